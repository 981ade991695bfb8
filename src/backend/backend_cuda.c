// backend_cuda.c: the CUDA backend's runtime: device selection, one non-blocking stream per rank,
// device memory, timing, NCCL (bootstrapped over MPI) for the sums, and the backend's table; its device
// queries are in backend_cuda_info.c, the workloads' operations beside each workload (*_cuda.c), all
// reaching CUDA through backend_cuda.h. Waits never block inside CUDA: they poll the stream and the NCCL
// communicator, so a failed peer turns into an error instead of a hang.
// provides: ds_backend_cuda
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cusolverDn.h>

#include "backend/backend_cuda.h"

// The workload tables (solve/solve_cuda.c, ann/ann_cuda.c, sort/sort_cuda.c, logreg/logreg_cuda.c,
// bench/bench_cuda.c).
extern const solve_ops solve_ops_cuda;
extern const ann_ops ann_ops_cuda;
extern const sort_ops sort_ops_cuda;
extern const lr_ops lr_ops_cuda;
extern const bench_ops bench_ops_cuda;

// ---------------------------------------------------------------------------------------------------
// Errors: one generic check (backend_cuda.h) behind the library-specific ones.

int cuda_failed(ds_ctx *ctx, const char *stmt, const char *why, const char *file, int line)
{
    return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "cuda: %s failed: %s (%s:%d, rank %d, device %d)", stmt, why,
                   file, line, ctx->rank, ctx->device);
}

// ---------------------------------------------------------------------------------------------------
// Waiting: poll instead of cudaStreamSynchronize (nccl-tests' testStreamSynchronize pattern), so that an
// NCCL error from a failed peer ends the wait; a wait that never ends is the watchdog's (core/watchdog.h).

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
const char *cuda_solver_status(cusolverStatus_t s)
{
    switch (s) {
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "cuSOLVER not initialized";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "cuSOLVER allocation failed";
    case CUSOLVER_STATUS_INVALID_VALUE: return "cuSOLVER invalid value";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "cuSOLVER architecture mismatch";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "cuSOLVER execution failed";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "cuSOLVER internal error";
    default: return "cuSOLVER error";
    }
}

int cuda_solver(ds_ctx *ctx, cusolverDnHandle_t *h)
{
    cuda_state *st = state(ctx);
    if (!st->solver) {
        SOLVER_CHECK(ctx, cusolverDnCreate(&st->solver));
        SOLVER_CHECK(ctx, cusolverDnSetStream(st->solver, st->stream));
    }
    *h = st->solver;
    return DS_OK;
}

