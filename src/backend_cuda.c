// backend_cuda.c: the CUDA backend: device memory, one non-blocking stream per rank, cuBLAS for the
// Gram products, kernels/ for SolveBak's fused passes, NCCL (bootstrapped over MPI) for the sums.
// The only C file that includes CUDA headers. Waits never block inside CUDA: they poll the stream and
// the NCCL communicator, so a failed peer turns into an error instead of a hang.
// provides: ds_backend_cuda, ds_cuda_device_count, ds_cuda_versions, ds_cuda_device_name
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
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

static int cuda_failed(ds_ctx *ctx, const char *stmt, const char *why, const char *file, int line)
{
    return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "cuda: %s failed: %s (%s:%d, rank %d, device %d)", stmt, why,
                   file, line, ctx->rank, ctx->device);
}

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

static cuda_state *state(ds_ctx *ctx)
{
    return (cuda_state *)ctx->be_state;
}

// ---------------------------------------------------------------------------------------------------
// Waiting: poll instead of cudaStreamSynchronize (nccl-tests' testStreamSynchronize pattern).

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Frees NCCL's kernels from a collective that will never complete.
static void nccl_abort(cuda_state *st)
{
    if (st->nccl) {
        ncclCommAbort(st->nccl);
        st->nccl = NULL;
        st->nccl_aborted = 1;
    }
}

// Returns when ev (or, when ev is NULL, everything queued on the stream) has completed.
static int cuda_wait(ds_ctx *ctx, cudaEvent_t ev)
{
    cuda_state *st = state(ctx);
    const double t0 = st->timeout_s > 0 ? now_s() : 0.0;
    for (long round = 0;; round++) {
        cudaError_t q = ev ? cudaEventQuery(ev) : cudaStreamQuery(st->stream);
        if (q == cudaSuccess)
            return DS_OK;
        if (q != cudaErrorNotReady)
            return cuda_failed(ctx, ev ? "cudaEventQuery(mark)" : "cudaStreamQuery(stream)",
                               cudaGetErrorString(q), __FILE__, __LINE__);
        if (st->nccl) {
            ncclResult_t async = ncclSuccess;
            ncclResult_t rc = ncclCommGetAsyncError(st->nccl, &async);
            if (rc != ncclSuccess)
                async = rc;
            if (async != ncclSuccess && async != ncclInProgress) {
                nccl_abort(st);
                return ds_fail(&ctx->msg, DS_ERR_RUNTIME,
                               "nccl: asynchronous error: %s (rank %d, device %d); communicator aborted",
                               ncclGetErrorString(async), ctx->rank, ctx->device);
            }
        }
        if (st->timeout_s > 0 && now_s() - t0 > st->timeout_s) {
            nccl_abort(st);
            return ds_fail(&ctx->msg, DS_ERR_RUNTIME,
                           "cuda: timed out waiting for the GPU after %g s (a peer rank may have failed) "
                           "(rank %d, device %d; DSOLVE_TIMEOUT)",
                           st->timeout_s, ctx->rank, ctx->device);
        }
        // Spin politely at first (most waits are short), then sleep so that a long wait costs no core.
        if (round < 2000) {
            sched_yield();
        } else {
            struct timespec pause = {0, 20000};
            nanosleep(&pause, NULL);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// open / close

static int timeout_from_env(ds_ctx *ctx, double *seconds)
{
    *seconds = 0.0;
    const char *s = getenv("DSOLVE_TIMEOUT");
    if (!s || !*s)
        return DS_OK;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0.0 && v <= 1e9))
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "DSOLVE_TIMEOUT must be seconds between 0 and 1e9, not \"%s\"",
                       s);
    *seconds = v;
    return DS_OK;
}

