// solvebak.c: SolveBak written once against backend.h (see solvebak.h for the two routes).
// Failure and collectives: a rank that fails returns at once, and every rank calls ctx_agree before
// any collective or any wait on the device that follows work which can fail (a peer stuck in an NCCL
// sum that a failed rank never joined would otherwise wait forever). ctx_agree is idempotent after an
// agreed failure, so the phases can agree again on the way out.
#include "solve/solvebak.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// Backend buffers of one solve, released together.
typedef struct sb_work {
    double *e, *a, *diag, *grams, *gbuf, *coef, *hist, *sys, *g, *ee, *gout;
} sb_work;

// What the host needs to decide after each sweep when it checks (tol > 0 or progress).
typedef struct sb_loop {
    int checking;
    double yy;       // ‖y‖², global
    double rel_prev;
    double t0;       // wall clock at the start of the sweeps
} sb_loop;

static int sb_alloc(ds_ctx *ctx, double **p, int64_t count)
{
    return ctx->be->alloc(ctx, (void **)p, (size_t)(count > 0 ? count : 1) * sizeof(double));
}

static void sb_work_free(ds_ctx *ctx, sb_work *w)
{
    double **all[] = {&w->e, &w->a, &w->diag, &w->grams, &w->gbuf, &w->coef, &w->hist, &w->sys, &w->g, &w->ee, &w->gout};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i])
            ctx->be->free(ctx, *all[i]);
        *all[i] = NULL;
    }
}

int solvebak_pick_method(const ds_ctx *ctx, int64_t rows_per_rank, int64_t cols, int f32, const sb_opts *opts)
{
    const double m = (double)rows_per_rank, n = (double)cols, sz = f32 ? 4 : 8;
    // The backend's rough rates: FP64 matrix product, memory bandwidth, and the latency of one block step.
    ds_costs cost;
    ctx->be->costs(ctx, &cost);
    const double flops = cost.flops, bw = cost.bandwidth, lat = cost.latency;
    const double blocks = ceil(n / opts->batch);
    if (n * n * 8 > 4e9)  // G would not fit comfortably
        return SB_METHOD_RESIDUAL;
    double t_gram = m * n * n / flops + opts->iters * n * n * 8 / cost.sweep_bandwidth;
    // Narrow blocks of a row-major X read whole cache lines (64 bytes) per row for fewer bytes used.
    const double sz_eff = fmax(sz, 64.0 / opts->batch);
    double t_res = m * n * opts->batch / flops + opts->iters * (2 * m * n * sz_eff / bw + blocks * lat);
    return t_gram < t_res ? SB_METHOD_GRAM : SB_METHOD_RESIDUAL;
}

// Rank 0 decides after sweep s (hist_s = ‖e‖² then) whether to stop, and every rank learns the
// verdict, so that no rank runs a collective the others skip. Returns the stop reason or NULL.
static const char *sb_decide(ds_ctx *ctx, const sb_opts *o, sb_loop *L, int s, double ee)
{
    int verdict = 0;
    if (ctx->rank == 0) {
        double rel = L->yy > 0 ? sqrt(fmax(ee, 0.0) / L->yy) : sqrt(fmax(ee, 0.0));
        if (o->tol > 0 && (!isfinite(ee) || rel > 1e3))  // with --tol 0 every sweep runs, as documented
            verdict = 1;
        else if (o->tol > 0 && rel <= o->tol)
            verdict = 2;
        else if (o->tol > 0 && s > 0 && fabs(L->rel_prev - rel) <= o->tol * L->rel_prev)
            verdict = 3;
        else if (s == o->iters)
            verdict = 4;
        double t = MPI_Wtime() - L->t0;
        if (o->progress && s > 0 && t > 2.0)
            ctx_log(ctx, "solve: sweep %d/%d, relative residual %.3e, %.1f s", s, o->iters, rel, t);
        L->rel_prev = rel;
    }
    MPI_Bcast(&verdict, 1, MPI_INT, 0, ctx->comm);
    static const char *reasons[] = {NULL, "diverged", "converged", "stalled", "max_sweeps"};
    return reasons[verdict];
}

