// solve_run.c: one solve from start to certificate, whatever the method (solvebak.h): the buffers, the
// phases timed between device marks, the certificate pass, and the report every rank agrees on.
// Failure and collectives: a rank that fails returns at once, and every rank calls ctx_agree before
// any collective or any wait on the device that follows work which can fail (a peer stuck in an NCCL
// sum that a failed rank never joined would otherwise wait forever). ctx_agree is idempotent after an
// agreed failure, so the phases can agree again on the way out.
#include "solve/solve_work.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sb_alloc(ds_ctx *ctx, double **p, int64_t count)
{
    return ctx->be->alloc(ctx, (void **)p, (size_t)(count > 0 ? count : 1) * sizeof(double));
}

static void sb_free(ds_ctx *ctx, double **p)
{
    if (*p)
        ctx->be->free(ctx, *p);
    *p = NULL;
}

void sb_work_free(ds_ctx *ctx, sb_work *w)
{
    double **all[] = {&w->e,  &w->a,   &w->diag, &w->grams, &w->gbuf, &w->coef,
                      &w->hist, &w->sys, &w->g,    &w->ee,    &w->gout, &w->acc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i])
            ctx->be->free(ctx, *all[i]);
        *all[i] = NULL;
    }
    for (size_t i = 0; i < sizeof w->qr / sizeof w->qr[0]; i++)
        sb_free(ctx, &w->qr[i]);
    for (size_t i = 0; i < sizeof w->bs / sizeof w->bs[0]; i++)
        sb_free(ctx, &w->bs[i]);
}

int sb_injected(const ds_ctx *ctx, const char *phase, ds_msg *msg)
{
    const char *v = getenv("DSOLVE_INJECT_FAILURE");
    char *end = NULL;
    long rank = v ? strtol(v, &end, 10) : -1;
    if (!v || end == v || *end != ':' || rank != ctx->rank)
        return DS_OK;
    if (strcmp(end + 1, "hang") == 0 && strcmp(phase, "setup") == 0)
        for (;;)
            pause();  // a rank stuck in a phase: the watchdog's case
    if (strcmp(end + 1, phase) != 0)
        return DS_OK;
    return ds_fail(msg, DS_ERR_RUNTIME, "injected failure in %s on rank %d (DSOLVE_INJECT_FAILURE)", phase, ctx->rank);
}

// Reads one double of backend memory on every rank.
int sb_read(ds_ctx *ctx, const double *src, double *dst)
{
    return ctx->be->download(ctx, dst, src, sizeof(double));
}

// Sweeps of either route (cholesky: the factor and solve), timed between marks 0 (start), 1 (after
// setup) and 2 (after the sweeps).
static int sb_solve(ds_ctx *ctx, const ds_mat *X, const double *y, const sb_opts *o, int method, sb_work *w,
                    sb_result *res)
{
    const int gram = method != SB_METHOD_RESIDUAL;
    const ds_backend *be = ctx->be;
    sb_loop L = {.checking = o->tol > 0 || o->progress || o->ckpt};
    DS_CHECK(be->sync(ctx));
    MPI_Barrier(ctx->comm);
    DS_CHECK(be->mark(ctx, 0));
    ctx_beat(ctx, "solve: setup (X'X or the block Grams, and their sum over the ranks)");
    const int resumed = w->rs.phase == 2;  // the system from a checkpoint (solve_ckpt.c)
    int rc = method == SB_METHOD_QR ? sb_qr_factor(ctx, X, y, w)
             : resumed              ? sb_ckpt_resume_system(ctx, w, X->cols, o->iters)
             : gram                 ? sb_gram_setup(ctx, X, y, w)
                                    : sb_residual_setup(ctx, X, y, o->batch, w);
    DS_CHECK(ctx_agree(ctx, rc));
    DS_CHECK(ctx_agree(ctx, sb_blocks_setup(ctx, X, o, gram, w)));
    if (method == SB_METHOD_CHOLESKY && w->ckpt) {  // the sweeps' checkpoints are the Gram route's own
        if (!resumed)
            DS_CHECK(sb_ckpt_sweep(ctx, w, X->cols, o->iters, 0, (const double[4]){0}));
        w->rs.phase = 0;
    }
    DS_CHECK(be->mark(ctx, 1));
    L.t0 = MPI_Wtime();
    ctx_beat(ctx, gram && method != SB_METHOD_GRAM ? "solve: the factor and solve" : "solve: sweeps");
    rc = method == SB_METHOD_QR         ? sb_qr_solve(ctx, X->cols, w, res)
         : method == SB_METHOD_CHOLESKY ? sb_chol_step(ctx, X->cols, w, res)
         : gram                         ? sb_gram_sweeps(ctx, X->cols, o, w, &L, res)
                                        : sb_residual_sweeps(ctx, X, o, o->batch, w, &L, res);
    DS_CHECK(ctx_agree(ctx, rc));
    DS_CHECK(be->mark(ctx, 2));
    DS_CHECK(be->elapsed(ctx, 0, 1, &res->setup_seconds));
    DS_CHECK(be->elapsed(ctx, 1, 2, &res->sweep_seconds));
    if (method == SB_METHOD_QR)
        DS_CHECK(be->elapsed(ctx, 0, 7, &res->qr_local_seconds));  // mark 7: sb_qr_factor's local factor done
    return DS_OK;
}

