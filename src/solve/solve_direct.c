// solve_direct.c: --method cholesky (the equilibrated factor of the reduced Gram, one solve, one step of
// iterative refinement) and the certificate every method ends with.
#include "solve/solve_work.h"

#include <math.h>
#include <stdlib.h>

// ‖x‖₂ without overflow or underflow in the squares (x scaled by its largest magnitude).
static double sb_norm2(const double *x, int64_t n)
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

// An estimate of cond(X·S) from the equilibrated factor F (n × n in place of G): max d / min d over its
// diagonal, a lower bound that follows the small pivots (--method auto reads it).
static int sb_chol_cond(ds_ctx *ctx, const double *F, int64_t n, sb_work *w, double *host, double *cond)
{
    DS_CHECK(ctx->be->gather(ctx, w->gout, F, n, n + 1));
    DS_CHECK(ctx->be->download(ctx, host, w->gout, (size_t)n * sizeof(double)));
    double lo = INFINITY, hi = 0;
    for (int64_t j = 0; j < n; j++) {
        lo = fmin(lo, fabs(host[j]));
        hi = fmax(hi, fabs(host[j]));
    }
    *cond = n > 0 && lo > 0 ? hi / lo : n > 0 ? INFINITY : 1.0;
    return DS_OK;
}

// --method cholesky, in place of the sweeps: the equilibrated Cholesky factor of the reduced G (in place,
// its scales in w->coef) and a = S·F⁻¹·S·c. Both stay for the refinement. A G that is not positive
// definite, or not finite, is a numerical failure (exit 4) naming the column; ranks agree on it after the
// step (G is the same on every rank, so they all see it).
int sb_chol_step(ds_ctx *ctx, int64_t n, sb_work *w, sb_result *res)
{
    const ds_backend *be = ctx->be;
    double *host = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!host)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int info = 0;
    int rc = sb_chol_range(ctx, w->diag, n, host);
    if (rc == DS_OK)
        rc = be->solve->chol_factor(ctx, w->sys, n, w->coef, &info);
    if (rc == DS_OK && info > 0)
        rc = ds_fail(&ctx->msg, DS_ERR_NUMERIC,
                     "solve --method cholesky: X'X is singular at column %d (counting from 0) of %lld after "
                     "scaling: X is rank deficient (a column is a combination of earlier ones), or too "
                     "ill-conditioned for the normal equations",
                     info - 1, (long long)n);
    if (rc == DS_OK)
        rc = sb_chol_cond(ctx, w->sys, n, w, host, &res->cond_estimate);
    free(host);
    DS_CHECK(rc);
    DS_CHECK(be->solve->chol_solve(ctx, w->sys, w->coef, n, w->sys + n * n, w->a, 0));
    DS_CHECK(be->copy(ctx, w->hist + 1, w->ee, sizeof(double)));  // the certificate replaces it
    res->sweeps = 1;
    res->stop_reason = "solved";
    return DS_OK;
}

// The certificate, from a fresh pass over X (a streamed one: sb_check_stream): e = y − X·a, Xᵀe and ‖e‖²,
// reduced over ranks.
int sb_check(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols;
    double *host = malloc((size_t)(2 * n + 1) * sizeof(double));
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
        rc = be->download(ctx, host, w->gout, (size_t)(n + 1) * sizeof(double));
    if (rc == DS_OK)
        rc = be->download(ctx, host + n + 1, w->diag, (size_t)n * sizeof(double));
    if (rc == DS_OK) {
        double xtx = 0, yy = res->history[0];
        for (int64_t j = 0; j < n; j++) {
            xtx += host[n + 1 + j];
            res->zero_columns += host[n + 1 + j] == 0.0;
        }
        const double xe = sb_norm2(host, n);  // scaled: Xᵀe of a column scaled by 1e100 squares past DBL_MAX
        res->rel_residual = yy > 0 ? sqrt(host[n] / yy) : sqrt(host[n]);
        res->normal_residual = xtx > 0 && yy > 0 ? xe / (sqrt(xtx) * sqrt(yy)) : xe;
    }
    free(host);
    return rc;
}

// One step of iterative refinement from the certificate pass (w->gout = Xᵀe): a += S·F⁻¹·S·Xᵀe, kept
// when rank 0's normal residual falls, else a and the certificate are restored. Collective.
static int sb_chol_refine(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols;
    const sb_result before = *res;
    DS_CHECK(be->copy(ctx, w->g, w->a, (size_t)n * sizeof(double)));
    DS_CHECK(be->solve->chol_solve(ctx, w->sys, w->coef, n, w->gout, w->a, 1));
    res->zero_columns = 0;
    DS_CHECK(ctx_agree(ctx, sb_check(ctx, X, y, w, res)));
    int keep = res->normal_residual < before.normal_residual;
    MPI_Bcast(&keep, 1, MPI_INT, 0, ctx->comm);
    res->refined = keep;
    if (keep)
        return DS_OK;
    res->rel_residual = before.rel_residual;
    res->normal_residual = before.normal_residual;
    res->zero_columns = before.zero_columns;
    return be->copy(ctx, w->a, w->g, (size_t)n * sizeof(double));
}

// The refinement between marks 5 and 6 (refine_seconds).
int sb_chol_refine_timed(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res)
{
    DS_CHECK(ctx->be->mark(ctx, 5));
    DS_CHECK(sb_chol_refine(ctx, X, y, w, res));
    DS_CHECK(ctx->be->mark(ctx, 6));
    return ctx->be->elapsed(ctx, 5, 6, &res->refine_seconds);
}

