// backend_cuda_mem.c: the CUDA backend's device allocations. cudaMalloc and cudaFree of large blocks are
// slow (measured on one H200 of a 4-GPU machine, 2026-11-28: cudaFree of qr's 8 GB work took 6.7 ms
// alone and 19.9 ms with four ranks, of 32 GB 29 ms: a tenth of a 4 M × 1 000 qr solve; cudaMalloc 1.3 to
// 3.4 ms), so one freed block of at least KEEP_MIN bytes is kept, as caching allocators keep theirs, and
// handed to the next allocation it fits (at most twice as large as asked). The kept block is given back
// before any other allocation of KEEP_MIN or more (so the memory held never passes the largest use
// before it by more than small blocks: a grown scratch frees its old block first, as before), when an
// allocation runs out of memory (then retried) and when the backend closes; the solve methods' memory
// plans count it as free (cuda_kept_bytes).
// provides: cuda_alloc, cuda_release, cuda_kept_bytes, cuda_keep_close
#include "backend/backend_cuda.h"

#define KEEP_MIN ((size_t)256 << 20)

// The large blocks handed out and not yet released (a block not listed here is freed, never kept).
static int big_find(const cuda_state *st, const void *p)
{
    for (int i = 0; i < st->nbig; i++)
        if (st->big[i].ptr == p)
            return i;
    return -1;
}

// A block freed by cudaFree elsewhere leaves its entry behind: an address cudaMalloc hands out again
// replaces it.
static void big_add(cuda_state *st, void *p, size_t bytes)
{
    const int i = big_find(st, p);
    if (i >= 0)
        st->big[i] = st->big[--st->nbig];
    if (bytes >= KEEP_MIN && st->nbig < CUDA_BIG_BLOCKS)
        st->big[st->nbig++] = (cuda_block){p, bytes};
}

static void keep_drop(cuda_state *st)
{
    cudaFree(st->keep.ptr);
    st->keep = (cuda_block){NULL, 0};
}

int cuda_alloc(ds_ctx *ctx, void **ptr, size_t bytes)
{
    cuda_state *st = state(ctx);
    *ptr = NULL;
    if (bytes == 0)
        return DS_OK;
    // Whole 256-byte units, cudaMalloc's own granularity: NCCL's LL broadcast reads a buffer's last
    // partial 4-byte word whole (compute-sanitizer memcheck reported it past a 19-byte allocation).
    bytes = (bytes + 255) & ~(size_t)255;
    if (st && st->keep.ptr && bytes >= KEEP_MIN && st->keep.bytes >= bytes && st->keep.bytes / 2 <= bytes) {
        *ptr = st->keep.ptr;
        big_add(st, st->keep.ptr, st->keep.bytes);
        st->keep = (cuda_block){NULL, 0};
        return DS_OK;
    }
    if (st && st->keep.ptr && bytes >= KEEP_MIN)  // a large block it does not fit: the kept one goes first
        keep_drop(st);
    cudaError_t rc = cudaMalloc(ptr, bytes);
    if (rc == cudaErrorMemoryAllocation && st && st->keep.ptr) {  // the kept block first, then again
        (void)cudaGetLastError();
        keep_drop(st);
        rc = cudaMalloc(ptr, bytes);
    }
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
    if (st)
        big_add(st, *ptr, bytes);
    return DS_OK;
}

// The side streams and the staging copy stream done too: cudaFree synchronized the whole device, a
// block kept instead must not be handed out while work on any stream may still touch it.
static void wait_other_streams(ds_ctx *ctx, cuda_state *st)
{
    if (!st->fork)
        return;
    for (int i = 0; i <= GRAM_STREAMS; i++) {
        cudaStream_t s = i < GRAM_STREAMS ? st->side[i] : st->copy;
        if (s && cudaEventRecord(st->fork, s) == cudaSuccess)
            (void)cuda_wait(ctx, st->fork);
    }
}

void cuda_release(ds_ctx *ctx, void *ptr)
{
    if (!ptr)
        return;
    cuda_state *st = state(ctx);
    (void)cuda_wait(ctx, NULL);  // queued work may still use it; and cudaFree synchronizes the device
    const int i = st ? big_find(st, ptr) : -1;
    if (i < 0) {
        cudaFree(ptr);
        return;
    }
    const cuda_block b = st->big[i];
    st->big[i] = st->big[--st->nbig];
    wait_other_streams(ctx, st);
    if (st->keep.ptr && st->keep.bytes >= b.bytes) {  // the larger of the two stays
        cudaFree(b.ptr);
        return;
    }
    if (st->keep.ptr)
        keep_drop(st);
    st->keep = b;
}

size_t cuda_kept_bytes(const cuda_state *st)
{
    return st ? st->keep.bytes : 0;
}

void cuda_keep_close(cuda_state *st)
{
    keep_drop(st);
    st->nbig = 0;
}
