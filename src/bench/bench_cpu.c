// bench_cpu.c: the CPU side of `dsolve bench`: OpenBLAS GEMM, a threaded add and MPI broadcast as
// bench_ops (no references: the host backend is measured against the device one).
// provides: bench_ops_cpu
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "bench/bench.h"

static int cpu_gemm(ds_ctx *ctx, int f32, int64_t m, int64_t n, int64_t k, const void *A, const void *B, void *C)
{
    DS_ASSERT(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX);  // bench's need() refuses larger shapes
    if (m == 0 || n == 0)
        return DS_OK;
    if (f32)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, A, (int)k, B, (int)n,
                    0.0f, C, (int)n);
    else
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, A, (int)k, B, (int)n,
                    0.0, C, (int)n);
    return DS_OK;
}

typedef struct add_arg {
    const void *a, *b;
    void *c;
    int f32;
} add_arg;

static void add_part(void *p, int part, int64_t lo, int64_t hi)
{
    const add_arg *x = p;
    if (x->f32) {
        const float *a = x->a, *b = x->b;
        float *c = x->c;
        for (int64_t i = lo; i < hi; i++)
            c[i] = a[i] + b[i];
    } else {
        const double *a = x->a, *b = x->b;
        double *c = x->c;
        for (int64_t i = lo; i < hi; i++)
            c[i] = a[i] + b[i];
    }
}

static int cpu_add(ds_ctx *ctx, int f32, int64_t n, const void *a, const void *b, void *c)
{
    add_arg x = {a, b, c, f32};
    bench_parallel(openblas_get_num_threads(), n, add_part, &x);  // the rank's cores, as for BLAS
    return DS_OK;
}

static int cpu_bcast(ds_ctx *ctx, void *buf, size_t bytes, int root)
{
    const size_t chunk = (size_t)1 << 30;
    for (size_t done = 0; done < bytes; done += chunk) {
        size_t part = bytes - done < chunk ? bytes - done : chunk;
        if (MPI_Bcast((char *)buf + done, (int)part, MPI_BYTE, root, ctx->comm) != MPI_SUCCESS)
            return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "MPI_Bcast failed on rank %d", ctx->rank);
    }
    return DS_OK;
}

const bench_ops bench_ops_cpu = {
    .gemm = cpu_gemm,
    .add = cpu_add,
    .bcast = cpu_bcast,
};
