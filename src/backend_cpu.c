// backend_cpu.c: the reference backend: host memory, OpenBLAS (all of the rank's cores) and MPI.
// The CUDA backend is tested against it.
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"

typedef struct cpu_state {
    double marks[DS_MARKS];
    int64_t a2a_chunk;  // bytes per MPI message of alltoallv (DS_CPU_A2A_CHUNK unless a test sets it)
    double *scratch;  // float rows converted to double, and per-chunk products
    size_t scratch_len;
} cpu_state;

static cpu_state *cpu_st(ds_ctx *ctx) { return (cpu_state *)ctx->be_state; }

static int cpu_open(ds_ctx *ctx)
{
    cpu_state *st = calloc(1, sizeof(cpu_state));
    ctx->be_state = st;
    if (!st)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    st->a2a_chunk = DS_CPU_A2A_CHUNK;
    const char *s = getenv("DSOLVE_TEST_A2A_CHUNK");
    if (s && *s) {
        char *end = NULL;
        long long v = strtoll(s, &end, 10);
        if (*end != '\0' || v < 1 || v > DS_CPU_A2A_CHUNK)
            return ds_fail(&ctx->msg, DS_ERR_USAGE, "DSOLVE_TEST_A2A_CHUNK must be bytes in 1 .. %lld, not \"%s\"",
                           (long long)DS_CPU_A2A_CHUNK, s);
        st->a2a_chunk = v;
    }
    // OpenBLAS's threads: the rank's cores (ctx_cores; OpenBLAS alone would give every rank all of the
    // node's), unless OPENBLAS_NUM_THREADS says otherwise.
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (!env || !*env)
        openblas_set_num_threads(ctx_cores(ctx));
    return DS_OK;
}

static void cpu_close(ds_ctx *ctx)
{
    cpu_state *st = cpu_st(ctx);
    if (st)
        free(st->scratch);
    free(st);
    ctx->be_state = NULL;
}

// A scratch of at least len doubles, kept between calls so the hot loop does not allocate.
static double *cpu_scratch(ds_ctx *ctx, size_t len)
{
    cpu_state *st = cpu_st(ctx);
    if (st->scratch_len < len) {
        free(st->scratch);
        st->scratch = malloc(len * sizeof(double));
        st->scratch_len = st->scratch ? len : 0;
    }
    return st->scratch;
}

static int cpu_alloc(ds_ctx *ctx, void **ptr, size_t bytes)
{
    size_t rounded = bytes > SIZE_MAX - 64 ? 0 : (bytes + 63) / 64 * 64;
    *ptr = rounded || !bytes ? aligned_alloc(64, rounded ? rounded : 64) : NULL;
    if (!*ptr)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory allocating %.2f GiB on rank %d",
                       (double)bytes / (1 << 30), ctx->rank);
    return DS_OK;
}

static void cpu_free(ds_ctx *ctx, void *ptr) { free(ptr); }

static int cpu_memcpy(ds_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memmove(dst, src, bytes);
    return DS_OK;
}

static int cpu_fill(ds_ctx *ctx, double *x, int64_t n, double value)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = value;
    return DS_OK;
}

static int cpu_gather(ds_ctx *ctx, double *dst, const double *src, int64_t n, int64_t stride)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = src[i * stride];
    return DS_OK;
}

static int cpu_sync(ds_ctx *ctx) { return DS_OK; }

static int cpu_mark(ds_ctx *ctx, int slot)
{
    DS_ASSERT(slot >= 0 && slot < DS_MARKS);
    cpu_st(ctx)->marks[slot] = MPI_Wtime();
    return DS_OK;
}

static int cpu_elapsed(ds_ctx *ctx, int from, int to, double *seconds)
{
    *seconds = cpu_st(ctx)->marks[to] - cpu_st(ctx)->marks[from];
    return DS_OK;
}

static int cpu_allreduce_sum(ds_ctx *ctx, double *buf, int64_t count)
{
    if (ctx->nranks == 1)
        return DS_OK;
    for (int64_t done = 0; done < count;) {
        int part = count - done > INT_MAX / 2 ? INT_MAX / 2 : (int)(count - done);
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + done, part, MPI_DOUBLE, MPI_SUM, ctx->comm);
        if (rc != MPI_SUCCESS)
            return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "MPI_Allreduce failed on rank %d", ctx->rank);
        done += part;
    }
    return DS_OK;
}

