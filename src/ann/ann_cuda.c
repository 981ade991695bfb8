// ann_cuda.c: the network's operations on the CUDA backend: cuBLAS strided-batched products and
// cuSOLVER batched Cholesky for the hidden fits (a few launches a group of neurons, ann_fit_group), cuBLAS
// for H, its Gram by blocks and the output, cuSOLVER potrf/potrs (syevd when Cholesky fails) for the
// output layer.
#include <cusolverDn.h>
#include <math.h>
#include <stdlib.h>

#include "ann/ann.h"
#include "backend/backend_cuda.h"
#include "ann/ann_kernels.h"

// A launcher's error as a failure of ctx (for paths that free buffers before returning).
static int launched(ds_ctx *ctx, cudaError_t e, const char *what, int line)
{
    return e == cudaSuccess ? DS_OK : cuda_failed(ctx, what, cudaGetErrorString(e), __FILE__, line);
}

static int gpu_gather_fit_rows(ds_ctx *ctx, const double *X, int64_t n, const double *z, const int64_t *idx,
                               int64_t count, double *dst)
{
    CUDA_CHECK(ctx, ds_k_ann_gather_fit(X, n, z, idx, count, dst, state(ctx)->stream));
    return DS_OK;
}

static int gpu_gather_chunk_rows(ds_ctx *ctx, const double *X, int64_t n, const double *z, int64_t c0,
                                 const int64_t *idx, const int64_t *pos, int64_t count, double *dst)
{
    CUDA_CHECK(ctx, ds_k_ann_gather_chunk(X, n, z, c0, idx, pos, count, dst, state(ctx)->stream));
    return DS_OK;
}

static int gpu_route_requests(ds_ctx *ctx, const int64_t *L, int64_t nb, int64_t S, int p, const int64_t *tab,
                              int64_t *req)
{
    CUDA_CHECK(ctx, ds_k_ann_route_requests(L, nb, S, p, tab, req, state(ctx)->stream));
    return DS_OK;
}

static int gpu_route_place(ds_ctx *ctx, const double *recv, int64_t width, int64_t nb, int64_t S, int p,
                           const int64_t *tab, double *A)
{
    CUDA_CHECK(ctx, ds_k_ann_route_place(recv, width, nb, S, p, tab, A, state(ctx)->stream));
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// Hidden fits. Column-major views: a neuron's block of A (S rows of width n + 2, row-major) is the
// (n+2) × S matrix Ac with leading dimension n + 2, whose first n1 = n + 1 rows are [X_s 1]ᵀ.
//   S ≥ n1: G = Ac·Acᵀ (n1 × n1), W = G⁻¹·(Ac·t)        S < n1: G = Acᵀ·Ac (S × S), W = Ac·(G⁻¹·t)

typedef struct fit_bufs {
    double *G, *t, *u;  // nb × g², nb × S, nb × S
    double **gp, **bp;  // pointer arrays for the batched Cholesky
    int *info, *failed;
} fit_bufs;

static int64_t gpu_fit_scratch(int64_t nb, int64_t S, int64_t n)
{
    const int64_t g = S >= n + 1 ? n + 1 : S;
    return nb * (g * g + 2 * S + 3);  // G, t, u; gp, bp and info in a slot of 8 bytes each
}

static fit_bufs fit_layout(double *scratch, int64_t nb, int64_t S, int64_t g, int *failed)
{
    fit_bufs b = {.G = scratch, .failed = failed};
    b.t = b.G + nb * g * g;
    b.u = b.t + nb * S;
    b.gp = (double **)(b.u + nb * S);
    b.bp = b.gp + nb;
    b.info = (int *)(b.bp + nb);
    return b;
}

// The batched Cholesky solve G_i·x_i = b_i (b_i overwritten by x_i) for nb systems of order g.
static int batched_cholesky(ds_ctx *ctx, fit_bufs *b, int64_t nb, int64_t g, double *rhs, int64_t rhs_stride)
{
    cuda_state *st = state(ctx);
    cusolverDnHandle_t h = NULL;
    DS_CHECK(cuda_solver(ctx, &h));
    CUDA_CHECK(ctx, ds_k_ann_ptrs(b->gp, b->G, g * g, nb, st->stream));
    CUDA_CHECK(ctx, ds_k_ann_ptrs(b->bp, rhs, rhs_stride, nb, st->stream));
    SOLVER_CHECK(ctx, cusolverDnDpotrfBatched(h, CUBLAS_FILL_MODE_LOWER, (int)g, b->gp, (int)g, b->info, (int)nb));
    // potrs reports only bad arguments; a failed factorization shows in info and in non-finite weights.
    SOLVER_CHECK(ctx, cusolverDnDpotrsBatched(h, CUBLAS_FILL_MODE_LOWER, (int)g, 1, b->gp, (int)g, b->bp, (int)g,
                                              b->failed, (int)nb));
    return DS_OK;
}

static int fit_products(ds_ctx *ctx, const double *A, int64_t nb, int64_t S, int64_t n, fit_bufs *b, double *W)
{
    cuda_state *st = state(ctx);
    const int64_t n1 = n + 1, lda = n + 2, sa = S * lda;
    const double one = 1.0, zero = 0.0;
    if (S >= n1) {
        CUBLAS_CHECK(ctx, cublasDgemmStridedBatched(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)n1, (int)n1, (int)S, &one,
                                                    A, (int)lda, sa, A, (int)lda, sa, &zero, b->G, (int)n1, n1 * n1,
                                                    (int)nb));
        CUBLAS_CHECK(ctx, cublasDgemvStridedBatched(st->blas, CUBLAS_OP_N, (int)n1, (int)S, &one, A, (int)lda, sa, b->t,
                                                    1, S, &zero, W, 1, n1, (int)nb));
        return batched_cholesky(ctx, b, nb, n1, W, n1);
    }
    CUBLAS_CHECK(ctx, cublasDgemmStridedBatched(st->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)S, (int)S, (int)n1, &one, A,
                                                (int)lda, sa, A, (int)lda, sa, &zero, b->G, (int)S, S * S, (int)nb));
    CUDA_CHECK(ctx, cudaMemcpyAsync(b->u, b->t, (size_t)(nb * S) * sizeof(double), cudaMemcpyDeviceToDevice, st->stream));
    DS_CHECK(batched_cholesky(ctx, b, nb, S, b->u, S));
    CUBLAS_CHECK(ctx, cublasDgemvStridedBatched(st->blas, CUBLAS_OP_N, (int)n1, (int)S, &one, A, (int)lda, sa, b->u, 1,
                                                S, &zero, W, 1, n1, (int)nb));
    return DS_OK;
}

