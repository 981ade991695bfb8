// solve_direct.c: --method cholesky (the equilibrated factor of the reduced Gram, one solve, one step of
// iterative refinement) and the certificate every method ends with.
#include "solve/solve_work.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double sb_norm2(const double *x, int64_t n)
{
    double big = 0, sum = 0;
    for (int64_t j = 0; j < n; j++)
        big = fmax(big, fabs(x[j]));
    if (!(big > 0) || !isfinite(big))
        return big;
    for (int64_t j = 0; j < n; j++)
        sum += (x[j] / big) * (x[j] / big);
    return big * sqrt(sum);
}

// The overflow check before the factor: a column whose squares leave double's range makes G_jj infinite
// (or NaN), which the factor would take for a zero column. diag is w->diag, the reduced G's diagonal.
static int sb_chol_range(ds_ctx *ctx, const double *diag, int64_t n, double *host)
{
    DS_CHECK(ctx->be->download(ctx, host, diag, (size_t)n * sizeof(double)));
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(host[j]))
            return ds_fail(&ctx->msg, DS_ERR_NUMERIC,
                           "solve --method cholesky: X'X overflows at column %lld (||X_j||^2 = %g): values of X too "
                           "large to square in double precision; use --method qr",
                           (long long)j, host[j]);
    return DS_OK;
}

// Why the single-precision attempt is set aside (sb_single_verdict): the format of its value, then of the
// precision's name (solve_ops' single_name: single, fp16).
enum { SB_KEEP, SB_FB_RANGE, SB_FB_FACTOR, SB_FB_COND, SB_FB_SLOW, SB_FB_STEPS };
static const char *const sb_fb_format[] = {
    [SB_FB_RANGE] = "column %.0f of X leaves the range that X'X in %s needs",
    [SB_FB_FACTOR] = "X'X is not positive definite at column %.0f in %s",
    [SB_FB_COND] = "cond(X) about %.2g from the factor of X'X in %s: its refinement would be slow",
    [SB_FB_SLOW] = "the refinement steps shrink by only %.2g a step (X'X in %s)",
    [SB_FB_STEPS] = "the refinement did not reach double's rounding in %.0f steps (X'X in %s)",
};
// The single attempt is set aside beyond the backend's cond(X) estimate (solve_ops' single_cond_max: where
// its steps would shrink by less than about 5e-3 each), or when a step shrinks by less than SB_SINGLE_RATE
// while still above SB_SINGLE_NOISE of the first step (the lower precision's error; the steps' own noise in
// double lies many orders below), or after SB_SINGLE_STEPS steps. A step below SB_SINGLE_DONE·ε·max|a|
// ends the refinement: it changes a only in its last bits, and another would cost a pass over X. Nor is
// one computed where the last step's ratio to the one before, SB_SINGLE_AHEAD times over, puts it there.
#define SB_SINGLE_AHEAD 4.0
#define SB_SINGLE_RATE 0.05
#define SB_SINGLE_NOISE 1e-6
#define SB_SINGLE_STEPS 8
#define SB_SINGLE_DONE 8.0

// Rank 0's verdict (code SB_*, value v) on every rank: all ranks take the same path after it. Not keep:
// w->fallback and w->why say why, and the attempt ends (the caller forms G in double).
static int sb_single_verdict(ds_ctx *ctx, sb_work *w, int code, double v)
{
    double msg[2] = {code, v};
    MPI_Bcast(msg, 2, MPI_DOUBLE, 0, ctx->comm);
    if (msg[0] == SB_KEEP)
        return 0;
    const char *name = ctx->be->solve->single_name ? ctx->be->solve->single_name : "single";
    if (msg[0] == SB_FB_RANGE && msg[1] < 0)  // c, not a column of X
        snprintf(w->why, sizeof w->why, "y leaves the range that X'y in %s needs", name);
    else
        snprintf(w->why, sizeof w->why, sb_fb_format[(int)msg[0]], msg[1], name);
    w->fallback = w->why;
    return 1;
}

