// test_backend_ops_sort_runs.c: test_backend_ops's cases of the sort_ops over sorted runs (sort/sort.h),
// all exact: sample, bounds, merge, and check (over any keys); mapped keys against the CPU backend (gpu
// mode) or the loops here, native keys against the loops here (test_backend_ops_sort.c says why).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_ops.h"
#include "sort/sort.h"

// ---------------------------------------------------------------------------------------------------
// sample, bounds (host outputs, over sorted keys)

// n sorted keys of kind k (few: with ties), in backend memory of c through m.
static void sorted_keys(ops_run *r, ops_mem *h, const ops_kind *k, int64_t n, int few, void **keys)
{
    *keys = ops_new(h, (size_t)n * k->w);
    ops_keys_make(r, *keys, n, k, few);
    ops_keys_sort(*keys, NULL, n, k);
}

static int sample_on(ds_ctx *c, const ops_kind *k, const void *keys, int64_t n, int64_t s, uint64_t *out)
{
    ops_mem m = {c};
    const void *d = ops_put(&m, keys, (size_t)n * k->w);
    sort_plan p;
    int rc = ops_sort_plan(c, k, d, n, &p);
    if (rc == DS_OK)
        rc = ops_ran(c, c->be->sort->sample(c, &p, d, n, k->w, k->dtype >= 0, s, out), "sort.sample");
    sort_plan_free(c, &p);
    ops_release(&m);
    return rc;
}

// out[i] = the order key at ⌊i·n/s⌋, for s up to 256 (fewer than the plan's samples).
void case_sort_sample(ops_run *r)
{
    ops_kind kinds[OPS_MAX_KINDS];
    const int nk = ops_kinds(r, kinds);
    for (int q = 0; q < nk; q++)
        for (int v = 0; v < 3; v++) {
            const ops_kind k = kinds[q];
            const int64_t n = ops_dim(r, ops_sort_sizes[(q + 2 * v) % OPS_SORT_NSIZES]),
                          s = v == 0 ? (n < 7 ? n : 7) : (n < 256 ? n : 256);
            ops_mem h = {NULL};
            void *keys;
            sorted_keys(r, &h, &k, n, v == 1, &keys);
            uint64_t *got = ops_new(&h, (size_t)s * 8), *want = ops_new(&h, (size_t)s * 8);
            int st = sample_on(r->dut, &k, keys, n, s, got);
            ds_ctx *ref = ops_kind_reference(r, &k);
            if (ref) {
                st |= sample_on(ref, &k, keys, n, s, want);
            } else {
                for (int64_t i = 0; i < s; i++)
                    want[i] = ops_order_key(keys, k.w, k.dtype, k.desc, i * n / s);
            }
            char shape[64], extra[40];
            snprintf(extra, sizeof extra, ", %lld samples%s%s", (long long)s, v == 1 ? ", few values" : "",
                     k.dtype >= 0 ? ", native" : "");
            ops_shape_n(shape, sizeof shape, n, extra);
            ops_report(r, "sort.sample", shape, ops_kind_name(&k), ops_err_bytes(got, want, s, 8), 0, st);
            ops_release(&h);
        }
}

static int bounds_on(ds_ctx *c, const ops_kind *k, const void *keys, int64_t n, const uint64_t *split, int ns, int64_t *lo,
                     int64_t *hi)
{
    ops_mem m = {c};
    const void *d = ops_put(&m, keys, (size_t)n * k->w);
    sort_plan p;
    int rc = ops_sort_plan(c, k, d, n, &p);
    if (rc == DS_OK)
        rc = ops_ran(c, c->be->sort->bounds(c, &p, d, n, k->w, k->dtype >= 0, split, ns, lo, hi), "sort.bounds");
    sort_plan_free(c, &p);
    ops_release(&m);
    return rc;
}