// The fits by groups that end at the multiples of G = ann_fit_group(S, n): the batched calls' kernels,
// chosen by their batch counts too, are then the same for a neuron on any number of ranks and any budget
// (ann_hidden.c's rounds and ranks hold whole groups).
static int gpu_fit(ds_ctx *ctx, const double *A, int64_t nb, int64_t S, int64_t n, int classes, int64_t k0,
                   double *W, int *failed, double *scratch)
{
    cuda_state *st = state(ctx);
    const int64_t n1 = n + 1, g = S >= n1 ? n1 : S, G = ann_fit_group(S, n);
    if (G * g * g > INT32_MAX || S * (n + 2) > INT32_MAX)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "hidden fits of %lld rows x %lld inputs are too large for one batch",
                       (long long)S, (long long)n);
    for (int64_t i = 0; i < nb;) {
        const int64_t k = k0 + i, to_end = G - k % G, c = nb - i < to_end ? nb - i : to_end;
        fit_bufs b = fit_layout(scratch, c, S, g, failed + i);
        const double *Ai = A + i * S * (n + 2);
        double *Wi = W + i * n1;
        CUDA_CHECK(ctx, ds_k_ann_targets(Ai, c, S, n, classes, k, atanh(ANN_TARGET), b.t, st->stream));
        DS_CHECK(fit_products(ctx, Ai, c, S, n, &b, Wi));
        CUDA_CHECK(ctx, ds_k_ann_check_fits(b.info, Wi, c, n1, failed + i, st->stream));
        i += c;
    }
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// H and the outputs. Row-major H (rows × ld) is column-major ld × rows; W (K × (n+1)) is column-major
// (n+1) × K, so H[:, :K] = Xc-products: Hc = Wcᵀ[:n]·Xc (K × rows); P = H[:, :K+1]·V is Pc = Vc·Hc.