static void sb_times_max(ds_ctx *ctx, sb_result *res)
{
    double t[6] = {res->setup_seconds, res->sweep_seconds, res->check_seconds, res->refine_seconds,
                   res->setup_seconds + res->sweep_seconds + res->refine_seconds, res->qr_local_seconds};
    MPI_Allreduce(MPI_IN_PLACE, t, 6, MPI_DOUBLE, MPI_MAX, ctx->comm);
    res->qr_local_seconds = fmin(t[5], t[0]);  // the slowest rank's factor may not be the slowest setup's
    res->qr_combine_seconds = t[0] - res->qr_local_seconds;
    res->setup_seconds = t[0];
    res->sweep_seconds = t[1];
    res->check_seconds = t[2];
    res->refine_seconds = t[3];
    res->solve_seconds = t[4];  // the slowest rank's setup, sweeps and refinement
}

// Every rank reports, and decides on, rank 0's results (MPI reductions need not be bitwise equal on all
// ranks): the coefficients, the history as relative residuals, the certificate, the slowest rank's
// times and the bytes read (pass: one pass over X, all ranks). DS_ERR_NUMERIC when anything is not finite.
static int sb_finish(ds_ctx *ctx, int64_t n, double pass, int method, const sb_opts *o, sb_result *res)
{
    MPI_Bcast(res->a, (int)n, MPI_DOUBLE, 0, ctx->comm);
    MPI_Bcast(res->history, res->sweeps + 1, MPI_DOUBLE, 0, ctx->comm);
    double cert[3] = {res->rel_residual, res->normal_residual, (double)res->zero_columns};
    MPI_Bcast(cert, 3, MPI_DOUBLE, 0, ctx->comm);
    res->rel_residual = cert[0];
    res->normal_residual = cert[1];
    res->zero_columns = (int64_t)cert[2];
    sb_times_max(ctx, res);
    // The sweeps' test reads a running estimate; the certificate is exact. A "converged" the certificate
    // does not bear out (the Gram route's estimate at its floor, for a tol below it) claims nothing: the
    // certified residual must be within tol itself.
    if (res->stop_reason && strcmp(res->stop_reason, "converged") == 0 && res->rel_residual > o->tol)
        res->stop_reason = "stalled";
    const double yy = res->history[0];
    for (int s = 0; s <= res->sweeps; s++)
        res->history[s] = yy > 0 ? sqrt(fmax(res->history[s], 0.0) / yy) : 0.0;
    // The Gram route's running values are estimates: ‖e‖² = yy − (a sum of terms as large as yy), whose
    // rounding drifts by tens of ε·yy over the sweeps (printed 1.97e-8 where the least-squares minimum
    // is 2.32e-8; 4.41e-8 where the certificate gave 7.72e-8), so a relative residual below √(64·ε)
    // (the sweeps' own test, sb_gram_tested, distrusts ‖e‖² below 64·ε·yy) is only known to be below it:
    // such entries are the floor, and the summary prints "<floor". The last entry is the exact one of the
    // check pass.
    if (method == SB_METHOD_GRAM) {
        res->history_floor = sqrt(64.0 * DBL_EPSILON);
        for (int s = 1; s < res->sweeps; s++)
            res->history[s] = fmax(res->history[s], res->history_floor);
    }
    res->history[res->sweeps] = res->rel_residual;
    res->bytes = method == SB_METHOD_CHOLESKY || method == SB_METHOD_QR
                     ? res->passes * pass  // the Gram pass (QR: the copy), the certificate, refinement steps
                 : method == SB_METHOD_GRAM   ? pass
                                              : pass * (1.0 + 2.0 * res->sweeps);
    int finite = isfinite(res->rel_residual) && isfinite(res->normal_residual);
    for (int s = 0; s <= res->sweeps; s++)
        finite = finite && isfinite(res->history[s]) && res->history[s] <= 1e3;
    for (int64_t j = 0; j < n; j++)
        finite = finite && isfinite(res->a[j]);
    if (!finite || strcmp(res->stop_reason, "diverged") == 0) {
        res->stop_reason = "diverged";
        return ds_fail(&ctx->msg, DS_ERR_NUMERIC,
                       "solve diverged (relative residual %.3g after %d sweeps)%s", res->rel_residual, res->sweeps,
                       o->line_search ? "" : "; the raw block update needs --batch 1 or line search on correlated columns");
    }
    return DS_OK;
}

