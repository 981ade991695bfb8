// sort_cpu.c: the CPU backend's sort steps (sort_ops_cpu): a multi-threaded stable LSD radix sort
// (8-bit digits, passes whose digit is the same for all keys skipped), a stable two-way merge, and
// threaded maps, gathers and checks over host memory.
// provides: sort_ops_cpu
#include <stdlib.h>
#include <string.h>

#include "core/par.h"
#include "sort/sort.h"

enum { MAX_THREADS = PAR_MAX_THREADS, RADIX = 256 };

// The threads of a pass over n keys: one below 32 768 keys; part t of P covers [n·t/P, n·(t+1)/P).
static int pfor_threads(int threads, int64_t n)
{
    if (n < 32768)
        return 1;
    return threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
}

static uint64_t key_at(const void *k, int w, int64_t i)
{
    return w == 4 ? ((const uint32_t *)k)[i] : ((const uint64_t *)k)[i];
}

// ---------------------------------------------------------------------------------------------------
// Maps, iota, gather

typedef struct map_arg {
    void *dst;
    const void *src;
    int dtype, desc, inverse;
} map_arg;

static void map_range(void *p, int t, int64_t a, int64_t b)
{
    const map_arg *m = p;
    if (sort_dtype_size(m->dtype) == 4) {
        const uint32_t *s = m->src;
        uint32_t *d = m->dst;
        for (int64_t i = a; i < b; i++)
            d[i] = m->inverse ? sk_unmap32(s[i], m->dtype, m->desc) : sk_map32(s[i], m->dtype, m->desc);
    } else {
        const uint64_t *s = m->src;
        uint64_t *d = m->dst;
        for (int64_t i = a; i < b; i++)
            d[i] = m->inverse ? sk_unmap64(s[i], m->dtype, m->desc) : sk_map64(s[i], m->dtype, m->desc);
    }
}

static int cpu_map(ds_ctx *ctx, void *dst, const void *src, int64_t n, int dtype, int desc, int inverse)
{
    map_arg m = {dst, src, dtype, desc, inverse};
    par_for(pfor_threads(sort_threads(ctx), n), n, 1, map_range, &m);
    return DS_OK;
}

static int cpu_special(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int dtype, int *any)
{
    *any = 1;  // the CPU path always maps; never asked
    return DS_OK;
}

static int cpu_iota(ds_ctx *ctx, int64_t *x, int64_t n, int64_t start)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = start + i;
    return DS_OK;
}

typedef struct gather_arg {
    void *dst;
    const void *src;
    const int64_t *idx;
    int64_t base;
    int size;
} gather_arg;

static void gather_range(void *p, int t, int64_t a, int64_t b)
{
    const gather_arg *g = p;
    if (g->size == 4)
        for (int64_t i = a; i < b; i++)
            ((uint32_t *)g->dst)[i] = ((const uint32_t *)g->src)[g->idx[i] - g->base];
    else
        for (int64_t i = a; i < b; i++)
            ((uint64_t *)g->dst)[i] = ((const uint64_t *)g->src)[g->idx[i] - g->base];
}

