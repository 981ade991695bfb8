// cmd_predict.c: `dsolve predict`: applies a model written by `dsolve ann` to an HDF5 input, rows
// distributed across ranks; reports the metrics when the input has targets; writes the predictions.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ann/ann.h"
#include "ann/ann_io.h"
#include "cli/cmd_ann_stream.h"
#include "cli/cmds.h"
#include "cli/memcaps.h"
#include "h5io.h"
#include "cli/opts.h"
#include "cli/report.h"

static const ds_opt predict_table[] = {
    {"model", OPT_STRING, NULL, "F.h5", 0, 0, "model written by dsolve ann (required)"},
    {"input", OPT_STRING, NULL, "F.h5", 0, 0, "HDF5 file with X (required); with y too, the metrics are reported"},
    {"x-dataset", OPT_STRING, "X", "NAME", 0, 0, "dataset holding X"},
    {"y-dataset", OPT_STRING, "y", "NAME", 0, 0, "dataset holding y, when present (regression models)"},
    {"labels", OPT_STRING, "labels", "NAME", 0, 0, "dataset holding the integer labels, when present (classification models)"},
    {"output", OPT_STRING, NULL, "F.h5", 0, 0, "write /yhat (and /class for classes) in the input's row order"},
    {"plot", OPT_STRING, NULL, "F.svg", 0, 0, "predicted against actual (needs y; rows sampled above 4 000)"},
    DS_MEMORY_OPTS("an --input X"),
    DS_COMMON_OPTS,
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const char predict_usage[] = "dsolve predict --model model.h5 --input X.h5 [--output pred.h5] [--plot scatter.svg]";
static const char predict_about[] = "Predictions of a network trained by dsolve ann, with metrics when the input has y.";

typedef struct predict_run {
    ds_args args;
    ann_model m;
    ds_data d;
    int has_y;
    double *P, seconds;
    ann_metrics met;
    ann_source src;  // X streamed (src.open) when it does not fit the caps
    ann_plan plan;
    double stream_bytes, stream_seconds;
} predict_run;

static int predict_plot(ds_ctx *ctx, predict_run *r)
{
    const char *path = opts_str(&r->args, "plot");
    if (!path)
        return DS_OK;
    double *y = malloc((size_t)(r->d.X.rows ? r->d.X.rows : 1) * sizeof(double));
    int rc = y ? ctx->be->download(ctx, y, r->d.y, (size_t)r->d.X.rows * sizeof(double))
               : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    rc = ctx_agree(ctx, rc);
    char title[400];
    snprintf(title, sizeof title, "dsolve predict: %s on %s (r = %.6f)", opts_str(&r->args, "model"), r->d.source, r->met.r);
    if (rc == DS_OK)
        rc = ann_scatter_plot(ctx, &r->d, r->P, y, path, title);
    free(y);
    return rc;
}

// Whether the input fits the caps with the model's buffers (W, V, a chunk of H), else the stream's chunk.
static int predict_plan(ds_ctx *ctx, predict_run *r, const char *yname)
{
    const ds_args *a = &r->args;
    DS_CHECK(ann_cli_probe(ctx, opts_str(a, "input"), opts_str(a, "x-dataset"), yname, r->m.classes, &r->d));
    const int64_t K1 = r->m.neurons + 1, C = r->m.outputs;
    const ann_weights w = {.fixed = (double)(r->m.neurons * (r->m.n + 1) + K1 * C) * 8.0, .row_extra = 8.0 * (double)C,
                           .least = 64.0 * (double)(K1 + C), .budget0 = ctx->be->host_memory ? (int64_t)256 << 20 : (int64_t)2 << 30,
                           .ld = K1 + C, .what = "the model's neurons"};
    DS_CHECK(ann_cli_plan(ctx, a, &r->d, &w, &r->plan));
    if (r->plan.stream && opts_given(a, "plot"))
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "%s does not fit the memory caps, and --plot does not stream yet",
                       opts_str(a, "input"));
    return DS_OK;
}

// The input by chunks: the metrics in two passes, the predictions written by the first as they are made
// (to a temporary file renamed at the end, removed on failure).
static int predict_streamed(ds_ctx *ctx, predict_run *r, const char *yname)
{
    const ds_args *a = &r->args;
    const char *in = opts_str(a, "input"), *out = opts_str(a, "output");
    DS_CHECK(ann_cli_open(ctx, &r->plan, in, opts_str(a, "x-dataset"), yname, r->m.classes, &r->d, &r->src,
                          "predict: streaming X"));
    const double t0 = MPI_Wtime();
    char tmp[4200];
    int rc = out ? ann_predictions_begin(ctx, &r->m, r->d.rows_global, out, tmp, sizeof tmp) : DS_OK;
    if (rc == DS_OK)
        rc = ann_stream_predict(ctx, &r->m, &r->src, r->d.source, r->has_y, out ? tmp : NULL, &r->met);
    if (out)
        rc = ann_predictions_end(ctx, rc, tmp, out);
    r->seconds = MPI_Wtime() - t0;
    if (rc == DS_OK)
        ann_cli_stats(ctx, &r->src, NULL, &r->stream_bytes, &r->stream_seconds);
    return rc;
}

