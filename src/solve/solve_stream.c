// solve_stream.c: least squares from inputs larger than the memory a rank may use. The Gram route reads
// X once: G = XᵀX, c = Xᵀy and yᵀy by chunks (each chunk's [G | c | yy] by the backend's gram op, added
// up with axpy), then the one allreduce and the sweeps (or cholesky's factor and solve) on the n × n
// system exactly as in memory, then the certificate pass (e = y − X·a, Xᵀe, ‖e‖²) by chunks too; the
// refinement step of cholesky is one more such pass. QR reads X once too, each chunk's R folded into the
// rank's (TSQR down the chunks, then across the ranks as in memory). The residual route (only when asked
// for: it reads X about twice a sweep) keeps e and a resident: its setup is one pass (the block Grams,
// e = y), and each block's step one pass over a column window of the rows, the columns of the block
// before (e −= X_p·Δa_p) and of the block (g_b = X_bᵀe), so that a sweep reads and moves X about twice.
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

// What one pass over the chunks of w->rows sums, and where: SB_PASS_GRAM, [G | c | yy] (with checkpoints
// between chunks, and a restart's own rows and starting sum: solve_ckpt.c); SB_PASS_CHECK, [Xᵀe | ‖e‖²]
// with e = y − X·w->a by chunk (e in w->e); SB_PASS_GRAMS, the block Grams of batch B, with w->e = y
// for the rank's rows; SB_PASS_STEP, a block step's [X_grᵀe | ‖e‖²] after e −= X_up·w->coef, over a
// column window (up, gr: the blocks' first columns in the window's chunks).
enum { SB_PASS_GRAM, SB_PASS_CHECK, SB_PASS_GRAMS, SB_PASS_STEP };
typedef struct sb_pass {
    int kind;
    double *sum;
    int64_t len;
    int B;
    int64_t up, upn, gr, grn;
} sb_pass;

// One chunk's sums into out; row: the chunk's first row in the pass.
static int sb_stream_chunk(ds_ctx *ctx, int64_t n, sb_work *w, const sb_pass *p, const ds_mat *C, const double *yc,
                           int64_t row, double *out)
{
    const solve_ops *op = ctx->be->solve;
    const size_t ybytes = (size_t)C->rows * sizeof(double);
    switch (p->kind) {
    case SB_PASS_GRAM:
        return op->gram(ctx, C, yc, out);
    case SB_PASS_GRAMS:
        DS_CHECK(ctx->be->copy(ctx, w->e + row, yc, ybytes));
        return op->block_grams(ctx, C, p->B, out);
    case SB_PASS_STEP:
        return op->grad_update(ctx, C, w->e + row, p->up, p->upn, w->coef, p->gr, p->grn, out);
    default:
        DS_CHECK(ctx->be->copy(ctx, w->e, yc, ybytes));
        return op->grad_update(ctx, C, w->e, 0, n, w->a, 0, n, out);
    }
}

