// backend_cuda_stage.c: the CUDA backend's staging of streamed inputs (pinned host memory, copies on a
// stream of their own that overlap the compute stream's work, ordered by events per slot) and axpy.
// backend.h states the contracts; core/rows.c drives them.
// provides: cuda_axpy, cuda_pinned_limit, cuda_host_alloc, cuda_host_free, cuda_stage, cuda_stage_2d, cuda_stage_wait, cuda_stage_release,
//           cuda_stage_close
#include "backend/backend_cuda.h"
#include "cli/opts.h"  // opts_parse_size

int cuda_axpy(ds_ctx *ctx, double *y, const double *x, int64_t n, double alpha)
{
    if (n <= 0)
        return DS_OK;
    CUBLAS_CHECK(ctx, cublasDaxpy_64(state(ctx)->blas, n, &alpha, x, 1, y, 1));
    return DS_OK;
}

int cuda_pinned_limit(ds_ctx *ctx, cuda_state *st)
{
    const char *v = getenv("DSOLVE_PINNED_LIMIT");
    st->pinned_limit = 0;
    if (!v || !*v)
        return DS_OK;
    if (opts_parse_size(v, &st->pinned_limit) != DS_OK || st->pinned_limit < 1)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "DSOLVE_PINNED_LIMIT must be a size of at least 1 byte (bytes, or a "
                       "number with K, M, G or T: 64M), not \"%s\"", v);
    return DS_OK;
}

int cuda_host_alloc(ds_ctx *ctx, void **ptr, size_t bytes)
{
    *ptr = NULL;
    const double limit = state(ctx)->pinned_limit;
    const char *why = "DSOLVE_PINNED_LIMIT";
    if (!(limit > 0 && (double)bytes > limit)) {
        cudaError_t rc = cudaHostAlloc(ptr, bytes ? bytes : 64, cudaHostAllocDefault);
        if (rc == cudaSuccess)
            return DS_OK;
        (void)cudaGetLastError();  // an allocation failure is not sticky
        *ptr = NULL;
        why = cudaGetErrorString(rc);
    }
    // The size as read: bytes below a MiB (the staging of a few rows), else MiB or GiB.
    char size[48];
    if (bytes < (1 << 20))
        snprintf(size, sizeof size, "%zu bytes", bytes);
    else if ((double)bytes < GIB)
        snprintf(size, sizeof size, "%.1f MiB", (double)bytes / (1 << 20));
    else
        snprintf(size, sizeof size, "%.2f GiB", (double)bytes / GIB);
    return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "cuda: out of pinned host memory allocating %s on rank %d (%s)", size,
                   ctx->rank, why);
}

void cuda_host_free(ds_ctx *ctx, void *ptr)
{
    if (!ptr)
        return;
    (void)cuda_wait(ctx, NULL);  // a copy from it may still be queued
    if (state(ctx)->copy)
        (void)cudaStreamSynchronize(state(ctx)->copy);
    cudaFreeHost(ptr);
}

// The copy stream and the slots' events, on first use.
static int stage_open(ds_ctx *ctx, cuda_state *st)
{
    if (st->copy)
        return DS_OK;
    CUDA_CHECK(ctx, cudaStreamCreateWithFlags(&st->copy, cudaStreamNonBlocking));
    for (int i = 0; i < DS_STAGES; i++) {
        CUDA_CHECK(ctx, cudaEventCreateWithFlags(&st->staged[i], cudaEventDisableTiming));
        CUDA_CHECK(ctx, cudaEventCreateWithFlags(&st->released[i], cudaEventDisableTiming));
        st->release_pending[i] = 0;
    }
    return DS_OK;
}

// A stage into slot comes after the work that read the slot's last chunk (before) and before the
// work queued after it (after).
static int stage_before(ds_ctx *ctx, cuda_state *st, int slot)
{
    DS_ASSERT(slot >= 0 && slot < DS_STAGES);
    DS_CHECK(stage_open(ctx, st));
    if (st->release_pending[slot])
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->copy, st->released[slot], 0));
    st->release_pending[slot] = 0;
    return DS_OK;
}

static int stage_after(ds_ctx *ctx, cuda_state *st, int slot)
{
    CUDA_CHECK(ctx, cudaEventRecord(st->staged[slot], st->copy));
    CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->staged[slot], 0));
    return DS_OK;
}

int cuda_stage(ds_ctx *ctx, int slot, void *dst, const void *src, size_t bytes)
{
    cuda_state *st = state(ctx);
    DS_CHECK(stage_before(ctx, st, slot));
    if (bytes)
        CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st->copy));
    return stage_after(ctx, st, slot);
}

int cuda_stage_2d(ds_ctx *ctx, int slot, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                  size_t height)
{
    cuda_state *st = state(ctx);
    DS_CHECK(stage_before(ctx, st, slot));
    if (width && height)
        CUDA_CHECK(ctx, cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyHostToDevice, st->copy));
    return stage_after(ctx, st, slot);
}

int cuda_stage_wait(ds_ctx *ctx, int slot)
{
    DS_ASSERT(slot >= 0 && slot < DS_STAGES);
    cuda_state *st = state(ctx);
    return st->copy ? cuda_wait(ctx, st->staged[slot]) : DS_OK;
}

int cuda_stage_release(ds_ctx *ctx, int slot)
{
    DS_ASSERT(slot >= 0 && slot < DS_STAGES);
    cuda_state *st = state(ctx);
    DS_CHECK(stage_open(ctx, st));
    CUDA_CHECK(ctx, cudaEventRecord(st->released[slot], st->stream));
    st->release_pending[slot] = 1;
    return DS_OK;
}

void cuda_stage_close(cuda_state *st)
{
    if (!st->copy)
        return;
    (void)cudaStreamSynchronize(st->copy);
    for (int i = 0; i < DS_STAGES; i++) {
        cudaEventDestroy(st->staged[i]);
        cudaEventDestroy(st->released[i]);
    }
    cudaStreamDestroy(st->copy);
    st->copy = NULL;
}