// This rank's device, stream, handles and events. Not collective.
static int open_local(ds_ctx *ctx, cuda_state *st)
{
    DS_CHECK(timeout_from_env(ctx, &st->timeout_s));
    CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
    CUDA_CHECK(ctx, cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(ctx, cublasCreate(&st->blas));
    CUBLAS_CHECK(ctx, cublasSetStream(st->blas, st->stream));
    CUBLAS_CHECK(ctx, cublasSetPointerMode(st->blas, CUBLAS_POINTER_MODE_HOST));
    for (int i = 0; i < DS_MARKS; i++)
        CUDA_CHECK(ctx, cudaEventCreate(&st->marks[i]));
    CUDA_CHECK(ctx, cudaDeviceGetAttribute(&st->nsm, cudaDevAttrMultiProcessorCount, ctx->device));
    CUDA_CHECK(ctx, cudaEventCreateWithFlags(&st->fork, cudaEventDisableTiming));
    for (int i = 0; i < GRAM_STREAMS; i++) {
        CUDA_CHECK(ctx, cudaStreamCreateWithFlags(&st->side[i], cudaStreamNonBlocking));
        CUDA_CHECK(ctx, cudaEventCreateWithFlags(&st->join[i], cudaEventDisableTiming));
        CUBLAS_CHECK(ctx, cublasCreate(&st->side_blas[i]));
        CUBLAS_CHECK(ctx, cublasSetStream(st->side_blas[i], st->side[i]));
    }
    return DS_OK;
}

// Collective: NCCL hangs or fails when two ranks drive one GPU, so refuse that up front.
static int check_one_gpu_per_rank(ds_ctx *ctx)
{
    MPI_Comm node;
    if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Comm_split_type failed (rank %d)", ctx->rank);
    int nlocal = 0;
    MPI_Comm_size(node, &nlocal);
    int *devices = malloc((size_t)nlocal * sizeof *devices);
    DS_ASSERT(devices);
    MPI_Allgather(&ctx->device, 1, MPI_INT, devices, 1, MPI_INT, node);
    int rc = DS_OK;
    for (int i = 1; i < nlocal && rc == DS_OK; i++)
        for (int k = 0; k < i; k++)
            if (devices[i] >= 0 && devices[i] == devices[k]) {
                rc = ds_fail(&ctx->msg, DS_ERR_RUNTIME,
                             "two ranks on host %s were given GPU %d: NCCL needs one GPU per rank", ctx->host,
                             devices[i]);
                break;
            }
    free(devices);
    MPI_Comm_free(&node);
    return rc;
}

static int nccl_unique_id(ds_ctx *ctx, ncclUniqueId *id)
{
    NCCL_CHECK(ctx, ncclGetUniqueId(id));
    return DS_OK;
}

static int nccl_init(ds_ctx *ctx, cuda_state *st, ncclUniqueId id)
{
    ncclComm_t comm = NULL;
    NCCL_CHECK(ctx, ncclCommInitRank(&comm, ctx->nranks, id, ctx->rank));
    st->nccl = comm;
    return DS_OK;
}

// Collective. Rank 0 makes the NCCL id, MPI carries it, every rank joins.
static int open_nccl(ds_ctx *ctx, cuda_state *st)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int rc = ctx->rank == 0 ? nccl_unique_id(ctx, &id) : DS_OK;
    DS_CHECK(ctx_agree(ctx, rc));
    if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Bcast of the NCCL id failed (rank %d)", ctx->rank);
    return ctx_agree(ctx, nccl_init(ctx, st, id));
}

static int cuda_open(ds_ctx *ctx)
{
    cuda_state *st = calloc(1, sizeof *st);
    ctx->be_state = st;
    int rc = st ? open_local(ctx, st) : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "cuda: out of host memory");
    // Both checks are agreed on before NCCL starts, so no rank waits in ncclCommInitRank for one that
    // already failed.
    int dup = check_one_gpu_per_rank(ctx);
    if (rc == DS_OK)
        rc = dup;
    DS_CHECK(ctx_agree(ctx, rc));
    if (ctx->nranks > 1)
        DS_CHECK(open_nccl(ctx, st));
    return DS_OK;
}

