// sort_cuda.c: the CUDA backend's sort steps (sort_ops_cuda), host side: CUB through kernels/sort.cu on
// the backend's stream, scratch from the plan (grown only when a call needs more), small results
// through the plan's device buffer. Waits only where a result is read on the host.
// provides: sort_ops_cuda
#include "backend/backend_cuda.h"
#include "sort/sort.h"

#include "sort/sort_kernels.h"

static cudaStream_t stream(ds_ctx *ctx) { return state(ctx)->stream; }

// The plan's small device buffer: samples, then splitters, bounds and counters.
static uint64_t *small_at(sort_plan *p, int64_t words)
{
    DS_ASSERT((words + 8) * 8 <= p->small_bytes);
    return (uint64_t *)p->small + words;
}

// How the kernels map keys for comparison: native keys by the plan's type and direction; mapped keys
// are unsigned ascending already (the identity map of the same width).
static void key_order(const sort_plan *p, int w, int native, int *dtype, int *desc)
{
    *dtype = native ? p->o.dtype : w == 4 ? SORT_U32 : SORT_U64;
    *desc = native ? p->o.descending : 0;
    DS_ASSERT(sort_dtype_size(*dtype) == w);
}

static int cu_map(ds_ctx *ctx, void *dst, const void *src, int64_t n, int dtype, int desc, int inverse)
{
    CUDA_CHECK(ctx, ds_ks_map(dst, src, n, dtype, desc, inverse, stream(ctx)));
    return DS_OK;
}

static int cu_special(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int dtype, int *any)
{
    unsigned long long *count = (unsigned long long *)small_at(p, 0), host = 0;
    CUDA_CHECK(ctx, cudaMemsetAsync(count, 0, sizeof *count, stream(ctx)));
    CUDA_CHECK(ctx, ds_ks_special(keys, n, dtype, count, stream(ctx)));
    DS_CHECK(ctx->be->download(ctx, &host, count, sizeof host));
    *any = host > 0;
    return DS_OK;
}

static int cu_radix(ds_ctx *ctx, sort_plan *p, int64_t n, int w, int native_dtype, int desc, int *sel,
                    const int pos[2])
{
    if (n <= 0)
        return DS_OK;
    int64_t *v0 = pos ? p->g[pos[0]] : NULL, *v1 = pos ? p->g[pos[1]] : NULL;
    size_t bytes = 0;
    CUDA_CHECK(ctx, ds_ks_radix(NULL, &bytes, p->k[0], p->k[1], v0, v1, n, w, native_dtype, desc, sel, stream(ctx)));
    DS_CHECK(sort_tmp_reserve(ctx, p, bytes));
    bytes = p->tmp_bytes;
    CUDA_CHECK(ctx, ds_ks_radix(p->tmp, &bytes, p->k[0], p->k[1], v0, v1, n, w, native_dtype, desc, sel, stream(ctx)));
    return DS_OK;
}

static int cu_iota(ds_ctx *ctx, int64_t *x, int64_t n, int64_t start)
{
    CUDA_CHECK(ctx, ds_ks_iota(x, n, start, stream(ctx)));
    return DS_OK;
}

static int cu_gather(ds_ctx *ctx, void *dst, const void *src, const int64_t *idx, int64_t base, int64_t n, int size)
{
    CUDA_CHECK(ctx, ds_ks_gather(dst, src, idx, base, n, size, stream(ctx)));
    return DS_OK;
}

static int cu_sample(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int w, int native, int64_t s,
                     uint64_t *out)
{
    if (s <= 0)
        return DS_OK;
    uint64_t *d = small_at(p, 0);
    DS_ASSERT(s <= p->samples);
    int dtype, desc;
    key_order(p, w, native, &dtype, &desc);
    CUDA_CHECK(ctx, ds_ks_sample(keys, dtype, desc, n, s, d, stream(ctx)));
    return ctx->be->download(ctx, out, d, (size_t)s * 8);
}

static int cu_bounds(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int w, int native, const uint64_t *split,
                     int ns, int64_t *lo, int64_t *hi)
{
    if (ns <= 0)
        return DS_OK;
    int dtype, desc;
    key_order(p, w, native, &dtype, &desc);
    uint64_t *ds = small_at(p, p->samples);
    int64_t *dlo = (int64_t *)small_at(p, p->samples + ns), *dhi = (int64_t *)small_at(p, p->samples + 2 * ns);
    DS_CHECK(ctx->be->upload(ctx, ds, split, (size_t)ns * 8));
    CUDA_CHECK(ctx, ds_ks_bounds(keys, dtype, desc, n, ds, ns, dlo, dhi, stream(ctx)));
    DS_CHECK(ctx->be->download(ctx, lo, dlo, (size_t)ns * 8));
    return ctx->be->download(ctx, hi, dhi, (size_t)ns * 8);
}

static int cu_merge(ds_ctx *ctx, sort_plan *p, const void *a, int64_t na, const void *b, int64_t nb, void *out, int w,
                    int native, const int64_t *pa, const int64_t *pb, int64_t *pout)
{
    int dtype, desc;
    key_order(p, w, native, &dtype, &desc);
    size_t bytes = 0;
    CUDA_CHECK(ctx, ds_ks_merge(NULL, &bytes, a, na, b, nb, out, dtype, desc, pa, pb, pout, stream(ctx)));
    DS_CHECK(sort_tmp_reserve(ctx, p, bytes));
    bytes = p->tmp_bytes;
    CUDA_CHECK(ctx, ds_ks_merge(p->tmp, &bytes, a, na, b, nb, out, dtype, desc, pa, pb, pout, stream(ctx)));
    return DS_OK;
}

static int cu_fetch(ds_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream(ctx)));
    return DS_OK;
}

static int cu_check(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int dtype, int desc, uint64_t out[4])
{
    unsigned long long *d = (unsigned long long *)small_at(p, 0);
    CUDA_CHECK(ctx, cudaMemsetAsync(d, 0, 4 * sizeof *d, stream(ctx)));
    CUDA_CHECK(ctx, ds_ks_check(keys, n, dtype, desc, d, stream(ctx)));
    return ctx->be->download(ctx, out, d, 4 * sizeof *d);
}

const sort_ops sort_ops_cuda = {
    .native_ok = 1,
    .map = cu_map,
    .special = cu_special,
    .radix = cu_radix,
    .iota = cu_iota,
    .gather = cu_gather,
    .sample = cu_sample,
    .bounds = cu_bounds,
    .merge = cu_merge,
    .check = cu_check,
    .fetch = cu_fetch,
};
