// bench_solve.c: the solve case of `dsolve bench`: the built-in problem (rows × --cols) solved by each
// --method (SolveBak: --iters sweeps of --batch columns) on the CPU and the GPU backends, the GPU's
// coefficients checked against the CPU's, and, with --peer, what a user would run instead timed in the
// same run: the seed's own CuPy code for SolveBak, torch's normal equations for cholesky,
// torch.linalg.lstsq for qr and auto.
// provides: bench_case_solve
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/data.h"
#include "solve/solvebak.h"

typedef struct solve_shape {
    int64_t rows_global, rows_local, cols;
    int iters, batch;
} solve_shape;

// The variants (--method): their names, and how each is asked of solvebak_run.
static const struct {
    const char *name;
    int method, block_solve;
} solve_methods[] = {
    {"solvebak", SB_METHOD_SOLVEBAK, 0}, {"residual", SB_METHOD_RESIDUAL, 0}, {"gram", SB_METHOD_GRAM, 0},
    {"block", SB_METHOD_GRAM, 1},        {"cholesky", SB_METHOD_CHOLESKY, 0}, {"qr", SB_METHOD_QR, 0},
    {"auto", SB_METHOD_AUTO, 0},
};
enum { N_SOLVE_METHODS = sizeof solve_methods / sizeof solve_methods[0] };

static int solve_method_index(const char *name, size_t len)
{
    for (int i = 0; i < N_SOLVE_METHODS; i++)
        if (strlen(solve_methods[i].name) == len && strncmp(solve_methods[i].name, name, len) == 0)
            return i;
    return -1;
}

// The v-th method of --method's list ("all": every one), NULL past the last or on a bad list (solve_need
// reports that).
static const char *solve_variant(const bench_run *b, int v)
{
    const char *list = opts_str(&b->args, "method");
    if (strcmp(list, "all") == 0)
        return v < N_SOLVE_METHODS ? solve_methods[v].name : NULL;
    for (const char *p = list; *p; v--) {
        const size_t len = strcspn(p, ",");
        const int i = solve_method_index(p, len);
        if (i < 0)
            return NULL;
        if (v == 0)
            return solve_methods[i].name;
        p += len + (p[len] == ',');
    }
    return NULL;
}

static void solve_shape_of(const bench_run *b, int64_t size, solve_shape *s)
{
    const ds_args *a = &b->args;
    s->cols = opts_int(a, "cols");
    s->iters = (int)opts_int(a, "iters");
    s->batch = (int)opts_int(a, "batch");
    s->rows_global = b->weak ? size * b->cpu.nranks : size;
    s->rows_local = b->weak ? size : (size + b->cpu.nranks - 1) / b->cpu.nranks;
}

static int solve_need(bench_run *b, int64_t size, double *host, double *dev, ds_msg *msg)
{
    solve_shape s;
    solve_shape_of(b, size, &s);
    if (!b->weak && size < b->cpu.nranks)
        return ds_fail(msg, DS_ERR_INPUT, "bench solve: %lld rows are fewer than the %d ranks", (long long)size,
                       b->cpu.nranks);
    const char *list = opts_str(&b->args, "method");
    for (const char *p = list; strcmp(list, "all") != 0 && *p;) {
        const size_t len = strcspn(p, ",");
        if (solve_method_index(p, len) < 0)
            return ds_fail(msg, DS_ERR_USAGE, "bench solve --method: '%.*s' is not one of solvebak, residual, gram, "
                           "block, cholesky, qr, auto, all", (int)len, p);
        p += len + (p[len] == ',');
    }
    const double x = (double)s.rows_local * (double)s.cols * (b->f32 ? 4 : 8) + 8.0 * s.rows_local;
    const double gram = 8.0 * (double)s.cols * (double)s.cols * 2;
    *host = 2 * (x + gram);  // the CPU's X and the staging of the GPU's (bounded chunks; counted whole)
    *dev = x + gram + 8.0 * s.rows_local * 2;
    return DS_OK;
}

typedef struct solve_call {
    const ds_data *d;
    const sb_opts *o;
    sb_result *res;
} solve_call;

// One solve; t[0]: its solve_seconds (the slowest rank's already).
static int solve_once(ds_ctx *ctx, void *arg, int call, double *t)
{
    solve_call *c = arg;
    solvebak_result_free(c->res);
    DS_CHECK(solvebak_run(ctx, &c->d->X, c->d->y, c->d->rows_global, c->o, c->res));
    t[0] = c->res->solve_seconds;
    return DS_OK;
}

// warmup + reps solves on ctx (reps 0: one untimed); the median of their solve_seconds and the
// coefficients of the last.
static int solve_timed(bench_run *b, ds_ctx *ctx, const ds_data *d, const sb_opts *o, int reps, double *median,
                       double *a_out)
{
    sb_result res = {0};
    repeat_plan p = bench_repeat_plan(b, reps);
    p.slowest = 0;
    solve_call c = {d, o, &res};
    int rc = repeat_timed(ctx, &p, solve_once, &c, NULL, median);
    if (rc == DS_OK)
        memcpy(a_out, res.a, (size_t)d->X.cols * sizeof(double));
    solvebak_result_free(&res);
    return rc;
}

// Generates the problem on ctx's backend and solves it; reps 0: one untimed solve for the check.
static int solve_on(bench_run *b, ds_ctx *ctx, const solve_shape *s, int method, int block, int reps,
                    double *median, double *a_out)
{
    gen_lsq p = {.rows = s->rows_global, .cols = s->cols, .seed = 0, .noise = 0, .corr = 0};
    sb_opts o = {.batch = s->batch, .iters = s->iters, .tol = 0, .line_search = 1, .method = method,
                 .progress = 0, .block_solve = block, .coarse = block};
    ds_data d;
    memset(&d, 0, sizeof d);
    int rc = data_gen_lsq(ctx, &p, b->f32, &d);
    if (rc == DS_OK)
        rc = solve_timed(b, ctx, &d, &o, reps, median, a_out);
    data_free(ctx, &d);
    return rc;
}

