// solve_stream.c: least squares from inputs larger than the memory a rank may use. The Gram route reads
// X once: G = XᵀX, c = Xᵀy and yᵀy by chunks (each chunk's [G | c | yy] by the backend's gram op, added
// up with axpy), then the one allreduce and the sweeps (or cholesky's factor and solve) on the n × n
// system exactly as in memory, then the certificate pass (e = y − X·a, Xᵀe, ‖e‖²) by chunks too; the
// refinement step of cholesky is one more such pass. QR reads X once too, each chunk's R folded into the
// rank's (TSQR down the chunks, then across the ranks as in memory). The residual route does not stream.
#include "solve/solve_work.h"

#include "core/data.h"
#include "solve/qr_ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// Working bytes of a Gram-route solve besides X, y and the residual: G (and, streamed, a chunk's G
// before it is added; the backend's scratch for the product), and the vectors of n.
static double sb_gram_fixed(int64_t cols, int streamed)
{
    const double n = (double)cols;
    return ((streamed ? 3.0 : 2.0) * (n * n + n + 1) + 16.0 * n + 64.0) * 8.0;
}

// One pass over the chunks of w->rows. gram: w->sys = Σ the chunks' [G | c | yy] (with checkpoints
// between chunks, and a restart's own rows and starting sum: solve_ckpt.c); else w->gout = Σ [Xᵀe | ‖e‖²]
// with e = y − X·w->a by chunk (e in w->e). The first chunk's sums go straight to their place, so that a
// single chunk gives the in-memory bits. The reader is stopped on every path.
static int sb_stream_pass(ds_ctx *ctx, int64_t n, sb_work *w, int gram)
{
    const ds_backend *be = ctx->be;
    ds_rows *s = w->rows;
    double *sum = gram ? w->sys : w->gout;
    const int64_t len = gram ? n * n + n + 1 : n + 1;
    int have = 0;
    int rc = gram ? sb_ckpt_pass_start(ctx, w, len, sum, &have) : DS_OK;
    if (rc == DS_OK)
        rc = rows_begin(ctx, s);
    // With checkpoints every rank stops at as many chunk boundaries: the decisions there are collective.
    const int ck = gram && w->ckpt && w->ckpt->path;
    int64_t chunks = (s->pass_rows + s->chunk_rows - 1) / s->chunk_rows, most = chunks, consumed = 0;
    if (ck) {
        rc = ctx_agree(ctx, rc);
        MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT64_T, MPI_MAX, ctx->comm);
    }
    for (int64_t k = 0; rc == DS_OK && k < most; k++) {
        ds_mat C = {.rows = 0};
        const double *yc = NULL;
        if (k < chunks)
            rc = rows_next(ctx, s, &C, &yc);
        if (rc == DS_OK && C.rows > 0) {
            double *out = have ? w->acc : sum;
            if (gram) {
                rc = be->solve->gram(ctx, &C, yc, out);
            } else {
                rc = be->copy(ctx, w->e, yc, (size_t)C.rows * sizeof(double));
                if (rc == DS_OK)
                    rc = be->solve->grad_update(ctx, &C, w->e, 0, n, w->a, 0, n, out);
            }
            if (rc == DS_OK && have)
                rc = be->axpy(ctx, sum, w->acc, len, 1.0);
            have = 1;
            consumed += C.rows;
        }
        if (ck) {
            rc = ctx_agree(ctx, rc);
            if (rc == DS_OK)
                rc = sb_ckpt_pass(ctx, w, len, sum, have, consumed);
        }
    }
    if (rc == DS_OK && !have)  // no rows on this rank
        rc = be->fill(ctx, sum, len, 0.0);
    const int end = rows_end(ctx, s);
    return rc != DS_OK ? rc : end;
}