static void cuda_close(ds_ctx *ctx)
{
    cuda_state *st = state(ctx);
    if (!st)
        return;
    if (st->nccl) {
        // After a failure a peer may never join: abort rather than wait in ncclCommDestroy.
        if (ctx->msg.text[0] == '\0' && cuda_wait(ctx, NULL) == DS_OK && st->nccl)
            ncclCommDestroy(st->nccl);
        else
            nccl_abort(st);
        st->nccl = NULL;
    } else if (st->stream && ctx->msg.text[0] == '\0') {
        (void)cuda_wait(ctx, NULL);
    }
    for (int i = 0; i < DS_MARKS; i++)
        if (st->marks[i])
            cudaEventDestroy(st->marks[i]);
    if (st->blas)
        cublasDestroy(st->blas);
    for (int i = 0; i < GRAM_STREAMS; i++) {
        if (st->side_blas[i])
            cublasDestroy(st->side_blas[i]);
        if (st->side[i])
            cudaStreamDestroy(st->side[i]);
        if (st->join[i])
            cudaEventDestroy(st->join[i]);
    }
    if (st->fork)
        cudaEventDestroy(st->fork);
    cudaFree(st->ptrs);
    cudaFree(st->scratch);
    if (st->stream)
        cudaStreamDestroy(st->stream);
    free(st);
    ctx->be_state = NULL;
}

// ---------------------------------------------------------------------------------------------------
// Memory

static int cuda_alloc(ds_ctx *ctx, void **ptr, size_t bytes)
{
    *ptr = NULL;
    if (bytes == 0)
        return DS_OK;
    cudaError_t rc = cudaMalloc(ptr, bytes);
    if (rc == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // not sticky: clear it, or the next launch check would report it
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        *ptr = NULL;
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME,
                       "cuda: out of memory allocating %.2f GiB on device %d (free %.2f GiB of %.2f)",
                       (double)bytes / GIB, ctx->device, (double)free_b / GIB, (double)total_b / GIB);
    }
    if (rc != cudaSuccess) {
        *ptr = NULL;
        return cuda_failed(ctx, "cudaMalloc", cudaGetErrorString(rc), __FILE__, __LINE__);
    }
    return DS_OK;
}

static void cuda_free(ds_ctx *ctx, void *ptr)
{
    if (!ptr)
        return;
    (void)cuda_wait(ctx, NULL);  // cudaFree synchronizes the device; wait here where a hang is caught
    cudaFree(ptr);
}

static int cuda_upload(ds_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return DS_OK;
    // A copy from pageable memory may block until earlier work is done: drain the queue first.
    DS_CHECK(cuda_wait(ctx, NULL));
    CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, state(ctx)->stream));
    return cuda_wait(ctx, NULL);
}

static int cuda_download(ds_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    DS_CHECK(cuda_wait(ctx, NULL));
    if (bytes == 0)
        return DS_OK;
    CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, state(ctx)->stream));
    return cuda_wait(ctx, NULL);
}

static int cuda_copy(ds_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return DS_OK;
    CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, state(ctx)->stream));
    return DS_OK;
}

static int cuda_fill(ds_ctx *ctx, double *x, int64_t n, double value)
{
    CUDA_CHECK(ctx, ds_k_fill(x, n, value, state(ctx)->stream));
    return DS_OK;
}

static int cuda_gather(ds_ctx *ctx, double *dst, const double *src, int64_t n, int64_t stride)
{
    CUDA_CHECK(ctx, ds_k_gather(dst, src, n, stride, state(ctx)->stream));
    return DS_OK;
}

static int cuda_sync(ds_ctx *ctx)
{
    return cuda_wait(ctx, NULL);
}

