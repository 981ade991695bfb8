// test_backend_ops_sort.c: test_backend_ops's cases of sort_ops (sort/sort.h), all exact: map, special,
// radix, iota, gather and fetch (sample, bounds, merge and check: test_backend_ops_sort_runs.c), and the keys
// of both files (the ops_key* and ops_kind* of backend_ops.h). Mapped keys (unsigned, 4 and 8 bytes)
// run on every backend against the CPU backend (gpu mode) or the loops here. Native keys of every type
// run where the backend under test takes them (native_ok), against the loops here: the CPU backend's
// steps take mapped keys only (and its special is a stub that always answers 1), so it is no reference
// there. Native keys avoid -0.0 and NaNs with the sign bit, where the library's own order differs.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "sort/sort.h"

const int64_t ops_sort_sizes[OPS_SORT_NSIZES] = {0, 1, 17, 1001, 130001};

uint64_t ops_key_get(const void *k, int w, int64_t i)
{
    return w == 4 ? ((const uint32_t *)k)[i] : ((const uint64_t *)k)[i];
}

void ops_key_set(void *k, int w, int64_t i, uint64_t v)
{
    if (w == 4)
        ((uint32_t *)k)[i] = (uint32_t)v;
    else
        ((uint64_t *)k)[i] = v;
}

uint64_t ops_order_key(const void *k, int w, int dtype, int desc, int64_t i)
{
    const uint64_t x = ops_key_get(k, w, i);
    if (dtype < 0)
        return x;
    return w == 4 ? sk_map32((uint32_t)x, dtype, desc) : sk_map64(x, dtype, desc);
}

// The plan's dtype for mapped keys of width w (the plan's buffers take their width from it).
static int mapped_dtype(int w)
{
    return w == 4 ? SORT_U32 : SORT_U64;
}

const char *ops_kind_name(const ops_kind *k)
{
    return k->dtype >= 0 ? sort_dtype_name(k->dtype) : k->w == 4 ? "u32" : "u64";
}

int ops_kinds(const ops_run *r, ops_kind *out)
{
    int n = 0;
    out[n++] = (ops_kind){4, -1, 0};
    out[n++] = (ops_kind){8, -1, 0};
    for (int t = 0; r->dut->be->sort->native_ok && t < SORT_NTYPES; t++)
        out[n++] = (ops_kind){sort_dtype_size(t), t, t % 2};
    return n;
}

ds_ctx *ops_kind_reference(const ops_run *r, const ops_kind *k)
{
    return k->dtype < 0 ? r->cpu : NULL;
}

void ops_keys_make(ops_run *r, void *keys, int64_t n, const ops_kind *k, int few)
{
    const uint64_t s = ops_stream(r);
    for (int64_t i = 0; i < n; i++) {
        uint64_t b = ops_bits(r, s, r->rank, i);
        if (few)
            b = (b % 7) * 0x0123456789ull;
        if (k->dtype == SORT_F32 || k->dtype == SORT_F64) {
            double v = few ? (double)(b % 7) - 3.0 : round(20.0 * (ops_uniform(r, s, r->rank, i) - 0.5)) / 2;
            const int special = (int)(b >> 60);
            v = special == 1 ? INFINITY : special == 2 ? -INFINITY : special == 3 ? NAN : v == 0 ? 0.0 : v;
            if (k->dtype == SORT_F32) {
                float f = (float)v;
                memcpy(&b, &f, 4);
            } else {
                memcpy(&b, &v, 8);
            }
        }
        ops_key_set(keys, k->w, i, b);
    }
}

typedef struct ref_entry {
    uint64_t key;
    int64_t i;
} ref_entry;