// Whether the pass just made saw values beyond 2^±DATA_RANGE_EXP (before[]: those of rows summed before
// a restart): if so, the chunks of the next pass are divided by the powers of two that bring them back, and
// 1 is returned. Collective.
static int sb_stream_rescale(ds_ctx *ctx, ds_rows *s, const double before[2])
{
    double big[2] = {fmax(s->xmax, before[0]), fmax(s->ymax, before[1])};
    MPI_Allreduce(MPI_IN_PLACE, big, 2, MPI_DOUBLE, MPI_MAX, ctx->comm);
    const int xe = data_range_exp(big[0]), ye = data_range_exp(big[1]);
    if (xe == s->x_exp && ye == s->y_exp)
        return 0;
    s->x_exp = xe, s->y_exp = ye;
    return 1;
}

int sb_qr_stream(ds_ctx *ctx, int64_t n1, sb_work *w)
{
    const qr_ops *q = ctx->be->solve->qr;
    ds_rows *s = w->rows;
    const double none[2] = {0, 0};
    for (int pass = 0;; pass++) {
        int have = 0;
        int rc = rows_begin(ctx, s);
        while (rc == DS_OK) {
            ds_mat C = {.rows = 0};
            const double *yc = NULL;
            rc = rows_next(ctx, s, &C, &yc);
            if (rc != DS_OK || C.rows == 0)
                break;
            rc = q->local_r(ctx, &C, yc, w->qr[0], have ? w->qr[2] : w->qr[1]);
            if (rc == DS_OK && have)
                rc = q->stack_r(ctx, w->qr[1], w->qr[2], n1, w->qr[1]);
            have = 1;
        }
        if (rc == DS_OK && !have)  // no rows on this rank: R = 0
            rc = ctx->be->fill(ctx, w->qr[1], n1 * n1, 0.0);
        const int end = rows_end(ctx, s);
        DS_CHECK(ctx_agree(ctx, rc != DS_OK ? rc : end));
        if (pass > 0 || !sb_stream_rescale(ctx, s, none))
            return DS_OK;
    }
}

int sb_gram_stream(ds_ctx *ctx, int64_t n, sb_work *w)
{
    ds_rows *s = w->rows;
    // A restart inside the pass: the magnitudes of the rows summed before it count too.
    const double before[2] = {w->rs.phase == 1 ? w->rs.ck[SB_CK_XMAX] : 0, w->rs.phase == 1 ? w->rs.ck[SB_CK_YMAX] : 0};
    for (int pass = 0;; pass++) {
        DS_CHECK(ctx_agree(ctx, sb_stream_pass(ctx, n, w, 1)));
        w->rs.phase = 0;  // a second pass (below) reads every row
        // Values beyond 2^±DATA_RANGE_EXP: the pass again, divided by powers of two (data.h), as in memory.
        if (pass > 0 || !sb_stream_rescale(ctx, s, before))
            return DS_OK;
    }
}

int sb_check_stream(ds_ctx *ctx, int64_t n, sb_work *w)
{
    return sb_stream_pass(ctx, n, w, 0);
}

// qr's working bytes beyond the Gram route's: two more R factors and the column norms, and the local
// factor's work for a chunk of rows (qr_ops.local_work), as fixed bytes and bytes a row.
static void sb_qr_bytes(const ds_ctx *ctx, int64_t cols, double *fixed, double *per_row)
{
    const qr_ops *q = ctx->be->solve->qr;
    const double n1 = (double)cols + 1, r0 = 4.0 * n1;
    *per_row = n1 * 8.0;
    *fixed = (2.0 * n1 * n1 + 2.0 * n1) * 8.0 + fmax(0.0, (double)q->local_work(ctx, (int64_t)r0, cols) - r0 * n1) * 8.0;
}