// H on the given handle and stream (the main ones, or a side stream's in the Gram).
static int forward_on(ds_ctx *ctx, cublasHandle_t blas, cudaStream_t stream, const double *X, int64_t rows, int64_t n,
                      const double *W, int64_t K, const double *y, int64_t outputs, double *H, int64_t ld)
{
    const double one = 1.0, zero = 0.0;
    if (rows > INT32_MAX)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "a chunk of H of %lld rows is too large", (long long)rows);
    CUBLAS_CHECK(ctx, cublasDgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)K, (int)rows, (int)n, &one, W, (int)(n + 1), X,
                                  (int)n, &zero, H, (int)ld));
    CUDA_CHECK(ctx, ds_k_ann_activate(H, rows, ld, W, n, K, y, outputs, stream));
    return DS_OK;
}

static int gpu_forward(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K,
                       const double *y, int64_t outputs, double *H, int64_t ld)
{
    cuda_state *st = state(ctx);
    return forward_on(ctx, st->blas, st->stream, X, rows, n, W, K, y, outputs, H, ld);
}

static int gpu_output(ds_ctx *ctx, const double *H, int64_t rows, int64_t ld, int64_t K, const double *V,
                      int64_t outputs, double *P)
{
    cuda_state *st = state(ctx);
    const double one = 1.0, zero = 0.0;
    CUBLAS_CHECK(ctx, cublasDgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)outputs, (int)rows, (int)(K + 1), &one, V,
                                  (int)outputs, H, (int)ld, &zero, P, (int)outputs));
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// The output Gram by blocks (ann_ops.gram_digits): a block's H is formed a unit at a time (gpu_unit_rows,
// by ld and the block alone) and each unit's DSYRK added into the block's Gram P, then one kernel splits
// P's upper triangle into the digits. cuBLAS picks its kernel by shape, so a unit of the same shape gives
// the same bits on any rank and in any chunk. A block's DSYRK (ld² outputs) fills a fraction of the GPU
// when ld is about a thousand, so the blocks are dealt round-robin to side streams (gram_streams), each
// with its own H, P and digits; the digits are integers, so adding the streams' in any order is exact.
// Everything is queued: no wait, no allocation (the scratch is the caller's).

enum { UNIT_BYTES = 256 << 20, STREAM_BYTES = 64 << 20 };

static int64_t gpu_unit_rows(int64_t ld, int64_t block)
{
    int64_t u = block;
    while (u > 64 && u * ld * (int64_t)sizeof(double) > UNIT_BYTES)
        u = (u + 1) / 2;
    return u;
}

// Doubles a stream holds: a unit of H, P, and (side streams) digits.
static int64_t stream_doubles(int64_t ld, int64_t block)
{
    return gpu_unit_rows(ld, block) * ld + ld * ld + 2 * (ld * (ld + 1) / 2);
}

// Side streams for the Gram: GRAM_STREAMS for ld from 256 while a stream's buffers stay under
// STREAM_BYTES (a larger ld fills the GPU with one DSYRK; a smaller one costs little, and the streams'
// buffers would raise a tight --device-memory's minimum), else one; DSOLVE_ANN_GRAM_STREAMS lowers it
// (1: the main stream alone). Measured on an H100, seed problem (ld 1 002): 6.78 ms against 7.33 ms.
static int64_t gram_streams(int64_t ld, int64_t block)
{
    int64_t s = ld >= 256 && stream_doubles(ld, block) * (int64_t)sizeof(double) <= STREAM_BYTES ? GRAM_STREAMS : 1;
    const char *v = getenv("DSOLVE_ANN_GRAM_STREAMS");
    const long e = v && *v ? strtol(v, NULL, 10) : 0;
    return e >= 1 && e < s ? e : s;
}

static int64_t gpu_gram_scratch(int64_t ld, int64_t block)
{
    const int64_t s = gram_streams(ld, block);
    return s > 1 ? s * stream_doubles(ld, block) : gpu_unit_rows(ld, block) * ld + ld * ld;
}

// The blocks of rows b0 .. from 'first' on, every 'step'-th, on one handle and stream into dig.
static int gram_blocks(ds_ctx *ctx, cublasHandle_t blas, cudaStream_t stream, const double *X, int64_t rows, int64_t n,
                       const double *W, int64_t K, const double *y, int64_t outputs, int64_t ld, const ann_fix *fx,
                       int64_t first, int64_t step, double *H, double *P, double *dig)
{
    const int64_t unit = gpu_unit_rows(ld, fx->block);
    const double one = 1.0, zero = 0.0;
    for (int64_t b0 = first * fx->block; b0 < rows; b0 += step * fx->block) {
        const int64_t b1 = b0 + fx->block < rows ? b0 + fx->block : rows;
        for (int64_t r = b0; r < b1; r += unit) {
            const int64_t nr = b1 - r < unit ? b1 - r : unit;
            DS_CHECK(forward_on(ctx, blas, stream, X + r * n, nr, n, W, K, y + r, outputs, H, ld));
            // P's column-major lower triangle: its row-major upper, as ds_k_ann_split reads it.
            CUBLAS_CHECK(ctx, cublasDsyrk(blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, (int)ld, (int)nr, &one, H, (int)ld,
                                          r == b0 ? &zero : &one, P, (int)ld));
        }
        CUDA_CHECK(ctx, ds_k_ann_split(P, ld, fx->col, fx->s0, fx->lo, dig, stream));
    }
    return DS_OK;
}