// One round of alltoallv: piece k (bytes k·chunk .. (k+1)·chunk) of every pair that has one. Both sides
// of a pair agree on whether the piece exists because their counts match. Returns 1 in *more when some
// pair of this rank has a later piece.
static int cpu_a2a_round(ds_ctx *ctx, const char *send, const int64_t *scount, const int64_t *sdispl, char *recv,
                         const int64_t *rcount, const int64_t *rdispl, int64_t k, MPI_Request *req, int *more)
{
    const int64_t chunk = cpu_st(ctx)->a2a_chunk, off = k * chunk;
    int nreq = 0;
    *more = 0;
    for (int r = 0; r < ctx->nranks; r++) {
        if (r == ctx->rank)
            continue;
        if (rcount[r] > off) {
            int part = (int)(rcount[r] - off < chunk ? rcount[r] - off : chunk);
            *more |= rcount[r] - off > chunk;
            if (MPI_Irecv(recv + rdispl[r] + off, part, MPI_BYTE, r, 71, ctx->comm, &req[nreq++]) != MPI_SUCCESS)
                return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "MPI_Irecv failed on rank %d", ctx->rank);
        }
        if (scount[r] > off) {
            int part = (int)(scount[r] - off < chunk ? scount[r] - off : chunk);
            *more |= scount[r] - off > chunk;
            if (MPI_Isend(send + sdispl[r] + off, part, MPI_BYTE, r, 71, ctx->comm, &req[nreq++]) != MPI_SUCCESS)
                return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "MPI_Isend failed on rank %d", ctx->rank);
        }
    }
    if (MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "MPI_Waitall in alltoallv failed on rank %d", ctx->rank);
    return DS_OK;
}

// Point-to-point in rounds of at most one piece per pair, so no MPI count exceeds int and at most
// 2·(p − 1) requests are open. A rank with fewer pieces than a peer leaves the loop early; the peer's
// later rounds then only involve ranks that still have pieces.
static int cpu_alltoallv(ds_ctx *ctx, const void *send, const int64_t *scount, const int64_t *sdispl, void *recv,
                         const int64_t *rcount, const int64_t *rdispl)
{
    DS_ASSERT(scount[ctx->rank] == rcount[ctx->rank]);
    if (scount[ctx->rank] > 0)
        memcpy((char *)recv + rdispl[ctx->rank], (const char *)send + sdispl[ctx->rank], (size_t)scount[ctx->rank]);
    if (ctx->nranks == 1)
        return DS_OK;
    MPI_Request *req = malloc(2 * (size_t)ctx->nranks * sizeof *req);
    if (!req)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int rc = DS_OK, more = 1;
    for (int64_t k = 0; more && rc == DS_OK; k++)
        rc = cpu_a2a_round(ctx, send, scount, sdispl, recv, rcount, rdispl, k, req, &more);
    free(req);
    return rc;
}

// Rows r0 .. r0+nr−1, columns c0 .. c0+nc−1 of X as doubles: a pointer into X itself when it holds
// doubles (leading dimension X->cols), else a converted copy in scratch (leading dimension nc).
static const double *cpu_rows_f64(const ds_mat *X, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                                  double *scratch, int64_t *ld)
{
    if (!X->f32) {
        *ld = X->cols;
        return (const double *)X->data + r0 * X->cols + c0;
    }
    const float *src = (const float *)X->data + r0 * X->cols + c0;
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < nc; c++)
            scratch[r * nc + c] = src[r * X->cols + c];
    *ld = nc;
    return scratch;
}

// Rows per BLAS call on double data, so that row counts passed to BLAS stay within int.
#define CPU_BLAS_ROWS ((int64_t)1 << 24)

// Rows per chunk so that a chunk of width cols is about 2 MB (stays in cache between its two uses).
static int64_t cpu_chunk_rows(int64_t cols)
{
    int64_t r = (2 << 20) / (8 * (cols > 0 ? cols : 1));
    return r < 16 ? 16 : r;
}

static void cpu_symmetrize(double *A, int64_t n, int64_t ld)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < i; j++)
            A[i * ld + j] = A[j * ld + i];
}