int solvebak_stream_plan(const ds_ctx *ctx, const rows_caps *caps, const char *cap_name, int64_t rows,
                         int64_t cols, int f32, const sb_opts *o, int64_t *chunk_rows, ds_msg *msg)
{
    *chunk_rows = 0;
    const double row = (double)cols * (f32 ? 4 : 8) + 8.0;
    const double in_memory = (double)rows * (row + 8.0) + sb_gram_fixed(cols, 0);
    if (in_memory <= caps->backend)
        return DS_OK;
    char have[64];
    snprintf(have, sizeof have, "X (%.3g GB a rank) exceeds %s %.3g GB", (double)rows * row / 1e9, cap_name,
             caps->backend / 1e9);
    if (o->method == SB_METHOD_RESIDUAL)
        return ds_fail(msg, DS_ERR_USAGE, "%s and --method residual does not stream yet: the Gram route (--method "
                       "gram or solvebak), cholesky, qr and auto do", have);
    if ((double)cols * (double)cols * 8 > SB_STREAM_GRAM_BYTES)
        return ds_fail(msg, DS_ERR_USAGE, "%s, and X'X (%.3g GB) is too large for the Gram route that streams",
                       have, (double)cols * (double)cols * 8 / 1e9);
    // qr, and auto (which may go on to qr), keep room for the local factor's work beside the chunks.
    double fixed = sb_gram_fixed(cols, 1), extra = 8.0, qr_fixed = 0, qr_row = 0;
    if (o->method == SB_METHOD_QR || o->method == SB_METHOD_AUTO)
        sb_qr_bytes(ctx, cols, &qr_fixed, &qr_row);
    double least[2];
    *chunk_rows = rows_chunk_for(ctx, caps, rows, cols, f32, fixed + qr_fixed, extra + qr_row, least);
    if (*chunk_rows > 0)
        return DS_OK;
    const int host = least[1] > caps->host;
    return ds_fail(msg, DS_ERR_USAGE, "%s %.4g MB is below the working minimum of %.4g MB for %lld columns (%s)",
                   host ? "--host-memory" : cap_name, (host ? caps->host : caps->backend) / 1e6,
                   (host ? least[1] : least[0]) / 1e6 + 0.0005, (long long)cols,
                   host ? "two pinned chunks of 8 rows" : "X'X and two chunks of 8 rows");
}

// Bytes and seconds of the passes since before: summed over ranks, and the slowest rank's.
static void sb_stream_stats(ds_ctx *ctx, const ds_rows *s, double bytes0, double seconds0, sb_result *res)
{
    double b = s->bytes - bytes0, t = s->seconds - seconds0;
    MPI_Allreduce(MPI_IN_PLACE, &b, 1, MPI_DOUBLE, MPI_SUM, ctx->comm);
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
    res->streamed = 1;
    res->chunk_rows = s->chunk_rows;
    res->bytes_moved = b;
    res->stream_seconds = t;
    res->bytes = b;
}

int solvebak_run_rows(ds_ctx *ctx, ds_rows *rows, int64_t n_rows_global, const sb_opts *opts, sb_result *res)
{
    sb_opts o = *opts;
    if (o.method == SB_METHOD_RESIDUAL)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "--method residual does not stream yet: the Gram route, cholesky, "
                       "qr and auto do");
    if (o.method == SB_METHOD_SOLVEBAK)  // read X once: the residual route would read it twice a sweep
        o.method = SB_METHOD_GRAM;
    const ds_mat shape = {.data = NULL, .rows = rows->chunk_rows, .cols = rows->cols, .f32 = rows->f32};
    const double bytes0 = rows->bytes, seconds0 = rows->seconds;
    const int rc = o.method == SB_METHOD_AUTO ? sb_auto_run(ctx, &shape, NULL, rows, n_rows_global, &o, res)
                                              : sb_run_core(ctx, &shape, NULL, rows, n_rows_global, &o, res);
    if (rc != DS_OK && rc != DS_ERR_NUMERIC)
        return rc;
    sb_stream_stats(ctx, rows, bytes0, seconds0, res);
    if (o.method == SB_METHOD_AUTO) {
        char why[sizeof res->method_reason];
        snprintf(why, sizeof why, "X streamed: %.200s", res->method_reason);
        snprintf(res->method_reason, sizeof res->method_reason, "%s", why);
    }
    return rc;
}
