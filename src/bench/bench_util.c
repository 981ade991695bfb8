// bench_util.c: the helpers of bench.h that every case uses (sizes, threads, inputs, checks, timing,
// the peer).
// provides: bench_parse_sizes, bench_parallel, bench_fill, bench_compare, bench_host_alloc, bench_agree,
//           bench_repeat_plan, bench_time, bench_rel_diff, bench_peer
#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "core/rng.h"

// ---------------------------------------------------------------------------------------------------
// Sizes: "10,100,1e3:1e9:x10,5:20:+5"

static int size_value(const char *s, size_t len, int64_t *v)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end = NULL;
    errno = 0;
    double x = strtod(buf, &end);
    if (errno || end == buf || *end != '\0' || !(x >= 1 && x <= 1e15) || x != floor(x))
        return 0;
    *v = (int64_t)x;
    return 1;
}

static int sizes_push(int64_t v, int64_t *sizes, int *count)
{
    if (*count >= BENCH_MAX_SIZES)
        return 0;
    sizes[(*count)++] = v;
    return 1;
}

// One item: a number, or FROM:TO[:xFACTOR|:+STEP] (the default step is x10).
static int sizes_item(const char *s, size_t len, int64_t *sizes, int *count, ds_msg *msg)
{
    const char *c1 = memchr(s, ':', len);
    int64_t from = 0, to = 0;
    if (!c1) {
        if (!size_value(s, len, &from))
            return ds_fail(msg, DS_ERR_USAGE, "--sizes: '%.*s' is not a whole number from 1 to 1e15", (int)len, s);
        return sizes_push(from, sizes, count) ? DS_OK
                                              : ds_fail(msg, DS_ERR_USAGE, "--sizes: more than %d sizes", BENCH_MAX_SIZES);
    }
    const char *c2 = memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - s));
    const char *to_end = c2 ? c2 : s + len;
    double step = 10;
    int mult = 1;
    if (c2) {
        char buf[32], *end = NULL;
        size_t sl = len - (size_t)(c2 + 1 - s);
        if (sl < 2 || sl >= sizeof buf || (c2[1] != 'x' && c2[1] != '+'))
            return ds_fail(msg, DS_ERR_USAGE, "--sizes: '%.*s': the step is xFACTOR or +STEP", (int)len, s);
        mult = c2[1] == 'x';
        memcpy(buf, c2 + 2, sl - 1);
        buf[sl - 1] = '\0';
        step = strtod(buf, &end);
        if (end == buf || *end != '\0' || !isfinite(step) || (mult ? step <= 1.0 : step < 1.0 || step != floor(step)))
            return ds_fail(msg, DS_ERR_USAGE, "--sizes: '%.*s': a factor must be > 1, a step a whole number >= 1",
                           (int)len, s);
    }
    if (!size_value(s, (size_t)(c1 - s), &from) || !size_value(c1 + 1, (size_t)(to_end - c1 - 1), &to) || to < from)
        return ds_fail(msg, DS_ERR_USAGE, "--sizes: '%.*s' is not FROM:TO with whole numbers 1 <= FROM <= TO <= 1e15",
                       (int)len, s);
    int64_t last = 0;
    for (double x = (double)from; x <= (double)to * (1 + 1e-12); x = mult ? x * step : x + step) {
        int64_t v = (int64_t)llround(x);
        if (v == last)
            continue;
        if (!sizes_push(v, sizes, count))
            return ds_fail(msg, DS_ERR_USAGE, "--sizes: more than %d sizes", BENCH_MAX_SIZES);
        last = v;
    }
    return DS_OK;
}