static int predict_body(ds_ctx *ctx, predict_run *r)
{
    const ds_args *a = &r->args;
    const char *in = opts_str(a, "input"), *out = opts_str(a, "output");
    int rc = out && ctx->rank == 0 ? h5io_output_dir_ok(out, &ctx->msg) : DS_OK;
    DS_CHECK(ctx_agree(ctx, rc));
    DS_CHECK(ann_model_read(ctx, opts_str(a, "model"), &r->m));
    const char *yname = opts_str(a, r->m.classes ? "labels" : "y-dataset");
    int has = h5io_has_dataset(in, yname);  // every rank must take the same path: agree on what was seen
    MPI_Allreduce(&has, &r->has_y, 1, MPI_INT, MPI_MIN, ctx->comm);
    if (opts_given(a, "plot") && (!r->has_y || r->m.classes))
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "--plot draws predicted against actual y: it needs a regression model "
                       "and an input with %s", yname);
    DS_CHECK(predict_plan(ctx, r, r->has_y ? yname : NULL));
    if (r->plan.stream)
        return predict_streamed(ctx, r, r->has_y ? yname : NULL);
    if (r->has_y && r->m.classes)
        DS_CHECK(data_load_labelled(ctx, in, opts_str(a, "x-dataset"), yname, &r->d));
    else
        DS_CHECK(data_load_lsq(ctx, in, opts_str(a, "x-dataset"), r->has_y ? yname : NULL, 0, &r->d));
    r->P = malloc((size_t)(r->d.X.rows ? r->d.X.rows : 1) * (size_t)r->m.outputs * sizeof(double));
    DS_CHECK(ctx_agree(ctx, r->P ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory")));
    double t0 = MPI_Wtime();
    DS_CHECK(ann_predict(ctx, &r->m, &r->d, r->has_y, r->P, &r->met));
    r->seconds = MPI_Wtime() - t0;
    if (out)
        DS_CHECK(ann_predictions_write(ctx, &r->m, &r->d, r->P, out));
    return predict_plot(ctx, r);
}

static void predict_report(const ds_ctx *ctx, const predict_run *r, double total)
{
    if (opts_flag(&r->args, "json")) {
        ds_json j;
        json_begin(&j);
        json_int(&j, "rows", r->d.rows_global);
        json_int(&j, "cols", r->d.X.cols);
        json_int(&j, "neurons", r->m.neurons);
        json_int(&j, "classes", r->m.classes);
        json_int(&j, "ranks", ctx->nranks);
        json_str(&j, "backend", ctx->be->name);
        json_str(&j, "source", r->d.source);
        json_bool(&j, "has_y", r->has_y);
        json_num(&j, "r", r->has_y ? r->met.r : NAN);
        json_num(&j, "rmse", r->has_y ? r->met.rmse : NAN);
        json_num(&j, "r2", r->has_y ? r->met.r2 : NAN);
        json_num(&j, "accuracy", r->has_y ? r->met.accuracy : NAN);
        json_bool(&j, "streamed", r->src.open);
        json_str(&j, "stream_source", !r->src.open ? "" : r->plan.from_memory ? "host memory" : "file");
        json_int(&j, "chunk_rows", r->src.open ? r->src.rows.chunk_rows : 0);
        json_int(&j, "bytes_moved", (int64_t)r->stream_bytes);  // a count: every digit
        json_num(&j, "stream_rate_gbps", r->src.open ? r->stream_bytes / r->stream_seconds / 1e9 : NAN);
        json_num(&j, "seconds", r->seconds);
        json_num(&j, "total_seconds", total);
        json_str(&j, "output", opts_str(&r->args, "output") ? opts_str(&r->args, "output") : "");
        json_end(&j, stdout);
        return;
    }
    printf("dsolve predict: %lld rows of %s, model %s (%lld neurons), %d rank%s on %s\n", (long long)r->d.rows_global,
           r->d.source, opts_str(&r->args, "model"), (long long)r->m.neurons, ctx->nranks, ctx->nranks > 1 ? "s" : "",
           ctx->be->name);
    if (r->has_y && r->m.classes)
        printf("  accuracy %.4f\n", r->met.accuracy);
    else if (r->has_y)
        printf("  r %.7f  rmse %.3e  R2 %.7f\n", r->met.r, r->met.rmse, r->met.r2);
    if (r->src.open)
        printf("  streamed: X did not fit the memory caps; chunks of %lld rows, %.3g GB read from %s at %.2f GB/s\n",
               (long long)r->src.rows.chunk_rows, r->stream_bytes / 1e9,
               r->plan.from_memory ? "host memory (pinned)" : "the file", r->stream_bytes / r->stream_seconds / 1e9);
    printf("  prediction %.4f s, total %.2f s%s%s\n", r->seconds, total, opts_str(&r->args, "output") ? "; written to " : "",
           opts_str(&r->args, "output") ? opts_str(&r->args, "output") : "");
}

int cmd_predict(MPI_Comm comm, int argc, char **argv, ds_msg *msg)
{
    const double t0 = MPI_Wtime();
    predict_run r;
    memset(&r, 0, sizeof r);
    DS_CHECK(opts_parse(predict_table, argc, argv, &r.args, msg));
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (opts_flag(&r.args, "help")) {
        if (rank == 0)
            opts_help(stdout, &r.args, predict_usage, predict_about);
        return DS_OK;
    }
    if (!opts_given(&r.args, "model") || !opts_given(&r.args, "input"))
        return ds_fail(msg, DS_ERR_USAGE, "predict needs --model and --input (see dsolve predict --help)");
    ds_ctx ctx;
    int rc = ctx_open(&ctx, comm, opts_str(&r.args, "backend"));
    report_settings(&ctx, &r.args);
    if (rc == DS_OK)
        rc = ctx_agree(&ctx, predict_body(&ctx, &r));
    if (rc == DS_OK && ctx.rank == 0)
        predict_report(&ctx, &r, MPI_Wtime() - t0);
    *msg = ctx.msg;
    ann_model_free(&r.m);
    free(r.P);
    ann_source_close(&ctx, &r.src);
    data_free(&ctx, &r.d);
    ctx_close(&ctx);
    return rc;
}
