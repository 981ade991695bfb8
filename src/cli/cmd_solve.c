// cmd_solve.c: `dsolve solve`: SolveBak on an HDF5 input or the built-in seed problem.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "cli/cmd_solve.h"
#include "cli/ckptopts.h"
#include "cli/memcaps.h"
#include "core/data.h"
#include "core/rows.h"
#include "h5io.h"
#include "cli/opts.h"
#include "cli/report.h"
#include "solve/solvebak.h"
#include "core/repeat.h"

static const ds_opt solve_table[] = {
    {"input", OPT_STRING, NULL, "F.h5", 0, 0, "HDF5 file with X (m × n) and y (m); without it, the built-in problem"},
    {"x-dataset", OPT_STRING, "X", "NAME", 0, 0, "dataset holding X"},
    {"y-dataset", OPT_STRING, "y", "NAME", 0, 0, "dataset holding y"},
    {"rows", OPT_INT, "100000", "M", 1, 1e15, "rows of the built-in problem"},
    {"cols", OPT_INT, "1000", "N", 1, 1e6, "columns of the built-in problem"},
    {"seed", OPT_INT, "0", "S", 0, 9e18, "seed of the built-in problem"},
    {"noise", OPT_DOUBLE, "0", "SIGMA", 0, 1e300, "noise of the built-in problem"},
    {"corr", OPT_DOUBLE, "0", "RHO", 0, 0.999, "pairwise column correlation of the built-in problem"},
    {"precision", OPT_CHOICE, "f64", "f64|f32", 0, 0, "storage of X on the device (vectors and sums stay f64)"},
    {"batch", OPT_INT, "100", "B", 1, 1e6, "columns per block; 1 is the sequential algorithm"},
    {"iters", OPT_INT, "10", "K", 0, 1e7, "most sweeps"},
    {"tol", OPT_DOUBLE, "0", "T", 0, 1, "stop when the relative residual or its relative change over a sweep is <= T (0: never)"},
    {"no-line-search", OPT_FLAG, NULL, NULL, 0, 0, "the seed's raw block update (diverges on correlated columns)"},
    {"method", OPT_CHOICE, "solvebak", "solvebak|auto|residual|gram|cholesky|qr", 0, 0,
     "solvebak (the default: the seed's algorithm, as the notebooks run it): SolveBak on the route its cost model "
     "prefers; residual: SolveBak with one allreduce per block; gram: X'X once, then SolveBak's sweeps on it; "
     "cholesky: X'X once, equilibrated, factored and solved, then one refinement step; qr: TSQR over the ranks, "
     "for ill-conditioned X; auto: cholesky when the factor shows X well conditioned, else qr (residual "
     "SolveBak when X'X would not fit), and says why"},
    {"gram-precision", OPT_CHOICE, "auto", "auto|low|double", 0, 0,
     "cholesky: low sums X'X in a lower precision (single on the CPU backend, at twice the rate; FP16 on a "
     "GPU's tensor cores, columns scaled by powers of two), then refines the answer to double's accuracy in passes over X, and forms X'X again "
     "in double when X leaves that precision's range or is too ill-conditioned for that; auto (the default): low on the "
     "CPU, and on a GPU where it pays for its extra passes (from 250 columns and 1.5e10 rows x columns^2 "
     "a rank); double: X'X in double and one refinement step; a streamed X always takes double"},
    {"block-solve", OPT_FLAG, NULL, NULL, 0, 0,
     "SolveBak: solve each block exactly (block Gauss-Seidel) and correct the block sums after every sweep; "
     "converges on correlated columns"},
    {"no-coarse", OPT_FLAG, NULL, NULL, 0, 0, "with --block-solve: without the correction of the block sums"},
    {"output", OPT_STRING, NULL, "F.h5", 0, 0, "write /a and the run's attributes (atomically: a temporary file, then a rename)"},
    {"plot", OPT_STRING, NULL, "F.svg", 0, 0, "an SVG plot of the relative residual by sweep"},
    {"repeat", OPT_INT, "1", "R", 1, 10000, "with R > 1: one warm-up solve, then R timed solves; the median is reported"},
    DS_MEMORY_OPTS("an --input X"),
    DS_CHECKPOINT_OPTS("the solve's state",
                       ": the partial sums inside the pass over a streamed X, then X'X and the sweeps. Takes the Gram "
                       "route: --method solvebak becomes gram; gram and cholesky as asked",
                       "at every chunk and sweep", "solve"),
    DS_COMMON_OPTS,
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const char solve_usage[] = "dsolve solve [--input F.h5] [--batch B] [--iters K] [--tol T] [--output F.h5] [options]";
static const char solve_about[] =
    "SolveBak least squares (X a ~ y) by coordinate descent over row blocks distributed across ranks.";



// --checkpoint and --restart: one solve on the Gram route (its state, X'X, is what a restart needs;
// the residual route's is a vector as long as X, QR's a factor per rank).
static int solve_parse_ckpt(solve_run *r, ds_msg *msg)
{
    const ds_args *a = &r->args;
    r->ck = cli_checkpoint(a, "solve", SB_CK_FORMAT);
    if (!r->ck.path && !r->ck.restart)
        return DS_OK;
    if (opts_int(a, "repeat") > 1)
        return ds_fail(msg, DS_ERR_USAGE, "--checkpoint and --restart take one solve: --repeat 1");
    if (r->so.method == SB_METHOD_RESIDUAL || r->so.method == SB_METHOD_QR || r->so.method == SB_METHOD_AUTO)
        return ds_fail(msg, DS_ERR_USAGE, "--checkpoint and --restart take the Gram route: --method solvebak, gram "
                       "or cholesky, not %s", opts_str(a, "method"));
    if (r->so.method == SB_METHOD_SOLVEBAK)
        r->so.method = SB_METHOD_GRAM;
    if (r->ck.path)
        DS_CHECK(h5io_output_dir_ok(r->ck.path, msg));
    r->so.ckpt = &r->ck;
    return DS_OK;
}

// What a checkpoint must belong to: the data (its source, size and the built-in problem's settings) and
// every setting of the solve; not the ranks.
static uint64_t solve_fingerprint(const solve_run *r, const ds_data *d)
{
    const ds_args *a = &r->args;
    const double v[] = {(double)d->rows_global, (double)d->X.cols, r->f32, r->so.batch, r->so.iters, r->so.tol,
                        r->so.line_search, r->so.method, r->so.block_solve, r->so.coarse,
                        (double)opts_int(a, "seed"), opts_double(a, "noise"), opts_double(a, "corr")};
    return ckpt_hash(ckpt_hash(0, v, sizeof v), d->source, strlen(d->source));
}

static int solve_parse(int argc, char **argv, solve_run *r, ds_msg *msg)
{
    DS_CHECK(opts_parse(solve_table, argc, argv, &r->args, msg));
    const ds_args *a = &r->args;
    r->f32 = strcmp(opts_str(a, "precision"), "f32") == 0;
    const char *m = opts_str(a, "method");
    r->so = (sb_opts){
        .batch = (int)opts_int(a, "batch"),
        .iters = (int)opts_int(a, "iters"),
        .tol = opts_double(a, "tol"),
        .line_search = !opts_flag(a, "no-line-search"),
        .method = strcmp(m, "gram") == 0       ? SB_METHOD_GRAM
                  : strcmp(m, "residual") == 0 ? SB_METHOD_RESIDUAL
                  : strcmp(m, "cholesky") == 0 ? SB_METHOD_CHOLESKY
                  : strcmp(m, "qr") == 0       ? SB_METHOD_QR
                  : strcmp(m, "auto") == 0     ? SB_METHOD_AUTO
                                               : SB_METHOD_SOLVEBAK,
        .progress = 0,
        .block_solve = opts_flag(a, "block-solve"),
        .coarse = opts_flag(a, "block-solve") && !opts_flag(a, "no-coarse"),
        .gram_double = strcmp(opts_str(a, "gram-precision"), "double") == 0,
        .gram_low = strcmp(opts_str(a, "gram-precision"), "low") == 0,
    };
    if (opts_flag(a, "no-coarse") && !opts_flag(a, "block-solve"))
        return ds_fail(msg, DS_ERR_USAGE, "--no-coarse goes with --block-solve");
    if (opts_given(a, "input") && (opts_given(a, "rows") || opts_given(a, "cols") || opts_given(a, "corr") || opts_given(a, "noise")))
        return ds_fail(msg, DS_ERR_USAGE, "--rows, --cols, --corr and --noise describe the built-in problem; not with --input");
    return solve_parse_ckpt(r, msg);
}

// Whether the rank's X fits the caps, else the chunk rows to stream it by; every rank streams when one
// must, by the smallest chunk. Collective.
static int solve_plan(ds_ctx *ctx, solve_run *r, const ds_data *d, int64_t *chunk_rows)
{
    rows_caps caps;
    const char *cap_name = cli_memory_caps(ctx, &r->args, &caps);
    int64_t chunk = 0;
    int rc = solvebak_stream_plan(ctx, &caps, cap_name, d->X.rows, d->X.cols, r->f32, &r->so, &chunk, &ctx->msg);
    DS_CHECK(ctx_agree(ctx, rc));
    // X and y kept in host memory when they fit the host cap with room to spare (a device backend only:
    // on the host the caps are one), so that the passes cross the bus instead of reading the file again.
    const double bytes = (double)d->X.rows * ((double)d->X.cols * (r->f32 ? 4 : 8) + 8.0);
    const int64_t host = !ctx->be->host_memory && bytes <= 0.8 * caps.host;
    int64_t v[3] = {chunk > 0, chunk > 0 ? -chunk : INT64_MIN, -host};  // MAX: any streams, the least chunk, all fit
    MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_INT64_T, MPI_MAX, ctx->comm);
    r->stream = v[0] > 0;
    r->stream_host = r->stream && v[2] == -1;
    *chunk_rows = r->stream ? -v[1] : 0;
    return DS_OK;
}

