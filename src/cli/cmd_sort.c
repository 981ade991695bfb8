// cmd_sort.c: `dsolve sort`: sorts the keys of a 1-D HDF5 dataset (or generated ones) over all ranks,
// optionally with a payload (--values) or the global permutation (--argsort); verifies, times the
// phases (median of --repeat runs after a warm-up) and writes the result in global order (ranks in
// turns, to a temporary file renamed when complete).
// provides: cmd_sort
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_sort.h"
#include "cli/cmds.h"
#include "core/cleanup.h"
#include "core/data.h"
#include "h5io.h"
#include "cli/memcaps.h"
#include "cli/opts.h"
#include "cli/report.h"
#include "core/repeat.h"
#include "sort/sort.h"

static const ds_opt sort_table[] = {
    {"input", OPT_STRING, NULL, "F.h5", 0, 0, "HDF5 file with the keys (a 1-D dataset)"},
    {"dataset", OPT_STRING, "keys", "NAME", 0, 0, "dataset of keys in --input; the output's dataset has this name"},
    {"values", OPT_STRING, NULL, "NAME", 0, 0, "payload dataset of --input sorted along with the keys"},
    {"argsort", OPT_FLAG, NULL, NULL, 0, 0, "also produce the global permutation (int64 dataset /argsort)"},
    {"output", OPT_STRING, NULL, "F.h5", 0, 0, "write the sorted keys (and values, permutation) here"},
    {"gen", OPT_INT, NULL, "N", 1, 1.1e12, "generate N keys in all (instead of --input)"},
    {"dtype", OPT_CHOICE, "int32", "int32|int64|uint32|uint64|float32|float64", 0, 0, "type of generated keys"},
    {"dist", OPT_CHOICE, "uniform", SORT_DIST_NAMES, 0, 0, "distribution of generated keys"},
    {"seed", OPT_INT, "0", "S", 0, 9e18, "generator seed"},
    {"descending", OPT_FLAG, NULL, NULL, 0, 0, "largest first (the exact reverse order: NaNs first)"},
    {"verify", OPT_FLAG, NULL, NULL, 0, 0, "check order, rank boundaries, count and checksum"},
    {"repeat", OPT_INT, "1", "R", 1, 10000, "with R > 1: one warm-up sort, then R timed; the median is reported"},
    {"cub-only", OPT_FLAG, NULL, NULL, 0, 0, "benchmark reference: time the library's radix sort alone on each rank's keys"},
    DS_MEMORY_OPTS("a rank's share of the keys"),
    DS_COMMON_OPTS,
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const char sort_usage[] =
    "dsolve sort [--input F.h5 [--dataset keys] [--values NAME] | --gen N [--dtype T] [--dist D] [--seed S]]\n"
    "            [--argsort] [--descending] [--output F.h5] [--verify] [--repeat R]";
static const char sort_about[] =
    "Distributed sample sort: local radix sort, splitters by regular sampling on (key, position), one\n"
    "all-to-all, a merge of the received runs. Floats: -inf < ... < -0.0 < +0.0 < ... < +inf < NaN.\n"
    "Without --input or --gen: 10^8 int32 keys per rank in descending order, sorted and verified.";


// The sizes and types of the input (every rank validates, so all fail alike).
static int sort_probe(ds_ctx *ctx, sort_cmd *c)
{
    if (!c->input) {
        c->n_global = c->default_run ? (int64_t)100000000 * ctx->nranks : opts_int(&c->a, "gen");
        return DS_OK;
    }
    int type = 0, vtype = 0;
    int64_t nv = 0;
    DS_CHECK(h5io_probe_keys(c->input, c->dataset, &type, &c->n_global, &ctx->msg));
    c->o.dtype = type;
    if (c->values) {
        DS_CHECK(h5io_probe_keys(c->input, c->values, &vtype, &nv, &ctx->msg));
        if (nv != c->n_global)
            return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: dataset %s has %lld elements but the keys %s have %lld",
                           c->input, c->values, (long long)nv, c->dataset, (long long)c->n_global);
        c->o.val_size = sort_dtype_size(vtype);
    }
    return DS_OK;
}

