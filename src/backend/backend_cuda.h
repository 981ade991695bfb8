// backend_cuda.h: what the CUDA backend (backend_cuda.c: runtime, memory, waits, collectives, devices)
// shares with the workloads' CUDA files (solve_cuda.c, ann_cuda.c, sort_cuda.c, logreg_cuda.c,
// bench_cuda.c): its state, the error checks, and the functions they call across. Those files reach the
// stream, the library handles and the checks through it.
// provides: cuda_state, state, cuda_axpy, cuda_pinned_limit, cuda_host_alloc, cuda_host_free, cuda_stage*, CUDA_CHECK, CUBLAS_CHECK, NCCL_CHECK, cuda_failed, cuda_wait, cuda_alloc,
//           cuda_release, cuda_kept_bytes, cuda_keep_close, cuda_block,
//           scratch_reserve, SOLVER_CHECK, cuda_solver, cuda_device_*, cuda_versions, cuda_costs, GIB, GRAM_STREAMS, F32_CHUNK_DOUBLES, GEMM_CHUNK_ROWS
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

#include "backend/backend.h"
#include "core/ctx.h"
#include "core/err.h"
#include "backend/backend_kernels.h"


#define GIB (1024.0 * 1024.0 * 1024.0)
#define GRAM_STREAMS 4
#define F32_CHUNK_DOUBLES ((int64_t)32 << 20)  // f32 rows are widened ≤ 256 MB at a time
#define GEMM_CHUNK_ROWS ((int64_t)32768)        // rows (cuBLAS's k) per pass over f32 X widened to double

enum { CUDA_BIG_BLOCKS = 32 };
typedef struct cuda_block {
    void *ptr;
    size_t bytes;
} cuda_block;

typedef struct cuda_state {
    cudaStream_t stream;
    cublasHandle_t blas;
    cusolverDnHandle_t solver;  // made on first use (ann_cuda.c)
    ncclComm_t nccl;  // NULL with one rank, or once aborted
    int nccl_aborted;
    cudaEvent_t marks[DS_MARKS];
    int nsm;              // multiprocessors: sizes the grids
    int cert_plan;        // DSOLVE_CERT_PLAN: how grad_update passes over a wide slab (DS_CERT_*)
    double *scratch;      // partial sums and widened rows; grown only when too small
    size_t scratch_doubles;
    const double **ptrs;  // pointer arrays of batched GEMMs
    size_t ptrs_len;
    cudaStream_t side[GRAM_STREAMS];  // concurrent parts of the Gram product, each with its own handle
    cublasHandle_t side_blas[GRAM_STREAMS];
    cudaEvent_t fork, join[GRAM_STREAMS];
    // Staging of streamed inputs (backend_cuda_stage.c), made on first use: a copy stream, and per slot
    // the end of its copy and the end of the work that reads it.
    cudaStream_t copy;
    cudaEvent_t staged[DS_STAGES], released[DS_STAGES];
    int release_pending[DS_STAGES];  // 1 when released[slot] was recorded since the slot's last copy
    double pinned_limit;             // DSOLVE_PINNED_LIMIT's bytes (a test hook), 0 for none
    // --method cholesky's triangular solves (solve_cuda.c): what they read of the last factor (the inverses
    // of its diagonal blocks, trsv_of's of order trsv_n) and their work (its own state between calls);
    // grown only when too small.
    double *trsv, *trsv_work;
    size_t trsv_doubles, trsv_work_len;
    const double *trsv_of;
    int64_t trsv_n;
    cudaEvent_t trsv_ready;  // the end of the last preparation, on side stream 0
    int chol_potrs;          // DSOLVE_CHOL_POTRS=1: cuSOLVER's potrs for those solves (to compare)
    int sweeps_cluster;      // DSOLVE_SWEEPS_CLUSTER: the Gram sweeps' cluster size pinned (2-16), else 0
    int sweeps_tx;           // the cluster sweeps exchange by st.async on mbarriers (DSOLVE_SWEEPS_TX=0: by a cluster barrier)
    // backend_cuda_mem.c: the large blocks handed out, and the one freed block kept for reuse
    cuda_block big[CUDA_BIG_BLOCKS], keep;
    int nbig;
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
#define SOLVER_CHECK(ctx, expr) GPU_CHECK_GEN(ctx, cusolverStatus_t, CUSOLVER_STATUS_SUCCESS, cuda_solver_status, expr)

const char *cuda_solver_status(cusolverStatus_t s);
// The backend's cuSOLVER handle on its stream, made on first use (released by close).
int cuda_solver(ds_ctx *ctx, cusolverDnHandle_t *h);

static inline cuda_state *state(ds_ctx *ctx)
{
    return (cuda_state *)ctx->be_state;
}

// Waits for the stream (ev NULL) or for ev, polling; see backend_cuda.c.
int cuda_wait(ds_ctx *ctx, cudaEvent_t ev);
// Device memory (backend_cuda_mem.c): cuda_alloc as cudaMalloc, failing with a message; cuda_release
// (the backend's free) waits for the stream and frees, or keeps one large block for the next allocation it
// fits; cuda_kept_bytes: the kept block's size (free memory to a memory plan); cuda_keep_close frees it.
int cuda_alloc(ds_ctx *ctx, void **ptr, size_t bytes);
void cuda_release(ds_ctx *ctx, void *ptr);
size_t cuda_kept_bytes(const cuda_state *st);
void cuda_keep_close(cuda_state *st);
// A device scratch of at least doubles, grown only when a call needs more than any before it.
int scratch_reserve(ds_ctx *ctx, size_t doubles, double **out);

// Staging and axpy (backend_cuda_stage.c; backend.h states their contracts); cuda_stage_close releases
// the stream and events on close.
int cuda_axpy(ds_ctx *ctx, double *y, const double *x, int64_t n, double alpha);
// Reads DSOLVE_PINNED_LIMIT=SIZE (bytes, or with K, M, G or T) on open: a test hook under which a pinned
// allocation larger than SIZE fails as a short cudaHostAlloc does. DS_ERR_USAGE when not a size.
int cuda_pinned_limit(ds_ctx *ctx, cuda_state *st);
int cuda_host_alloc(ds_ctx *ctx, void **ptr, size_t bytes);
void cuda_host_free(ds_ctx *ctx, void *ptr);
int cuda_stage(ds_ctx *ctx, int slot, void *dst, const void *src, size_t bytes);
int cuda_stage_2d(ds_ctx *ctx, int slot, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                  size_t height);
int cuda_stage_wait(ds_ctx *ctx, int slot);
int cuda_stage_release(ds_ctx *ctx, int slot);
void cuda_stage_close(cuda_state *st);

// The device queries of ds_backend (backend.h states their contracts), in backend_cuda_info.c.
int cuda_device_count(void);
int cuda_device_info(int device, ds_device_info *d);
void cuda_device_name(ds_ctx *ctx, char *buf, size_t len);
void cuda_versions(ds_versions *v);
void cuda_costs(const ds_ctx *ctx, ds_costs *c);

#endif