static int gpu_gram_digits(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K,
                           const double *y, int64_t outputs, int64_t ld, const ann_fix *fx, double *scratch,
                           double *dig)
{
    cuda_state *st = state(ctx);
    const int64_t blocks = (rows + fx->block - 1) / fx->block;
    int64_t S = gram_streams(ld, fx->block);
    S = S < blocks ? S : blocks;
    if (S <= 1) {
        double *H = scratch, *P = scratch + gpu_unit_rows(ld, fx->block) * ld;
        return gram_blocks(ctx, st->blas, st->stream, X, rows, n, W, K, y, outputs, ld, fx, 0, 1, H, P, dig);
    }
    const int64_t per = stream_doubles(ld, fx->block), unit = gpu_unit_rows(ld, fx->block), dlen = 2 * (ld * (ld + 1) / 2);
    for (int64_t s = 0; s < S; s++)
        CUDA_CHECK(ctx, cudaMemsetAsync(scratch + s * per + unit * ld + ld * ld, 0, (size_t)dlen * sizeof(double),
                                        st->stream));
    CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
    for (int64_t s = 0; s < S; s++) {
        double *H = scratch + s * per, *P = H + unit * ld, *d = P + ld * ld;
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[s], st->fork, 0));
        DS_CHECK(gram_blocks(ctx, st->side_blas[s], st->side[s], X, rows, n, W, K, y, outputs, ld, fx, s, S, H, P, d));
        CUDA_CHECK(ctx, cudaEventRecord(st->join[s], st->side[s]));
    }
    const double one = 1.0;
    for (int64_t s = 0; s < S; s++) {  // integers below 2^53: each addition is exact
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[s], 0));
        CUBLAS_CHECK(ctx, cublasDaxpy_64(st->blas, dlen, &one, scratch + s * per + unit * ld + ld * ld, 1, dig, 1));
    }
    return DS_OK;
}

static int gpu_gram_join(ds_ctx *ctx, const double *dig, int64_t ld, const ann_fix *fx, double *S)
{
    CUDA_CHECK(ctx, ds_k_ann_join(dig, ld, fx->col, fx->s0, fx->lo, S, state(ctx)->stream));
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// The output solve.

typedef struct solve_bufs {
    double *A, *B, *e, *Q, *work;
    int *info;
} solve_bufs;

static int solve_cholesky(ds_ctx *ctx, cusolverDnHandle_t h, solve_bufs *b, int64_t K1, int64_t C, int *info)
{
    int lwork = 0;
    SOLVER_CHECK(ctx, cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, (int)K1, b->A, (int)K1, &lwork));
    DS_CHECK(cuda_alloc(ctx, (void **)&b->work, (size_t)(lwork > 0 ? lwork : 1) * sizeof(double)));
    SOLVER_CHECK(ctx, cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, (int)K1, b->A, (int)K1, b->work, lwork, b->info));
    CUDA_CHECK(ctx, cudaMemcpyAsync(info, b->info, sizeof(int), cudaMemcpyDeviceToHost, state(ctx)->stream));
    DS_CHECK(cuda_wait(ctx, NULL));
    if (*info == 0)
        SOLVER_CHECK(ctx, cusolverDnDpotrs(h, CUBLAS_FILL_MODE_LOWER, (int)K1, (int)C, b->A, (int)K1, b->B, (int)K1,
                                           b->info));
    return DS_OK;
}