int solvebak_run(ds_ctx *ctx, const ds_mat *X, const double *y, int64_t n_rows_global,
                 const sb_opts *opts, sb_result *res)
{
    return opts->method == SB_METHOD_AUTO ? sb_auto_run(ctx, X, y, NULL, n_rows_global, opts, res)
                                          : sb_run_method(ctx, X, y, n_rows_global, opts, res);
}

int sb_run_method(ds_ctx *ctx, const ds_mat *X, const double *y, int64_t n_rows_global, const sb_opts *opts,
                  sb_result *res)
{
    return sb_run_core(ctx, X, y, NULL, n_rows_global, opts, res);
}

// One attempt at the solve once its buffers are there: the method, the certificate, cholesky's refinement.
// An attempt that ends with w->fallback set (the same on every rank) is the caller's to set aside.
static int sb_attempt(ds_ctx *ctx, const ds_mat *X, const double *y, const sb_opts *o, int method, sb_work *w,
                      sb_result *res)
{
    int rc = ctx_agree(ctx, sb_solve(ctx, X, y, o, method, w, res));
    if (rc != DS_OK || w->fallback)
        return rc;
    rc = ctx->be->download(ctx, res->history, w->hist, (size_t)(res->sweeps + 1) * sizeof(double));
    if (rc == DS_OK)
        rc = ctx->be->mark(ctx, 3);
    if (rc == DS_OK) {
        ctx_beat(ctx, "solve: the certificate pass");
        res->zero_columns = 0;
        rc = sb_check(ctx, X, y, w, res);
        res->passes = 2;  // X'X (or QR's copy) and the certificate
    }
    if (rc == DS_OK) {
        rc = ctx->be->mark(ctx, 4);
        if (rc == DS_OK)
            rc = ctx->be->elapsed(ctx, 3, 4, &res->check_seconds);
    }
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK && method == SB_METHOD_CHOLESKY) {
        ctx_beat(ctx, "solve: refinement");
        rc = sb_chol_refine_timed(ctx, X, y, w, res);
    }
    return rc;
}