// The row source over the rank's rows that data_load_lsq_ranged or data_gen_lsq put in host memory.
static int solve_open_memory(ds_ctx *ctx, solve_run *r, const ds_data *d, int64_t chunk)
{
    return ctx_agree(ctx, rows_open_memory(ctx, &r->src, d->X.data, d->y, d->row0, d->X.rows, d->X.cols, r->f32,
                                           chunk, d->host == 2, "solve: streaming X from host memory"));
}

static int solve_load(ds_ctx *ctx, solve_run *r, ds_data *d)
{
    const ds_args *a = &r->args;
    if (opts_given(a, "input")) {
        const char *path = opts_str(a, "input"), *xn = opts_str(a, "x-dataset"), *yn = opts_str(a, "y-dataset");
        int64_t chunk = 0;
        DS_CHECK(data_probe_lsq(ctx, path, xn, yn, r->f32, d));
        DS_CHECK(solve_plan(ctx, r, d, &chunk));
        if (!r->stream || r->stream_host) {
            d->host = r->stream_host;
            DS_CHECK(data_load_lsq_ranged(ctx, path, xn, yn, r->f32, d));
            r->so.x_exps = d->x_exps, r->so.y_exp = d->y_exp;  // for the checkpoints
            return r->stream ? solve_open_memory(ctx, r, d, chunk) : DS_OK;
        }
        DS_CHECK(ctx_agree(ctx, rows_open_h5(ctx, &r->src, path, xn, yn, d->row0, d->X.rows, d->X.cols, r->f32, chunk,
                                             "solve: streaming X")));
        data_read_a_true(ctx, path, d);
        return DS_OK;
    }
    gen_lsq p = {.rows = opts_int(a, "rows"), .cols = opts_int(a, "cols"), .seed = (uint64_t)opts_int(a, "seed"),
                 .noise = opts_double(a, "noise"), .corr = opts_double(a, "corr")};
    int64_t chunk = 0;
    if (p.rows >= ctx->nranks) {  // (fewer rows than ranks: data_gen_lsq says so)
        ds_data shape = {.X = {.cols = p.cols}};
        data_partition(p.rows, ctx->nranks, ctx->rank, &shape.row0, &shape.X.rows);
        DS_CHECK(solve_plan(ctx, r, &shape, &chunk));
    }
    if (r->stream && !r->stream_host)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "the built-in problem fits neither the device nor the host memory "
                       "caps, and only --input files stream from disk: write it with dsolve gen and solve that file");
    d->host = r->stream_host;
    DS_CHECK(data_gen_lsq(ctx, &p, r->f32, d));
    return r->stream ? solve_open_memory(ctx, r, d, chunk) : DS_OK;
}

