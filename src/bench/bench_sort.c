// bench_sort.c: the sort case of `dsolve bench`: the distributed sample sort (sort.h) of uniform int32
// keys on the CPU and the GPU backends, each result verified (order within and across ranks, count,
// checksum against the input) and the GPU's keys compared bitwise with the CPU's; the seed's sort
// (the peer) timed in the same run when --peer is given.
// provides: bench_case_sort
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/data.h"
#include "sort/sort.h"

typedef struct sort_shape {
    int64_t n_all, i0, n_local;  // keys in all; this rank's first global position and count
} sort_shape;

static void sort_shape_of(const bench_run *b, int64_t size, sort_shape *s)
{
    s->n_all = b->weak ? size * b->cpu.nranks : size;
    data_partition(s->n_all, b->cpu.nranks, b->cpu.rank, &s->i0, &s->n_local);
}

static int sort_need(bench_run *b, int64_t size, double *host, double *dev, ds_msg *msg)
{
    sort_shape s;
    sort_shape_of(b, size, &s);
    if (!b->weak && size < b->cpu.nranks)
        return ds_fail(msg, DS_ERR_INPUT, "bench sort: %lld keys are fewer than the %d ranks", (long long)size,
                       b->cpu.nranks);
    // A plan holds two key buffers and three int64 position buffers of 9/8 of the rank's keys (the room
    // for an unbalanced exchange), and the radix scratch (about two key buffers more).
    const double n = (double)s.n_local, plan = n * 1.125 * (2 * 4 + 3 * 8) + 2 * 4 * n;
    *host = 3 * 4 * n + plan;  // the input, the CPU's and the GPU's sorted keys, the CPU plan
    *dev = 4 * n + plan;
    return DS_OK;
}

typedef struct sort_call {
    sort_plan *p;
    sort_result *r;
} sort_call;

// One sort; t[0]: its seconds.
static int sort_once(ds_ctx *ctx, void *arg, int call, double *t)
{
    sort_call *c = arg;
    DS_CHECK(sort_run(ctx, c->p, c->r));
    t[0] = c->r->seconds;
    return DS_OK;
}

// warmup + reps sorts on ctx (reps 0: one untimed); the median of the slowest rank's `seconds`.
static int sort_timed(bench_run *b, ds_ctx *ctx, sort_plan *p, int reps, double *median, sort_result *r)
{
    repeat_plan rp = bench_repeat_plan(b, reps);
    sort_call c = {p, r};
    return repeat_timed(ctx, &rp, sort_once, &c, NULL, median);
}

// What one backend's run leaves for the check: its sorted keys on the host and its verification.
typedef struct sort_out {
    int32_t *keys;  // [n], host
    int64_t n;
    int ok;
    char why[160];
} sort_out;

// Corrupts the rank-0 result in backend memory (the tests' fault injection, on the backend under test:
// the GPU, else the CPU): one key changed, which breaks the checksum and the bitwise comparison.
static int sort_corrupt(ds_ctx *ctx, const sort_result *r)
{
    if (ctx->rank != 0 || r->n == 0)
        return DS_OK;
    int32_t k = 0;
    void *at = (char *)r->keys + (size_t)(r->n / 2) * 4;
    DS_CHECK(ctx->be->download(ctx, &k, at, 4));
    k ^= 1;
    return ctx->be->upload(ctx, at, &k, 4);
}

// Sorts dkeys (this rank's input, backend memory) on ctx: timed when reps > 0, verified, the result brought back.
static int sort_plan_run(bench_run *b, ds_ctx *ctx, const void *dkeys, const sort_shape *s, int reps,
                         double *median, sort_out *out)
{
    sort_plan p;
    sort_result r;
    sort_opts o = {.dtype = SORT_I32};
    int rc = bench_agree(b, ctx, sort_plan_init(ctx, &p, &o, dkeys, NULL, s->n_local));
    if (rc == DS_OK)
        rc = sort_timed(b, ctx, &p, reps, median, &r);
    if (rc == DS_OK && b->corrupt && (ctx == &b->gpu || !b->have_gpu))
        rc = bench_agree(b, ctx, sort_corrupt(ctx, &r));
    if (rc == DS_OK)
        rc = bench_agree(b, ctx, sort_check(ctx, &p, &r, &out->ok, out->why, sizeof out->why));
    if (rc == DS_OK) {
        out->n = r.n;
        rc = bench_host_alloc(b, (void **)&out->keys, (double)r.n * 4);
        if (rc == DS_OK)
            rc = ctx->be->download(ctx, out->keys, r.keys, (size_t)r.n * 4);
        rc = bench_agree(b, ctx, rc);
    }
    sort_plan_free(ctx, &p);
    return rc;
}

