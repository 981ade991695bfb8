// solve_qr.c: --method qr, least squares by TSQR. Each rank factors its rows of A = [X | y] (the backend's
// qr_ops.local_r), the (n+1) × (n+1) R factors are combined up a binomial tree to rank 0 (stack two,
// factor again: qr_ops.stack_r) and rank 0's R is sent to every rank, so that all ranks hold the same
// bits. A backend with qr_ops.global_r may factor all ranks' rows at once instead (CUDA, unless
// DSOLVE_QR_GLOBAL=0: its sums are collectives, with no serial step like the tree's). From R: a = R[0:n,0:n]⁻¹·R[0:n,n], ‖y‖² and ‖X_j‖² from its columns' norms, and the residual
// ‖y − X·a‖² = R_nn². The normal equations square cond(X); R does not, so this is the method for
// ill-conditioned X (up to 1e12 and beyond) where cholesky fails. Rank deficiency is a failure (exit 4)
// naming the column (qr_ops.h, QR_RANK_TOL).
// Failure and collectives as in solve_run.c: ranks agree before every collective that follows work
// that can fail.
#include "solve/solve_work.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "solve/qr_ops.h"

// The tree: at step s = 1, 2, 4, ..., rank r with r mod 2s = s sends its R to rank r − s, and rank r
// with r mod 2s = 0 and r + s < p receives it and factors [R; R_received] into R: ⌈log₂ p⌉ steps of
// one alltoallv in which only those pairs move data, for any p. Ranks agree after each step's factor.
static int sb_qr_tree(ds_ctx *ctx, int64_t n1, double *R, double *recv)
{
    const int p = ctx->nranks, r = ctx->rank;
    const int64_t bytes = n1 * n1 * (int64_t)sizeof(double);
    int64_t *cnt = calloc(4 * (size_t)p, sizeof *cnt);  // send counts, displacements, receive counts, displacements
    if (!cnt)
        return ctx_agree(ctx, ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory"));
    int rc = DS_OK;
    for (int s = 1; s < p && rc == DS_OK; s *= 2) {
        memset(cnt, 0, 4 * (size_t)p * sizeof *cnt);
        const int sender = r % (2 * s) == s, receiver = r % (2 * s) == 0 && r + s < p;
        if (sender)
            cnt[r - s] = bytes;
        if (receiver)
            cnt[2 * p + r + s] = bytes;
        rc = ctx->be->alltoallv(ctx, R, cnt, cnt + p, recv, cnt + 2 * p, cnt + 3 * p);
        if (rc == DS_OK && receiver)
            rc = ctx->be->solve->qr->stack_r(ctx, R, recv, n1, R);
        rc = ctx_agree(ctx, rc);
    }
    free(cnt);
    return rc;
}

int qr_bcast(ds_ctx *ctx, double *buf, int64_t n)
{
    if (ctx->nranks == 1)
        return DS_OK;
    DS_CHECK(ctx_agree(ctx, ctx->rank != 0 ? ctx->be->fill(ctx, buf, n, 0.0) : DS_OK));
    return ctx->be->allreduce_sum(ctx, buf, n);
}

void qr_trace(ds_ctx *ctx, const char *what)
{
    static int on = -1;
    static double last = 0;
    if (on < 0)
        on = getenv("DSOLVE_TRACE") != NULL;
    if (!on)
        return;
    if (ctx->be->sync(ctx) != DS_OK)
        return;
    const double now = MPI_Wtime();
    if (what)
        fprintf(stderr, "trace: rank %d qr %s %.3f ms\n", ctx->rank, what, (now - last) * 1e3);
    last = now;
}

// The buffers: w->qr[0] the local factorization's work (freed once the local R exists), qr[1] R,
// qr[2] the R received in the tree, qr[3] the column norms² and the diagonal of R (2·n1).
int sb_qr_factor(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w)
{
    const qr_ops *q = ctx->be->solve->qr;
    const int64_t n1 = X->cols + 1;
    int global = 0;  // R already holds every rank's rows (qr_ops.global_r): no tree
    qr_trace(ctx, NULL);
    int rc = sb_alloc(ctx, &w->qr[0], q->local_work(ctx, X->rows, X->cols));
    if (rc == DS_OK)
        rc = sb_alloc(ctx, &w->qr[1], n1 * n1);
    if (rc == DS_OK)
        rc = sb_alloc(ctx, &w->qr[2], n1 * n1);
    if (rc == DS_OK)
        rc = sb_alloc(ctx, &w->qr[3], 2 * n1);
    qr_trace(ctx, "alloc");
    if (w->rows) {  // streamed: X gives the chunks' shape; the chunks' R folded as they pass (collective)
        rc = ctx_agree(ctx, rc);
        if (rc == DS_OK)
            rc = sb_qr_stream(ctx, n1, w);
    } else if (q->global_r && ctx->nranks > 1) {  // collective: the ranks agree first
        rc = ctx_agree(ctx, rc);
        if (rc == DS_OK)
            rc = q->global_r(ctx, X, y, w->qr[0], w->qr[1], &global);
        if (rc == DS_OK && !global)
            rc = q->local_r(ctx, X, y, w->qr[0], w->qr[1]);
    } else if (rc == DS_OK) {
        rc = q->local_r(ctx, X, y, w->qr[0], w->qr[1]);
    }
    if (rc == DS_OK)
        rc = sb_injected(ctx, "setup", &ctx->msg);
    qr_trace(ctx, "factor");
    if (w->qr[0]) {  // as large as X (a chunk, streamed): give it back before the certificate pass
        ctx->be->free(ctx, w->qr[0]);
        w->qr[0] = NULL;
    }
    DS_CHECK(ctx_agree(ctx, rc));
    qr_trace(ctx, "free and agree");
    DS_CHECK(ctx->be->mark(ctx, 7));  // the local factor ends: sb_qr_solve reads the time from mark 0
    if (!global)
        DS_CHECK(sb_qr_tree(ctx, n1, w->qr[1], w->qr[2]));
    rc = qr_bcast(ctx, w->qr[1], n1 * n1);
    qr_trace(ctx, "tree and broadcast");
    return rc;
}

// The rank test on the host (cn: the column norms², d: R's diagonal, n1 entries each; xn: the column norms)
// and the estimate of cond(X·S) with S the column scales 1/‖X_j‖: the ratio of the largest to the smallest
// |R_jj|/‖X_j‖ (a lower bound, as cholesky's is). R is the same on every rank, so all ranks decide alike.
static int sb_qr_rank(ds_ctx *ctx, const double *cn, const double *xn, const double *d, int64_t n, double *cond)
{
    double lo = INFINITY, hi = 0.0;
    for (int64_t j = 0; j < n; j++) {
        const double xj = xn[j], rj = fabs(d[j]);
        if (!isfinite(xj) || !isfinite(rj))
            return ds_fail(&ctx->msg, DS_ERR_NUMERIC,
                           "solve --method qr: the factor is not finite at column %lld (||X_j||^2 = %g, R_jj = %g): "
                           "X or y holds values that are not finite or too large to square in double precision",
                           (long long)j, cn[j], d[j]);
        if (!(rj > QR_RANK_TOL * xj))
            return ds_fail(&ctx->msg, DS_ERR_NUMERIC,
                           xj > 0 ? "solve --method qr: X is rank deficient at column %lld (counting from 0) of %lld: "
                                    "|R_jj| = %.3g <= %g * ||X_j|| = %.3g; a column is a combination of earlier ones"
                                  : "solve --method qr: X is rank deficient at column %lld (counting from 0) of %lld: "
                                    "|R_jj| = %.3g <= %g * ||X_j|| = %.3g; the column is zero",
                           (long long)j, (long long)n, rj, QR_RANK_TOL, QR_RANK_TOL * xj);
        lo = fmin(lo, rj / xj);
        hi = fmax(hi, rj / xj);
    }
    *cond = n > 0 ? hi / lo : 1.0;
    return DS_OK;
}

// After sb_qr_factor, on every rank: the rank test, then a (w->a), w->diag = ‖X_j‖², w->hist[0] = ‖y‖²
// and w->hist[1] = R_nn², the residual² (the certificate pass replaces it). No coefficients on failure.
int sb_qr_solve(ds_ctx *ctx, int64_t n, sb_work *w, sb_result *res)
{
    const ds_backend *be = ctx->be;
    const int64_t n1 = n + 1;
    double *R = w->qr[1], *cn = w->qr[3], *d = w->qr[3] + n1;
    double *host = malloc(4 * (size_t)n1 * sizeof(double));  // cn, d, the norms, a column of R
    if (!host)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    double *xn = host + 2 * n1, *col = host + 3 * n1;
    int rc = be->solve->qr->col_norms(ctx, R, n1, cn);
    if (rc == DS_OK)
        rc = be->gather(ctx, d, R, n1, n1 + 1);
    if (rc == DS_OK)
        rc = be->download(ctx, host, cn, 2 * (size_t)n1 * sizeof(double));
    // ‖X_j‖ = ‖R's column j‖: from its square, but where that left double's normal range with R_jj finite
    // and not zero (X_j's values near 1e-162 and below, or 1e154 and above, as their squares sum), from the
    // column itself, scaled (a zero column would pass any rank test, an infinite one fail it)
    int64_t odd = 0;
    for (int64_t j = 0; j < n && rc == DS_OK; j++) {
        xn[j] = sqrt(host[j]);
        if ((host[j] >= DBL_MIN && isfinite(host[j])) || host[n1 + j] == 0.0 || !isfinite(host[n1 + j]))
            continue;
        rc = be->download(ctx, col, R + j * n1, (size_t)(j + 1) * sizeof(double));
        xn[j] = rc == DS_OK ? sb_norm2(col, j + 1) : xn[j];
        odd++;
    }
    if (rc == DS_OK)
        rc = sb_qr_rank(ctx, host, xn, host + n1, n, &res->cond_estimate);
    const double rr = rc == DS_OK ? host[n1 + n] * host[n1 + n] : 0.0;
    if (rc == DS_OK)
        rc = be->solve->qr->solve(ctx, R, n, w->a);
    if (rc == DS_OK)
        rc = be->copy(ctx, w->diag, cn, (size_t)n * sizeof(double));
    // A column whose ‖X_j‖² underflowed is not a zero column to the certificate (which counts those):
    // its entry becomes double's smallest normal value (it adds nothing to Σ‖X_j‖² either way).
    for (int64_t j = 0; j < n && rc == DS_OK && odd > 0; j++)
        if (host[j] < DBL_MIN && xn[j] > 0 && isfinite(xn[j]))
            rc = be->upload(ctx, w->diag + j, &(double){DBL_MIN}, sizeof(double));
    free(host);
    DS_CHECK(rc);
    DS_CHECK(be->copy(ctx, w->hist, cn + n, sizeof(double)));
    DS_CHECK(be->upload(ctx, w->hist + 1, &rr, sizeof(double)));
    res->sweeps = 1;
    res->stop_reason = "solved";
    return DS_OK;
}