// A = Q·diag(e)·Qᵀ; B ← Q·(diag(1/e)·(Qᵀ·B)) with eigenvalues below the cutoff dropped.
static int solve_eigen(ds_ctx *ctx, cusolverDnHandle_t h, solve_bufs *b, int64_t K1, int64_t C)
{
    cuda_state *st = state(ctx);
    const double one = 1.0, zero = 0.0;
    int lwork = 0, info = 0;
    DS_CHECK(cuda_alloc(ctx, (void **)&b->e, (size_t)K1 * sizeof(double)));
    DS_CHECK(cuda_alloc(ctx, (void **)&b->Q, (size_t)(K1 * C) * sizeof(double)));
    SOLVER_CHECK(ctx, cusolverDnDsyevd_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, (int)K1, b->A,
                                                  (int)K1, b->e, &lwork));
    cuda_release(ctx, b->work);
    b->work = NULL;
    DS_CHECK(cuda_alloc(ctx, (void **)&b->work, (size_t)(lwork > 0 ? lwork : 1) * sizeof(double)));
    SOLVER_CHECK(ctx, cusolverDnDsyevd(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, (int)K1, b->A, (int)K1, b->e,
                                       b->work, lwork, b->info));
    CUDA_CHECK(ctx, cudaMemcpyAsync(&info, b->info, sizeof(int), cudaMemcpyDeviceToHost, st->stream));
    DS_CHECK(cuda_wait(ctx, NULL));
    if (info != 0)
        return ds_fail(&ctx->msg, DS_ERR_NUMERIC, "the output layer's eigendecomposition did not converge (info %d)", info);
    CUBLAS_CHECK(ctx, cublasDgemm(st->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)K1, (int)C, (int)K1, &one, b->A, (int)K1, b->B,
                                  (int)K1, &zero, b->Q, (int)K1));
    CUDA_CHECK(ctx, ds_k_ann_scale_eigen(b->Q, b->e, K1, C, ANN_EIGEN_CUT, st->stream));
    CUBLAS_CHECK(ctx, cublasDgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)K1, (int)C, (int)K1, &one, b->A, (int)K1, b->Q,
                                  (int)K1, &zero, b->B, (int)K1));
    return DS_OK;
}

static int gpu_solve(ds_ctx *ctx, double *S, int64_t ld, int64_t K1, int64_t outputs, double lambda, double *V,
                     char *route, size_t route_len)
{
    cuda_state *st = state(ctx);
    solve_bufs b = {0};
    cusolverDnHandle_t h = NULL;
    int info = 0;
    int rc = cuda_solver(ctx, &h);
    if (rc == DS_OK)
        rc = cuda_alloc(ctx, (void **)&b.A, (size_t)(K1 * K1) * sizeof(double));
    if (rc == DS_OK)
        rc = cuda_alloc(ctx, (void **)&b.B, (size_t)(K1 * outputs) * sizeof(double));
    if (rc == DS_OK)
        rc = cuda_alloc(ctx, (void **)&b.info, sizeof(int));
    if (rc == DS_OK)
        rc = launched(ctx, ds_k_ann_solve_in(S, ld, K1, outputs, lambda, b.A, b.B, st->stream), "ds_k_ann_solve_in", __LINE__);
    if (rc == DS_OK)
        rc = solve_cholesky(ctx, h, &b, K1, outputs, &info);
    snprintf(route, route_len, "cholesky");
    if (rc == DS_OK && info != 0) {  // A holds a partial factor: take A and B from S again
        snprintf(route, route_len, "eigen");
        rc = launched(ctx, ds_k_ann_solve_in(S, ld, K1, outputs, lambda, b.A, b.B, st->stream), "ds_k_ann_solve_in",
                      __LINE__);
        if (rc == DS_OK)
            rc = solve_eigen(ctx, h, &b, K1, outputs);
    }
    if (rc == DS_OK)
        rc = launched(ctx, ds_k_ann_transpose(b.B, K1, outputs, V, st->stream), "ds_k_ann_transpose", __LINE__);
    if (rc == DS_OK)
        rc = cuda_wait(ctx, NULL);  // the buffers are freed next
    void *p[] = {b.A, b.B, b.e, b.Q, b.work, b.info};
    for (int i = 0; i < 6; i++)
        cudaFree(p[i]);
    return rc;
}

const ann_ops ann_ops_cuda = {
    .gather_fit_rows = gpu_gather_fit_rows,
    .gather_chunk_rows = gpu_gather_chunk_rows,
    .route_requests = gpu_route_requests,
    .route_place = gpu_route_place,
    .fit_scratch = gpu_fit_scratch,
    .fit = gpu_fit,
    .forward = gpu_forward,
    .gram_scratch = gpu_gram_scratch,
    .gram_digits = gpu_gram_digits,
    .gram_join = gpu_gram_join,
    .output = gpu_output,
    .solve = gpu_solve,
};
