// solve_sweeps.c: SolveBak's two routes written once against backend.h (see solvebak.h): their setup, sweeps
// and buffers. solve_run.c runs them; solve_direct.c holds the direct methods and the certificate;
// solve_blocks.c the block solve's buffers, setup and coarse steps.
// Failure and collectives: a rank that fails returns at once, and every rank calls ctx_agree before
// any collective or any wait on the device that follows work which can fail (a peer stuck in an NCCL
// sum that a failed rank never joined would otherwise wait forever). ctx_agree is idempotent after an
// agreed failure, so the phases can agree again on the way out.
#include "solve/solve_work.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    ctx_beat(ctx, "solve: sweeps");
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

// A column whose ‖X_j‖² is 0 in double is a zero column (its coefficient 0), unless one of its products
// with other columns or with y is not: then its values are so small that their squares underflow (about
// 1e-162 and below, as the sums are formed), and taking it for a zero column would answer without it: a
// numerical failure (exit 4) for qr. The sums are the same on every rank.
int sb_tiny_columns(ds_ctx *ctx, const double *diag, int64_t n, int B, const double *G, const double *c)
{
    double *v = NULL;
    int rc = DS_OK;
    for (int64_t j = 0; j < n && rc == DS_OK; j++) {
        if (diag[j] != 0.0)
            continue;
        const int64_t b0 = B > 0 ? j / B * B : 0, len = B > 0 ? (n - b0 < B ? n - b0 : B) : n;
        const double *row = B > 0 ? G + (j / B) * B * B + (j - b0) * B : G + j * n;
        if (!v && !(v = malloc((size_t)(n + 1) * sizeof(double))))
            return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
        v[len] = 0.0;
        rc = ctx->be->download(ctx, v, row, (size_t)len * sizeof(double));
        if (rc == DS_OK && c)
            rc = ctx->be->download(ctx, v + len, c + j, sizeof(double));
        for (int64_t i = 0; i <= len && rc == DS_OK; i++)
            if (v[i] != 0.0)
                rc = ds_fail(&ctx->msg, DS_ERR_NUMERIC,
                             "solve: column %lld of X is too small to square in double precision: ||X_j||^2 "
                             "underflows to 0 while X_j is not zero; use --method qr",
                             (long long)j);
    }
    free(v);
    return rc;
}

int sb_residual_setup(ds_ctx *ctx, const ds_mat *X, const double *y, int B, sb_work *w)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols, nblocks = (n + B - 1) / B;
    DS_CHECK(w->rows ? sb_grams_stream(ctx, n, B, w) : be->solve->block_grams(ctx, X, B, w->grams));
    DS_CHECK(sb_injected(ctx, "setup", &ctx->msg));
    DS_CHECK(ctx_agree(ctx, DS_OK));
    DS_CHECK(be->allreduce_sum(ctx, w->grams, nblocks * B * B));
    for (int64_t b = 0; b < nblocks; b++) {
        int64_t b0 = b * B, nb = n - b0 < B ? n - b0 : B;
        DS_CHECK(be->gather(ctx, w->diag + b0, w->grams + b * B * B, nb, B + 1));
    }
    sb_tiny_later(w, w->grams, NULL, B);  // underflowed columns: looked for in the certificate's wait
    DS_CHECK(be->fill(ctx, w->a, n, 0.0));
    return w->rows ? DS_OK : be->copy(ctx, w->e, y, (size_t)X->rows * sizeof(double));  // streamed: e = y by then
}

// Block b's pass: e −= X_p·coef on the pending block p's columns, then gbuf = [X_bᵀe | ‖e‖²] (local);
// a streamed X is read for just those columns.
static int sb_residual_pass(ds_ctx *ctx, const ds_mat *X, sb_work *w, int64_t up0, int64_t upn, int64_t b0,
                            int64_t nb)
{
    if (w->rows)
        return sb_step_stream(ctx, X->cols, w, up0, upn, b0, nb);
    return ctx->be->solve->grad_update(ctx, X, w->e, up0, upn, w->coef, b0, nb, w->gbuf);
}