// Fault injection for the tests of failure handling: DSOLVE_INJECT_FAILURE=RANK:PHASE (PHASE one of
// setup, sweep, check) makes that rank fail there, as a device or library failure would.
static int sb_injected(const ds_ctx *ctx, const char *phase, ds_msg *msg)
{
    const char *v = getenv("DSOLVE_INJECT_FAILURE");
    char *end = NULL;
    long rank = v ? strtol(v, &end, 10) : -1;
    if (!v || end == v || *end != ':' || rank != ctx->rank || strcmp(end + 1, phase) != 0)
        return DS_OK;
    return ds_fail(msg, DS_ERR_RUNTIME, "injected failure in %s on rank %d (DSOLVE_INJECT_FAILURE)", phase, ctx->rank);
}

// Reads one double of backend memory on every rank.
static int sb_read(ds_ctx *ctx, const double *src, double *dst)
{
    return ctx->be->download(ctx, dst, src, sizeof(double));
}

static int sb_residual_setup(ds_ctx *ctx, const ds_mat *X, const double *y, int B, sb_work *w)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols, nblocks = (n + B - 1) / B;
    DS_CHECK(be->solve->block_grams(ctx, X, B, w->grams));
    DS_CHECK(sb_injected(ctx, "setup", &ctx->msg));
    DS_CHECK(ctx_agree(ctx, DS_OK));
    DS_CHECK(be->allreduce_sum(ctx, w->grams, nblocks * B * B));
    for (int64_t b = 0; b < nblocks; b++) {
        int64_t b0 = b * B, nb = n - b0 < B ? n - b0 : B;
        DS_CHECK(be->gather(ctx, w->diag + b0, w->grams + b * B * B, nb, B + 1));
    }
    DS_CHECK(be->fill(ctx, w->a, n, 0.0));
    return be->copy(ctx, w->e, y, (size_t)X->rows * sizeof(double));
}

// A failure inside the residual route's sweeps, after every rank agreed that the first block went
// well: the other ranks are inside per-block sums that cannot be rejoined, so the job ends here with
// the message and the status as exit code on every rank (MPI_Abort), as HPL and ScaLAPACK do.
static int sb_abort(ds_ctx *ctx, int rc)
{
    if (rc == DS_OK)
        return DS_OK;
    fprintf(stderr, "dsolve: %s (rank %d; ending the job)\n", ctx->msg.text[0] ? ctx->msg.text : "failed", ctx->rank);
    fflush(stderr);
    MPI_Abort(ctx->comm, rc);
    return rc;
}

// The residual route's sweeps. A sweep's last block update is applied by the next grad_update, fused
// with the next block's gradient, so each block of X is read twice a sweep and never a third time.
static int sb_residual_sweeps(ds_ctx *ctx, const ds_mat *X, const sb_opts *o, int B, sb_work *w,
                              sb_loop *L, sb_result *res)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols, nblocks = (n + B - 1) / B;
    int64_t pend0 = 0, pendn = 0;
    for (int s = 0;; s++) {
        for (int64_t b = 0; b < nblocks; b++) {
            const int64_t b0 = b * B, nb = n - b0 < B ? n - b0 : B;
            int rc = be->solve->grad_update(ctx, X, w->e, pend0, pendn, w->coef, b0, nb, w->gbuf);
            if (rc == DS_OK && s == 1 && b == nblocks - 1)
                rc = sb_injected(ctx, "sweep", &ctx->msg);
            if (s == 0 && b == 0)  // its scratch is allocated on this first call: fail together
                DS_CHECK(ctx_agree(ctx, rc));
            DS_CHECK(sb_abort(ctx, rc));
            DS_CHECK(sb_abort(ctx, be->allreduce_sum(ctx, w->gbuf, nb + 1)));
            if (b == 0) {
                DS_CHECK(sb_abort(ctx, be->copy(ctx, w->hist + s, w->gbuf + nb, sizeof(double))));
                const char *why = NULL;
                if (L->checking) {
                    double ee;
                    DS_CHECK(sb_abort(ctx, sb_read(ctx, w->gbuf + nb, &ee)));
                    if (s == 0)
                        L->yy = ee;
                    why = sb_decide(ctx, o, L, s, ee);
                } else if (s == o->iters) {
                    why = "max_sweeps";
                }
                if (why) {
                    res->sweeps = s;
                    res->stop_reason = why;
                    return DS_OK;
                }
            }
            ds_step_args st = {.gbuf = w->gbuf, .diag = w->diag + b0, .gbb = w->grams + b * B * B,
                               .nb = (int)nb, .ld = B, .line_search = o->line_search,
                               .a = w->a + b0, .coef = w->coef, .ee_slot = NULL};
            DS_CHECK(sb_abort(ctx, be->solve->block_step(ctx, &st)));
            pend0 = b0;
            pendn = nb;
        }
    }
}

