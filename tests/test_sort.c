// test_sort.c: `dsolve sort`'s algorithm against a reference (qsort on (mapped key, position), so the
// expected order is the stable one): every distribution × key type, descending, --argsort and
// --values, ±0.0/NaN/±inf keys, tiny inputs (0 keys on some ranks, 1 key, fewer keys than ranks).
// Mode "cpu" (default): the CPU backend. Mode "gpu": the CUDA backend on the same cases and larger
// ones, plus a sort of more than 2^31 int32 keys checked by sort_check; exits 77 without a GPU per rank.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data.h"
#include "harness.h"
#include "sort.h"

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
    for (int t = SORT_F32; t <= SORT_F64; t++)
        for (int desc = 0; desc < 2; desc++) {
            int64_t N = 2000 * scale + 1;
            void *all = special_floats(t, N, seed);
            sort_opts o = {.dtype = t, .descending = desc, .argsort = 1, .val_size = 4};
            snprintf(what, sizeof what, "%s ±0/NaN/inf%s (%s)", sort_dtype_name(t), desc ? " descending" : "", ctx->be->name);
            run_case(ctx, all, N, &o, what);
            free(all);
        }
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
        sort_plan_free(ctx, &p);
    }
    ctx->be->free(ctx, d);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    if (gpu && !test_gpus_for_all()) {
        if (rank == 0)
            printf("test_sort: skipped: not every rank has a GPU of its own\n");
        MPI_Finalize();
        return 77;
    }
    uint64_t seed = test_seed(gpu ? "test_sort gpu" : "test_sort cpu");
    ds_ctx ctx;
    int rc = ctx_open(&ctx, MPI_COMM_WORLD, gpu ? "cuda" : "cpu");
    CHECK(rc == DS_OK, "ctx: %s", ctx.msg.text);
    if (rc == DS_OK) {
        cpu_and_gpu_cases(&ctx, seed, 1);
        if (gpu) {
            cpu_and_gpu_cases(&ctx, seed + 1, 100);  // 300k keys: many CUB tiles and merge partitions
            big_case(&ctx, seed);
        }
    }
    ctx_close(&ctx);
    int status = test_finish(gpu ? "test_sort gpu" : "test_sort cpu");
    MPI_Finalize();
    return status;
}
