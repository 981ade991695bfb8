// solve_auto.c: --method auto, the method that suits the problem, verified rather than predicted:
//   1. when X'X would not fit (n² doubles beyond AUTO_GRAM_BYTES), SolveBak on the residual route with the
//      block solve and the coarse correction, which never forms it;
//   2. otherwise cholesky (one pass over X, the cheapest exact method), kept when its factor shows X well
//      enough conditioned for the normal equations: the estimate of cond(X) from the factor's diagonal
//      at most AUTO_COND_MAX, where the normal equations lose about cond²·ε and the refinement step wins
//      most of it back;
//   3. otherwise, and when the factor fails (X'X singular or overflowing), qr, which works on X itself
//      (a second pass) and refuses only an X that is rank deficient.
// Every rank takes the same branch: the decisions rest on results all ranks share. A streamed X (rows)
// takes the same steps, each method reading X from the source (qr: one more pass), but never step 1: the
// residual route streams only when asked for (--method residual), as it reads X about twice a sweep.
#include "solve/solve_work.h"

#include <stdio.h>
#include <string.h>

#define AUTO_GRAM_BYTES 4e9
#define AUTO_COND_MAX 1e5

// After a numerical failure that every rank agreed on (nothing pending in any collective): forget it and
// start the next method afresh.
static void auto_forgive(ds_ctx *ctx)
{
    ctx->agreed_failure = DS_OK;
    ctx->msg.text[0] = '\0';
}

int sb_auto_run(ds_ctx *ctx, const ds_mat *X, const double *y, ds_rows *rows, int64_t n_rows_global,
                const sb_opts *opts, sb_result *res)
{
    const double n = (double)X->cols;
    sb_opts o = *opts;
    char why[sizeof res->method_reason];
    if (n * n * 8 > AUTO_GRAM_BYTES && rows)  // solvebak_stream_plan refuses such a stream before this
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "X'X (%.3g GB) would not fit, and auto does not take the residual "
                       "route on a streamed X (it reads X twice a sweep): --method residual does", n * n * 8 / 1e9);
    if (n * n * 8 > AUTO_GRAM_BYTES) {
        o.method = SB_METHOD_RESIDUAL;
        const int64_t blocks = (X->cols + o.batch - 1) / o.batch;
        o.block_solve = 1;
        o.coarse = blocks <= SB_BS_MAX;  // beyond, the coarse system itself would be large
        snprintf(why, sizeof why, "X'X (%.3g GB) would not fit: SolveBak on the residual route with the block solve%s",
                 n * n * 8 / 1e9, o.coarse ? "" : " (no coarse correction: more than 2048 blocks)");
        DS_CHECK(sb_run_method(ctx, X, y, n_rows_global, &o, res));
        snprintf(res->method_reason, sizeof res->method_reason, "%s", why);
        return DS_OK;
    }
    o.method = SB_METHOD_CHOLESKY;
    DS_CHECK(ctx_agree(ctx, ctx->be->sync(ctx)));
    const double t0 = MPI_Wtime();
    int rc = sb_run_core(ctx, X, y, rows, n_rows_global, &o, res);
    if (rc == DS_OK && res->cond_estimate <= AUTO_COND_MAX) {
        snprintf(res->method_reason, sizeof res->method_reason,
                 "cond(X) about %.2g from the Cholesky factor: the normal equations suffice", res->cond_estimate);
        return DS_OK;
    }
    if (rc != DS_OK && rc != DS_ERR_NUMERIC)
        return rc;
    if (rc == DS_OK)
        snprintf(why, sizeof why, "cond(X) about %.2g from the Cholesky factor, above %.0e: QR", res->cond_estimate,
                 AUTO_COND_MAX);
    else {  // "solve --method cholesky: X'X is singular at column j ... after scaling: X is ..."
        const char *m = strstr(ctx->msg.text, ": ");
        m = m ? m + 2 : ctx->msg.text;
        const char *end = strchr(m, ':');
        snprintf(why, sizeof why, "%.*s: QR", (int)(end ? end - m : (long)strlen(m)), m);
    }
    auto_forgive(ctx);
    DS_CHECK(ctx_agree(ctx, ctx->be->sync(ctx)));
    double tried = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &tried, 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
    solvebak_result_free(res);
    o.method = SB_METHOD_QR;
    DS_CHECK(sb_run_core(ctx, X, y, rows, n_rows_global, &o, res));
    snprintf(res->method_reason, sizeof res->method_reason, "%s", why);
    res->tried_seconds = tried;
    res->solve_seconds += tried;  // the honest total: the attempt set aside is part of the solve
    return DS_OK;
}