static int sb_gram_setup(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols;
    DS_CHECK(be->solve->gram(ctx, X, y, w->sys));
    DS_CHECK(sb_injected(ctx, "setup", &ctx->msg));
    DS_CHECK(ctx_agree(ctx, DS_OK));
    DS_CHECK(be->allreduce_sum(ctx, w->sys, n * n + n + 1));
    DS_CHECK(be->gather(ctx, w->diag, w->sys, n, n + 1));
    DS_CHECK(be->copy(ctx, w->g, w->sys + n * n, (size_t)n * sizeof(double)));
    DS_CHECK(be->fill(ctx, w->a, n, 0.0));
    DS_CHECK(be->copy(ctx, w->ee, w->sys + n * n + n, sizeof(double)));
    return be->copy(ctx, w->hist, w->ee, sizeof(double));
}

static int sb_gram_sweeps(ds_ctx *ctx, int64_t n, const sb_opts *o, sb_work *w, sb_loop *L, sb_result *res)
{
    ds_gram_args ga = {.G = w->sys, .diag = w->diag, .g = w->g, .a = w->a, .ee = w->ee, .ee_hist = w->hist + 1,
                       .n = n, .batch = o->batch, .line_search = o->line_search, .sweeps = o->iters};
    if (!L->checking) {
        if (o->iters > 0)
            DS_CHECK(ctx->be->solve->gram_sweeps(ctx, &ga));
        DS_CHECK(sb_injected(ctx, "sweep", &ctx->msg));
        res->sweeps = o->iters;
        res->stop_reason = "max_sweeps";
        return DS_OK;
    }
    ga.sweeps = 1;
    for (int s = 0;; s++) {
        double ee;
        DS_CHECK(ctx_agree(ctx, DS_OK));
        DS_CHECK(sb_read(ctx, w->hist + s, &ee));
        if (s == 0)
            L->yy = ee;
        const char *why = sb_decide(ctx, o, L, s, ee);
        if (why) {
            res->sweeps = s;
            res->stop_reason = why;
            return DS_OK;
        }
        ga.ee_hist = w->hist + s + 1;
        DS_CHECK(ctx->be->solve->gram_sweeps(ctx, &ga));
        if (s == 1)
            DS_CHECK(sb_injected(ctx, "sweep", &ctx->msg));
    }
}

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

// --method cholesky, in place of the sweeps: the equilibrated Cholesky factor of the reduced G (in place,
// its scales in w->coef) and a = S·F⁻¹·S·c. Both stay for the refinement. A G that is not positive
// definite is a numerical failure (exit 4) naming the column; ranks agree on it after the step.
static int sb_chol_step(ds_ctx *ctx, int64_t n, sb_work *w, sb_result *res)
{
    const ds_backend *be = ctx->be;
    int info = 0;
    DS_CHECK(be->solve->chol_factor(ctx, w->sys, n, w->coef, &info));
    if (info > 0)
        return ds_fail(&ctx->msg, DS_ERR_NUMERIC,
                       "solve --method cholesky: X'X is singular at column %d (counting from 0) of %lld after "
                       "scaling: X is rank deficient (a column is a combination of earlier ones), or too "
                       "ill-conditioned for the normal equations",
                       info - 1, (long long)n);
    DS_CHECK(be->solve->chol_solve(ctx, w->sys, w->coef, n, w->sys + n * n, w->a, 0));
    DS_CHECK(be->copy(ctx, w->hist + 1, w->ee, sizeof(double)));  // the certificate replaces it
    res->sweeps = 1;
    res->stop_reason = "solved";
    return DS_OK;
}

