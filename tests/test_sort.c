// test_sort.c: `dsolve sort`'s algorithm against a reference (qsort on (mapped key, position), so the
// expected order is the stable one): every distribution × key type, descending, --argsort and
// --values, ±0.0/NaN/±inf keys, tiny inputs (0 keys on some ranks, 1 key, fewer keys than ranks), and
// the path each run took: native keys on the CUDA backend unless some rank holds -0.0 or a negative
// NaN (then mapped on every rank), mapped always on the CPU backend.
// Mode "cpu" (default): the CPU backend. Mode "gpu": the CUDA backend on the same cases and larger
// ones, plus a sort of more than 2^31 int32 keys checked by sort_check; exits 77 without a GPU per rank.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/data.h"
#include "harness.h"
#include "sort/sort.h"

typedef struct ref {
    uint64_t key;
    int64_t idx;
} ref;

static int cmp_ref(const void *a, const void *b)
{
    const ref *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static uint64_t mapped(const void *k, int dtype, int desc, int64_t i)
{
    return sort_dtype_size(dtype) == 4 ? sk_map32(((const uint32_t *)k)[i], dtype, desc)
                                       : sk_map64(((const uint64_t *)k)[i], dtype, desc);
}

static uint64_t value_of(int64_t i) { return (uint64_t)i * 2654435761u + 17; }

// 1 when a float key is -0.0 or a NaN with its sign bit set (where CUB's order differs from ours).
static int has_special(const void *k, int64_t N, int dtype)
{
    for (int64_t i = 0; i < N && (dtype == SORT_F32 || dtype == SORT_F64); i++) {
        uint64_t x = dtype == SORT_F32 ? ((const uint32_t *)k)[i] : ((const uint64_t *)k)[i];
        uint64_t top = dtype == SORT_F32 ? 0x80000000ull : 0x8000000000000000ull;
        uint64_t inf = dtype == SORT_F32 ? 0x7f800000ull : 0x7ff0000000000000ull;
        if (x == top || ((x & top) && (x & ~top) > inf))
            return 1;
    }
    return 0;
}

// The path every rank must report: native where the backend sorts native keys and no key is special.
static int expected_native(ds_ctx *ctx, const void *all, int64_t N, int dtype)
{
    return ctx->be->sort->native_ok && !has_special(all, N, dtype);
}

// This rank's result, gathered on rank 0 (small sizes only). n_all gets the total.
static void *gather_bytes(ds_ctx *ctx, const void *dev, int64_t n, int size, int64_t *n_all)
{
    void *h = malloc((size_t)(n > 0 ? n : 1) * size);
    if (n > 0)
        CHECK(ctx->be->download(ctx, h, dev, (size_t)n * size) == DS_OK, "download: %s", ctx->msg.text);
    int cnt = (int)(n * size), *cnts = malloc(ctx->nranks * sizeof(int)), *dsp = malloc(ctx->nranks * sizeof(int));
    MPI_Gather(&cnt, 1, MPI_INT, cnts, 1, MPI_INT, 0, ctx->comm);
    int total = 0;
    for (int r = 0; ctx->rank == 0 && r < ctx->nranks; r++) {
        dsp[r] = total;
        total += cnts[r];
    }
    void *all = malloc(total > 0 ? (size_t)total : 1);
    MPI_Gatherv(h, cnt, MPI_BYTE, all, cnts, dsp, MPI_BYTE, 0, ctx->comm);
    *n_all = total / size;
    free(h);
    free(cnts);
    free(dsp);
    return all;
}

static void *to_backend(ds_ctx *ctx, const void *h, size_t bytes)
{
    if (ctx->be->host_memory)
        return (void *)h;
    void *d = NULL;
    CHECK(ctx->be->alloc(ctx, &d, bytes ? bytes : 8) == DS_OK, "alloc: %s", ctx->msg.text);
    CHECK(ctx->be->upload(ctx, d, h, bytes) == DS_OK, "upload: %s", ctx->msg.text);
    return d;
}

// Rank 0 compares the gathered output with the reference order of the whole input.
static void compare(const void *all, int64_t N, const sort_opts *o, const void *keys, const int64_t *perm,
                    const void *vals, const char *what)
{
    const int w = sort_dtype_size(o->dtype);
    ref *r = malloc((size_t)(N > 0 ? N : 1) * sizeof *r);
    for (int64_t i = 0; i < N; i++)
        r[i] = (ref){mapped(all, o->dtype, o->descending, i), i};
    qsort(r, (size_t)N, sizeof *r, cmp_ref);
    int64_t bad_k = 0, bad_p = 0, bad_v = 0, first = -1;
    for (int64_t i = 0; i < N; i++) {
        int kb = mapped(keys, o->dtype, o->descending, i) != r[i].key;
        // bits as stored: a NaN comes back with its sign dropped, so compare the mapped forms and,
        // for every other key, the exact bits
        if (!kb && memcmp((const char *)keys + i * w, (const char *)all + r[i].idx * w, (size_t)w) != 0) {
            uint64_t asc = o->descending ? ~r[i].key & (w == 4 ? 0xffffffffull : ~0ull) : r[i].key;
            kb = !(asc > (w == 4 ? 0xff800000ull : 0xfff0000000000000ull));
        }
        bad_k += kb;
        if (perm)
            bad_p += perm[i] != r[i].idx;
        if (vals)
            bad_v += o->val_size == 8 ? ((const uint64_t *)vals)[i] != value_of(r[i].idx)
                                      : ((const uint32_t *)vals)[i] != (uint32_t)value_of(r[i].idx);
        if ((bad_k || bad_p || bad_v) && first < 0)
            first = i;
    }
    CHECK(bad_k == 0 && bad_p == 0 && bad_v == 0, "%s: %lld keys, %lld permutation entries, %lld values differ of %lld (first at %lld)",
          what, (long long)bad_k, (long long)bad_p, (long long)bad_v, (long long)N, (long long)first);
    free(r);
}

// Sorts the global input `all` (N keys, identical on every rank) split by data_partition.
static void run_case(ds_ctx *ctx, const void *all, int64_t N, const sort_opts *o, const char *what)
{
    const int w = sort_dtype_size(o->dtype);
    int64_t i0, n;
    data_partition(N, ctx->nranks, ctx->rank, &i0, &n);
    void *hv = NULL;
    if (o->val_size) {
        hv = malloc((size_t)(n > 0 ? n : 1) * o->val_size);
        for (int64_t i = 0; i < n; i++) {
            if (o->val_size == 8)
                ((uint64_t *)hv)[i] = value_of(i0 + i);
            else
                ((uint32_t *)hv)[i] = (uint32_t)value_of(i0 + i);
        }
    }
    void *dk = to_backend(ctx, (const char *)all + i0 * w, (size_t)n * w);
    void *dv = o->val_size ? to_backend(ctx, hv, (size_t)n * o->val_size) : NULL;
    sort_plan p;
    sort_result r;
    int rc = sort_plan_init(ctx, &p, o, dk, dv, n);
    for (int rep = 0; rc == DS_OK && rep < 2; rep++)  // twice: the second run reuses the plan
        rc = sort_run(ctx, &p, &r);
    CHECK(rc == DS_OK, "%s: sort_run: %s", what, ctx->msg.text);
    if (rc == DS_OK)
        CHECK(r.path_native == expected_native(ctx, all, N, o->dtype), "%s: rank %d took the %s path", what,
              ctx->rank, r.path_native ? "native" : "mapped");
    int ok = 0;
    char why[256] = "";
    if (rc == DS_OK) {
        CHECK(sort_check(ctx, &p, &r, &ok, why, sizeof why) == DS_OK && ok, "%s: sort_check: %s %s", what, why,
              ctx->msg.text);
        int64_t nk, np_, nv;
        void *keys = gather_bytes(ctx, r.keys, r.n, w, &nk);
        void *perm = o->argsort ? gather_bytes(ctx, r.perm, r.n, 8, &np_) : NULL;
        void *vals = o->val_size ? gather_bytes(ctx, r.vals, r.n, o->val_size, &nv) : NULL;
        if (ctx->rank == 0) {
            CHECK_EQ_INT(nk, N, what);
            if (nk == N)
                compare(all, N, o, keys, perm, vals, what);
        }
        free(keys);
        free(perm);
        free(vals);
    }
    sort_plan_free(ctx, &p);
    if (!ctx->be->host_memory) {
        ctx->be->free(ctx, dk);
        ctx->be->free(ctx, dv);
    }
    free(hv);
}

// ±0.0, ±inf, NaNs of both signs, denormals and ordinary values, shuffled by the generator.
static void *special_floats(int dtype, int64_t N, uint64_t seed)
{
    const int w = sort_dtype_size(dtype);
    char *k = malloc((size_t)N * w);
    sort_gen_keys(dtype, DIST_GAUSS, seed, N, 0, N, k, 1);
    const double pick[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1e-310, -1e-310, 1.0, -1.0};
    for (int64_t i = 0; i < N; i += 3) {
        double x = pick[(i / 3 * 7 + seed) % 10];
        if (w == 4) {
            float f = x == 1e-310 ? 1e-40f : x == -1e-310 ? -1e-40f : (float)x;
            memcpy(k + i * 4, &f, 4);
        } else {
            memcpy(k + i * 8, &x, 8);
        }
    }
    return k;
}

static void put_bits(void *k, int64_t i, int w, uint64_t bits)
{
    if (w == 4)
        ((uint32_t *)k)[i] = (uint32_t)bits;
    else
        ((uint64_t *)k)[i] = bits;
}

// ±inf, +NaNs of several payloads (quiet and signalling), +0.0, denormals and ordinary values: special
// to IEEE but ordered alike by CUB and by us, so the CUDA backend sorts them natively.
static void *clean_floats(int dtype, int64_t N, uint64_t seed)
{
    const int w = sort_dtype_size(dtype);
    char *k = malloc((size_t)N * w);
    sort_gen_keys(dtype, DIST_GAUSS, seed, N, 0, N, k, 1);
    const uint32_t b32[] = {0x00000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7fc00001u,
                            0x7f800001u, 0x00000001u, 0x80000001u, 0x3f800000u, 0xbf800000u};
    const uint64_t b64[] = {0, 0x7ff0000000000000ull, 0xfff0000000000000ull, 0x7ff8000000000000ull,
                            0x7ff8000000000001ull, 0x7ff0000000000001ull, 1, 0x8000000000000001ull,
                            0x3ff0000000000000ull, 0xbff0000000000000ull};
    for (int64_t i = 0; i < N; i += 3) {
        int j = (int)((i / 3 * 7 + seed) % 10);
        put_bits(k, i, w, w == 4 ? b32[j] : b64[j]);
    }
    return k;
}

// Float keys of both kinds: with -0.0 and -NaN throughout (mapped path), without (native on the GPU),
// and without but for one -0.0 on the last rank or one -NaN on the first (every rank must go mapped).
static void float_cases(ds_ctx *ctx, uint64_t seed, int64_t scale)
{
    char what[160];
    for (int t = SORT_F32; t <= SORT_F64; t++)
        for (int desc = 0; desc < 2; desc++) {
            const int w = sort_dtype_size(t);
            int64_t N = 2000 * scale + 1;
            sort_opts o = {.dtype = t, .descending = desc, .argsort = 1, .val_size = 4};
            void *all = special_floats(t, N, seed);
            snprintf(what, sizeof what, "%s ±0/NaN/inf%s on %d ranks (%s)", sort_dtype_name(t), desc ? " descending" : "",
                     ctx->nranks, ctx->be->name);
            run_case(ctx, all, N, &o, what);
            free(all);
            all = clean_floats(t, N, seed);
            o.val_size = desc ? 0 : 8;
            snprintf(what, sizeof what, "%s +0/+NaN/inf%s on %d ranks (%s)", sort_dtype_name(t), desc ? " descending" : "",
                     ctx->nranks, ctx->be->name);
            run_case(ctx, all, N, &o, what);
            const uint64_t neg_nan = w == 4 ? 0xffc00000ull : 0xfff8000000000000ull;
            const uint64_t neg_zero = w == 4 ? 0x80000000ull : 0x8000000000000000ull;
            put_bits(all, desc ? 0 : N - 1, w, desc ? neg_nan : neg_zero);
            o.argsort = !desc;
            snprintf(what, sizeof what, "%s +0/+NaN/inf and one %s%s on %d ranks (%s)", sort_dtype_name(t),
                     desc ? "-NaN first" : "-0.0 last", desc ? " descending" : "", ctx->nranks, ctx->be->name);
            run_case(ctx, all, N, &o, what);
            free(all);
        }
}

static void cpu_and_gpu_cases(ds_ctx *ctx, uint64_t seed, int64_t scale)
{
    static const char *dists[] = {"uniform", "sorted", "reverse", "equal", "few-unique", "zipf", "gaussian", "staggered"};
    char what[160];
    for (int t = 0; t < SORT_NTYPES; t++)
        for (int d = 0; d < 8; d++) {
            int64_t N = 3000 * scale + 7 * d + t;
            void *all = malloc((size_t)N * sort_dtype_size(t));
            sort_gen_keys(t, d, seed + (uint64_t)d, N, 0, N, all, 2);
            sort_opts o = {.dtype = t, .descending = d % 3 == 1, .argsort = d % 2, .val_size = d % 4 == 1 ? 8 : d % 4 == 3 ? 4 : 0};
            snprintf(what, sizeof what, "%s %s N=%lld%s%s%s on %d ranks (%s)", sort_dtype_name(t), dists[d], (long long)N,
                     o.descending ? " descending" : "", o.argsort ? " argsort" : "", o.val_size ? " values" : "",
                     ctx->nranks, ctx->be->name);
            run_case(ctx, all, N, &o, what);
            free(all);
        }
    // Ties in descending order with the permutation and values: stability of every path.
    for (int t = 0; t < SORT_NTYPES; t++) {
        int64_t N = 2500 * scale + 3;
        void *all = malloc((size_t)N * sort_dtype_size(t));
        sort_gen_keys(t, DIST_FEW, seed + 11, N, 0, N, all, 2);
        sort_opts o = {.dtype = t, .descending = 1, .argsort = 1, .val_size = 8};
        snprintf(what, sizeof what, "%s few-unique N=%lld descending argsort values on %d ranks (%s)", sort_dtype_name(t),
                 (long long)N, ctx->nranks, ctx->be->name);
        run_case(ctx, all, N, &o, what);
        free(all);
    }
    float_cases(ctx, seed, scale);
    // Tiny inputs: fewer keys than ranks (ranks with none), one key, two equal keys.
    const int64_t tiny[] = {1, 2, 3, 5, 9};
    for (int i = 0; i < 5; i++) {
        int64_t N = tiny[i];
        int32_t k[9] = {5, 5, -1, 7, 5, INT32_MIN, INT32_MAX, 0, 5};
        sort_opts o = {.dtype = SORT_I32, .argsort = 1, .val_size = 8};
        snprintf(what, sizeof what, "int32 N=%lld on %d ranks (%s)", (long long)N, ctx->nranks, ctx->be->name);
        run_case(ctx, k, N, &o, what);
        o.argsort = 0;
        o.val_size = 0;
        run_case(ctx, k, N, &o, what);
    }
}

// More than 2^31 int32 keys in all (per rank too with one rank), checked by sort_check.
static void big_case(ds_ctx *ctx, uint64_t seed)
{
    const int64_t N = ((int64_t)1 << 31) + 4099;
    int64_t i0, n;
    data_partition(N, ctx->nranks, ctx->rank, &i0, &n);
    void *h = malloc((size_t)n * 4);
    sort_gen_keys(SORT_I32, DIST_UNIFORM, seed, N, i0, n, h, sort_threads(ctx));
    void *d = to_backend(ctx, h, (size_t)n * 4);
    free(h);
    for (int desc = 0; desc < 2; desc++) {
        sort_opts o = {.dtype = SORT_I32, .descending = desc};
        sort_plan p;
        sort_result r;
        int rc = sort_plan_init(ctx, &p, &o, d, NULL, n), ok = 0;
        if (rc == DS_OK)
            rc = sort_run(ctx, &p, &r);
        char why[256] = "";
        if (rc == DS_OK)
            rc = sort_check(ctx, &p, &r, &ok, why, sizeof why);
        CHECK(rc == DS_OK && ok, "2^31 + 4099 int32 keys%s: %s %s", desc ? " descending" : "", why, ctx->msg.text);
        if (rc == DS_OK)
            CHECK(r.path_native == ctx->be->sort->native_ok, "2^31 + 4099 int32 keys%s: the %s path",
                  desc ? " descending" : "", r.path_native ? "native" : "mapped");
        sort_plan_free(ctx, &p);
    }
    ctx->be->free(ctx, d);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    const char *name = gpu ? "test_sort gpu" : "test_sort cpu";
    ds_ctx ctx;
    int rc = test_open_pair(name, gpu ? NULL : &ctx, gpu ? &ctx : NULL);
    if (rc == 77) {
        MPI_Finalize();
        return 77;
    }
    uint64_t seed = test_seed(name);
    if (rc == 0) {
        cpu_and_gpu_cases(&ctx, seed, 1);
        if (gpu) {
            cpu_and_gpu_cases(&ctx, seed + 1, 100);  // 300k keys: many CUB tiles and merge partitions
            big_case(&ctx, seed);
        }
    }
    ctx_close(&ctx);
    rc = test_finish(name);
    MPI_Finalize();
    return rc;
}