int bench_parse_sizes(const char *text, int64_t *sizes, int *count, ds_msg *msg)
{
    *count = 0;
    for (const char *s = text;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        DS_CHECK(sizes_item(s, len, sizes, count, msg));
        if (!comma)
            break;
        s = comma + 1;
    }
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// Threads, inputs, checks

int bench_parallel(int threads, int64_t n, par_fn fn, void *arg)
{
    return par_for(threads, n, 1 << 16, fn, arg);
}

typedef struct fill_arg {
    void *x;
    int f32;
    uint64_t stream;
    int64_t offset;
} fill_arg;

static void fill_part(void *p, int part, int64_t lo, int64_t hi)
{
    const fill_arg *a = p;
    for (int64_t i = lo; i < hi; i++) {
        double v = rng_uniform(0x62656e6368ULL, a->stream, (uint64_t)(a->offset + i)) - 0.5;
        if (a->f32)
            ((float *)a->x)[i] = (float)v;
        else
            ((double *)a->x)[i] = v;
    }
}

void bench_fill(bench_run *b, void *x, int64_t n, int f32, uint64_t stream, int64_t offset)
{
    fill_arg a = {x, f32, stream, offset};
    bench_parallel(b->threads, n, fill_part, &a);
}

typedef struct cmp_arg {
    const void *got, *want;
    int f32;
    double limit;  // tol · scale
    double max[PAR_MAX_THREADS];
    int64_t wrong[PAR_MAX_THREADS];
} cmp_arg;

static void cmp_part(void *p, int part, int64_t lo, int64_t hi)
{
    cmp_arg *a = p;
    double m = 0;
    int64_t w = 0;
    for (int64_t i = lo; i < hi; i++) {
        double g = a->f32 ? ((const float *)a->got)[i] : ((const double *)a->got)[i];
        double v = a->f32 ? ((const float *)a->want)[i] : ((const double *)a->want)[i];
        double d = fabs(g - v);
        if (!(d <= a->limit))
            w++;
        if (!(d <= m))
            m = isnan(d) ? INFINITY : d;
    }
    a->max[part] = m;
    a->wrong[part] = w;
}

void bench_compare(const void *got, const void *want, int64_t n, int f32, double scale, double tol, double *err,
                   int64_t *wrong)
{
    static const int threads = 16;  // a pass over memory: a few threads suffice
    cmp_arg *a = calloc(1, sizeof *a);
    DS_ASSERT(a);
    a->got = got, a->want = want, a->f32 = f32, a->limit = tol * scale;
    int parts = bench_parallel(threads, n, cmp_part, a);
    double m = 0;
    int64_t w = 0;
    for (int t = 0; t < parts; t++) {
        m = fmax(m, a->max[t]);
        w += a->wrong[t];
    }
    *err = m / scale;
    *wrong = w;
    free(a);
}

int bench_host_alloc(bench_run *b, void **ptr, double bytes)
{
    *ptr = bytes >= 0 && bytes < 9e18 ? malloc((size_t)(bytes > 64 ? bytes : 64)) : NULL;
    if (!*ptr)
        return ds_fail(&b->cpu.msg, DS_ERR_RUNTIME, "out of host memory allocating %.2f GiB on rank %d",
                       bytes / (1 << 30), b->cpu.rank);
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// Agreement and timing

int bench_agree(bench_run *b, ds_ctx *ctx, int status)
{
    if (status != DS_OK && ctx != &b->cpu && b->cpu.msg.text[0] == '\0')
        b->cpu.msg = ctx->msg;
    int rc = ctx_agree(&b->cpu, status);
    if (rc != DS_OK && b->have_gpu) {
        if (b->gpu.msg.text[0] == '\0')
            b->gpu.msg = b->cpu.msg;  // so that closing the GPU context aborts NCCL rather than waits
        b->gpu.agreed_failure = rc;
    }
    return rc;
}

double bench_rel_diff(const double *x, const double *y, int64_t n, MPI_Comm comm)
{
    double s[2] = {0, 0};
    for (int64_t i = 0; i < n; i++) {
        s[0] += (x[i] - y[i]) * (x[i] - y[i]);
        s[1] += y[i] * y[i];
    }
    if (comm != MPI_COMM_NULL)
        MPI_Allreduce(MPI_IN_PLACE, s, 2, MPI_DOUBLE, MPI_SUM, comm);
    const double d = s[1] > 0 ? sqrt(s[0] / s[1]) : sqrt(s[0]);
    return isnan(s[0]) ? INFINITY : d;
}

static int agree_run(void *b, ds_ctx *ctx, int status)
{
    return bench_agree(b, ctx, status);
}

repeat_plan bench_repeat_plan(bench_run *b, int reps)
{
    return (repeat_plan){.warmup = b->warmup, .repeat = reps, .nt = 1, .slowest = 1, .agree = agree_run, .agree_arg = b};
}

typedef struct marked_call {
    bench_fn fn;
    void *arg;
} marked_call;

// One call of the operation between marks 0 and 1 of ctx's backend (device events on CUDA).
static int marked_once(ds_ctx *ctx, void *arg, int call, double *t)
{
    const marked_call *m = arg;
    DS_CHECK(ctx->be->mark(ctx, 0));
    DS_CHECK(m->fn(ctx, m->arg));
    DS_CHECK(ctx->be->mark(ctx, 1));
    return ctx->be->elapsed(ctx, 0, 1, t);
}

int bench_time(bench_run *b, ds_ctx *ctx, bench_fn fn, void *arg, double *median)
{
    repeat_plan p = bench_repeat_plan(b, b->repeat);
    marked_call m = {fn, arg};
    return repeat_timed(ctx, &p, marked_once, &m, NULL, median);
}

// ---------------------------------------------------------------------------------------------------
// The peer

// Rank 0 runs `python3 SCRIPT ARGS` and reads "seconds" from the last JSON line containing match.
static double peer_seconds(bench_run *b, const char *script, const char *args, const char *match)
{
    const char *py = getenv("DSOLVE_PYTHON");
    char cmd[4600], line[4096], last[4096] = "";
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s 2>&1", py && *py ? py : "python3", script, args);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) {
        ctx_log(&b->cpu, "bench: peer not run: cannot start %s", cmd);
        return NAN;
    }
    while (fgets(line, sizeof line, p))
        if ((line[0] == '{' && (!match || strstr(line, match))) || last[0] != '{')
            snprintf(last, sizeof last, "%s", line);
    int status = pclose(p);
    const char *key = strstr(last, "\"seconds\":");
    double s = key ? strtod(key + 10, NULL) : NAN;
    if (status != 0 || last[0] != '{' || !(s > 0)) {
        last[strcspn(last, "\n")] = '\0';
        ctx_log(&b->cpu, "bench: peer gave no time (exit status %d): %s", status, last);
        return NAN;
    }
    return s;
}

double bench_peer(bench_run *b, const char *args)
{
    if (!b->peer || b->cpu.rank != 0)
        return NAN;
    return peer_seconds(b, b->peer, args, NULL);
}

double bench_peer_other(bench_run *b, const char *script, const char *args, const char *match)
{
    if (!b->peer || b->cpu.rank != 0)
        return NAN;
    char path[4200];
    const char *slash = strrchr(b->peer, '/');
    snprintf(path, sizeof path, "%.*s%s", slash ? (int)(slash - b->peer + 1) : 0, b->peer, script);
    if (access(path, R_OK) != 0) {
        ctx_log(&b->cpu, "bench: peer not run: no %s beside %s", script, b->peer);
        return NAN;
    }
    return peer_seconds(b, path, args, match);
}