// The certificate, from a fresh pass over X: e = y − X·a, Xᵀe and ‖e‖², reduced over ranks.
static int sb_check(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols;
    double *host = malloc((size_t)(2 * n + 1) * sizeof(double));
    if (!host)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int rc = be->copy(ctx, w->e, y, (size_t)X->rows * sizeof(double));
    if (rc == DS_OK)
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
static int sb_chol_refine_timed(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res)
{
    DS_CHECK(ctx->be->mark(ctx, 5));
    DS_CHECK(sb_chol_refine(ctx, X, y, w, res));
    DS_CHECK(ctx->be->mark(ctx, 6));
    return ctx->be->elapsed(ctx, 5, 6, &res->refine_seconds);
}

static int sb_alloc_all(ds_ctx *ctx, const ds_mat *X, const sb_opts *o, int gram, sb_work *w)
{
    const int64_t n = X->cols, B = o->batch, nblocks = (n + B - 1) / B;
    DS_CHECK(sb_alloc(ctx, &w->e, X->rows));
    DS_CHECK(sb_alloc(ctx, &w->a, n));
    DS_CHECK(sb_alloc(ctx, &w->diag, n));
    DS_CHECK(sb_alloc(ctx, &w->hist, o->iters + 1));
    DS_CHECK(sb_alloc(ctx, &w->gout, n + 1));
    if (gram) {  // the Gram route and cholesky (whose scales take coef)
        DS_CHECK(sb_alloc(ctx, &w->sys, n * n + n + 1));
        DS_CHECK(sb_alloc(ctx, &w->g, n));
        DS_CHECK(sb_alloc(ctx, &w->coef, n));
        return sb_alloc(ctx, &w->ee, 1);
    }
    DS_CHECK(sb_alloc(ctx, &w->grams, nblocks * B * B));
    DS_CHECK(sb_alloc(ctx, &w->gbuf, B + 1));
    return sb_alloc(ctx, &w->coef, B);
}

// Sweeps of either route (cholesky: the factor and solve), timed between marks 0 (start), 1 (after
// setup) and 2 (after the sweeps).
static int sb_solve(ds_ctx *ctx, const ds_mat *X, const double *y, const sb_opts *o, int method, sb_work *w,
                    sb_result *res)
{
    const int gram = method != SB_METHOD_RESIDUAL;
    const ds_backend *be = ctx->be;
    sb_loop L = {.checking = o->tol > 0 || o->progress};
    DS_CHECK(be->sync(ctx));
    MPI_Barrier(ctx->comm);
    DS_CHECK(be->mark(ctx, 0));
    DS_CHECK(ctx_agree(ctx, gram ? sb_gram_setup(ctx, X, y, w) : sb_residual_setup(ctx, X, y, o->batch, w)));
    DS_CHECK(be->mark(ctx, 1));
    L.t0 = MPI_Wtime();
    int rc = method == SB_METHOD_CHOLESKY ? sb_chol_step(ctx, X->cols, w, res)
             : gram                       ? sb_gram_sweeps(ctx, X->cols, o, w, &L, res)
                                          : sb_residual_sweeps(ctx, X, o, o->batch, w, &L, res);
    DS_CHECK(ctx_agree(ctx, rc));
    DS_CHECK(be->mark(ctx, 2));
    DS_CHECK(be->elapsed(ctx, 0, 1, &res->setup_seconds));
    DS_CHECK(be->elapsed(ctx, 1, 2, &res->sweep_seconds));
    return DS_OK;
}

static void sb_times_max(ds_ctx *ctx, sb_result *res)
{
    double t[5] = {res->setup_seconds, res->sweep_seconds, res->check_seconds, res->refine_seconds,
                   res->setup_seconds + res->sweep_seconds + res->refine_seconds};
    MPI_Allreduce(MPI_IN_PLACE, t, 5, MPI_DOUBLE, MPI_MAX, ctx->comm);
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
    const double yy = res->history[0];
    for (int s = 0; s <= res->sweeps; s++)
        res->history[s] = yy > 0 ? sqrt(fmax(res->history[s], 0.0) / yy) : 0.0;
    // The Gram route's running values are estimates: ‖e‖² = yy − (a sum of terms as large as yy), whose
    // rounding leaves it known only to about ε·yy, so a relative residual below √ε is only known to be
    // below √ε: such entries are the floor, and the summary prints "<floor". The last entry is the exact
    // one of the check pass.
    if (method == SB_METHOD_GRAM) {
        res->history_floor = sqrt(DBL_EPSILON);
        for (int s = 1; s < res->sweeps; s++)
            res->history[s] = fmax(res->history[s], res->history_floor);
    }
    res->history[res->sweeps] = res->rel_residual;
    res->bytes = method == SB_METHOD_CHOLESKY ? 2.0 * pass  // the Gram pass and the refinement's certificate
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
    memset(res, 0, sizeof *res);
    const int64_t n = X->cols;
    sb_opts o = *opts;
    if (o.batch > n)
        o.batch = (int)n;
    // From global sizes, so that every rank picks the same route.
    const int64_t rows_mean = (n_rows_global + ctx->nranks - 1) / ctx->nranks;
    int method = o.method != SB_METHOD_AUTO ? o.method : solvebak_pick_method(ctx, rows_mean, n, X->f32, &o);
    MPI_Bcast(&method, 1, MPI_INT, 0, ctx->comm);  // rank 0's choice: nodes may differ in cores
    res->method = method == SB_METHOD_CHOLESKY ? "cholesky" : method == SB_METHOD_GRAM ? "gram" : "residual";
    if (method == SB_METHOD_CHOLESKY && o.iters < 1)
        o.iters = 1;  // the history holds the start and the solve
    res->a = calloc((size_t)n, sizeof(double));
    res->history = calloc((size_t)o.iters + 1, sizeof(double));
    sb_work w = {0};
    int rc = res->a && res->history ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK)
        rc = sb_alloc_all(ctx, X, &o, method != SB_METHOD_RESIDUAL, &w);
    rc = ctx_agree(ctx, rc);  // out of memory on one rank must not leave the others in a collective
    if (rc == DS_OK)
        rc = ctx_agree(ctx, sb_solve(ctx, X, y, &o, method, &w, res));
    if (rc == DS_OK)
        rc = ctx->be->download(ctx, res->history, w.hist, (size_t)(res->sweeps + 1) * sizeof(double));
    if (rc == DS_OK)
        rc = ctx->be->mark(ctx, 3);
    if (rc == DS_OK)
        rc = sb_check(ctx, X, y, &w, res);
    if (rc == DS_OK) {
        rc = ctx->be->mark(ctx, 4);
        if (rc == DS_OK)
            rc = ctx->be->elapsed(ctx, 3, 4, &res->check_seconds);
    }
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK && method == SB_METHOD_CHOLESKY)
        rc = sb_chol_refine_timed(ctx, X, y, &w, res);
    if (rc == DS_OK)
        rc = ctx->be->download(ctx, res->a, w.a, (size_t)n * sizeof(double));
    rc = ctx_agree(ctx, rc);
    sb_work_free(ctx, &w);
    if (rc != DS_OK && method == SB_METHOD_CHOLESKY)
        solvebak_result_free(res);  // nothing to report: no factor, no coefficients
    if (rc != DS_OK)
        return rc;

    return sb_finish(ctx, n, (double)n_rows_global * (double)n * (X->f32 ? 4.0 : 8.0), method, &o, res);
}

void solvebak_result_free(sb_result *res)
{
    free(res->a);
    free(res->history);
    res->a = res->history = NULL;
}