// lo[i], hi[i] = the first position whose order key is ≥, > split[i]; splitters present in the keys
// (ties), absent, and the extremes. As many as ranks: the plan's buffer holds that many.
void case_sort_bounds(ops_run *r)
{
    ops_kind kinds[OPS_MAX_KINDS];
    const int nk = ops_kinds(r, kinds), ns = r->nranks;
    for (int q = 0; q < nk; q++)
        for (int v = 0; v < 3; v++) {
            const ops_kind k = kinds[q];
            const int64_t n = ops_dim(r, ops_sort_sizes[(q + 2 * v + 1) % OPS_SORT_NSIZES]);
            ops_mem h = {NULL};
            void *keys;
            sorted_keys(r, &h, &k, n, v != 2, &keys);
            uint64_t *split = ops_new(&h, (size_t)ns * 8);
            int64_t *lo = ops_new(&h, (size_t)(2 * ns) * 8), *hi = lo + ns, *wlo = ops_new(&h, (size_t)(2 * ns) * 8);
            int64_t *whi = wlo + ns;
            const uint64_t stream = ops_stream(r), top = k.w == 4 ? 0xffffffffull : ~0ull;
            for (int i = 0; i < ns; i++) {
                const uint64_t b = ops_bits(r, stream, OPS_SHARED, i);
                const int64_t at = n > 0 ? (int64_t)(b % (uint64_t)n) : 0;
                const uint64_t x = n > 0 ? ops_order_key(keys, k.w, k.dtype, k.desc, at) : b & top;
                split[i] = i % 4 == 0 ? x : i % 4 == 1 ? (x + 1) & top : i % 4 == 2 ? 0 : top;
            }
            int st = bounds_on(r->dut, &k, keys, n, split, ns, lo, hi);
            ds_ctx *ref = ops_kind_reference(r, &k);
            if (ref) {
                st |= bounds_on(ref, &k, keys, n, split, ns, wlo, whi);
            } else {
                for (int i = 0; i < ns; i++) {
                    wlo[i] = whi[i] = 0;
                    for (int64_t j = 0; j < n; j++) {
                        const uint64_t x = ops_order_key(keys, k.w, k.dtype, k.desc, j);
                        wlo[i] += x < split[i];
                        whi[i] += x <= split[i];
                    }
                }
            }
            char shape[64], extra[40];
            snprintf(extra, sizeof extra, ", %d splitters%s%s", ns, v != 2 ? ", few values" : "",
                     k.dtype >= 0 ? ", native" : "");
            ops_shape_n(shape, sizeof shape, n, extra);
            ops_report(r, "sort.bounds", shape, ops_kind_name(&k), ops_err_bytes(lo, wlo, 2 * ns, 8), 0, st);
            ops_release(&h);
        }
}

// ---------------------------------------------------------------------------------------------------
// merge, check

typedef struct merge_in {
    ops_kind k;
    int64_t na, nb;
    int tags;
    const void *a, *b;
} merge_in;

static int merge_on(ds_ctx *c, const merge_in *in, void *out, int64_t *tout)
{
    const int w = in->k.w;
    const int64_t n = in->na + in->nb;
    ops_mem m = {c}, h = {NULL};
    const void *a = ops_put(&m, in->a, (size_t)in->na * w), *b = ops_put(&m, in->b, (size_t)in->nb * w);
    void *o = ops_new(&m, (size_t)n * w);
    int64_t *tag = ops_new(&h, (size_t)n * 8), *pa = NULL, *pb = NULL, *po = NULL;
    for (int64_t i = 0; i < n; i++)
        tag[i] = i;  // a's tags before b's, as the received runs' positions are
    if (in->tags) {
        pa = ops_put(&m, tag, (size_t)in->na * 8);
        pb = ops_put(&m, tag + in->na, (size_t)in->nb * 8);
        po = ops_new(&m, (size_t)n * 8);
    }
    sort_plan p;
    int rc = ops_sort_plan(c, &in->k, NULL, n, &p);
    if (rc == DS_OK)
        rc = ops_ran(c, c->be->sort->merge(c, &p, a, in->na, b, in->nb, o, w, in->k.dtype >= 0, pa, pb, po),
                     "sort.merge");
    ops_get(&m, out, o, (size_t)n * w);
    if (in->tags)
        ops_get(&m, tout, po, (size_t)n * 8);
    sort_plan_free(c, &p);
    ops_release(&m);
    ops_release(&h);
    return rc;
}