static int sort_value_type(const sort_cmd *c, int *type)
{
    int64_t n = 0;
    ds_msg m = {{0}};
    return h5io_probe_keys(c->input, c->values, type, &n, &m);
}

// This rank's block of keys (and values) on the host, then in backend memory.
static int sort_load(ds_ctx *ctx, sort_cmd *c)
{
    data_partition(c->n_global, ctx->nranks, ctx->rank, &c->i0, &c->n_local);
    const size_t kb = (size_t)c->n_local * sort_dtype_size(c->o.dtype), vb = (size_t)c->n_local * c->o.val_size;
    c->hkeys = malloc(kb ? kb : 8);
    c->hvals = c->o.val_size ? malloc(vb ? vb : 8) : NULL;
    if (!c->hkeys || (c->o.val_size && !c->hvals))
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for %lld keys on rank %d", (long long)c->n_local,
                       ctx->rank);
    if (c->input) {
        DS_CHECK(h5io_read_keys(c->input, c->dataset, c->o.dtype, c->i0, c->n_local, c->hkeys, &ctx->msg));
        int vtype = 0;
        if (c->values && sort_value_type(c, &vtype) == DS_OK)
            DS_CHECK(h5io_read_keys(c->input, c->values, vtype, c->i0, c->n_local, c->hvals, &ctx->msg));
    } else {
        sort_gen_keys(c->o.dtype, c->dist, (uint64_t)opts_int(&c->a, "seed"), c->n_global, c->i0, c->n_local, c->hkeys,
                      sort_threads(ctx));
    }
    if (ctx->be->host_memory) {
        c->dkeys = c->hkeys;
        c->dvals = c->hvals;
        return DS_OK;
    }
    DS_CHECK(ctx->be->alloc(ctx, &c->dkeys, kb ? kb : 8));
    DS_CHECK(ctx->be->upload(ctx, c->dkeys, c->hkeys, kb));
    if (c->o.val_size) {
        DS_CHECK(ctx->be->alloc(ctx, &c->dvals, vb ? vb : 8));
        DS_CHECK(ctx->be->upload(ctx, c->dvals, c->hvals, vb));
    }
    return DS_OK;
}

// The library's radix sort alone on this rank's keys (the reference of the benchmarks).
static int cub_alone(ds_ctx *ctx, sort_plan *p, sort_result *r)
{
    memset(r, 0, sizeof *r);
    const int w = sort_dtype_size(p->o.dtype);
    int sel = 0;
    DS_CHECK(ctx->be->copy(ctx, p->k[0], p->keys_in, (size_t)p->n_local * w));
    DS_CHECK(ctx->be->sync(ctx));
    DS_CHECK(ctx->be->mark(ctx, 0));
    DS_CHECK(ctx->be->sort->radix(ctx, p, p->n_local, w, p->o.dtype, p->o.descending, &sel, NULL));
    DS_CHECK(ctx->be->mark(ctx, 1));
    DS_CHECK(ctx->be->elapsed(ctx, 0, 1, &r->seconds));
    r->keys = p->k[sel];
    r->n = p->n_local;
    r->path_native = 1;
    return DS_OK;
}

typedef struct sort_call {
    sort_cmd *c;
    sort_plan *p;
} sort_call;

// One sort (or the library's radix sort alone); t: the whole sort's seconds, then the four phases'.
static int sort_once(ds_ctx *ctx, void *arg, int call, double *t)
{
    sort_call *s = arg;
    sort_result *r = &s->c->res;
    DS_CHECK(opts_flag(&s->c->a, "cub-only") ? cub_alone(ctx, s->p, r) : sort_run(ctx, s->p, r));
    t[0] = r->seconds, t[1] = r->phase[0], t[2] = r->phase[1], t[3] = r->phase[2], t[4] = r->phase[3];
    return DS_OK;
}