typedef struct solve_call {
    const solve_run *r;
    const ds_data *d;
    sb_result *res;
    ds_rows *src;  // a streamed X, or NULL
} solve_call;

// The coefficients in the file's units: a_j times 2^(y_exp − x_exps[j]) (data_load_lsq_ranged). One that
// leaves double's range there is a numerical failure (exit 4) naming the column; the same on every rank.
static int solve_unscale(ds_ctx *ctx, const ds_data *d, sb_result *res)
{
    for (int64_t j = 0; res->a && j < d->X.cols; j++) {
        const double a = res->a[j];
        const int e = d->y_exp - (d->x_exps ? d->x_exps[j] : 0);
        res->a[j] = ldexp(a, e);
        if (isfinite(a) && !isfinite(res->a[j]))
            return ds_fail(&ctx->msg, DS_ERR_NUMERIC, "solve: coefficient %lld (counting from 0) is %.17g times 2^%d, "
                           "beyond double precision's range (column %lld of X is that small against y)",
                           (long long)j, a, e, (long long)j);
    }
    return DS_OK;
}

// One solve; t: its solve, setup and sweep seconds, and qr's local factor and combine (0 for the other
// methods).
static int solve_once(ds_ctx *ctx, void *arg, int call, double *t)
{
    solve_call *c = arg;
    solvebak_result_free(c->res);
    DS_CHECK(c->src ? solvebak_run_rows(ctx, c->src, c->d->rows_global, &c->r->so, c->res)
                    : solvebak_run(ctx, &c->d->X, c->d->y, c->d->rows_global, &c->r->so, c->res));
    t[0] = c->res->solve_seconds, t[1] = c->res->setup_seconds, t[2] = c->res->sweep_seconds;
    t[3] = c->res->qr_local_seconds, t[4] = c->res->qr_combine_seconds;
    return DS_OK;
}