// Scratch is grown (never shrunk) only when a call needs more than any call before it, so the
// thousands of same-sized calls of a solve allocate nothing.
static int scratch_reserve(ds_ctx *ctx, size_t doubles, double **out)
{
    cuda_state *st = state(ctx);
    if (doubles > st->scratch_doubles) {
        DS_CHECK(cuda_wait(ctx, NULL));  // queued work may still use the old buffer
        cudaFree(st->scratch);
        st->scratch = NULL;
        st->scratch_doubles = 0;
        size_t want = doubles + doubles / 4;
        void *p = NULL;
        DS_CHECK(cuda_alloc(ctx, &p, want * sizeof(double)));
        st->scratch = p;
        st->scratch_doubles = want;
    }
    *out = st->scratch;
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// Timing and collectives

static int cuda_mark(ds_ctx *ctx, int slot)
{
    DS_ASSERT(slot >= 0 && slot < DS_MARKS);
    cuda_state *st = state(ctx);
    CUDA_CHECK(ctx, cudaEventRecord(st->marks[slot], st->stream));
    return DS_OK;
}

static int cuda_elapsed(ds_ctx *ctx, int from, int to, double *seconds)
{
    DS_ASSERT(from >= 0 && from < DS_MARKS && to >= 0 && to < DS_MARKS);
    cuda_state *st = state(ctx);
    DS_CHECK(cuda_wait(ctx, st->marks[to]));
    float ms = 0.0f;
    CUDA_CHECK(ctx, cudaEventElapsedTime(&ms, st->marks[from], st->marks[to]));
    *seconds = 1e-3 * (double)ms;
    return DS_OK;
}

static int cuda_allreduce_sum(ds_ctx *ctx, double *buf, int64_t count)
{
    cuda_state *st = state(ctx);
    if (ctx->nranks == 1 || count <= 0)
        return DS_OK;
    if (!st->nccl)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME,
                       "nccl: the communicator was aborted after an earlier failure (rank %d)", ctx->rank);
    NCCL_CHECK(ctx, ncclAllReduce(buf, buf, (size_t)count, ncclDouble, ncclSum, st->nccl, st->stream));
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// Gram products. cuBLAS is column-major: X (m × n row-major) is Xᵀ (n × m, ld n) to it, and the
// columns c0 .. c0+k of X are rows c0 .. c0+k of that matrix: A = X + c0 with ld n.

// Rows of X from r0 as doubles: X itself, or its rows widened into scratch (f32).
static int rows_f64(ds_ctx *ctx, const ds_mat *X, int64_t r0, int64_t nr, double *wide, const double **A)
{
    if (!X->f32) {
        *A = (const double *)X->data + r0 * X->cols;
        return DS_OK;
    }
    CUDA_CHECK(ctx, ds_k_f32_to_f64(wide, (const float *)X->data + r0 * X->cols, nr * X->cols,
                                    state(ctx)->stream));
    *A = wide;
    return DS_OK;
}

// Rows per pass (cuBLAS's k): ≤ GEMM_CHUNK_ROWS, and for f32 ≤ 256 MB of widened rows (then a
// scratch of that size).
static int row_chunks(ds_ctx *ctx, const ds_mat *X, int64_t *chunk, double **wide)
{
    *wide = NULL;
    int64_t c = X->rows < GEMM_CHUNK_ROWS ? X->rows : GEMM_CHUNK_ROWS;
    if (X->f32 && X->cols > 0 && c > F32_CHUNK_DOUBLES / X->cols)
        c = F32_CHUNK_DOUBLES / X->cols;
    if (c < 1)
        c = 1;
    *chunk = c;
    return X->f32 ? scratch_reserve(ctx, (size_t)(c * X->cols), wide) : DS_OK;
}

static int cuda_block_grams(ds_ctx *ctx, const ds_mat *X, int batch, double *out)
{
    cuda_state *st = state(ctx);
    DS_ASSERT(batch >= 1);
    const int64_t n = X->cols, m = X->rows, bb = (int64_t)batch * batch;
    const int64_t nfull = n / batch, tail = n % batch, nblocks = nfull + (tail > 0);
    if (n == 0)
        return DS_OK;
    if (m == 0) {
        CUDA_CHECK(ctx, ds_k_fill(out, nblocks * bb, 0.0, st->stream));
        return DS_OK;
    }
    if (tail > 0)  // gemm writes only the tail × tail corner of the last slab: zero the rest
        CUDA_CHECK(ctx, ds_k_fill(out + nfull * bb, bb, 0.0, st->stream));
    int64_t chunk;
    double *wide;
    DS_CHECK(row_chunks(ctx, X, &chunk, &wide));
    const double one = 1.0, zero = 0.0;
    for (int64_t r0 = 0; r0 < m; r0 += chunk) {
        const int64_t nr = m - r0 < chunk ? m - r0 : chunk;
        const double *A = NULL, *beta = r0 == 0 ? &zero : &one;
        DS_CHECK(rows_f64(ctx, X, r0, nr, wide, &A));
        // G_b = A_b·A_bᵀ with A_b = A + b·batch (batch × nr, ld n); C_b at out + b·batch², ld batch.
        if (nfull > 0)
            CUBLAS_CHECK(ctx, cublasDgemmStridedBatched_64(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, batch, batch, nr,
                                                           &one, A, n, batch, A, n, batch, beta, out, batch,
                                                           bb, nfull));
        if (tail > 0)
            CUBLAS_CHECK(ctx, cublasDgemm_64(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, tail, tail, nr, &one,
                                             A + nfull * batch, n, A + nfull * batch, n, beta,
                                             out + nfull * bb, batch));
    }
    return DS_OK;
}

// ‖y‖² straight into device memory: the only call in device pointer mode, restored afterwards.
static int dot_self(ds_ctx *ctx, const double *y, int64_t m, double *result)
{
    cuda_state *st = state(ctx);
    CUBLAS_CHECK(ctx, cublasSetPointerMode(st->blas, CUBLAS_POINTER_MODE_DEVICE));
    cublasStatus_t rc = cublasDdot_64(st->blas, m, y, 1, y, 1, result);
    CUBLAS_CHECK(ctx, cublasSetPointerMode(st->blas, CUBLAS_POINTER_MODE_HOST));
    CUBLAS_CHECK(ctx, rc);
    return DS_OK;
}

// The tiled Gram product (f64): the n columns are cut into tiles of t (a multiple of 32) and only the
// tiles on and above the diagonal are multiplied (about half of a full GEMM's flops, as in SYRK); each
// tile is split over ks chunks of rows so that the batched GEMMs (one per tile shape) fill the GPU, and
// a reduction sums the partials into the full symmetric G.
// DSOLVE_GRAM_TILE and DSOLVE_GRAM_KSPLIT override the plan; DSOLVE_GRAM_KSPLIT=0 selects cuBLAS DSYRK.
typedef struct gram_plan {
    int64_t t, T, ks, kc;  // tile width, tiles per side, row chunks, rows per chunk
} gram_plan;

typedef struct gram_group {
    int64_t wi, wj, k;  // the shape of its GEMMs
    int64_t off, cnt;   // its pointers: A at off, B at off + cnt, C at off + 2·cnt
} gram_group;

static int64_t env_int(const char *name, int64_t fallback)
{
    const char *v = getenv(name);
    char *end = NULL;
    long long x = v ? strtoll(v, &end, 10) : 0;
    return v && end != v && *end == '\0' && x >= 0 ? (int64_t)x : fallback;
}

static gram_plan gram_make_plan(const cuda_state *st, int64_t m, int64_t n)
{
    gram_plan p;
    // Measured on an H200 (n = 1 000): tiles of 128 with chunks of 12 500 rows took 3.0 ms for 10⁵ rows
    // and 111 ms for 4·10⁶ (16 chunks), against 3.08 and 129 ms for DSYRK on chunks of 32 768 rows.
    p.t = env_int("DSOLVE_GRAM_TILE", n <= 128 ? n : 128);
    p.t = (p.t + 31) / 32 * 32;
    p.T = (n + p.t - 1) / p.t;
    int64_t ks = (m + 12499) / 12500;
    ks = ks > 16 ? 16 : ks < 1 ? 1 : ks;
    while (ks > 1 && (double)ks * n * n * 8 > 2e9)  // partials stay under 2 GB
        ks--;
    (void)st;
    p.ks = env_int("DSOLVE_GRAM_KSPLIT", ks);
    p.kc = p.ks > 0 ? (m + p.ks - 1) / p.ks : m;
    if (p.ks > 0)
        p.ks = (m + p.kc - 1) / p.kc;  // no empty chunk
    return p;
}

static int ptrs_reserve(ds_ctx *ctx, size_t count)
{
    cuda_state *st = state(ctx);
    if (count <= st->ptrs_len)
        return DS_OK;
    DS_CHECK(cuda_wait(ctx, NULL));
    cudaFree(st->ptrs);
    st->ptrs = NULL;
    st->ptrs_len = 0;
    DS_CHECK(cuda_alloc(ctx, (void **)&st->ptrs, count * sizeof(double *)));
    st->ptrs_len = count;
    return DS_OK;
}

// Visits every (chunk, tile) pair: fill == 0 sorts them into groups by shape and counts them; fill == 1
// writes their A, B and C pointers into host at their group's place.
static int gram_pairs(const double *X, double *P, int64_t m, int64_t n, const gram_plan *p, gram_group *g,
                      int *ng, const double **host, int fill)
{
    const int64_t r = n - (p->T - 1) * p->t;
    int64_t cursor[8] = {0};
    for (int64_t c = 0; c < p->ks; c++)
        for (int64_t I = 0; I < p->T; I++)
            for (int64_t J = I; J < p->T; J++) {
                const int64_t k0 = c * p->kc, k = m - k0 < p->kc ? m - k0 : p->kc;
                const int64_t wi = I == p->T - 1 ? r : p->t, wj = J == p->T - 1 ? r : p->t;
                int q = 0;
                while (q < *ng && !(g[q].wi == wi && g[q].wj == wj && g[q].k == k))
                    q++;
                if (q == *ng) {
                    DS_ASSERT(!fill && q < 8);
                    g[q] = (gram_group){wi, wj, k, 0, 0};
                    (*ng)++;
                }
                if (!fill) {
                    g[q].cnt++;
                    continue;
                }
                const int64_t at = g[q].off + cursor[q]++;
                host[at] = X + I * p->t + k0 * n;
                host[at + g[q].cnt] = X + J * p->t + k0 * n;
                host[at + 2 * g[q].cnt] = P + c * n * n + I * p->t + J * p->t * n;
            }
    return DS_OK;
}

static int gram_tiled(ds_ctx *ctx, const double *X, int64_t m, int64_t n, const gram_plan *p, double *G)
{
    cuda_state *st = state(ctx);
    double *P;
    DS_CHECK(scratch_reserve(ctx, (size_t)(p->ks * n * n), &P));
    const int64_t pairs = p->T * (p->T + 1) / 2 * p->ks;
    DS_CHECK(ptrs_reserve(ctx, (size_t)(3 * pairs)));
    const double **host = malloc((size_t)(3 * pairs) * sizeof *host);
    if (!host)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    gram_group g[8];
    int ng = 0;
    gram_pairs(X, P, m, n, p, g, &ng, host, 0);
    for (int q = 1; q < ng; q++)
        g[q].off = g[q - 1].off + 3 * g[q - 1].cnt;
    gram_pairs(X, P, m, n, p, g, &ng, host, 1);
    cudaError_t up = cudaMemcpyAsync(st->ptrs, host, (size_t)(3 * pairs) * sizeof *host, cudaMemcpyHostToDevice,
                                     st->stream);
    DS_CHECK(cuda_wait(ctx, NULL));  // host is pageable and freed next
    free(host);
    CUDA_CHECK(ctx, up);
    const double one = 1.0, zero = 0.0;
    for (int q = 0; q < ng; q++) {
        const double **A = st->ptrs + g[q].off;
        CUBLAS_CHECK(ctx, cublasDgemmBatched(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)g[q].wi, (int)g[q].wj,
                                             (int)g[q].k, &one, A, (int)n, A + g[q].cnt, (int)n, &zero,
                                             (double *const *)(A + 2 * g[q].cnt), (int)n, (int)g[q].cnt));
    }
    CUDA_CHECK(ctx, ds_k_gram_reduce(P, (int)p->ks, n, G, st->stream));
    return DS_OK;
}