static int sort_on(bench_run *b, ds_ctx *ctx, const int32_t *hkeys, const sort_shape *s, int reps, double *median,
                   sort_out *out)
{
    void *dkeys = (void *)hkeys;
    int rc = DS_OK;
    if (!ctx->be->host_memory) {
        dkeys = NULL;
        rc = ctx->be->alloc(ctx, &dkeys, (size_t)(s->n_local > 0 ? s->n_local : 1) * 4);
        if (rc == DS_OK)
            rc = ctx->be->upload(ctx, dkeys, hkeys, (size_t)s->n_local * 4);
    }
    rc = bench_agree(b, ctx, rc);
    if (rc == DS_OK)
        rc = sort_plan_run(b, ctx, dkeys, s, reps, median, out);
    if (!ctx->be->host_memory && dkeys)
        ctx->be->free(ctx, dkeys);
    return rc;
}

// got against want, key by key on this rank (both backends split the keys alike: the same splitters
// come from the same sorted samples); err is the fraction of this rank's keys that differ.
static void sort_compare(const sort_out *got, const sort_out *want, bench_row *row)
{
    const int64_t n = got->n < want->n ? got->n : want->n;
    int64_t diff = got->n > want->n ? got->n - want->n : want->n - got->n;
    for (int64_t i = 0; i < n; i++)
        diff += got->keys[i] != want->keys[i];
    row->wrong += diff;
    row->err = (double)diff / (double)(want->n > 0 ? want->n : 1);
}

// The verdicts of the verifications (the same on every rank) count once, on rank 0.
static void sort_verdict(const bench_run *b, const sort_out *o, const char *name, bench_row *row)
{
    if (o->ok)
        return;
    if (b->cpu.rank == 0) {
        row->wrong += 1;
        ctx_log(&b->cpu, "bench sort: the %s result failed verification: %s", name, o->why);
    }
    row->err = 1;  // the whole result is in doubt
}

static void sort_peer(bench_run *b, const sort_shape *s, bench_row *row)
{
    char args[128];
    snprintf(args, sizeof args, "sort --xp %s --n %lld --dtype int32", b->have_gpu ? "cupy" : "numpy",
             (long long)s->n_all);
    row->peer_s = bench_peer(b, args);
}

static int sort_case_run(bench_run *b, int64_t size, bench_row *row)
{
    sort_shape s;
    sort_shape_of(b, size, &s);
    snprintf(row->shape, sizeof row->shape, "%lld int32", (long long)s.n_all);
    row->work = (double)s.n_all;  // keys
    row->tol = 0;                 // sorting is exact
    row->err = 0;
    const int cpu_run = bench_cpu_wanted(b, row->work, 3e7 * b->threads * b->cpu.nranks);
    int32_t *hkeys = NULL;
    sort_out cpu = {0}, gpu = {0};
    int rc = bench_agree(b, &b->cpu, bench_host_alloc(b, (void **)&hkeys, (double)s.n_local * 4));
    if (rc == DS_OK)
        sort_gen_keys(SORT_I32, DIST_UNIFORM, 0, s.n_all, s.i0, s.n_local, hkeys, b->threads);
    if (rc == DS_OK && (cpu_run || !b->have_gpu))
        rc = sort_on(b, &b->cpu, hkeys, &s, b->repeat, &row->cpu_s, &cpu);
    if (rc == DS_OK && b->have_gpu)
        rc = sort_on(b, &b->gpu, hkeys, &s, b->repeat, &row->gpu_s, &gpu);
    if (rc == DS_OK) {
        if (b->have_gpu && cpu_run)
            sort_compare(&gpu, &cpu, row);
        if (cpu_run || !b->have_gpu)
            sort_verdict(b, &cpu, "cpu", row);
        if (b->have_gpu)
            sort_verdict(b, &gpu, "cuda", row);
        snprintf(row->check, sizeof row->check, "%s",
                 !b->have_gpu ? "cpu verified: order, rank edges, count, checksum"
                 : cpu_run    ? "cuda vs cpu, all keys bitwise; both verified"
                              : "cuda verified: order, rank edges, count, checksum");
        sort_peer(b, &s, row);
    }
    free(hkeys);
    free(cpu.keys);
    free(gpu.keys);
    return rc;
}

const bench_case bench_case_sort = {
    .name = "sort",
    .about = "sample sort of uniform int32 keys over the ranks; Gkeys/s",
    .unit = "Gkeys/s",
    .size_label = "keys",
    .default_sizes = "1e4:1e6:x10",
    .ref_label = "",
    .need = sort_need,
    .run = sort_case_run,
    .dtype = "int32",
    .available = NULL,
};