// A stable merge by order key (a first on ties), with and without tags; runs drawn from few values,
// so that ties between them are many.
void case_sort_merge(ops_run *r)
{
    const int64_t shapes[][2] = {{0, 0}, {0, 5}, {17, 0}, {1, 1}, {1001, 130}, {30001, 29999}};
    ops_kind kinds[OPS_MAX_KINDS];
    const int nk = ops_kinds(r, kinds);
    for (int q = 0; q < nk; q++)
        for (int s = 0; s < 6; s++) {
            if (q >= 2 && s != (q + 1) % 6 && s != 5)
                continue;  // native types: two shapes each
            const ops_kind k = kinds[q];
            merge_in in = {k, shapes[s][0] ? ops_dim(r, shapes[s][0]) : 0, shapes[s][1] ? ops_dim(r, shapes[s][1]) : 0,
                           s % 3 != 2};
            const int64_t n = in.na + in.nb;
            ops_mem h = {NULL};
            void *a, *b, *got = ops_new(&h, (size_t)n * k.w), *want = ops_new(&h, (size_t)n * k.w);
            int64_t *gt = ops_new(&h, (size_t)n * 8), *wt = ops_new(&h, (size_t)n * 8);
            sorted_keys(r, &h, &k, in.na, 1, &a);
            sorted_keys(r, &h, &k, in.nb, 1, &b);
            in.a = a, in.b = b;
            int st = merge_on(r->dut, &in, got, gt);
            ds_ctx *ref = ops_kind_reference(r, &k);
            if (ref) {
                st |= merge_on(ref, &in, want, wt);
            } else {
                int64_t i = 0, j = 0, o = 0;
                while (i < in.na || j < in.nb) {
                    const int take_b = i == in.na || (j < in.nb && ops_order_key(b, k.w, k.dtype, k.desc, j) <
                                                                       ops_order_key(a, k.w, k.dtype, k.desc, i));
                    ops_key_set(want, k.w, o, take_b ? ops_key_get(b, k.w, j) : ops_key_get(a, k.w, i));
                    wt[o++] = take_b ? in.na + j++ : i++;
                }
            }
            double err = ops_err_bytes(got, want, n, k.w);
            if (in.tags)
                err = fmax(err, ops_err_bytes(gt, wt, n, 8));
            char shape[64];
            snprintf(shape, sizeof shape, "%lld + %lld%s%s", (long long)in.na, (long long)in.nb,
                     in.tags ? ", tags" : "", k.dtype >= 0 ? ", native" : "");
            ops_report(r, "sort.merge", shape, ops_kind_name(&k), err, 0, st);
            ops_release(&h);
        }
}

static int check_on(ds_ctx *c, const ops_kind *k, const void *keys, int64_t n, uint64_t out[4])
{
    ops_mem m = {c};
    const void *d = ops_put(&m, keys, (size_t)n * k->w);
    sort_plan p;
    int rc = ops_sort_plan(c, k, d, n, &p);
    if (rc == DS_OK)
        rc = ops_ran(c, c->be->sort->check(c, &p, d, n, k->dtype, k->desc, out), "sort.check");
    sort_plan_free(c, &p);
    ops_release(&m);
    return rc;
}

// Over native keys of every type, sorted or not: out-of-order pairs, the hash sum, the first and last
// order keys. Every backend takes native keys here.
void case_sort_check(ops_run *r)
{
    for (int t = 0; t < SORT_NTYPES; t++)
        for (int v = 0; v < 4; v++) {
            const ops_kind k = {sort_dtype_size(t), t, v & 1};
            const int64_t n = ops_dim(r, ops_sort_sizes[(t + v) % OPS_SORT_NSIZES]);
            ops_mem h = {NULL};
            void *keys;
            if (v >= 2) {
                sorted_keys(r, &h, &k, n, v == 3, &keys);
            } else {
                keys = ops_new(&h, (size_t)n * k.w);
                ops_keys_make(r, keys, n, &k, v == 1);
            }
            uint64_t got[4] = {0}, want[4] = {0};
            int st = check_on(r->dut, &k, keys, n, got);
            if (r->cpu) {
                st |= check_on(r->cpu, &k, keys, n, want);
            } else {
                for (int64_t i = 0; i < n; i++) {
                    const uint64_t x = ops_order_key(keys, k.w, t, k.desc, i);
                    want[1] += sk_hash(x);
                    want[0] += i + 1 < n && ops_order_key(keys, k.w, t, k.desc, i + 1) < x;
                }
                want[2] = n > 0 ? ops_order_key(keys, k.w, t, k.desc, 0) : 0;
                want[3] = n > 0 ? ops_order_key(keys, k.w, t, k.desc, n - 1) : 0;
            }
            char shape[64];
            ops_shape_n(shape, sizeof shape, n, v >= 2 ? (k.desc ? ", sorted descending" : ", sorted") : ", unsorted");
            ops_report(r, "sort.check", shape, sort_dtype_name(t), ops_err_bytes(got, want, 4, 8), 0, st);
            ops_release(&h);
        }
}