static int cpu_gather(ds_ctx *ctx, void *dst, const void *src, const int64_t *idx, int64_t base, int64_t n, int size)
{
    gather_arg g = {dst, src, idx, base, size};
    par_for(pfor_threads(sort_threads(ctx), n), n, 1, gather_range, &g);
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// LSD radix sort

typedef struct radix_arg {
    const void *src;
    void *dst;
    const int64_t *psrc;
    int64_t *pdst;
    int w, shift;
    int64_t (*hist)[RADIX];  // [threads][RADIX]: counts, then each thread's first output position
} radix_arg;

static void hist_range(void *p, int t, int64_t a, int64_t b)
{
    radix_arg *r = p;
    int64_t *h = r->hist[t];
    memset(h, 0, RADIX * sizeof *h);
    if (r->w == 4)
        for (int64_t i = a; i < b; i++)
            h[(((const uint32_t *)r->src)[i] >> r->shift) & 0xff]++;
    else
        for (int64_t i = a; i < b; i++)
            h[(((const uint64_t *)r->src)[i] >> r->shift) & 0xff]++;
}

static void scatter_range(void *p, int t, int64_t a, int64_t b)
{
    radix_arg *r = p;
    int64_t *o = r->hist[t];
    if (r->w == 4) {
        const uint32_t *s = r->src;
        uint32_t *d = r->dst;
        for (int64_t i = a; i < b; i++) {
            int64_t at = o[(s[i] >> r->shift) & 0xff]++;
            d[at] = s[i];
            if (r->pdst)
                r->pdst[at] = r->psrc[i];
        }
    } else {
        const uint64_t *s = r->src;
        uint64_t *d = r->dst;
        for (int64_t i = a; i < b; i++) {
            int64_t at = o[(s[i] >> r->shift) & 0xff]++;
            d[at] = s[i];
            if (r->pdst)
                r->pdst[at] = r->psrc[i];
        }
    }
}

// Turns per-thread counts into per-thread output positions; 0 when one digit holds every key (the
// pass would move nothing).
static int radix_offsets(int64_t (*h)[RADIX], int threads, int64_t n)
{
    int64_t at = 0;
    for (int d = 0; d < RADIX; d++) {
        int64_t total = 0;
        for (int t = 0; t < threads; t++)
            total += h[t][d];
        if (total == n)
            return 0;
        for (int t = 0; t < threads; t++) {
            int64_t c = h[t][d];
            h[t][d] = at;
            at += c;
        }
    }
    return 1;
}

static int cpu_radix(ds_ctx *ctx, sort_plan *p, int64_t n, int w, int native_dtype, int desc, int *sel,
                     const int pos[2])
{
    DS_ASSERT(native_dtype < 0);
    const int threads = pfor_threads(p->threads, n);
    int64_t(*hist)[RADIX] = malloc((size_t)threads * sizeof *hist);
    if (!hist)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int cur = *sel;
    for (int shift = 0; shift < 8 * w; shift += 8) {
        radix_arg r = {p->k[cur], p->k[1 - cur], pos ? p->g[pos[cur]] : NULL, pos ? p->g[pos[1 - cur]] : NULL,
                       w, shift, hist};
        par_for(threads, n, 1, hist_range, &r);
        if (!radix_offsets(hist, threads, n))
            continue;
        par_for(threads, n, 1, scatter_range, &r);
        cur = 1 - cur;
    }
    free(hist);
    *sel = cur;
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// Samples, bounds, merge, check

static int cpu_sample(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int w, int native, int64_t s,
                      uint64_t *out)
{
    DS_ASSERT(!native);
    for (int64_t k = 0; k < s; k++)
        out[k] = key_at(keys, w, k * n / s);
    return DS_OK;
}

// First position whose key is > x (upper) or ≥ x.
static int64_t search(const void *keys, int w, int64_t n, uint64_t x, int upper)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        uint64_t k = key_at(keys, w, mid);
        if (k < x || (upper && k == x))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int cpu_bounds(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int w, int native, const uint64_t *split,
                      int ns, int64_t *lo, int64_t *hi)
{
    DS_ASSERT(!native);
    for (int i = 0; i < ns; i++) {
        lo[i] = search(keys, w, n, split[i], 0);
        hi[i] = search(keys, w, n, split[i], 1);
    }
    return DS_OK;
}

#define MERGE_BODY(T)                                              \
    do {                                                           \
        const T *x = a, *y = b;                                    \
        T *o = out;                                                \
        int64_t i = 0, j = 0, k = 0;                               \
        while (i < na && j < nb) {                                 \
            int take_b = y[j] < x[i];                              \
            if (pout)                                              \
                pout[k] = take_b ? pb[j] : pa[i];                  \
            o[k++] = take_b ? y[j++] : x[i++];                     \
        }                                                          \
        for (; i < na; i++, k++) {                                 \
            o[k] = x[i];                                           \
            if (pout)                                              \
                pout[k] = pa[i];                                   \
        }                                                          \
        for (; j < nb; j++, k++) {                                 \
            o[k] = y[j];                                           \
            if (pout)                                              \
                pout[k] = pb[j];                                   \
        }                                                          \
    } while (0)

// Runs come in rank order, so every tag of a is below every tag of b: taking a on ties is the tag order.
static int cpu_merge(ds_ctx *ctx, sort_plan *p, const void *a, int64_t na, const void *b, int64_t nb, void *out,
                     int w, int native, const int64_t *pa, const int64_t *pb, int64_t *pout)
{
    DS_ASSERT(!native);
    if (w == 4)
        MERGE_BODY(uint32_t);
    else
        MERGE_BODY(uint64_t);
    return DS_OK;
}

typedef struct check_arg {
    const void *keys;
    int64_t n;
    int dtype, desc;
    uint64_t part[MAX_THREADS][2];  // inversions, checksum
} check_arg;

static uint64_t mapped_at(const check_arg *c, int64_t i)
{
    return sort_dtype_size(c->dtype) == 4 ? sk_map32(((const uint32_t *)c->keys)[i], c->dtype, c->desc)
                                          : sk_map64(((const uint64_t *)c->keys)[i], c->dtype, c->desc);
}

static void check_range(void *p, int t, int64_t a, int64_t b)
{
    check_arg *c = p;
    uint64_t inv = 0, sum = 0;
    for (int64_t i = a; i < b; i++) {
        uint64_t k = mapped_at(c, i);
        sum += sk_hash(k);
        if (i + 1 < c->n)
            inv += mapped_at(c, i + 1) < k;
    }
    c->part[t][0] = inv;
    c->part[t][1] = sum;
}

static int cpu_fetch(ds_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memcpy(dst, src, bytes);
    return DS_OK;
}

static int cpu_check(ds_ctx *ctx, sort_plan *p, const void *keys, int64_t n, int dtype, int desc, uint64_t out[4])
{
    check_arg *c = calloc(1, sizeof *c);
    if (!c)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    *c = (check_arg){.keys = keys, .n = n, .dtype = dtype, .desc = desc};
    const int threads = pfor_threads(sort_threads(ctx), n);
    par_for(threads, n, 1, check_range, c);
    out[0] = out[1] = 0;
    for (int t = 0; t < threads; t++) {
        out[0] += c->part[t][0];
        out[1] += c->part[t][1];
    }
    out[2] = n > 0 ? mapped_at(c, 0) : 0;
    out[3] = n > 0 ? mapped_at(c, n - 1) : 0;
    free(c);
    return DS_OK;
}

const sort_ops sort_ops_cpu = {
    .native_ok = 0,
    .map = cpu_map,
    .special = cpu_special,
    .radix = cpu_radix,
    .iota = cpu_iota,
    .gather = cpu_gather,
    .sample = cpu_sample,
    .bounds = cpu_bounds,
    .merge = cpu_merge,
    .check = cpu_check,
    .fetch = cpu_fetch,
};