// One pass over the chunks of w->rows, p->sum = Σ the chunks' sums. The first chunk's sums go straight
// to their place, so that a single chunk gives the in-memory bits. The reader is stopped on every path.
static int sb_stream_pass(ds_ctx *ctx, int64_t n, sb_work *w, const sb_pass *p)
{
    const ds_backend *be = ctx->be;
    ds_rows *s = w->rows;
    const int gram = p->kind == SB_PASS_GRAM;
    double *sum = p->sum;
    const int64_t len = p->len;
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
            rc = sb_stream_chunk(ctx, n, w, p, &C, yc, consumed, have ? w->acc : sum);
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

// Whether the pass just made divided X's columns or y by other powers of two than the largest magnitudes
// it saw call for (data.h: beyond 2^±DATA_RANGE_EXP; before: NULL, or the n + 1 of rows summed before a
// restart): if so, *again = 1 and the chunks of the next pass are divided by those. Collective.
static int sb_stream_rescale(ds_ctx *ctx, ds_rows *s, const double *before, int *again)
{
    *again = 0;
    if (s->mem_x)  // rows in memory: divided as they were loaded (data_load_lsq_ranged), on every rank
        return DS_OK;
    const int64_t n = s->cols;
    double *big = malloc(((size_t)n + 1) * sizeof(double));
    int *xe = malloc((size_t)n * sizeof(int));
    int rc = ctx_agree(ctx, big && xe ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory"));
    if (rc == DS_OK) {
        for (int64_t j = 0; j <= n; j++)
            big[j] = before ? fmax(s->big[j], before[j]) : s->big[j];
        MPI_Allreduce(MPI_IN_PLACE, big, (int)n + 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
        const int64_t scaled = data_range_exps(big, n, xe);
        const int ye = data_range_exp(big[n]);
        int same = ye == s->y_exp;
        for (int64_t j = 0; j < n; j++)
            same &= xe[j] == (s->x_exps ? s->x_exps[j] : 0);
        if (!same) {
            free(s->x_exps);
            s->x_exps = scaled ? xe : NULL, s->y_exp = ye;
            xe = scaled ? NULL : xe;
            *again = 1;
        }
    }
    free(big), free(xe);
    return rc;
}

int sb_qr_stream(ds_ctx *ctx, int64_t n1, sb_work *w)
{
    const qr_ops *q = ctx->be->solve->qr;
    ds_rows *s = w->rows;
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
        int again = 0;
        if (pass == 0)
            DS_CHECK(sb_stream_rescale(ctx, s, NULL, &again));
        if (!again)
            return DS_OK;
    }
}

// The setup's pass, and once more divided by powers of two when the values lie beyond 2^±DATA_RANGE_EXP
// (data.h), as in memory. Collective.
static int sb_setup_stream(ds_ctx *ctx, int64_t n, sb_work *w, const sb_pass *p)
{
    // A restart inside the Gram pass: the magnitudes of the rows summed before it count too.
    const double *before = w->rs.phase == 1 ? w->rs.scales + n + 1 : NULL;
    for (int pass = 0;; pass++) {
        DS_CHECK(ctx_agree(ctx, sb_stream_pass(ctx, n, w, p)));
        w->rs.phase = 0;  // a second pass (below) reads every row
        int again = 0;
        if (pass == 0)
            DS_CHECK(sb_stream_rescale(ctx, w->rows, before, &again));
        if (!again)
            return DS_OK;
    }
}

int sb_gram_stream(ds_ctx *ctx, int64_t n, sb_work *w)
{
    const sb_pass p = {.kind = SB_PASS_GRAM, .sum = w->sys, .len = n * n + n + 1};
    return sb_setup_stream(ctx, n, w, &p);
}

int sb_grams_stream(ds_ctx *ctx, int64_t n, int B, sb_work *w)
{
    const sb_pass p = {.kind = SB_PASS_GRAMS, .sum = w->grams, .len = (n + B - 1) / B * B * B, .B = B};
    return sb_setup_stream(ctx, n, w, &p);
}

int sb_check_stream(ds_ctx *ctx, int64_t n, sb_work *w)
{
    const sb_pass p = {.kind = SB_PASS_CHECK, .sum = w->gout, .len = n + 1};
    return sb_stream_pass(ctx, n, w, &p);
}

int sb_step_stream(ds_ctx *ctx, int64_t n, sb_work *w, int64_t up0, int64_t upn, int64_t gr0, int64_t grn)
{
    const int64_t cols[4] = {up0, up0 + upn, gr0, gr0 + grn};
    rows_window(w->rows, cols, 2);
    const sb_pass p = {.kind = SB_PASS_STEP, .sum = w->gbuf, .len = grn + 1, .up = upn ? rows_window_col(w->rows, up0) : 0,
                       .upn = upn, .gr = rows_window_col(w->rows, gr0), .grn = grn};
    return sb_stream_pass(ctx, n, w, &p);
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

// Working bytes of a residual-route solve besides X and y: the residual e (rows doubles), the block
// Grams (and, streamed, a chunk's before they are added; with the block solve, their pseudo-inverses),
// and the vectors of n and of a block.
static double sb_residual_fixed(int64_t rows, int64_t cols, int batch, int block_solve, int streamed)
{
    const double B = (double)(batch < cols ? batch : cols), grams = ceil((double)cols / B) * B * B;
    return ((1.0 + streamed + block_solve) * grams + (double)rows + 4.0 * (double)cols + 3.0 * B + 64.0) * 8.0;
}

// What a streamed residual route does not take: the coarse correction keeps Z = X·P beside e (a value a
// row for each block) and reads X for its products, which this route's passes do not plan for.
static int sb_stream_refused(const sb_opts *o, int64_t cols, const char *have, ds_msg *msg)
{
    if (o->method != SB_METHOD_RESIDUAL || sb_blocks_wanted(o, cols) != 2)
        return DS_OK;
    return ds_fail(msg, DS_ERR_USAGE, "%s%s--method residual streams without the coarse correction only: "
                   "--block-solve --no-coarse", have, have[0] ? ", and " : "");
}

int solvebak_stream_plan(const ds_ctx *ctx, const rows_caps *caps, const char *cap_name, int64_t rows,
                         int64_t cols, int f32, const sb_opts *o, int64_t *chunk_rows, ds_msg *msg)
{
    *chunk_rows = 0;
    const double row = (double)cols * (f32 ? 4 : 8) + 8.0;
    const int residual = o->method == SB_METHOD_RESIDUAL;
    const double in_memory = (double)rows * (row + 8.0) + (residual ? sb_residual_fixed(0, cols, o->batch,
                                                                                       o->block_solve, 0)
                                                                     : sb_gram_fixed(cols, 0));
    if (in_memory <= caps->backend)
        return DS_OK;
    char have[224];
    snprintf(have, sizeof have, "X (%.3g GB a rank) with the solve's work (%.3g GB) exceeds %s %.3g GB",
             (double)rows * row / 1e9, (in_memory - (double)rows * row) / 1e9, cap_name, caps->backend / 1e9);
    DS_CHECK(sb_stream_refused(o, cols, have, msg));
    if (!residual && (double)cols * (double)cols * 8 > SB_STREAM_GRAM_BYTES)
        return ds_fail(msg, DS_ERR_USAGE, "%s, and X'X (%.3g GB) is too large for the Gram route that streams",
                       have, (double)cols * (double)cols * 8 / 1e9);
    // qr, and auto (which may go on to qr), keep room for the local factor's work beside the chunks.
    // The residual route keeps e for every row of the rank instead of a chunk's.
    double fixed = residual ? sb_residual_fixed(rows, cols, o->batch, o->block_solve, 1) : sb_gram_fixed(cols, 1);
    double extra = residual ? 0.0 : 8.0, qr_fixed = 0, qr_row = 0;
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
                   host       ? "two pinned chunks of 8 rows"
                   : residual ? "the residual, the block Grams and two chunks of 8 rows"
                              : "X'X and two chunks of 8 rows");
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
    DS_CHECK(sb_stream_refused(&o, rows->cols, "", &ctx->msg));
    if (o.method == SB_METHOD_SOLVEBAK)  // read X once: the residual route would read it twice a sweep
        o.method = SB_METHOD_GRAM;
    const ds_mat shape = {.data = NULL, .rows = rows->chunk_rows, .cols = rows->cols, .f32 = rows->f32};
    const double bytes0 = rows->bytes, seconds0 = rows->seconds;
    const int rc = o.method == SB_METHOD_AUTO ? sb_auto_run(ctx, &shape, NULL, rows, n_rows_global, &o, res)
                                              : sb_run_core(ctx, &shape, NULL, rows, n_rows_global, &o, res);
    if (rc != DS_OK && rc != DS_ERR_NUMERIC)
        return rc;
    sb_stream_stats(ctx, rows, bytes0, seconds0, res);
    if (o.method == SB_METHOD_RESIDUAL) {  // a pass a block: host memory gives its two blocks' columns only
        const int64_t B = o.batch < rows->cols ? o.batch : rows->cols, blocks = (rows->cols + B - 1) / B;
        if (blocks > 1 && rows->mem_x)
            snprintf(res->stream_note, sizeof res->stream_note, "the residual route moves X about twice a sweep "
                     "(a pass a block: its columns and the previous block's)");
        else if (blocks > 1)
            snprintf(res->stream_note, sizeof res->stream_note, "the residual route reads X %lld times a sweep "
                     "(a pass a block, whole rows)", (long long)blocks);
        else
            snprintf(res->stream_note, sizeof res->stream_note, "the residual route reads X once a sweep");
    }
    if (o.method == SB_METHOD_AUTO) {
        char why[sizeof res->method_reason];
        snprintf(why, sizeof why, "X streamed: %.200s", res->method_reason);
        snprintf(res->method_reason, sizeof res->method_reason, "%s", why);
    }
    return rc;
}