// G by cuBLAS DSYRK (DSOLVE_GRAM_KSPLIT=0) on chunks of at most GEMM_CHUNK_ROWS rows (one DSYRK over
// 4 M rows ran 7× slower than chunks of 32 768), dealt round-robin to S side streams (DSOLVE_GRAM_STREAMS,
// default 1: 4 concurrent streams were measured slower), each summing into its own partial; c = Xᵀy
// runs meanwhile on the main stream, and a reduction adds the partials into the full symmetric G.
static int gram_syrk_streams(ds_ctx *ctx, const double *X, int64_t m, int64_t n, const double *y, double *out)
{
    cuda_state *st = state(ctx);
    const int64_t chunks = (m + GEMM_CHUNK_ROWS - 1) / GEMM_CHUNK_ROWS;
    int64_t S = env_int("DSOLVE_GRAM_STREAMS", 1);
    S = S < 1 ? 1 : S > GRAM_STREAMS ? GRAM_STREAMS : S;
    S = S > chunks ? chunks : S;
    while (S > 1 && (double)S * n * n * 8 > 2e9)  // partials stay under 2 GB
        S--;
    const int64_t kc = (m + chunks - 1) / chunks;  // near-equal chunks
    double *P = out;  // one stream sums straight into G
    if (S > 1)
        DS_CHECK(scratch_reserve(ctx, (size_t)(S * n * n), &P));
    const double one = 1.0, zero = 0.0;
    CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
    for (int64_t s = 0; s < S; s++)
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[s], st->fork, 0));
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t s = c % S, r0 = c * kc, k = m - r0 < kc ? m - r0 : kc;
        // Partials: the column-major upper triangle (row ≤ column), as ds_k_gram_reduce reads it; G
        // itself: the column-major lower, which is the row-major upper that ds_k_mirror_upper copies.
        CUBLAS_CHECK(ctx, cublasDsyrk_64(st->side_blas[s], S > 1 ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER,
                                         CUBLAS_OP_N, n, k, &one,
                                         X + r0 * n, n, c < S ? &zero : &one, P + s * n * n, n));
    }
    for (int64_t s = 0; s < S; s++)
        CUDA_CHECK(ctx, cudaEventRecord(st->join[s], st->side[s]));
    CUBLAS_CHECK(ctx, cublasDgemv_64(st->blas, CUBLAS_OP_N, n, m, &one, X, n, y, 1, &zero, out + n * n, 1));
    for (int64_t s = 0; s < S; s++)
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[s], 0));
    if (S > 1)
        CUDA_CHECK(ctx, ds_k_gram_reduce(P, (int)S, n, out, st->stream));
    else
        CUDA_CHECK(ctx, ds_k_mirror_upper(out, n, st->stream));
    return DS_OK;
}