// One warm-up and R timed sorts when --repeat R > 1; the median of the slowest rank's times.
static int sort_timed(ds_ctx *ctx, sort_cmd *c, sort_plan *p)
{
    const int reps = (int)opts_int(&c->a, "repeat");
    c->times = calloc((size_t)reps * 5, sizeof(double));
    DS_CHECK(ctx_agree(ctx, c->times ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory")));
    repeat_plan rp = {.warmup = reps > 1, .repeat = reps, .nt = 5, .slowest = 1, .agree = repeat_ctx_agree};
    sort_call call = {c, p};
    double m[5];
    DS_CHECK(repeat_timed(ctx, &rp, sort_once, &call, c->times, m));
    c->seconds = m[0];
    for (int k = 0; k < 4; k++)
        c->phase[k] = m[k + 1];
    int64_t most = 0;
    MPI_Allreduce(&c->res.n, &most, 1, MPI_INT64_T, MPI_MAX, ctx->comm);
    c->imbalance = c->n_global > 0 ? (double)most / ((double)c->n_global / ctx->nranks) : 1.0;
    return DS_OK;
}

// Downloads this rank's result and writes it, ranks in turns, into tmp at its global position.
static int sort_write_part(ds_ctx *ctx, sort_cmd *c, const char *tmp, int64_t at)
{
    const sort_result *r = &c->res;
    const int w = sort_dtype_size(c->o.dtype);
    size_t most = (size_t)r->n * 8;  // the widest element
    void *h = malloc(most ? most : 8);
    if (!h)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int rc = ctx->be->download(ctx, h, r->keys, (size_t)r->n * w);
    if (rc == DS_OK)
        rc = h5io_write_keys(tmp, c->dataset, c->o.dtype, at, r->n, h, &ctx->msg);
    if (rc == DS_OK && c->o.argsort) {
        rc = ctx->be->download(ctx, h, r->perm, (size_t)r->n * 8);
        if (rc == DS_OK)
            rc = h5io_write_keys(tmp, "argsort", H5IO_KEY_I64, at, r->n, h, &ctx->msg);
    }
    int vtype = 0;
    if (rc == DS_OK && c->values && (rc = sort_value_type(c, &vtype)) == DS_OK) {
        rc = ctx->be->download(ctx, h, r->vals, (size_t)r->n * c->o.val_size);
        if (rc == DS_OK)
            rc = h5io_write_keys(tmp, c->values, vtype, at, r->n, h, &ctx->msg);
    }
    free(h);
    return rc;
}

static int sort_create(ds_ctx *ctx, sort_cmd *c, const char *tmp)
{
    if (ctx->rank != 0)
        return DS_OK;
    DS_CHECK(h5io_create_keys(tmp, 1, c->dataset, c->o.dtype, c->n_global, &ctx->msg));
    if (c->o.argsort)
        DS_CHECK(h5io_create_keys(tmp, 0, "argsort", H5IO_KEY_I64, c->n_global, &ctx->msg));
    int vtype = 0;
    if (c->values) {
        DS_CHECK(sort_value_type(c, &vtype));
        DS_CHECK(h5io_create_keys(tmp, 0, c->values, vtype, c->n_global, &ctx->msg));
    }
    return DS_OK;
}

static int sort_write(ds_ctx *ctx, sort_cmd *c)
{
    const char *out = opts_str(&c->a, "output");
    if (!out)
        return DS_OK;
    char tmp[4200];
    h5io_part_name(out, ctx->job_tag, tmp, sizeof tmp);
    cleanup_add(tmp);
    int64_t at = 0;
    MPI_Exscan(&c->res.n, &at, 1, MPI_INT64_T, MPI_SUM, ctx->comm);
    if (ctx->rank == 0)
        at = 0;
    int rc = ctx_agree(ctx, sort_create(ctx, c, tmp));
    for (int turn = 0; rc == DS_OK && turn < ctx->nranks; turn++)
        rc = ctx_agree(ctx, turn == ctx->rank ? sort_write_part(ctx, c, tmp, at) : DS_OK);
    if (rc == DS_OK && ctx->rank == 0)
        rc = h5io_commit(tmp, out, &ctx->msg);
    rc = ctx_agree(ctx, rc);
    if (rc != DS_OK && ctx->rank == 0)
        h5io_discard(tmp);
    cleanup_remove(tmp);
    return rc;
}

static const char *phase_keys[4] = {"local_sort_seconds", "splitter_seconds", "exchange_seconds", "merge_seconds"};

static void sort_report(ds_ctx *ctx, sort_cmd *c)
{
    const int cub = opts_flag(&c->a, "cub-only");
    const char *source = c->input ? c->input : opts_str(&c->a, "dist");
    const double rate = c->seconds > 0 ? (double)c->n_global / c->seconds / 1e9 : 0.0;
    if (opts_flag(&c->a, "json")) {
        ds_json j;
        json_begin(&j);
        json_str(&j, "mode", cub ? "cub-only" : "sort");
        json_int(&j, "keys", c->n_global);
        json_str(&j, "dtype", sort_dtype_name(c->o.dtype));
        json_int(&j, "ranks", ctx->nranks);
        json_str(&j, "backend", ctx->be->name);
        json_str(&j, "device", ctx->device_name);
        json_str(&j, c->input ? "input" : "dist", source);
        json_bool(&j, "descending", c->o.descending);
        json_bool(&j, "argsort", c->o.argsort);
        json_int(&j, "value_bytes", c->o.val_size);
        json_num(&j, "seconds", c->seconds);
        json_num(&j, "total_seconds", c->total);
        json_num(&j, "gkeys_per_s", rate);
        json_num(&j, "imbalance", c->imbalance);
        if (c->verified >= 0)
            json_bool(&j, "verified", c->verified);
        else
            json_str(&j, "verified", "not checked");
        for (int k = 0; k < 4; k++)
            json_num(&j, phase_keys[k], c->phase[k]);
        json_str(&j, "path", c->streamed ? "streamed" : c->res.path_native ? "native" : "mapped");
        json_bool(&j, "streamed", c->streamed);
        json_int(&j, "chunk_keys", c->streamed ? c->ss.chunk : c->n_global);
        json_int(&j, "runs", c->streamed ? c->ss.runs : 1);
        json_int(&j, "bytes_moved", c->streamed ? (int64_t)c->ss.bytes_moved : 0);  // a count: every digit
        json_num(&j, "stream_rate_gbps", c->streamed && c->seconds > 0 ? c->ss.bytes_moved / c->seconds / 1e9 : NAN);
        json_num(&j, "io_seconds", c->streamed ? c->ss.io_seconds : NAN);
        json_int(&j, "repeat", opts_int(&c->a, "repeat"));
        json_nums(&j, "seconds_all", c->times, opts_int(&c->a, "repeat"));
        json_end(&j, stdout);
        return;
    }
    printf("dsolve sort%s: %lld %s keys (%s%s) on %d rank%s, %s backend (%s)\n", cub ? " --cub-only" : "",
           (long long)c->n_global, sort_dtype_name(c->o.dtype), source, c->o.descending ? ", descending" : "",
           ctx->nranks, ctx->nranks > 1 ? "s" : "", ctx->be->name, ctx->device_name);
    printf("  sort %.4f s%s (%.2f Gkeys/s), with I/O %.3f s, imbalance %.3f\n", c->seconds,
           opts_int(&c->a, "repeat") > 1 ? " median" : "", rate, c->total, c->imbalance);
    if (c->streamed)
        printf("  streamed: the keys did not fit the memory caps; %lld runs of %lld keys, %.3g GB moved at %.2f GB/s, "
               "%.3f s producing and writing\n", (long long)c->ss.runs, (long long)c->ss.chunk, c->ss.bytes_moved / 1e9,
               c->seconds > 0 ? c->ss.bytes_moved / c->seconds / 1e9 : 0.0, c->ss.io_seconds);
    else
        printf("  phases: local sort %.4f s, splitters %.4f s, exchange %.4f s, merge %.4f s\n", c->phase[0],
               c->phase[1], c->phase[2], c->phase[3]);
    if (c->verified >= 0)
        printf("  verify: %s%s%s\n", c->verified ? "PASSED" : "FAILED", c->verified ? "" : ": ", c->why);
}

static int sort_options(ds_ctx *ctx, sort_cmd *c, ds_msg *msg)
{
    c->input = opts_str(&c->a, "input");
    c->dataset = opts_str(&c->a, "dataset");
    c->values = opts_str(&c->a, "values");
    c->default_run = !c->input && !opts_given(&c->a, "gen");
    c->dist = c->default_run ? DIST_REVERSE : sort_dist_parse(opts_str(&c->a, "dist"));
    c->o.dtype = sort_dtype_parse(opts_str(&c->a, "dtype"));
    c->o.descending = opts_flag(&c->a, "descending");
    c->o.argsort = opts_flag(&c->a, "argsort");
    c->verified = -1;
    if (c->input && opts_given(&c->a, "gen"))
        return ds_fail(msg, DS_ERR_USAGE, "sort takes --input or --gen, not both");
    if (c->values && !c->input)
        return ds_fail(msg, DS_ERR_USAGE, "--values names a dataset of --input");
    if (opts_flag(&c->a, "cub-only") && (c->o.argsort || c->values))
        return ds_fail(msg, DS_ERR_USAGE, "--cub-only sorts keys alone");
    if (opts_str(&c->a, "output"))
        DS_CHECK(h5io_output_dir_ok(opts_str(&c->a, "output"), msg));
    return DS_OK;
}

// The whole command's seconds (the slowest rank's), the report, and exit 4 for a failed verification.
static int sort_finish(ds_ctx *ctx, sort_cmd *c, double t0, int rc)
{
    c->total = MPI_Wtime() - t0;
    double most = 0;
    MPI_Allreduce(&c->total, &most, 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
    c->total = most;
    if (rc == DS_OK && ctx->rank == 0)
        sort_report(ctx, c);
    if (rc == DS_OK && c->verified == 0)
        rc = ds_fail(&ctx->msg, DS_ERR_NUMERIC, "sort: verification failed: %s", c->why);
    return rc;
}

static int sort_main(ds_ctx *ctx, sort_cmd *c)
{
    const double t0 = MPI_Wtime();
    if (opts_flag(&c->a, "cub-only") && !ctx->be->sort->native_ok)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "--cub-only times CUB's radix sort: it needs the cuda backend");
    DS_CHECK(ctx_agree(ctx, sort_probe(ctx, c)));
    DS_CHECK(ctx_agree(ctx, sort_stream_decide(ctx, c)));
    if (c->streamed) {
        c->times = calloc(1, sizeof(double));
        DS_CHECK(ctx_agree(ctx, c->times ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory")));
        int rc = ctx_agree(ctx, sort_streamed(ctx, c));
        c->times[0] = c->seconds;
        return sort_finish(ctx, c, t0, rc);
    }
    DS_CHECK(ctx_agree(ctx, sort_load(ctx, c)));
    sort_plan p;
    int rc = ctx_agree(ctx, sort_plan_init(ctx, &p, &c->o, c->dkeys, c->dvals, c->n_local));
    if (rc == DS_OK)
        rc = sort_timed(ctx, c, &p);
    if (rc == DS_OK && (opts_flag(&c->a, "verify") || c->default_run)) {
        int ok = 0;
        rc = sort_check(ctx, &p, &c->res, &ok, c->why, sizeof c->why);
        c->verified = ok;
    }
    if (rc == DS_OK && !opts_flag(&c->a, "cub-only"))
        rc = sort_write(ctx, c);
    rc = sort_finish(ctx, c, t0, rc);
    sort_plan_free(ctx, &p);
    return rc;
}

int cmd_sort(MPI_Comm comm, int argc, char **argv, ds_msg *msg)
{
    sort_cmd c;
    memset(&c, 0, sizeof c);
    DS_CHECK(opts_parse(sort_table, argc, argv, &c.a, msg));
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (opts_flag(&c.a, "help")) {
        if (rank == 0)
            opts_help(stdout, &c.a, sort_usage, sort_about);
        return DS_OK;
    }
    DS_CHECK(sort_options(NULL, &c, msg));
    ds_ctx ctx;
    int rc = ctx_open(&ctx, comm, opts_str(&c.a, "backend"));
    if (rc == DS_OK) {
        report_settings(&ctx, &c.a);
        ctx.quiet = ctx.quiet || opts_flag(&c.a, "json");
        rc = sort_main(&ctx, &c);
    }
    if (ctx.be && !ctx.be->host_memory) {
        ctx.be->free(&ctx, c.dkeys);
        ctx.be->free(&ctx, c.dvals);
    }
    free(c.hkeys);
    free(c.hvals);
    free(c.times);
    *msg = ctx.msg;
    ctx_close(&ctx);
    return rc;
}