// C (nc × nc, leading dimension ldc) = Σ over the rows of X[:, c0 .. c0+nc−1]ᵀ X[:, c0 .. c0+nc−1].
static int cpu_syrk_cols(ds_ctx *ctx, const ds_mat *X, int64_t c0, int64_t nc, double *C, int64_t ldc)
{
    int64_t chunk = X->f32 ? cpu_chunk_rows(nc) : CPU_BLAS_ROWS;
    double *scratch = X->f32 ? cpu_scratch(ctx, (size_t)(chunk * nc)) : NULL;
    if (X->f32 && !scratch)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int64_t i = 0; i < nc; i++)
        memset(C + i * ldc, 0, (size_t)nc * sizeof(double));
    for (int64_t r0 = 0; r0 < X->rows; r0 += chunk) {
        int64_t nr = X->rows - r0 < chunk ? X->rows - r0 : chunk, ld;
        const double *A = cpu_rows_f64(X, r0, nr, c0, nc, scratch, &ld);
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)nc, (int)nr, 1.0, A, (int)ld, 1.0, C, (int)ldc);
    }
    cpu_symmetrize(C, nc, ldc);
    return DS_OK;
}

static int cpu_block_grams(ds_ctx *ctx, const ds_mat *X, int batch, double *out)
{
    for (int64_t b0 = 0, b = 0; b0 < X->cols; b0 += batch, b++) {
        int64_t nb = X->cols - b0 < batch ? X->cols - b0 : batch;
        DS_CHECK(cpu_syrk_cols(ctx, X, b0, nb, out + b * (int64_t)batch * batch, batch));
    }
    return DS_OK;
}

static int cpu_grad_update(ds_ctx *ctx, const ds_mat *X, double *e, int64_t up_col0, int64_t up_n,
                           const double *coef, int64_t gr_col0, int64_t gr_n, double *gout)
{
    int64_t width = up_n > gr_n ? up_n : gr_n;
    int64_t chunk = cpu_chunk_rows(width);
    double *conv = cpu_scratch(ctx, (size_t)(X->f32 ? chunk * width : 1)), ee = 0.0;
    if (!conv)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    memset(gout, 0, (size_t)(gr_n + 1) * sizeof(double));
    for (int64_t r0 = 0; r0 < X->rows; r0 += chunk) {
        int64_t nr = X->rows - r0 < chunk ? X->rows - r0 : chunk, ld;
        if (up_n > 0) {
            const double *A = cpu_rows_f64(X, r0, nr, up_col0, up_n, conv, &ld);
            cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)nr, (int)up_n, -1.0, A, (int)ld, coef, 1, 1.0,
                        e + r0, 1);
        }
        if (gr_n > 0) {
            const double *A = cpu_rows_f64(X, r0, nr, gr_col0, gr_n, conv, &ld);
            cblas_dgemv(CblasRowMajor, CblasTrans, (int)nr, (int)gr_n, 1.0, A, (int)ld, e + r0, 1, 1.0,
                        gout, 1);
        }
        ee += cblas_ddot((int)nr, e + r0, 1, e + r0, 1);
    }
    gout[gr_n] = ee;
    return DS_OK;
}

static int cpu_block_step(ds_ctx *ctx, const ds_step_args *s)
{
    double *da = cpu_scratch(ctx, (size_t)s->nb);
    if (!da)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    double num = 0.0, den = 0.0;
    for (int j = 0; j < s->nb; j++) {
        da[j] = s->diag[j] > 0 ? s->gbuf[j] / s->diag[j] : 0.0;
        num += da[j] * s->gbuf[j];
    }
    for (int j = 0; j < s->nb; j++) {
        double row = 0.0;
        for (int k = 0; k < s->nb; k++)
            row += s->gbb[(int64_t)j * s->ld + k] * da[k];
        den += da[j] * row;
    }
    double alpha = s->line_search && s->nb > 1 ? (den > 0 ? num / den : 0.0) : 1.0;
    for (int j = 0; j < s->nb; j++) {
        s->coef[j] = alpha * da[j];
        s->a[j] += s->coef[j];
    }
    if (s->ee_slot)
        *s->ee_slot = s->gbuf[s->nb];
    return DS_OK;
}