static int cuda_gram(ds_ctx *ctx, const ds_mat *X, const double *y, double *out)
{
    cuda_state *st = state(ctx);
    const int64_t n = X->cols, m = X->rows;
    if (m == 0) {
        CUDA_CHECK(ctx, ds_k_fill(out, n * n + n + 1, 0.0, st->stream));
        return DS_OK;
    }
    const gram_plan plan = gram_make_plan(st, m, n);
    if (!X->f32 && n > 0 && plan.ks == 0) {
        DS_CHECK(gram_syrk_streams(ctx, (const double *)X->data, m, n, y, out));
    } else if (!X->f32 && n > 0) {
        // c = Xᵀy (memory-bound) on a side stream, under the compute-bound GEMMs.
        const double one = 1.0, zero = 0.0;
        CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[0], st->fork, 0));
        CUBLAS_CHECK(ctx, cublasDgemv_64(st->side_blas[0], CUBLAS_OP_N, n, m, &one, (const double *)X->data, n, y,
                                         1, &zero, out + n * n, 1));
        CUDA_CHECK(ctx, cudaEventRecord(st->join[0], st->side[0]));
        DS_CHECK(gram_tiled(ctx, (const double *)X->data, m, n, &plan, out));
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[0], 0));
    } else if (n > 0) {
        int64_t chunk;
        double *wide;
        DS_CHECK(row_chunks(ctx, X, &chunk, &wide));
        const double one = 1.0, zero = 0.0;
        for (int64_t r0 = 0; r0 < m; r0 += chunk) {
            const int64_t nr = m - r0 < chunk ? m - r0 : chunk;
            const double *A = NULL, *beta = r0 == 0 ? &zero : &one;
            DS_CHECK(rows_f64(ctx, X, r0, nr, wide, &A));
            // G = A·Aᵀ (A: n × nr, ld n); column-major lower = row-major upper, mirrored below.
            CUBLAS_CHECK(ctx, cublasDsyrk_64(st->blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, nr, &one, A, n,
                                             beta, out, n));
            // c = A·y
            CUBLAS_CHECK(ctx, cublasDgemv_64(st->blas, CUBLAS_OP_N, n, nr, &one, A, n, y + r0, 1, beta,
                                             out + n * n, 1));
        }
        CUDA_CHECK(ctx, ds_k_mirror_upper(out, n, st->stream));
    }
    return dot_self(ctx, y, m, out + n * n + n);
}