// One warm-up and R timed solves when --repeat R > 1; res holds the last, with the median times (each
// part's median on its own: qr's local factor and its combine are both medians, never a difference of
// medians from different solves). r->times: the R solve times, then the setup, sweep, local-factor and
// combine times.
static int solve_timed(ds_ctx *ctx, solve_run *r, const ds_data *d, sb_result *res)
{
    const int reps = (int)opts_int(&r->args, "repeat");
    r->times = calloc((size_t)reps * 5, sizeof(double));
    DS_CHECK(ctx_agree(ctx, r->times ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory")));
    repeat_plan p = {.warmup = reps > 1, .repeat = reps, .nt = 5};
    solve_call c = {r, d, res, r->stream ? &r->src : NULL};
    double median[5];
    DS_CHECK(repeat_timed(ctx, &p, solve_once, &c, r->times, median));
    res->solve_seconds = median[0], res->setup_seconds = median[1], res->sweep_seconds = median[2];
    res->qr_local_seconds = median[3], res->qr_combine_seconds = median[4];
    return DS_OK;
}

static double solve_coef_error(const ds_data *d, const sb_result *res)
{
    if (!d->a_true || !res->a)
        return NAN;
    double num = 0, den = 0;
    for (int64_t j = 0; j < d->X.cols; j++) {
        num += (res->a[j] - d->a_true[j]) * (res->a[j] - d->a_true[j]);
        den += d->a_true[j] * d->a_true[j];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int solve_output_writable(ds_ctx *ctx, const char *out)
{
    if (!out || ctx->rank != 0)
        return DS_OK;
    return h5io_output_dir_ok(out, &ctx->msg);
}

int cmd_solve(MPI_Comm comm, int argc, char **argv, ds_msg *msg)
{
    solve_run r = {.t_start = MPI_Wtime()};
    DS_CHECK(solve_parse(argc, argv, &r, msg));
    if (opts_flag(&r.args, "help")) {
        int rank;
        MPI_Comm_rank(comm, &rank);
        if (rank == 0)
            opts_help(stdout, &r.args, solve_usage, solve_about);
        return DS_OK;
    }
    ds_ctx ctx;
    int rc = ctx_open(&ctx, comm, opts_str(&r.args, "backend"));
    if (rc == DS_OK)
        rc = ctx_agree(&ctx, solve_output_writable(&ctx, opts_str(&r.args, "output")));
    if (rc != DS_OK) {
        *msg = ctx.msg;
        ctx_close(&ctx);
        return rc;
    }
    report_settings(&ctx, &r.args);
    ds_data d = {0};
    sb_result res = {0};
    rc = solve_load(&ctx, &r, &d);
    if (rc == DS_OK) {
        // From global sizes only: every rank must reach the same choice (it decides the collectives).
        ds_costs cost;
        ctx.be->costs(&ctx, &cost);
        double predicted = r.so.iters * 2.0 * ((double)d.rows_global / ctx.nranks) * (double)d.X.cols * (r.f32 ? 4 : 8) /
                           cost.bandwidth;
        // Long runs check in after every sweep (a line on stderr unless --quiet), so no single wait on
        // the device is longer than a sweep.
        r.so.progress = predicted > 3.0;
        r.ck.fingerprint = solve_fingerprint(&r, &d);
        rc = solve_timed(&ctx, &r, &d, &res);
        if (r.stream && !r.stream_host)  // the powers of two the file's stream divided by (else the load's)
            d.x_exps = r.src.x_exps, d.y_exp = r.src.y_exp, r.src.x_exps = NULL;
    }
    if (rc == DS_OK || rc == DS_ERR_NUMERIC) {  // a failed solve's coefficients are reported too
        const int urc = solve_unscale(&ctx, &d, &res);
        rc = rc == DS_OK ? urc : rc;
    }
    if (rc == DS_OK || rc == DS_ERR_NUMERIC) {
        char cmdline[4096];
        report_cmdline("solve", argc, argv, cmdline, sizeof cmdline);
        r.coef_error = solve_coef_error(&d, &res);
        if (d.a_true_note[0])  // said once there is an answer: a run that fails ends with one error line
            ctx_log(&ctx, "dsolve: not comparing with /a_true: %s", d.a_true_note);
        int wrc = rc == DS_OK ? ctx_agree(&ctx, solve_write(&ctx, &r, &d, &res, cmdline)) : DS_OK;
        if (wrc == DS_OK && res.a)
            wrc = ctx_agree(&ctx, solve_plot(&ctx, &r, &d, &res));
        double total = MPI_Wtime() - r.t_start;
        if (ctx.rank == 0 && res.a) {
            if (opts_flag(&r.args, "json"))
                solve_json(&ctx, &r, &d, &res, total);
            else
                solve_summary(&ctx, &r, &d, &res, total);
        }
        if (rc == DS_OK)
            rc = wrc;
    }
    *msg = ctx.msg;
    solvebak_result_free(&res);
    free(r.times);
    data_free(&ctx, &d);
    if (r.stream)
        rows_close(&ctx, &r.src);
    ctx_close(&ctx);
    return rc;
}
