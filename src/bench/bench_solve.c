// bench_solve.c: the solve case of `dsolve bench`: SolveBak on the built-in problem (rows × --cols,
// --iters sweeps, --batch) on the CPU and the GPU backends, the GPU's coefficients checked against the
// CPU's, and the seed's own code (the peer) timed in the same run when --peer is given.
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
static int solve_on(bench_run *b, ds_ctx *ctx, const solve_shape *s, int method, int reps, double *median,
                    double *a_out)
{
    gen_lsq p = {.rows = s->rows_global, .cols = s->cols, .seed = 0, .noise = 0, .corr = 0};
    sb_opts o = {.batch = s->batch, .iters = s->iters, .tol = 0, .line_search = 1, .method = method, .progress = 0};
    ds_data d;
    memset(&d, 0, sizeof d);
    int rc = data_gen_lsq(ctx, &p, b->f32, &d);
    if (rc == DS_OK)
        rc = solve_timed(b, ctx, &d, &o, reps, median, a_out);
    data_free(ctx, &d);
    return rc;
}

static void solve_peer(bench_run *b, const solve_shape *s, bench_row *row)
{
    char args[256];
    snprintf(args, sizeof args, "solvebak --xp %s --obs %lld --vars %lld --iters %d --batch %d",
             b->have_gpu ? "cupy" : "numpy", (long long)s->rows_global, (long long)s->cols, s->iters, s->batch);
    row->peer_s = bench_peer(b, args);
}

static int solve_run(bench_run *b, int64_t size, bench_row *row)
{
    solve_shape s;
    solve_shape_of(b, size, &s);
    snprintf(row->shape, sizeof row->shape, "%lldx%lld", (long long)s.rows_global, (long long)s.cols);
    // Effective bytes: X read once per sweep's two passes and once for the setup (the residual route's
    // traffic), for either route, so that the two rates compare like for like.
    row->work = (double)s.rows_global * (double)s.cols * (b->f32 ? 4 : 8) * (1.0 + 2.0 * s.iters);
    row->tol = b->f32 ? 1e-5 : 1e-9;
    const int cpu_run = bench_cpu_wanted(b, row->work, 2e9 * b->threads * b->cpu.nranks);
    double *a_cpu = calloc((size_t)s.cols, sizeof(double)), *a_got = calloc((size_t)s.cols, sizeof(double));
    int rc = bench_agree(b, &b->cpu, a_cpu && a_got ? DS_OK : ds_fail(&b->cpu.msg, DS_ERR_RUNTIME, "out of host memory"));
    if (rc == DS_OK)
        rc = solve_on(b, &b->cpu, &s, SB_METHOD_SOLVEBAK, cpu_run ? b->repeat : 0, &row->cpu_s, a_cpu);
    if (rc == DS_OK && b->have_gpu)
        rc = solve_on(b, &b->gpu, &s, SB_METHOD_SOLVEBAK, b->repeat, &row->gpu_s, a_got);
    // Without a GPU: the other route on the CPU, which gives the same iterates in exact arithmetic.
    if (rc == DS_OK && !b->have_gpu) {
        int m = solvebak_pick_method(&b->cpu, s.rows_local, s.cols, b->f32,
                                     &(sb_opts){.batch = s.batch, .iters = s.iters, .line_search = 1});
        rc = solve_on(b, &b->cpu, &s, m == SB_METHOD_GRAM ? SB_METHOD_RESIDUAL : SB_METHOD_GRAM, 0, NULL, a_got);
    }
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
                 b->have_gpu ? "cuda vs cpu" : "cpu gram vs residual route");
        solve_peer(b, &s, row);
    }
    free(a_cpu);
    free(a_got);
    return rc;
}

const bench_case bench_case_solve = {
    .name = "solve",
    .about = "SolveBak on the built-in problem (ROWS x --cols, --iters sweeps); effective GB/s",
    .unit = "GB/s",
    .size_label = "rows",
    .default_sizes = "1e4:1e5:x10",
    .ref_label = "",
    .need = solve_need,
    .run = solve_run,
};