// A failure inside the residual route's sweeps that the ranks did not agree on (X in memory after the
// first block; the sums and steps): the other ranks are inside per-block sums that cannot be rejoined,
// so the job ends here with the message and the status as exit code on every rank (MPI_Abort), as HPL
// and ScaLAPACK do.
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
// With the block solve's coarse correction (solve_blocks.c), the correction of sweep s − 1 rides on
// block 0's pass and allreduce of sweep s: t = Zᵀe joins g_0 and ‖e‖² there, sb_coarse_step corrects a,
// g_0 and ‖e‖² (so the history and the stop test see the corrected residual), and e −= Z·δ follows.
int sb_residual_sweeps(ds_ctx *ctx, const ds_mat *X, const sb_opts *o, int B, sb_work *w,
                              sb_loop *L, sb_result *res)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols, nblocks = (n + B - 1) / B;
    const double *binv = w->bs[SB_BS_BINV];
    int64_t pend0 = 0, pendn = 0;
    for (int s = 0;; s++) {
        for (int64_t b = 0; b < nblocks; b++) {
            const int64_t b0 = b * B, nb = n - b0 < B ? n - b0 : B;
            const int corr = w->bs[SB_BS_CINV] && s > 0 && b == 0;
            int rc = sb_residual_pass(ctx, X, w, pend0, pendn, b0, nb);
            if (rc == DS_OK && corr)
                rc = sb_coarse_pass(ctx, X, B, w, 0);
            if (rc == DS_OK && s == 1 && b == nblocks - 1)
                rc = sb_injected(ctx, "sweep", &ctx->msg);
            // Fail together where a pass fails for reasons of its own: the first (its scratch is allocated
            // there) and, with X streamed, every one (a file changed or unreadable mid-run; an agreement a
            // block costs nothing beside the pass's reads)
            if ((s == 0 && b == 0) || w->rows)
                DS_CHECK(ctx_agree(ctx, rc));
            DS_CHECK(sb_abort(ctx, rc));
            DS_CHECK(sb_abort(ctx, be->allreduce_sum(ctx, w->gbuf, nb + 1 + (corr ? nblocks : 0))));
            if (corr)
                DS_CHECK(sb_abort(ctx, sb_coarse_step(ctx, n, B, w)));
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
            if (corr)
                DS_CHECK(sb_abort(ctx, sb_coarse_pass(ctx, X, B, w, 1)));
            ds_step_args st = {.gbuf = w->gbuf, .diag = w->diag + b0, .gbb = w->grams + b * B * B,
                               .nb = (int)nb, .ld = B, .line_search = o->line_search,
                               .a = w->a + b0, .coef = w->coef, .ee_slot = NULL,
                               .binv = binv ? binv + b * B * B : NULL};
            DS_CHECK(sb_abort(ctx, be->solve->block_step(ctx, &st)));
            pend0 = b0;
            pendn = nb;
        }
    }
}

int sb_gram_setup(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols;
    DS_CHECK(w->rows     ? sb_gram_stream(ctx, n, w)
             : w->single ? be->solve->gram_single(ctx, X, y, w->sys)
                         : be->solve->gram(ctx, X, y, w->sys));
    DS_CHECK(sb_injected(ctx, "setup", &ctx->msg));
    DS_CHECK(ctx_agree(ctx, DS_OK));
    DS_CHECK(be->allreduce_sum(ctx, w->sys, n * n + n + 1));
    DS_CHECK(be->gather(ctx, w->diag, w->sys, n, n + 1));
    // underflowed columns: looked for where the diagonal comes down anyway (sb_chol_step, sb_check), not
    // here, where a wait would hold the sweeps back (a lower precision cannot tell such a column from a
    // zero one: its attempt is set aside for X'X in double at a zero column, sb_single_range)
    sb_tiny_later(w, w->single ? NULL : w->sys, w->sys + n * n, 0);
    DS_CHECK(be->copy(ctx, w->g, w->sys + n * n, (size_t)n * sizeof(double)));
    DS_CHECK(be->fill(ctx, w->a, n, 0.0));
    DS_CHECK(be->copy(ctx, w->ee, w->sys + n * n + n, sizeof(double)));
    return be->copy(ctx, w->hist, w->ee, sizeof(double));
}

// What the Gram route tests against tol (sb_decide) after a sweep. Its running ‖e‖² is yy less a sum of
// terms as large as yy, so it is known only to about ε·yy, and the sweeps go on converging below that
// (the block solve with the coarse correction far below): there a test on it stops at random (on 3
// ranks, "converged" at a true 1.8e-8 for --tol 1e-10; "stalled" at 9e-9 for --tol 1e-14). What stays exact to rounding is a sweep's decrease
// d = ee_prev − ee (a sum of small terms), so under 64·ε·yy the test takes the rest of the way down that
// the rate r = d / d_prev predicts, d·r/(1 − r) (linear convergence), or ee itself when r is not below 1.
static double sb_gram_tested(double yy, double ee, double ee_prev, double d_prev)
{
    const double d = ee_prev - ee, r = d_prev > 0 ? d / d_prev : 1.0;
    if (ee > 64.0 * DBL_EPSILON * yy || !(r < 1.0))
        return ee;
    return fmax(d, 0.0) * fmax(r, 0.0) / (1.0 - r);
}