// The single-precision G's range: each X_j's ‖X_j‖² (diag, host) within the backend's single_range (a
// column that underflows to 0 looks like a zero column; one that overflows is Inf), c finite.
static int sb_single_range(ds_ctx *ctx, sb_work *w, int64_t n, double *host)
{
    int rc = ctx->be->download(ctx, host, w->diag, (size_t)n * sizeof(double));
    if (rc == DS_OK)
        rc = ctx->be->download(ctx, host + n, w->g, (size_t)n * sizeof(double));
    const double lo = ctx->be->solve->single_range[0], hi = ctx->be->solve->single_range[1];
    int64_t bad = -1;  // the first column out of range, else −2 where only c is not finite (y's fault)
    for (int64_t j = 0; j < n && bad < 0 && rc == DS_OK; j++)
        if (!(host[j] >= lo && host[j] <= hi))
            bad = j;
    for (int64_t j = 0; j < n && bad == -1 && rc == DS_OK; j++)
        if (!isfinite(host[n + j]))
            bad = -2;
    sb_single_verdict(ctx, w, bad == -1 ? SB_KEEP : SB_FB_RANGE, (double)bad);  // on every rank: it is collective
    return rc;
}

// --method cholesky, in place of the sweeps: the equilibrated Cholesky factor of the reduced G (in place,
// its scales in w->coef) and a = S·F⁻¹·S·c. Both stay for the refinement. A G that is not positive
// definite, or not finite, is a numerical failure (exit 4) naming the column; ranks agree on it after the
// step (G is the same on every rank, so they all see it). With w->single, a G out of float's range, not
// positive definite, or too ill-conditioned for the refinement sets w->fallback instead.
int sb_chol_step(ds_ctx *ctx, int64_t n, sb_work *w, sb_result *res)
{
    const ds_backend *be = ctx->be;
    double *host = malloc((size_t)(n > 0 ? 2 * n : 1) * sizeof(double));
    int info = 0;
    // before the verdicts below, which every rank must reach
    int rc = ctx_agree(ctx, host ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory"));
    if (rc != DS_OK) {
        free(host);
        return rc;
    }
    rc = w->single ? sb_single_range(ctx, w, n, host) : sb_chol_range(ctx, w->diag, n, host);
    if (rc == DS_OK && w->tiny_G)
        rc = sb_tiny_columns(ctx, host, n, w->tiny_B, w->tiny_G, w->tiny_c);  // before the factor overwrites G
    w->tiny_G = NULL;
    w->summed = 0;  // host holds the diagonal: its sums serve every certificate of this attempt
    if (rc == DS_OK && !w->fallback) {
        w->xtx = 0;
        w->zeros = 0;
        for (int64_t j = 0; j < n; j++) {
            w->xtx += host[j];
            w->zeros += host[j] == 0.0;
        }
        w->summed = 1;
    }
    if (rc == DS_OK && !w->fallback)
        rc = be->solve->chol_factor(ctx, w->sys, n, w->coef, w->single, &info, &res->cond_estimate);
    if (!w->fallback && w->single)  // the verdicts are collective: every rank, whatever its rc
        sb_single_verdict(ctx, w, rc == DS_OK && info > 0 ? SB_FB_FACTOR : SB_KEEP, info - 1);
    if (rc == DS_OK && !w->fallback && info > 0)
        rc = ds_fail(&ctx->msg, DS_ERR_NUMERIC,
                     "solve --method cholesky: X'X is singular at column %d (counting from 0) of %lld after "
                     "scaling: X is rank deficient (a column is a combination of earlier ones), or too "
                     "ill-conditioned for the normal equations",
                     info - 1, (long long)n);
    if (!w->fallback && w->single)
        sb_single_verdict(ctx, w,
                          rc == DS_OK && res->cond_estimate > be->solve->single_cond_max ? SB_FB_COND : SB_KEEP,
                          res->cond_estimate);
    free(host);
    DS_CHECK(rc);
    if (w->fallback)
        return DS_OK;
    DS_CHECK(be->solve->chol_solve(ctx, w->sys, w->coef, n, w->sys + n * n, w->a, 0));
    DS_CHECK(be->copy(ctx, w->hist + 1, w->ee, sizeof(double)));  // the certificate replaces it
    res->sweeps = 1;
    res->stop_reason = "solved";
    return DS_OK;
}

// The certificate, from a fresh pass over X (a streamed one: sb_check_stream): e = y − X·a, Xᵀe and ‖e‖²,
// reduced over ranks. With w->step_tail, step_size's two doubles at w->gout + n + 1 come down with them.
int sb_check(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols, len = n + 1 + (w->step_tail ? 2 : 0);
    double *host = malloc((size_t)(2 * n + 3) * sizeof(double));
    if (!host)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int rc = w->rows ? sb_check_stream(ctx, n, w) : be->copy(ctx, w->e, y, (size_t)X->rows * sizeof(double));
    if (rc == DS_OK && !w->rows)
        rc = be->solve->grad_update(ctx, X, w->e, 0, n, w->a, 0, n, w->gout);
    if (rc == DS_OK)
        rc = sb_injected(ctx, "check", &ctx->msg);
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = be->allreduce_sum(ctx, w->gout, n + 1);
    if (rc == DS_OK)
        rc = be->download(ctx, host, w->gout, (size_t)len * sizeof(double));
    if (rc == DS_OK && !w->summed)
        rc = be->download(ctx, host + n + 3, w->diag, (size_t)n * sizeof(double));
    if (rc == DS_OK && !w->summed && w->tiny_G)  // SolveBak's Grams, as the sweeps left them
        rc = sb_tiny_columns(ctx, host + n + 3, n, w->tiny_B, w->tiny_G, w->tiny_c);
    if (rc == DS_OK) {
        double xtx = w->summed ? w->xtx : 0, yy = res->history[0];
        res->zero_columns += w->summed ? w->zeros : 0;
        for (int64_t j = 0; j < n && !w->summed; j++) {
            xtx += host[n + 3 + j];
            res->zero_columns += host[n + 3 + j] == 0.0;
        }
        const double xe = sb_norm2(host, n);  // scaled: Xᵀe of a column scaled by 1e100 squares past DBL_MAX
        res->rel_residual = yy > 0 ? sqrt(host[n] / yy) : sqrt(host[n]);
        res->normal_residual = xtx > 0 && yy > 0 ? xe / (sqrt(xtx) * sqrt(yy)) : xe;
        if (w->step_tail)
            memcpy(w->step, host + n + 1, sizeof w->step);
    }
    free(host);
    return rc;
}

// Rank 0's verdict on a step just certified (the answer before it in w->g, its report in before): *keep
// when it lowered the normal residual, else a and the certificate are restored. Collective.
static int sb_keep_step(ds_ctx *ctx, sb_work *w, int64_t n, const sb_result *before, sb_result *res, int *keep)
{
    *keep = res->normal_residual < before->normal_residual;
    MPI_Bcast(keep, 1, MPI_INT, 0, ctx->comm);
    if (*keep)
        return DS_OK;
    res->rel_residual = before->rel_residual;
    res->normal_residual = before->normal_residual;
    res->zero_columns = before->zero_columns;
    return ctx_agree(ctx, ctx->be->copy(ctx, w->a, w->g, (size_t)n * sizeof(double)));
}

// What the refinement step says of the first answer (X'X in double). The step is about that answer's error,
// and the rounding of G and of its factor leaves an error of about cond(X·S)²·ε/√n relative to max|a|
// wherever X's small singular directions are not orthogonal to it, which rounding sees to: so a relative
// step fe above SB_CHOL_FE_NOISE (double's own noise in a step lies orders below) raises cond_estimate to
// √(fe·√n/ε) where that is larger. The factor's diagonal alone can miss an ill-conditioned X entirely (a
// Kahan-like X of cond 3e10 gave 4.3, and a first answer 99.7 % off). A step above SB_CHOL_FE_MAX (X's
// cond about 4e6 at n = 30) says the normal equations cannot give X's coefficients: exit 4.
#define SB_CHOL_FE_NOISE 1e-10
#define SB_CHOL_FE_MAX 1e-4

// One step of iterative refinement from the certificate pass (w->gout = Xᵀe): a += S·F⁻¹·S·Xᵀe, kept
// when rank 0's normal residual falls (sb_keep_step); its size (rank 0's, on every rank) updates
// cond_estimate, or refuses X (SB_CHOL_FE_MAX). Collective.
static int sb_chol_refine(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols;
    const sb_result before = *res;
    int rc = be->copy(ctx, w->g, w->a, (size_t)n * sizeof(double));
    if (rc == DS_OK)
        rc = be->solve->chol_solve(ctx, w->sys, w->coef, n, w->gout, w->a, 1);
    if (rc == DS_OK)
        rc = be->solve->step_size(ctx, w->a, w->g, n, w->gout + n + 1);
    res->zero_columns = 0;
    w->step_tail = 1;
    rc = ctx_agree(ctx, rc == DS_OK ? sb_check(ctx, X, y, w, res) : rc);  // the same rc on every rank
    w->step_tail = 0;
    DS_CHECK(rc);
    res->passes++;
    double fe = w->step[1] > 0 ? w->step[0] / w->step[1] : w->step[0] > 0 ? INFINITY : 0;
    MPI_Bcast(&fe, 1, MPI_DOUBLE, 0, ctx->comm);
    if (!(fe <= SB_CHOL_FE_NOISE))
        res->cond_estimate = fmax(res->cond_estimate, sqrt(fe * sqrt((double)n) / DBL_EPSILON));
    if (!(fe <= SB_CHOL_FE_MAX))
        return ds_fail(&ctx->msg, DS_ERR_NUMERIC,
                       "solve --method cholesky: X is too ill-conditioned for the normal equations (cond(X) "
                       "about %.2g): a refinement step changed the coefficients by %.1e of their size; use "
                       "--method qr",
                       res->cond_estimate, fe);
    int keep = 0;
    DS_CHECK(sb_keep_step(ctx, w, n, &before, res, &keep));
    res->refined = keep;
    return DS_OK;
}

// The refinement from a single-precision G (w->single): steps a += S·F⁻¹·S·Xᵀe, each followed at once by
// its certificate pass (the step's size comes down in the same wait) and kept while it lowers the normal
// residual (the first that does not is undone). They end at a step near a's rounding
// (SB_SINGLE_DONE·ε·max|a|), after one whose successor is predicted there (SB_SINGLE_AHEAD), at one that
// no longer shrinks (by half) in the noise of double (SB_SINGLE_NOISE), or at an undone one; steps that
// shrink too slowly, or too many, set w->fallback. Collective: rank 0 decides.
static int sb_chol_refine_single(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols;
    int rc = DS_OK;
    double first = 0, prev = 0;
    for (int k = 1; rc == DS_OK; k++) {
        const sb_result before = *res;
        rc = be->copy(ctx, w->g, w->a, (size_t)n * sizeof(double));
        if (rc == DS_OK)
            rc = be->solve->chol_solve(ctx, w->sys, w->coef, n, w->gout, w->a, 1);
        if (rc == DS_OK)
            rc = be->solve->step_size(ctx, w->a, w->g, n, w->gout + n + 1);
        res->zero_columns = 0;
        w->step_tail = 1;
        rc = ctx_agree(ctx, rc == DS_OK ? sb_check(ctx, X, y, w, res) : rc);  // the same rc on every rank
        w->step_tail = 0;
        if (rc != DS_OK)
            break;
        res->passes++;
        const double step = w->step[0], big = w->step[1];
        first = k == 1 ? step : first;
        const int noise = step <= SB_SINGLE_NOISE * first;
        const int done = step <= SB_SINGLE_DONE * DBL_EPSILON * big || (k > 1 && noise && step > 0.5 * prev);
        int verdict[2] = {done                                                  ? 1
                          : k > 1 && !noise && step > SB_SINGLE_RATE * prev ? 2  // slow
                          : k > SB_SINGLE_STEPS                             ? 3  // too many
                                                                            : 0,
                          // the next step, at this one's ratio to the last, would be done: none is computed
                          k > 1 && SB_SINGLE_AHEAD * step * (step / prev) <= SB_SINGLE_DONE * DBL_EPSILON * big};
        MPI_Bcast(verdict, 2, MPI_INT, 0, ctx->comm);
        if (verdict[0] > 1) {
            rc = ctx_agree(ctx, be->copy(ctx, w->a, w->g, (size_t)n * sizeof(double)));
            sb_single_verdict(ctx, w, verdict[0] == 2 ? SB_FB_SLOW : SB_FB_STEPS,
                              verdict[0] == 2 ? step / prev : SB_SINGLE_STEPS);
            break;
        }
        prev = step;
        int keep = 0;
        rc = sb_keep_step(ctx, w, n, &before, res, &keep);
        if (rc != DS_OK || !keep)
            break;
        res->refined++;
        if (verdict[0] == 1 || verdict[1])
            break;
    }
    return rc;
}

// The refinement between marks 5 and 6 (refine_seconds).
int sb_chol_refine_timed(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res)
{
    DS_CHECK(ctx->be->mark(ctx, 5));
    const int rc = w->single ? sb_chol_refine_single(ctx, X, y, w, res) : sb_chol_refine(ctx, X, y, w, res);
    w->summed = 0;  // the attempt's certificates are done
    DS_CHECK(rc);
    DS_CHECK(ctx->be->mark(ctx, 6));
    return ctx->be->elapsed(ctx, 5, 6, &res->refine_seconds);
}