static int cmp_entry(const void *a, const void *b)
{
    const ref_entry *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

void ops_keys_sort(void *keys, int64_t *vals, int64_t n, const ops_kind *k)
{
    ref_entry *e = malloc((size_t)(n > 0 ? n : 1) * sizeof *e);
    void *kc = malloc((size_t)(n > 0 ? n : 1) * k->w);
    int64_t *vc = malloc((size_t)(n > 0 ? n : 1) * 8);
    for (int64_t i = 0; i < n; i++)
        e[i] = (ref_entry){ops_order_key(keys, k->w, k->dtype, k->desc, i), i};
    qsort(e, (size_t)n, sizeof *e, cmp_entry);
    memcpy(kc, keys, (size_t)n * k->w);
    if (vals)
        memcpy(vc, vals, (size_t)n * 8);
    for (int64_t i = 0; i < n; i++) {
        ops_key_set(keys, k->w, i, ops_key_get(kc, k->w, e[i].i));
        if (vals)
            vals[i] = vc[e[i].i];
    }
    free(e), free(kc), free(vc);
}

int ops_sort_plan(ds_ctx *c, const ops_kind *k, const void *keys, int64_t n, sort_plan *p)
{
    sort_opts o = {.dtype = k->dtype >= 0 ? k->dtype : mapped_dtype(k->w), .descending = k->desc, .argsort = 1};
    return ops_ran(c, sort_plan_init(c, p, &o, keys, NULL, n), "sort_plan_init");
}

// ---------------------------------------------------------------------------------------------------
// map, special

static int map_on(ds_ctx *c, const void *src, int64_t n, int dtype, int desc, int inverse, int in_place, void *out)
{
    ops_mem m = {c};
    const size_t bytes = (size_t)n * sort_dtype_size(dtype);
    void *s = ops_put(&m, src, bytes), *d = in_place ? s : ops_new(&m, bytes);
    int rc = ops_ran(c, c->be->sort->map(c, d, s, n, dtype, desc, inverse), "sort.map");
    ops_get(&m, out, d, bytes);
    ops_release(&m);
    return rc;
}

// dst = map(src) or unmap(src) of random bits (every NaN and sign pattern), in place and not.
void case_sort_map(ops_run *r)
{
    for (int t = 0; t < SORT_NTYPES; t++)
        for (int v = 0; v < 4; v++) {
            const int desc = v & 1, inverse = v >> 1, w = sort_dtype_size(t);
            const int64_t n = ops_dim(r, ops_sort_sizes[(t + v) % OPS_SORT_NSIZES]);
            const ops_kind k = {w, -1, 0};
            ops_mem h = {NULL};
            void *src = ops_new(&h, (size_t)n * w), *got = ops_new(&h, (size_t)n * w),
                 *want = ops_new(&h, (size_t)n * w);
            ops_keys_make(r, src, n, &k, 0);
            int st = map_on(r->dut, src, n, t, desc, inverse, v % 3 == 0, got);
            if (r->cpu) {
                st |= map_on(r->cpu, src, n, t, desc, inverse, v % 3 == 0, want);
            } else {
                for (int64_t i = 0; i < n; i++) {
                    const uint64_t x = ops_key_get(src, w, i);
                    ops_key_set(want, w, i,
                            w == 4 ? (inverse ? sk_unmap32((uint32_t)x, t, desc) : sk_map32((uint32_t)x, t, desc))
                                   : (inverse ? sk_unmap64(x, t, desc) : sk_map64(x, t, desc)));
                }
            }
            char shape[64], extra[48];
            snprintf(extra, sizeof extra, "%s%s%s", inverse ? ", unmap" : ", map", desc ? ", descending" : "",
                     v % 3 == 0 ? ", in place" : "");
            ops_shape_n(shape, sizeof shape, n, extra);
            ops_report(r, "sort.map", shape, sort_dtype_name(t), ops_err_bytes(got, want, n, w), 0, st);
            ops_release(&h);
        }
}

static int special_on(ds_ctx *c, const ops_kind *k, const void *keys, int64_t n, int *any)
{
    ops_mem m = {c};
    const void *d = ops_put(&m, keys, (size_t)n * k->w);
    sort_plan p;
    int rc = ops_sort_plan(c, k, d, n, &p);
    if (rc == DS_OK)
        rc = ops_ran(c, c->be->sort->special(c, &p, d, n, k->dtype, any), "sort.special");
    sort_plan_free(c, &p);
    ops_release(&m);
    return rc;
}

// *any: whether a float key is -0.0 or a NaN with its sign bit (keys without them, with one of each).
void case_sort_special(ops_run *r)
{
    if (!r->dut->be->sort->native_ok) {
        ops_skip(r, "sort.special", "asked only where native_ok (the CPU's is a stub that answers 1)");
        return;
    }
    for (int t = SORT_F32; t <= SORT_F64; t++)
        for (int v = 0; v < 6; v++) {  // none, one -0.0, one -NaN; on sizes of 1 or more
            const ops_kind k = {sort_dtype_size(t), t, 0};
            const int64_t n = ops_dim(r, ops_sort_sizes[1 + v % (OPS_SORT_NSIZES - 1)]), at = n / 2;
            ops_mem h = {NULL};
            void *keys = ops_new(&h, (size_t)n * k.w);
            ops_keys_make(r, keys, n, &k, v % 2);
            const int which = v % 3;
            if (which)
                ops_key_set(keys, k.w, at, k.w == 4 ? (which == 1 ? 0x80000000ull : 0xffc00000ull)
                                               : (which == 1 ? 0x8000000000000000ull : 0xfff8000000000000ull));
            int any = -1;
            int st = special_on(r->dut, &k, keys, n, &any);
            char shape[64];
            ops_shape_n(shape, sizeof shape, n, which == 0 ? ", none" : which == 1 ? ", one -0.0" : ", one -NaN");
            ops_report(r, "sort.special", shape, sort_dtype_name(t), any == (which != 0) ? 0.0 : INFINITY, 0, st);
            ops_release(&h);
        }
}

// ---------------------------------------------------------------------------------------------------
// radix

typedef struct radix_in {
    ops_kind k;
    int64_t n;
    int with_vals, sel0;
    const void *keys;
    const int64_t *vals;
} radix_in;

// The keys into the plan's k[sel0] (values into g[pos[sel0]]), the sort, and the result back.
static int radix_on(ds_ctx *c, const radix_in *in, void *keys, int64_t *vals)
{
    const int pos[2][2] = {{0, 1}, {2, 1}};
    const int *ps = pos[in->sel0];
    sort_plan p;
    int rc = ops_sort_plan(c, &in->k, NULL, in->n, &p), sel = in->sel0;
    ops_mem m = {c};
    if (rc == DS_OK) {
        ops_upload(c, p.k[sel], in->keys, (size_t)in->n * in->k.w);
        if (in->with_vals)
            ops_upload(c, p.g[ps[sel]], in->vals, (size_t)in->n * 8);
        rc = ops_ran(
            c, c->be->sort->radix(c, &p, in->n, in->k.w, in->k.dtype, in->k.desc, &sel, in->with_vals ? ps : NULL),
            "sort.radix");
        ops_get(&m, keys, p.k[sel], (size_t)in->n * in->k.w);
        if (in->with_vals)
            ops_get(&m, vals, p.g[ps[sel]], (size_t)in->n * 8);
    }
    sort_plan_free(c, &p);
    return rc;
}

// A stable sort: the keys and, with values, the values (distinct, so a tie out of order shows).
void case_sort_radix(ops_run *r)
{
    ops_kind kinds[OPS_MAX_KINDS];
    const int nk = ops_kinds(r, kinds);
    for (int q = 0; q < nk; q++)
        for (int s = 0; s < OPS_SORT_NSIZES; s++) {
            if (q >= 2 && s != (q + 1) % OPS_SORT_NSIZES && s != OPS_SORT_NSIZES - 1)
                continue;  // native types: two sizes each
            const ops_kind k = kinds[q];
            radix_in in = {k, ops_dim(r, ops_sort_sizes[s]), s % 4 != 3, s % 2};
            const int few = s % 3 == 1;
            ops_mem h = {NULL};
            void *keys = ops_new(&h, (size_t)in.n * k.w), *got = ops_new(&h, (size_t)in.n * k.w);
            void *want = ops_new(&h, (size_t)in.n * k.w);
            int64_t *vals = ops_new(&h, (size_t)in.n * 8), *gv = ops_new(&h, (size_t)in.n * 8),
                    *wv = ops_new(&h, (size_t)in.n * 8);
            ops_keys_make(r, keys, in.n, &k, few);
            for (int64_t i = 0; i < in.n; i++)
                vals[i] = 1000003 * r->rank + i;
            in.keys = keys, in.vals = vals;
            int st = radix_on(r->dut, &in, got, gv);
            ds_ctx *ref = ops_kind_reference(r, &k);
            if (ref) {
                st |= radix_on(ref, &in, want, wv);
            } else {
                memcpy(want, keys, (size_t)in.n * k.w);
                memcpy(wv, vals, (size_t)in.n * 8);
                ops_keys_sort(want, in.with_vals ? wv : NULL, in.n, &k);
            }
            double err = ops_err_bytes(got, want, in.n, k.w);
            if (in.with_vals)
                err = fmax(err, ops_err_bytes(gv, wv, in.n, 8));
            char shape[96];
            snprintf(shape, sizeof shape, "n %lld%s%s%s, from k[%d]", (long long)in.n, few ? ", few values" : "",
                     k.dtype >= 0 ? (k.desc ? ", native descending" : ", native") : "", in.with_vals ? ", values" : "",
                     in.sel0);
            ops_report(r, "sort.radix", shape, ops_kind_name(&k), err, 0, st);
            ops_release(&h);
        }
}

// ---------------------------------------------------------------------------------------------------
// iota, gather

static int iota_on(ds_ctx *c, int64_t n, int64_t start, int64_t *out)
{
    ops_mem m = {c};
    int64_t *x = ops_new(&m, (size_t)n * 8);
    int rc = ops_ran(c, c->be->sort->iota(c, x, n, start), "sort.iota");
    ops_get(&m, out, x, (size_t)n * 8);
    ops_release(&m);
    return rc;
}

// x[i] = start + i.
void case_sort_iota(ops_run *r)
{
    for (int s = 0; s < OPS_SORT_NSIZES; s++) {
        const int64_t n = ops_dim(r, ops_sort_sizes[s]), start = s % 2 ? -((int64_t)1 << 40) + s : 3 * s;
        ops_mem h = {NULL};
        int64_t *got = ops_new(&h, (size_t)n * 8), *want = ops_new(&h, (size_t)n * 8);
        int st = iota_on(r->dut, n, start, got);
        if (r->cpu) {
            st |= iota_on(r->cpu, n, start, want);
        } else {
            for (int64_t i = 0; i < n; i++)
                want[i] = start + i;
        }
        char shape[64], extra[40];
        snprintf(extra, sizeof extra, ", start %lld", (long long)start);
        ops_shape_n(shape, sizeof shape, n, extra);
        ops_report(r, "sort.iota", shape, "i64", ops_err_bytes(got, want, n, 8), 0, st);
        ops_release(&h);
    }
}

static int gather_on(ds_ctx *c, const void *src, int64_t srcn, const int64_t *idx, int64_t base, int64_t n, int size,
                     void *out)
{
    ops_mem m = {c};
    const void *s = ops_put(&m, src, (size_t)srcn * size);
    const int64_t *id = ops_put(&m, idx, (size_t)n * 8);
    void *d = ops_new(&m, (size_t)n * size);
    int rc = ops_ran(c, c->be->sort->gather(c, d, s, id, base, n, size), "sort.gather");
    ops_get(&m, out, d, (size_t)n * size);
    ops_release(&m);
    return rc;
}

// dst[i] = src[idx[i] − base] of 4- and 8-byte elements.
void case_sort_gather(ops_run *r)
{
    for (int s = 0; s < OPS_SORT_NSIZES; s++)
        for (int size = 4; size <= 8; size += 4) {
            const int64_t n = ops_dim(r, ops_sort_sizes[s]), srcn = n / 2 + 1, base = s * 1000003;
            const ops_kind k = {size, -1, 0};
            ops_mem h = {NULL};
            void *src = ops_new(&h, (size_t)srcn * size), *got = ops_new(&h, (size_t)n * size);
            void *want = ops_new(&h, (size_t)n * size);
            int64_t *idx = ops_new(&h, (size_t)n * 8);
            ops_keys_make(r, src, srcn, &k, 0);
            const uint64_t stream = ops_stream(r);
            for (int64_t i = 0; i < n; i++)
                idx[i] = base + (int64_t)(ops_bits(r, stream, r->rank, i) % (uint64_t)srcn);
            int st = gather_on(r->dut, src, srcn, idx, base, n, size, got);
            if (r->cpu) {
                st |= gather_on(r->cpu, src, srcn, idx, base, n, size, want);
            } else {
                for (int64_t i = 0; i < n; i++)
                    ops_key_set(want, size, i, ops_key_get(src, size, idx[i] - base));
            }
            char shape[64], extra[40];
            snprintf(extra, sizeof extra, " of %lld, base %lld", (long long)srcn, (long long)base);
            ops_shape_n(shape, sizeof shape, n, extra);
            ops_report(r, "sort.gather", shape, size == 4 ? "u32" : "u64", ops_err_bytes(got, want, n, size), 0, st);
            ops_release(&h);
        }
}


// sort.fetch: host bytes from backend memory, queued, read after the queue is synced.
static int fetch_on(ds_ctx *c, const void *src, int64_t bytes, void *out)
{
    ops_mem m = {c};
    const void *s = ops_put(&m, src, (size_t)bytes);
    int rc = ops_ran(c, c->be->sort->fetch(c, out, s, (size_t)bytes), "sort.fetch");
    if (rc == DS_OK)
        rc = ops_ran(c, c->be->sync(c), "sync");
    ops_release(&m);
    return rc;
}

void case_sort_fetch(ops_run *r)
{
    for (int s = 0; s < OPS_SORT_NSIZES; s++) {
        const int64_t n = ops_dim(r, ops_sort_sizes[s]);
        const ops_kind k = {8, -1, 0};
        ops_mem h = {NULL};
        void *src = ops_new(&h, (size_t)n * 8), *got = ops_new(&h, (size_t)n * 8);
        ops_keys_make(r, src, n, &k, 0);
        int st = fetch_on(r->dut, src, n * 8, got);
        char shape[64];
        ops_shape_n(shape, sizeof shape, n, "");
        ops_report(r, "sort.fetch", shape, "u64", ops_err_bytes(got, src, n, 8), 0, st);
        ops_release(&h);
    }
}
