// bench_cuda.c: the CUDA side of `dsolve bench` and `dsolve info`: cuBLAS GEMM, the add kernel and
// NCCL broadcast as bench_ops on the GPU context's stream and handle; the references measured beside
// them (cuBLAS alone, the device copy); device memory, PCI id, properties and library versions.
// provides: bench_ops_cuda, bench_cuda_gemm_alone, bench_cuda_copy_alone, bench_cuda_mem, bench_cuda_bus_id,
//           info_cuda_count, info_cuda_gpu, info_cuda_versions
#include <cusolverDn.h>

#include "backend_cuda.h"
#include "bench.h"
#include "bench_kernels.h"

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

const bench_ops bench_ops_cuda = {
    .name = "cuda",
    .gemm = cuda_gemm,
    .add = cuda_add,
    .bcast = cuda_bcast,
};

// Marks 4 and 5 bracket the loop; bench_time uses 0 and 1, the broadcast 2 and 3.
int bench_cuda_gemm_alone(ds_ctx *ctx, int f32, int64_t m, int64_t n, int64_t k, const void *A, const void *B,
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

int bench_cuda_copy_alone(ds_ctx *ctx, void *dst, const void *src, size_t bytes, int reps, double *seconds)
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

int bench_cuda_mem(ds_ctx *ctx, double *free_b, double *total_b)
{
    size_t f = 0, t = 0;
    CUDA_CHECK(ctx, cudaMemGetInfo(&f, &t));
    *free_b = (double)f;
    *total_b = (double)t;
    return DS_OK;
}

void bench_cuda_bus_id(int device, char *buf, int len)
{
    if (cudaDeviceGetPCIBusId(buf, len, device) != cudaSuccess) {
        (void)cudaGetLastError();
        buf[0] = '\0';
    }
}

// ---------------------------------------------------------------------------------------------------
// dsolve info

int info_cuda_count(void)
{
    return ds_cuda_device_count();
}

int info_cuda_gpu(int device, info_gpu *g)
{
    struct cudaDeviceProp p;
    size_t f = 0, t = 0;
    memset(g, 0, sizeof *g);
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess || cudaSetDevice(device) != cudaSuccess ||
        cudaMemGetInfo(&f, &t) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    snprintf(g->name, sizeof g->name, "%.127s", p.name);
    bench_cuda_bus_id(device, g->bus, (int)sizeof g->bus);
    g->total = (double)t;
    g->free_b = (double)f;
    g->cc_major = p.major;
    g->cc_minor = p.minor;
    return 1;
}

void info_cuda_versions(info_versions *v)
{
    memset(v, 0, sizeof *v);
    const libraryPropertyType parts[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
    if (cudaRuntimeGetVersion(&v->runtime) != cudaSuccess)
        v->runtime = 0;
    if (cudaDriverGetVersion(&v->driver) != cudaSuccess)
        v->driver = 0;
    for (int i = 0; i < 3; i++) {
        if (cublasGetProperty(parts[i], &v->cublas[i]) != CUBLAS_STATUS_SUCCESS)
            v->cublas[i] = 0;
        if (cusolverGetProperty(parts[i], &v->cusolver[i]) != CUSOLVER_STATUS_SUCCESS)
            v->cusolver[i] = 0;
    }
    if (ncclGetVersion(&v->nccl) != ncclSuccess)
        v->nccl = 0;
    (void)cudaGetLastError();
}