int sb_gram_sweeps(ds_ctx *ctx, int64_t n, const sb_opts *o, sb_work *w, sb_loop *L, sb_result *res)
{
    ds_gram_args ga = {.G = w->sys, .diag = w->diag, .g = w->g, .a = w->a, .ee = w->ee, .ee_hist = w->hist + 1,
                       .n = n, .batch = o->batch, .line_search = o->line_search, .sweeps = o->iters,
                       .binv = w->bs[SB_BS_BINV]};
    if (w->bs[SB_BS_CINV]) {  // bs[SB_BS_WC] = [Wt (k × n) | C (k × k)]
        ga.cinv = w->bs[SB_BS_CINV];
        ga.wt = w->bs[SB_BS_WC];
        ga.cmat = w->bs[SB_BS_WC] + (n + o->batch - 1) / o->batch * n;
    }
    if (!L->checking) {
        if (o->iters > 0)
            DS_CHECK(ctx->be->solve->gram_sweeps(ctx, &ga));
        DS_CHECK(sb_injected(ctx, "sweep", &ctx->msg));
        res->sweeps = o->iters;
        res->stop_reason = "max_sweeps";
        return DS_OK;
    }
    ga.sweeps = 1;
    double ee_prev = 0.0, d_prev = 0.0;
    int s0 = 0;
    if (w->rs.phase == 2) {  // a restart (solve_ckpt.c): the loop as it was at the checkpoint
        const double *ck = w->rs.ck;
        s0 = (int)ck[SB_CK_SWEEP], ee_prev = ck[SB_CK_EE_PREV], d_prev = ck[SB_CK_D_PREV];
        L->yy = ck[SB_CK_YY], L->rel_prev = ck[SB_CK_REL_PREV];
        w->rs.phase = 0;
    }
    for (int s = s0;; s++) {
        double ee;
        DS_CHECK(ctx_agree(ctx, DS_OK));
        if (w->ckpt)
            DS_CHECK(sb_ckpt_sweep(ctx, w, n, o->iters, s, (const double[4]){ee_prev, d_prev, L->yy, L->rel_prev}));
        DS_CHECK(ctx_agree(ctx, sb_read(ctx, w->hist + s, &ee)));  // before sb_decide's broadcast
        if (s == 0)
            L->yy = ee;
        const double tested = s > 0 ? sb_gram_tested(L->yy, ee, ee_prev, d_prev) : ee;
        d_prev = s > 0 ? ee_prev - ee : 0.0;
        ee_prev = ee;
        const char *why = sb_decide(ctx, o, L, s, tested);
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

int sb_alloc_all(ds_ctx *ctx, const ds_mat *X, const sb_opts *o, int gram, sb_work *w)
{
    const int64_t n = X->cols, B = o->batch, nblocks = (n + B - 1) / B;
    DS_CHECK(sb_alloc(ctx, &w->e, w->rows && !gram ? w->rows->rows : X->rows));
    DS_CHECK(sb_alloc(ctx, &w->a, n));
    DS_CHECK(sb_alloc(ctx, &w->diag, n));
    DS_CHECK(sb_alloc(ctx, &w->hist, o->iters + 1));
    DS_CHECK(sb_alloc(ctx, &w->gout, n + 3));  // [Xᵀe | ‖e‖² | a refinement step's size and max|a|]
    if (gram) {  // the Gram route and cholesky (whose scales take coef)
        DS_CHECK(sb_alloc(ctx, &w->sys, n * n + n + 1));
        DS_CHECK(sb_alloc(ctx, &w->g, n));
        DS_CHECK(sb_alloc(ctx, &w->coef, n));
        DS_CHECK(sb_alloc(ctx, &w->ee, 1));  // ‖e‖²
        return sb_blocks_alloc(ctx, X, o, gram, w);
    }
    DS_CHECK(sb_alloc(ctx, &w->grams, nblocks * B * B));
    // With the coarse correction, block 0's also carries t = Zᵀe (nblocks) and the ‖e‖² of that pass.
    DS_CHECK(sb_alloc(ctx, &w->gbuf, B + 1 + (sb_blocks_wanted(o, n) == 2 ? nblocks + 1 : 0)));
    DS_CHECK(sb_alloc(ctx, &w->coef, B));
    return sb_blocks_alloc(ctx, X, o, gram, w);
}