// The peer of method v: the seed's SolveBak (CuPy, or NumPy without a GPU) for the seed's algorithm, torch
// for the direct methods (a GPU only), none for the block solve, which the seed does not have.
static void solve_peer(bench_run *b, const solve_shape *s, int v, bench_row *row)
{
    char args[256];
    const int m = solve_methods[v].method;
    if (solve_methods[v].block_solve) {
        return;
    } else if (m == SB_METHOD_SOLVEBAK || m == SB_METHOD_RESIDUAL || m == SB_METHOD_GRAM) {
        snprintf(args, sizeof args, "solvebak --xp %s --obs %lld --vars %lld --iters %d --batch %d",
                 b->have_gpu ? "cupy" : "numpy", (long long)s->rows_global, (long long)s->cols, s->iters, s->batch);
        row->peer_s = bench_peer(b, args);
    } else if (b->have_gpu) {
        snprintf(args, sizeof args, "lstsq --rows %lld --cols %lld", (long long)s->rows_global, (long long)s->cols);
        row->peer_s = bench_peer_other(b, "torch_peers.py", args, m == SB_METHOD_CHOLESKY ? "normal equations" : "lstsq");
    }
}

// What the CPU checks method m against without a GPU (see solve_run).
static int solve_other(const bench_run *b, const solve_shape *s, int m)
{
    if (m == SB_METHOD_CHOLESKY || m == SB_METHOD_QR || m == SB_METHOD_AUTO)
        return m == SB_METHOD_QR ? SB_METHOD_CHOLESKY : SB_METHOD_QR;
    if (m == SB_METHOD_SOLVEBAK)
        m = solvebak_pick_method(&b->cpu, s->rows_local, s->cols, b->f32,
                                 &(sb_opts){.batch = s->batch, .iters = s->iters, .line_search = 1});
    return m == SB_METHOD_GRAM ? SB_METHOD_RESIDUAL : SB_METHOD_GRAM;
}

static int solve_run(bench_run *b, int64_t size, bench_row *row)
{
    solve_shape s;
    solve_shape_of(b, size, &s);
    const char *name = solve_variant(b, b->variant);  // solve_need checked the list
    const int v = solve_method_index(name, strlen(name));
    const int m = solve_methods[v].method, block = solve_methods[v].block_solve;
    const int direct = m == SB_METHOD_CHOLESKY || m == SB_METHOD_QR || m == SB_METHOD_AUTO;
    snprintf(row->shape, sizeof row->shape, "%lldx%lld %s", (long long)s.rows_global, (long long)s.cols,
             solve_methods[v].name);
    // Effective bytes: for SolveBak, X read once per sweep's two passes and once for the setup (the
    // residual route's traffic), for either route, so that the two rates compare like for like; for the
    // direct methods, the two passes they make (the product or factorization, and the certificate).
    row->work = (double)s.rows_global * (double)s.cols * (b->f32 ? 4 : 8) * (direct ? 2.0 : 1.0 + 2.0 * s.iters);
    row->tol = b->f32 ? 1e-5 : 1e-9;
    const int cpu_run = bench_cpu_wanted(b, row->work, 2e9 * b->threads * b->cpu.nranks);
    double *a_cpu = calloc((size_t)s.cols, sizeof(double)), *a_got = calloc((size_t)s.cols, sizeof(double));
    int rc = bench_agree(b, &b->cpu, a_cpu && a_got ? DS_OK : ds_fail(&b->cpu.msg, DS_ERR_RUNTIME, "out of host memory"));
    if (rc == DS_OK)
        rc = solve_on(b, &b->cpu, &s, m, block, cpu_run ? b->repeat : 0, &row->cpu_s, a_cpu);
    if (rc == DS_OK && b->have_gpu)
        rc = solve_on(b, &b->gpu, &s, m, block, b->repeat, &row->gpu_s, a_got);
    // Without a GPU, the CPU against itself another way: SolveBak's other route (the same iterates in
    // exact arithmetic), or the other direct method (qr against cholesky: the same answer to rounding on
    // this well-conditioned problem).
    if (rc == DS_OK && !b->have_gpu)
        rc = solve_on(b, &b->cpu, &s, solve_other(b, &s, m), block, 0, NULL, a_got);
    if (rc == DS_OK) {
        if (b->corrupt)  // every rank holds the same coefficients: perturb them everywhere
            a_got[0] += 1.0;
        double scale = 0;
        for (int64_t j = 0; j < s.cols; j++)
            scale = fmax(scale, fabs(a_cpu[j]));
        bench_compare(a_got, a_cpu, s.cols, 0, scale > 0 ? scale : 1, row->tol, &row->err, &row->wrong);
        if (b->cpu.rank != 0)
            row->wrong = 0;  // the coefficients are replicated: count them once
        snprintf(row->check, sizeof row->check, "%s, coefficients",
                 b->have_gpu ? "cuda vs cpu" : direct ? "cpu qr vs cholesky" : "cpu gram vs residual route");
        solve_peer(b, &s, v, row);
    }
    free(a_cpu);
    free(a_got);
    return rc;
}

const bench_case bench_case_solve = {
    .name = "solve",
    .about = "least squares on the built-in problem (ROWS x --cols) by each --method; effective GB/s",
    .unit = "GB/s",
    .size_label = "rows",
    .default_sizes = "1e4:1e5:x10",
    .ref_label = "",
    .need = solve_need,
    .run = solve_run,
    .variant = solve_variant,
};