// OpenBLAS's DSYRK splits the result's columns among its threads and runs slower with fewer than about
// 64 columns a thread than with fewer threads (1 003 columns on 64 cores: 64 threads 1.16 s, 16 threads
// 0.19 s for the network's HᵀH), so the Gram of n columns takes at most n / 64 of them.
static int cpu_gram(ds_ctx *ctx, const ds_mat *X, const double *y, double *out)
{
    const int64_t n = X->cols;
    const int threads = openblas_get_num_threads(), cap = n / 64 < 1 ? 1 : n / 64 > INT_MAX ? INT_MAX : (int)(n / 64);
    if (cap < threads)
        openblas_set_num_threads(cap);
    int rc = cpu_syrk_cols(ctx, X, 0, n, out, n);
    if (cap < threads)
        openblas_set_num_threads(threads);
    DS_CHECK(rc);
    double *c = out + n * n;
    memset(c, 0, (size_t)n * sizeof(double));
    int64_t chunk = X->f32 ? cpu_chunk_rows(n) : CPU_BLAS_ROWS;
    double *scratch = X->f32 ? cpu_scratch(ctx, (size_t)(chunk * n)) : NULL;
    if (X->f32 && !scratch)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int64_t r0 = 0; r0 < X->rows; r0 += chunk) {
        int64_t nr = X->rows - r0 < chunk ? X->rows - r0 : chunk, ld;
        const double *A = cpu_rows_f64(X, r0, nr, 0, n, scratch, &ld);
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)nr, (int)n, 1.0, A, (int)ld, y + r0, 1, 1.0, c, 1);
    }
    double yy = 0.0;
    for (int64_t r0 = 0; r0 < X->rows; r0 += CPU_BLAS_ROWS) {
        int64_t nr = X->rows - r0 < CPU_BLAS_ROWS ? X->rows - r0 : CPU_BLAS_ROWS;
        yy += cblas_ddot((int)nr, y + r0, 1, y + r0, 1);
    }
    out[n * n + n] = yy;
    return DS_OK;
}

static int cpu_gram_sweeps(ds_ctx *ctx, const ds_gram_args *s)
{
    const int64_t n = s->n;
    double *da = cpu_scratch(ctx, (size_t)s->batch);
    if (!da)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int sweep = 0; sweep < s->sweeps; sweep++) {
        for (int64_t b0 = 0; b0 < n; b0 += s->batch) {
            int nb = (int)(n - b0 < s->batch ? n - b0 : s->batch);
            double num = 0.0, den = 0.0;
            for (int j = 0; j < nb; j++) {
                da[j] = s->diag[b0 + j] > 0 ? s->g[b0 + j] / s->diag[b0 + j] : 0.0;
                num += da[j] * s->g[b0 + j];
            }
            for (int j = 0; j < nb; j++) {
                const double *Gj = s->G + (b0 + j) * n + b0;
                double row = 0.0;
                for (int k = 0; k < nb; k++)
                    row += Gj[k] * da[k];
                den += da[j] * row;
            }
            double alpha = s->line_search && nb > 1 ? (den > 0 ? num / den : 0.0) : 1.0;
            for (int j = 0; j < nb; j++) {
                s->a[b0 + j] += alpha * da[j];
                cblas_daxpy((int)n, -alpha * da[j], s->G + (b0 + j) * n, 1, s->g, 1);
            }
            *s->ee -= 2.0 * alpha * num - alpha * alpha * den;
        }
        if (s->ee_hist)
            s->ee_hist[sweep] = *s->ee;
    }
    return DS_OK;
}

const ds_backend ds_backend_cpu = {
    .name = "cpu",
    .host_memory = 1,
    .open = cpu_open,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .fill = cpu_fill,
    .gather = cpu_gather,
    .sync = cpu_sync,
    .mark = cpu_mark,
    .elapsed = cpu_elapsed,
    .allreduce_sum = cpu_allreduce_sum,
    .alltoallv = cpu_alltoallv,
    .block_grams = cpu_block_grams,
    .grad_update = cpu_grad_update,
    .block_step = cpu_block_step,
    .gram = cpu_gram,
    .gram_sweeps = cpu_gram_sweeps,
};