int sb_run_core(ds_ctx *ctx, const ds_mat *X, const double *y, ds_rows *rows, int64_t n_rows_global,
                const sb_opts *opts, sb_result *res)
{
    memset(res, 0, sizeof *res);
    const int64_t n = X->cols;
    sb_opts o = *opts;
    if (o.batch > n)
        o.batch = (int)n;
    // From global sizes, so that every rank picks the same route.
    const int64_t rows_mean = (n_rows_global + ctx->nranks - 1) / ctx->nranks;
    int method = o.method != SB_METHOD_SOLVEBAK ? o.method : solvebak_pick_method(ctx, rows_mean, n, X->f32, &o);
    MPI_Bcast(&method, 1, MPI_INT, 0, ctx->comm);  // rank 0's choice: nodes may differ in cores
    static const char *names[] = {[SB_METHOD_RESIDUAL] = "residual", [SB_METHOD_GRAM] = "gram",
                                  [SB_METHOD_CHOLESKY] = "cholesky", [SB_METHOD_QR] = "qr"};
    res->method = names[method];
    const int direct = method == SB_METHOD_CHOLESKY || method == SB_METHOD_QR;
    const sb_opts ran = {.method = method, .batch = o.batch, .block_solve = o.block_solve, .coarse = o.coarse};
    const int blocks = sb_blocks_wanted(&ran, n);
    res->block_solve = blocks > 0;
    res->coarse = blocks == 2;
    res->line_search = !direct && !blocks && o.batch > 1 && o.line_search;  // a step of one column has none
    if (direct && o.iters < 1)
        o.iters = 1;  // the history holds the start and the solve
    res->a = calloc((size_t)n, sizeof(double));
    res->history = calloc((size_t)o.iters + 1, sizeof(double));
    sb_work w = {.rows = rows, .xe = o.x_exps, .ye = o.y_exp};
    int rc = res->a && res->history ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = sb_ckpt_begin(ctx, &o, n, n_rows_global, &w);
    if (rc == DS_OK && w.rs.phase == 1 && (!rows || rows->mem_x)) {
        // Taken inside a streamed pass, restarted where X fits in memory: X'X is one product here.
        ctx_log(ctx, "solve: X fits in memory now: X'X formed anew, not from the checkpoint's partial sums");
        w.rs.phase = 0;
    }
    if (rc == DS_OK)
        rc = sb_alloc_all(ctx, X, &o, method != SB_METHOD_RESIDUAL, &w);
    const int64_t grams = (n + o.batch - 1) / o.batch * o.batch * o.batch;
    if (rc == DS_OK && rows)  // a chunk's sums: its Gram, or the residual route's block Grams or certificate
        rc = sb_alloc(ctx, &w.acc, method != SB_METHOD_RESIDUAL ? n * n + n + 1 : grams > n + 1 ? grams : n + 1);
    rc = ctx_agree(ctx, rc);  // out of memory on one rank must not leave the others in a collective
    // cholesky on a backend with the single-precision Gram: that first (solve_direct.c), in double when set aside.
    const solve_ops *so = ctx->be->solve;
    w.single = method == SB_METHOD_CHOLESKY && !o.gram_double && !rows && !o.ckpt && so->gram_single &&
               (o.gram_low || !so->single_pays || so->single_pays(n_rows_global / ctx->nranks, n));
    const double t0 = MPI_Wtime();
    if (rc == DS_OK)
        rc = sb_attempt(ctx, X, y, &o, method, &w, res);
    if (rc == DS_OK && w.fallback) {
        ctx_log(ctx, "solve: %s: X'X formed again in double precision", w.fallback);
        snprintf(res->gram_fallback, sizeof res->gram_fallback, "%s", w.fallback);
        double tried = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &tried, 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
        res->fallback_seconds = tried;
        res->refined = res->passes = 0;
        res->cond_estimate = 0;
        w.single = 0;
        w.fallback = NULL;
        rc = sb_attempt(ctx, X, y, &o, method, &w, res);
    }
    if (method == SB_METHOD_CHOLESKY)
        res->gram_precision = w.single ? so->single_name : "double";
    if (rc == DS_OK)
        rc = ctx->be->download(ctx, res->a, w.a, (size_t)n * sizeof(double));
    rc = ctx_agree(ctx, rc);
    sb_work_free(ctx, &w);
    sb_ckpt_end(&w);
    if (rc != DS_OK && (direct || !res->stop_reason))
        solvebak_result_free(res);  // nothing to report: no factor, no coefficients, or no sweep run
    if (rc != DS_OK)
        return rc;

    rc = sb_finish(ctx, n, (double)n_rows_global * (double)n * (X->f32 ? 4.0 : 8.0), method, &o, res);
    res->solve_seconds += res->fallback_seconds;  // the honest total: the attempt set aside is part of the solve
    return rc;
}

void solvebak_result_free(sb_result *res)
{
    free(res->a);
    free(res->history);
    res->a = res->history = NULL;
}
