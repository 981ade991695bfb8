// backend_cuda.h: what the two files of the CUDA backend share (backend_cuda.c: runtime, memory,
// waits, collectives; backend_cuda_ops.c: Gram products and SolveBak ops): its state, the error checks, and the
// functions they call across. Included by the CUDA backend's files and by the per-command CUDA files
// (ann_cuda.c, sort_cuda.c, logreg_cuda.c, bench_cuda.c), which reach the stream, the library handles
// and the checks through it.
// provides: cuda_state, state, CUDA_CHECK, CUBLAS_CHECK, NCCL_CHECK, cuda_failed, cuda_wait, cuda_alloc,
//           scratch_reserve, cuda_block_grams, cuda_gram, cuda_grad_update, cuda_block_step, cuda_gram_sweeps
#ifndef DS_BACKEND_CUDA_H
#define DS_BACKEND_CUDA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cusolverDn.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "backend.h"
#include "ctx.h"
#include "err.h"
#include "kernels.h"


#define GIB (1024.0 * 1024.0 * 1024.0)
#define GRAM_STREAMS 4
#define F32_CHUNK_DOUBLES ((int64_t)32 << 20)  // f32 rows are widened ≤ 256 MB at a time
#define GEMM_CHUNK_ROWS ((int64_t)32768)        // rows (cuBLAS's k) per pass over f32 X widened to double

typedef struct cuda_state {
    cudaStream_t stream;
    cublasHandle_t blas;
    cusolverDnHandle_t solver;  // made on first use (ann_cuda.c)
    ncclComm_t nccl;  // NULL with one rank, or once aborted
    int nccl_aborted;
    cudaEvent_t marks[DS_MARKS];
    int nsm;              // multiprocessors: sizes the grids
    double timeout_s;     // DSOLVE_TIMEOUT; 0: wait without a deadline
    double *scratch;      // partial sums and widened rows; grown only when too small
    size_t scratch_doubles;
    const double **ptrs;  // pointer arrays of batched GEMMs
    size_t ptrs_len;
    cudaStream_t side[GRAM_STREAMS];  // concurrent parts of the Gram product, each with its own handle
    cublasHandle_t side_blas[GRAM_STREAMS];
    cudaEvent_t fork, join[GRAM_STREAMS];
} cuda_state;

// ---------------------------------------------------------------------------------------------------
// Errors: one generic check behind the library-specific ones.

int cuda_failed(ds_ctx *ctx, const char *stmt, const char *why, const char *file, int line);

#define GPU_CHECK_GEN(ctx, type, ok, errstr, expr)                                  \
    do {                                                                            \
        type gpu_rc_ = (expr);                                                      \
        if (gpu_rc_ != (ok))                                                        \
            return cuda_failed((ctx), #expr, errstr(gpu_rc_), __FILE__, __LINE__); \
    } while (0)
#define CUDA_CHECK(ctx, expr) GPU_CHECK_GEN(ctx, cudaError_t, cudaSuccess, cudaGetErrorString, expr)
#define CUBLAS_CHECK(ctx, expr) \
    GPU_CHECK_GEN(ctx, cublasStatus_t, CUBLAS_STATUS_SUCCESS, cublasGetStatusString, expr)
#define NCCL_CHECK(ctx, expr) GPU_CHECK_GEN(ctx, ncclResult_t, ncclSuccess, ncclGetErrorString, expr)

static inline cuda_state *state(ds_ctx *ctx)
{
    return (cuda_state *)ctx->be_state;
}

// Waits for the stream (ev NULL) or for ev, polling; see backend_cuda.c.
int cuda_wait(ds_ctx *ctx, cudaEvent_t ev);
int cuda_alloc(ds_ctx *ctx, void **ptr, size_t bytes);
// A device scratch of at least doubles, grown only when a call needs more than any before it.
int scratch_reserve(ds_ctx *ctx, size_t doubles, double **out);

// The SolveBak ops of ds_backend (backend.h states their contracts), in backend_cuda_ops.c.
int cuda_block_grams(ds_ctx *ctx, const ds_mat *X, int batch, double *out);
int cuda_gram(ds_ctx *ctx, const ds_mat *X, const double *y, double *out);
int cuda_grad_update(ds_ctx *ctx, const ds_mat *X, double *e, int64_t up_col0, int64_t up_n, const double *coef,
                     int64_t gr_col0, int64_t gr_n, double *gout);
int cuda_block_step(ds_ctx *ctx, const ds_step_args *s);
int cuda_gram_sweeps(ds_ctx *ctx, const ds_gram_args *s);

#endif