int cuda_wait(ds_ctx *ctx, cudaEvent_t ev)
{
    cuda_state *st = state(ctx);
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

// This rank's device, stream, handles and events. Not collective.
static int open_local(ds_ctx *ctx, cuda_state *st)
{
    CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
    CUDA_CHECK(ctx, cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(ctx, cublasCreate(&st->blas));
    CUBLAS_CHECK(ctx, cublasSetStream(st->blas, st->stream));
    CUBLAS_CHECK(ctx, cublasSetPointerMode(st->blas, CUBLAS_POINTER_MODE_HOST));
    for (int i = 0; i < DS_MARKS; i++)
        CUDA_CHECK(ctx, cudaEventCreate(&st->marks[i]));
    CUDA_CHECK(ctx, cudaDeviceGetAttribute(&st->nsm, cudaDevAttrMultiProcessorCount, ctx->device));
    const char *plan = getenv("DSOLVE_CERT_PLAN");  // DS_CERT_AUTO, _CHUNKS, _TWO_PASS, _CTA (solve_kernels.h)
    st->cert_plan = !plan                           ? 0
                    : strcmp(plan, "chunks") == 0   ? 1
                    : strcmp(plan, "two-pass") == 0 ? 2
                    : strcmp(plan, "cta") == 0      ? 3
                                                    : 0;
    st->chol_potrs = getenv("DSOLVE_CHOL_POTRS") != NULL;
    const char *cl = getenv("DSOLVE_SWEEPS_CLUSTER");
    st->sweeps_cluster = cl ? atoi(cl) : 0;
    if (st->sweeps_cluster != 2 && st->sweeps_cluster != 4 && st->sweeps_cluster != 8 && st->sweeps_cluster != 16)
        st->sweeps_cluster = 0;
    const char *tx = getenv("DSOLVE_SWEEPS_TX");
    st->sweeps_tx = !(tx && strcmp(tx, "0") == 0);
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
    // ncclCommInitRank is collective and blocking: peers of a rank that fails inside it stay inside it,
    // beyond the reach of ctx_agree. So a failure there ends the job, with its message, on every rank.
    rc = nccl_init(ctx, st, id);
    if (rc != DS_OK) {
        fprintf(stderr, "dsolve: %s (ending the job)\n", ctx->msg.text);
        fflush(stderr);
        MPI_Abort(ctx->comm, rc);
    }
    return DS_OK;
}

static int cuda_open(ds_ctx *ctx)
{
    cuda_state *st = calloc(1, sizeof *st);
    ctx->be_state = st;
    int rc = st ? open_local(ctx, st) : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "cuda: out of host memory");
    if (rc == DS_OK)
        rc = cuda_pinned_limit(ctx, st);
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
    if (st->solver)
        cusolverDnDestroy(st->solver);
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
    cuda_stage_close(st);
    cudaFree(st->ptrs);
    cudaFree(st->trsv);
    cudaFree(st->trsv_work);
    if (st->trsv_ready)
        cudaEventDestroy(st->trsv_ready);
    cudaFree(st->scratch);
    cuda_keep_close(st);
    if (st->stream)
        cudaStreamDestroy(st->stream);
    free(st);
    ctx->be_state = NULL;
}

// ---------------------------------------------------------------------------------------------------
// Memory

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
int scratch_reserve(ds_ctx *ctx, size_t doubles, double **out)
{
    cuda_state *st = state(ctx);
    if (doubles > st->scratch_doubles) {
        cuda_release(ctx, st->scratch);  // waits: queued work may still use the old buffer
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

// The pairs with another rank as one NCCL group of send/recv (ncclChar, size_t counts, so any size);
// pairs with nothing to move are left out of the group.
static int nccl_pairs(ds_ctx *ctx, const void *send, const int64_t *scount, const int64_t *sdispl, void *recv,
                      const int64_t *rcount, const int64_t *rdispl)
{
    cuda_state *st = state(ctx);
    NCCL_CHECK(ctx, ncclGroupStart());
    for (int r = 0; r < ctx->nranks; r++) {
        const int other = r != ctx->rank;
        ncclResult_t rc = ncclSuccess;
        if (other && scount[r] > 0)
            rc = ncclSend((const char *)send + sdispl[r], (size_t)scount[r], ncclChar, r, st->nccl, st->stream);
        if (rc == ncclSuccess && other && rcount[r] > 0)
            rc = ncclRecv((char *)recv + rdispl[r], (size_t)rcount[r], ncclChar, r, st->nccl, st->stream);
        if (rc != ncclSuccess) {
            (void)ncclGroupEnd();
            return cuda_failed(ctx, "ncclSend/ncclRecv", ncclGetErrorString(rc), __FILE__, __LINE__);
        }
    }
    NCCL_CHECK(ctx, ncclGroupEnd());
    return DS_OK;
}

// The self part by a device copy, the rest by nccl_pairs. With other ranks the copy runs on a side
// stream forked from the stream and joined back after the group, so that it overlaps the transfers;
// all is done when the stream's work is done.
static int cuda_alltoallv(ds_ctx *ctx, const void *send, const int64_t *scount, const int64_t *sdispl, void *recv,
                          const int64_t *rcount, const int64_t *rdispl)
{
    cuda_state *st = state(ctx);
    const int me = ctx->rank;
    DS_ASSERT(scount[me] == rcount[me]);
    if (ctx->nranks > 1 && !st->nccl)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME,
                       "nccl: the communicator was aborted after an earlier failure (rank %d)", ctx->rank);
    const int fork = ctx->nranks > 1 && scount[me] > 0;
    cudaStream_t cs = fork ? st->side[0] : st->stream;
    if (fork) {
        CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
        CUDA_CHECK(ctx, cudaStreamWaitEvent(cs, st->fork, 0));
    }
    if (scount[me] > 0)
        CUDA_CHECK(ctx, cudaMemcpyAsync((char *)recv + rdispl[me], (const char *)send + sdispl[me], (size_t)scount[me],
                                        cudaMemcpyDeviceToDevice, cs));
    if (ctx->nranks == 1)
        return DS_OK;
    int rc = nccl_pairs(ctx, send, scount, sdispl, recv, rcount, rdispl);
    if (fork) {
        CUDA_CHECK(ctx, cudaEventRecord(st->join[0], cs));
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[0], 0));
    }
    return rc;
}

const ds_backend ds_backend_cuda = {
    .name = "cuda",
    .host_memory = 0,
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_release,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .fill = cuda_fill,
    .gather = cuda_gather,
    .sync = cuda_sync,
    .axpy = cuda_axpy,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stage = cuda_stage,
    .stage_2d = cuda_stage_2d,
    .stage_wait = cuda_stage_wait,
    .stage_release = cuda_stage_release,
    .mark = cuda_mark,
    .elapsed = cuda_elapsed,
    .allreduce_sum = cuda_allreduce_sum,
    .alltoallv = cuda_alltoallv,
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .device_name = cuda_device_name,
    .versions = cuda_versions,
    .costs = cuda_costs,
    .solve = &solve_ops_cuda,
    .ann = &ann_ops_cuda,
    .sort = &sort_ops_cuda,
    .logreg = &lr_ops_cuda,
    .bench = &bench_ops_cuda,
};