// ---------------------------------------------------------------------------------------------------
// SolveBak

static int cuda_grad_update(ds_ctx *ctx, const ds_mat *X, double *e, int64_t up_col0, int64_t up_n,
                            const double *coef, int64_t gr_col0, int64_t gr_n, double *gout)
{
    cuda_state *st = state(ctx);
    double *scratch;
    DS_CHECK(scratch_reserve(ctx, ds_k_grad_update_scratch(X->rows, up_n, gr_n, st->nsm), &scratch));
    CUDA_CHECK(ctx, ds_k_grad_update(X->data, X->f32, X->rows, X->cols, e, up_col0, up_n, coef, gr_col0, gr_n,
                                     gout, scratch, st->nsm, st->stream));
    return DS_OK;
}

static int cuda_block_step(ds_ctx *ctx, const ds_step_args *s)
{
    CUDA_CHECK(ctx, ds_k_block_step(s->gbuf, s->diag, s->gbb, s->nb, s->ld, s->line_search, s->a, s->coef,
                                    s->ee_slot, state(ctx)->stream));
    return DS_OK;
}

static int cuda_gram_sweeps(ds_ctx *ctx, const ds_gram_args *s)
{
    double *scratch;
    DS_CHECK(scratch_reserve(ctx, ds_k_gram_sweeps_scratch(s->n, s->batch), &scratch));
    CUDA_CHECK(ctx, ds_k_gram_sweeps(s->G, s->diag, s->g, s->a, s->ee, s->ee_hist, s->n, s->batch,
                                     s->line_search, s->sweeps, scratch, state(ctx)->stream));
    return DS_OK;
}

