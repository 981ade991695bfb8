// bench_cuda.c: the CUDA side of `dsolve bench`: cuBLAS GEMM, the add kernel and NCCL broadcast as
// bench_ops on the GPU context's stream and handle, and the references measured beside them (cuBLAS
// alone, the device copy).
// provides: bench_ops_cuda
#include "backend/backend_cuda.h"
#include "bench/bench.h"
#include "bench/bench_kernels.h"

static int cuda_gemm(ds_ctx *ctx, int f32, int64_t m, int64_t n, int64_t k, const void *A, const void *B, void *C)
{
    if (m == 0 || n == 0)
        return DS_OK;
    cuda_state *st = state(ctx);
    // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS gets B first, with leading dimensions n and k.
    if (f32) {
        const float one = 1.0f, zero = 0.0f;
        CUBLAS_CHECK(ctx, cublasSgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, B, (int)n, A,
                                      (int)k, &zero, C, (int)n));
    } else {
        const double one = 1.0, zero = 0.0;
        CUBLAS_CHECK(ctx, cublasDgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, B, (int)n, A,
                                      (int)k, &zero, C, (int)n));
    }
    return DS_OK;
}

static int cuda_add(ds_ctx *ctx, int f32, int64_t n, const void *a, const void *b, void *c)
{
    CUDA_CHECK(ctx, ds_kb_add(f32, n, a, b, c, state(ctx)->stream));
    return DS_OK;
}

static int cuda_bcast(ds_ctx *ctx, void *buf, size_t bytes, int root)
{
    cuda_state *st = state(ctx);
    if (ctx->nranks == 1 || bytes == 0)
        return DS_OK;
    if (!st->nccl)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "nccl: no communicator (aborted after an earlier failure) (rank %d)",
                       ctx->rank);
    NCCL_CHECK(ctx, ncclBroadcast(buf, buf, bytes, ncclInt8, root, st->nccl, st->stream));
    return DS_OK;
}

// Marks 4 and 5 bracket the loop; bench_time uses 0 and 1, the broadcast 2 and 3.
static int cuda_gemm_alone(ds_ctx *ctx, int f32, int64_t m, int64_t n, int64_t k, const void *A, const void *B,
                          void *C, int reps, double *seconds)
{
    DS_CHECK(cuda_gemm(ctx, f32, m, n, k, A, B, C));  // its own warm-up
    DS_CHECK(ctx->be->mark(ctx, 4));
    for (int r = 0; r < reps; r++)
        DS_CHECK(cuda_gemm(ctx, f32, m, n, k, A, B, C));
    DS_CHECK(ctx->be->mark(ctx, 5));
    DS_CHECK(ctx->be->elapsed(ctx, 4, 5, seconds));
    *seconds /= reps;
    return DS_OK;
}

static int cuda_copy_alone(ds_ctx *ctx, void *dst, const void *src, size_t bytes, int reps, double *seconds)
{
    cudaStream_t s = state(ctx)->stream;
    CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    DS_CHECK(ctx->be->mark(ctx, 4));
    for (int r = 0; r < reps; r++)
        CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    DS_CHECK(ctx->be->mark(ctx, 5));
    DS_CHECK(ctx->be->elapsed(ctx, 4, 5, seconds));
    *seconds /= reps;
    return DS_OK;
}

const bench_ops bench_ops_cuda = {
    .gemm = cuda_gemm,
    .add = cuda_add,
    .bcast = cuda_bcast,
    .gemm_alone = cuda_gemm_alone,
    .copy_alone = cuda_copy_alone,
};