const ds_backend ds_backend_cuda = {
    .name = "cuda",
    .host_memory = 0,
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .fill = cuda_fill,
    .gather = cuda_gather,
    .sync = cuda_sync,
    .mark = cuda_mark,
    .elapsed = cuda_elapsed,
    .allreduce_sum = cuda_allreduce_sum,
    .block_grams = cuda_block_grams,
    .grad_update = cuda_grad_update,
    .block_step = cuda_block_step,
    .gram = cuda_gram,
    .gram_sweeps = cuda_gram_sweeps,
};

// ---------------------------------------------------------------------------------------------------
// Discovery and versions (safe without a driver)

int ds_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

void ds_cuda_versions(char *buf, size_t len)
{
    int rt = 0, drv = 0, nccl = 0;
    int bl[3] = {0, 0, 0}, so[3] = {0, 0, 0};
    const libraryPropertyType parts[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess)
        rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess)
        drv = 0;
    for (int i = 0; i < 3; i++) {
        if (cublasGetProperty(parts[i], &bl[i]) != CUBLAS_STATUS_SUCCESS)
            bl[i] = 0;
        if (cusolverGetProperty(parts[i], &so[i]) != CUSOLVER_STATUS_SUCCESS)
            so[i] = 0;
    }
    if (ncclGetVersion(&nccl) != ncclSuccess)
        nccl = 0;
    (void)cudaGetLastError();
    char drv_s[32];
    if (drv > 0)
        snprintf(drv_s, sizeof drv_s, "%d.%d", drv / 1000, drv % 1000 / 10);
    else
        snprintf(drv_s, sizeof drv_s, "none");
    snprintf(buf, len, "CUDA runtime %d.%d, driver %s, cuBLAS %d.%d.%d, cuSOLVER %d.%d.%d, NCCL %d.%d.%d",
             rt / 1000, rt % 1000 / 10, drv_s, bl[0], bl[1], bl[2], so[0], so[1], so[2], nccl / 10000,
             nccl / 100 % 100, nccl % 100);
}

void ds_cuda_device_name(ds_ctx *ctx, char *buf, size_t len)
{
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, ctx->device) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(buf, len, "unknown GPU %d", ctx->device);
        return;
    }
    snprintf(buf, len, "%s, %.0f GiB", p.name, (double)p.totalGlobalMem / GIB);
}
