// cmd_logreg.c: `dsolve logreg`: multi-class logistic regression on Fashion-MNIST (IDX) or an HDF5
// labelled set, data-parallel over ranks, for one training-set size or a sweep of them.
// provides: cmd_logreg
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/ckptopts.h"
#include "cli/memcaps.h"
#include "h5io.h"
#include "logreg/logreg_data.h"
#include "cli/opts.h"
#include "cli/plot.h"
#include "cli/report.h"
#include "core/repeat.h"

enum { MAX_SIZES = 16 };

static const ds_opt logreg_table[] = {
    {"data", OPT_STRING, "/usr/share/datasets/fashion-mnist", "DIR", 0, 0,
     "MNIST-layout directory: train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-..."},
    {"input", OPT_STRING, NULL, "F.h5", 0, 0, "HDF5 training set (float X, integer labels) instead of --data"},
    {"test", OPT_STRING, NULL, "F.h5", 0, 0, "HDF5 test set (with --input; without it no test accuracy)"},
    {"x-dataset", OPT_STRING, "X", "NAME", 0, 0, "dataset holding X in --input and --test"},
    {"labels-dataset", OPT_STRING, "labels", "NAME", 0, 0, "dataset holding the labels"},
    {"classes", OPT_INT, "10", "K", 2, LR_MAX_CLASSES, "number of classes (labels 0 .. K-1)"},
    {"model", OPT_CHOICE, "softmax", "softmax|ovr", 0, 0, "softmax, or one-vs-rest sigmoids (the seed's)"},
    {"optimizer", OPT_CHOICE, "lbfgs", "lbfgs|nesterov|gd", 0, 0, "L-BFGS (10 pairs, backtracking), Nesterov with restart, or plain gradient descent"},
    {"iters", OPT_INT, "100", "K", 0, 1e7, "iterations"},
    {"lr", OPT_DOUBLE, "0.1", "ETA", 0, 1e6, "step size of gd and nesterov"},
    {"l2", OPT_DOUBLE, "1e-4", "LAMBDA", 0, 1e6, "L2 penalty lambda/2 ||W||^2 on the weights (not the bias)"},
    {"samples", OPT_STRING, "all", "N[,N...]", 0, 0, "training-set sizes (the first N items), e.g. 60,600,6000,60000; a row each"},
    {"precision", OPT_CHOICE, "f32", "f32|f64", 0, 0, "storage of X and the GEMMs (the loss, gradient sums and optimiser stay f64)"},
    {"plot", OPT_STRING, NULL, "F.svg", 0, 0, "an SVG plot of the objective by iteration (one line per size)"},
    {"repeat", OPT_INT, "1", "R", 1, 1000, "with R > 1: one warm-up training, then R timed ones; the median time is reported"},
    DS_CHECKPOINT_OPTS("the training state", "", "every iteration", "run"),
    DS_MEMORY_OPTS("a training or test set (an HDF5 file's, or on a GPU one kept in host memory)"),
    DS_COMMON_OPTS,
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const char logreg_usage[] = "dsolve logreg [--data DIR | --input F.h5 [--test F.h5]] [--model M] [--optimizer O] [--iters K] [options]";
static const char logreg_about[] =
    "Multi-class logistic regression trained by full-batch gradient methods, rows distributed across ranks.";

typedef struct lr_run {
    ds_args args;
    lr_opts o;
    int f32, nsizes;
    int64_t sizes[MAX_SIZES];  // 0: all
    lr_source train, test;
    int have_test;
    double t_start;
    ds_ckpt ck;  // --checkpoint, --restart
    lr_mem mem_train, mem_test;  // the caps and each set's share of them
} lr_run;

typedef struct lr_row {
    int64_t samples, features;
    lr_result res;
    double test_accuracy, test_loss;
    // A set streamed (the training set's chunks, else the test set's): bytes read by all ranks for the
    // training and the evaluation, the slowest rank's seconds in its passes, the training set's passes.
    int streamed, stream_host, passes, test_streamed;
    int64_t chunk_rows;
    double bytes_moved, stream_seconds;
    double resident[2];  // the streamed sets' rows kept in backend memory, all ranks' [training, test]
} lr_row;

static int parse_sizes(const char *text, lr_run *r, ds_msg *msg)
{
    if (strcmp(text, "all") == 0) {
        r->nsizes = 1;
        r->sizes[0] = 0;
        return DS_OK;
    }
    const char *p = text;
    for (r->nsizes = 0; *p; r->nsizes++) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 1 || (*end && *end != ',') || r->nsizes == MAX_SIZES)
            return ds_fail(msg, DS_ERR_USAGE, "--samples %s: expected 'all' or up to %d positive integers separated by commas",
                           text, MAX_SIZES);
        r->sizes[r->nsizes] = v;
        p = *end ? end + 1 : end;
    }
    return r->nsizes ? DS_OK : ds_fail(msg, DS_ERR_USAGE, "--samples: empty");
}

static int logreg_parse(int argc, char **argv, lr_run *r, ds_msg *msg)
{
    DS_CHECK(opts_parse(logreg_table, argc, argv, &r->args, msg));
    const ds_args *a = &r->args;
    const char *opt = opts_str(a, "optimizer");
    r->o = (lr_opts){
        .model = strcmp(opts_str(a, "model"), "ovr") == 0 ? LR_OVR : LR_SOFTMAX,
        .optimizer = strcmp(opt, "gd") == 0 ? LR_GD : strcmp(opt, "nesterov") == 0 ? LR_NESTEROV : LR_LBFGS,
        .iters = (int)opts_int(a, "iters"),
        .classes = (int)opts_int(a, "classes"),
        .lr = opts_double(a, "lr"),
        .l2 = opts_double(a, "l2"),
    };
    r->f32 = strcmp(opts_str(a, "precision"), "f32") == 0;
    if (opts_given(a, "test") && !opts_given(a, "input"))
        return ds_fail(msg, DS_ERR_USAGE, "--test goes with --input (with --data the test set is the directory's t10k files)");
    if (opts_given(a, "input") && opts_given(a, "data"))
        return ds_fail(msg, DS_ERR_USAGE, "--input and --data both given: choose one");
    const char *xn = opts_str(a, "x-dataset"), *ln = opts_str(a, "labels-dataset"), *dir = opts_str(a, "data");
    r->train = (lr_source){.h5 = opts_str(a, "input"), .xname = xn, .lname = ln, .dir = dir, .split = "train"};
    r->test = (lr_source){.h5 = opts_str(a, "test"), .xname = xn, .lname = ln, .dir = dir, .split = "t10k"};
    r->have_test = !opts_given(a, "input") || opts_given(a, "test");
    DS_CHECK(parse_sizes(opts_str(a, "samples"), r, msg));
    r->ck = cli_checkpoint(a, "logreg", 0);
    if (!r->ck.path && !r->ck.restart)
        return DS_OK;
    if (r->nsizes > 1 || opts_int(a, "repeat") > 1)
        return ds_fail(msg, DS_ERR_USAGE, "--checkpoint and --restart take one training: one --samples size, --repeat 1");
    if (r->ck.path)
        DS_CHECK(h5io_output_dir_ok(r->ck.path, msg));
    r->o.ckpt = &r->ck;
    return DS_OK;
}

// What a checkpoint must belong to: the data (its source and size) and every setting of the training.
static uint64_t logreg_fingerprint(const lr_run *r, const lr_set *s, const char *src)
{
    const double v[] = {r->o.model, r->o.optimizer, r->o.iters, r->o.classes, r->o.lr, r->o.l2, r->f32,
                        (double)s->rows_global, (double)s->cols};
    return ckpt_hash(ckpt_hash(0, v, sizeof v), src, strlen(src));
}

static const char *model_name(int m)
{
    return m == LR_OVR ? "ovr" : "softmax";
}

static const char *optimizer_name(int o)
{
    return o == LR_GD ? "gd" : o == LR_NESTEROV ? "nesterov" : "lbfgs";
}

// What the streamed sets moved since before ([set][bytes, seconds, passes]): bytes summed over ranks,
// seconds the slowest rank's. Collective.
static void logreg_streamed(ds_ctx *ctx, const lr_set *const set[2], const double before[2][3], lr_row *row)
{
    double v[4] = {0};  // bytes, seconds, resident rows of each set
    for (int i = 1; i >= 0; i--) {
        const ds_rows *s = set[i]->src;
        if (!s)
            continue;
        v[0] += s->bytes - before[i][0], v[1] += s->seconds - before[i][1], v[2 + i] = (double)set[i]->resident;
        row->chunk_rows = s->chunk_rows, row->stream_host = s->mem_x != NULL;
        if (i == 0)
            row->passes = s->passes - (int)before[i][2];
        else
            row->test_streamed = 1;
    }
    double seconds = v[1];
    MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_DOUBLE, MPI_SUM, ctx->comm);
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
    row->streamed = 1, row->bytes_moved = v[0], row->stream_seconds = seconds;
    row->resident[0] = v[2], row->resident[1] = v[3];
}

typedef struct logreg_call {
    const lr_run *r;
    const lr_set *train;
    lr_row *row;
} logreg_call;

// One training; t[0]: its seconds.
static int logreg_once(ds_ctx *ctx, void *arg, int call, double *t)
{
    logreg_call *c = arg;
    logreg_result_free(&c->row->res);
    DS_CHECK(logreg_train(ctx, c->train, &c->r->o, &c->row->res));
    t[0] = c->row->res.seconds;
    return DS_OK;
}

// One size: load its rows, train, evaluate on the training rows and on the test set.
static int logreg_one(ds_ctx *ctx, const lr_run *r, const lr_set *test, int64_t samples, lr_row *row, char *src,
                      size_t len)
{
    lr_set train;
    DS_CHECK(logreg_load(ctx, &r->train, samples, 0, r->f32, r->o.classes, &r->mem_train, &train, src, len));
    const lr_set *set[2] = {&train, test};
    double before[2][3] = {{0}};
    for (int i = 0; i < 2; i++)
        if (set[i]->src)
            before[i][0] = set[i]->src->bytes, before[i][1] = set[i]->src->seconds, before[i][2] = set[i]->src->passes;
    ctx_log(ctx, "logreg: training on %lld samples (%s, %s, %d iterations)", (long long)train.rows_global,
            model_name(r->o.model), optimizer_name(r->o.optimizer), r->o.iters);
    row->samples = train.rows_global;
    row->features = train.cols - 1;
    if (r->o.ckpt)
        r->o.ckpt->fingerprint = logreg_fingerprint(r, &train, src);
    const int reps = (int)opts_int(&r->args, "repeat");
    double times[1000];  // --repeat's most
    repeat_plan p = {.warmup = reps > 1, .repeat = reps, .nt = 1};
    logreg_call call = {r, &train, row};
    int rc = repeat_timed(ctx, &p, logreg_once, &call, times, &row->res.seconds);
    row->test_accuracy = row->test_loss = NAN;
    if (rc == DS_OK && test->rows_global > 0) {
        if (test->cols != train.cols)
            rc = ctx_agree(ctx, ds_fail(&ctx->msg, DS_ERR_INPUT, "the test set has %lld features, the training set %lld",
                                        (long long)test->cols - 1, (long long)train.cols - 1));
        else
            rc = logreg_evaluate(ctx, test, &r->o, row->res.W, &row->test_accuracy, &row->test_loss);
    }
    if (rc == DS_OK && (train.src || test->src))  // the plans were agreed: every rank is here
        logreg_streamed(ctx, set, before, row);
    logreg_set_free(ctx, &train);
    return rc;
}

static void logreg_json(const ds_ctx *ctx, const lr_run *r, const lr_row *rows, int n, const char *src, double total)
{
    const lr_row *last = &rows[n - 1];
    double v[5][MAX_SIZES];
    for (int i = 0; i < n; i++) {
        v[0][i] = (double)rows[i].samples;
        v[1][i] = rows[i].res.train_accuracy;
        v[2][i] = rows[i].test_accuracy;
        v[3][i] = rows[i].res.seconds;
        v[4][i] = rows[i].res.iters;
    }
    ds_json j;
    json_begin(&j);
    json_str(&j, "source", src);
    json_int(&j, "samples", last->samples);
    json_int(&j, "features", last->features);
    json_str(&j, "model", model_name(r->o.model));
    json_str(&j, "optimizer", optimizer_name(r->o.optimizer));
    json_int(&j, "classes", r->o.classes);
    json_str(&j, "precision", r->f32 ? "f32" : "f64");
    json_num(&j, "lr", r->o.lr);
    json_num(&j, "l2", r->o.l2);
    json_int(&j, "ranks", ctx->nranks);
    json_str(&j, "backend", ctx->be->name);
    json_str(&j, "device_name", ctx->device_name);
    json_int(&j, "iterations", last->res.iters);
    json_str(&j, "stop_reason", last->res.stop_reason);
    json_num(&j, "train_accuracy", last->res.train_accuracy);
    json_num(&j, "test_accuracy", last->test_accuracy);
    json_num(&j, "loss", last->res.train_loss);
    json_num(&j, "test_loss", last->test_loss);
    json_num(&j, "seconds", last->res.seconds);
    json_num(&j, "seconds_per_iteration", last->res.iters ? last->res.seconds / last->res.iters : NAN);
    json_num(&j, "total_seconds", total);
    json_int(&j, "repeat", opts_int(&r->args, "repeat"));
    json_nums(&j, "loss_history", last->res.loss, last->res.iters + 1);
    char digest[20];  // the weights' bytes, FNV-1a: equal digests, bitwise equal weights
    snprintf(digest, sizeof digest, "%016llx",
             (unsigned long long)ckpt_hash(0, last->res.W, (size_t)(last->features + 1) * r->o.classes * sizeof(double)));
    json_str(&j, "weights_digest", digest);
    json_nums(&j, "sweep_samples", v[0], n);
    json_nums(&j, "sweep_train_accuracy", v[1], n);
    json_nums(&j, "sweep_test_accuracy", v[2], n);
    json_nums(&j, "sweep_seconds", v[3], n);
    json_nums(&j, "sweep_iterations", v[4], n);
    json_bool(&j, "streamed", last->streamed);
    json_str(&j, "stream_source", !last->streamed ? "" : last->stream_host ? "host memory" : "file");
    json_int(&j, "chunk_rows", last->chunk_rows);
    json_int(&j, "stream_passes", last->passes);
    json_bool(&j, "test_streamed", last->test_streamed);
    json_int(&j, "resident_rows", (int64_t)last->resident[0]);
    json_int(&j, "test_resident_rows", (int64_t)last->resident[1]);
    json_int(&j, "bytes_moved", (int64_t)last->bytes_moved);  // a count: every digit
    json_num(&j, "stream_rate_gbps", last->streamed ? last->bytes_moved / last->stream_seconds / 1e9 : NAN);
    json_end(&j, stdout);
}

static void logreg_summary(const ds_ctx *ctx, const lr_run *r, const lr_row *rows, int n, const char *src, double total)
{
    printf("dsolve logreg: %s (%lld features), %s model, %s, at most %d iterations, l2 %g", src,
           (long long)rows[n - 1].features, model_name(r->o.model), optimizer_name(r->o.optimizer), r->o.iters, r->o.l2);
    if (r->o.optimizer != LR_LBFGS)
        printf(", lr %g", r->o.lr);
    printf(", %s\n", r->f32 ? "f32" : "f64");
    printf("  ranks %d, backend %s (%s)%s%s\n", ctx->nranks, ctx->be->name, ctx->device_name,
           ctx->backend_note[0] ? " — " : "", ctx->backend_note);
    printf("  %10s %6s %10s %9s %9s %10s %12s\n", "samples", "iters", "loss", "train acc", "test acc", "seconds",
           "ms/iteration");
    for (int i = 0; i < n; i++) {
        const lr_result *s = &rows[i].res;
        printf("  %10lld %6d %10.5f %9.4f %9.4f %10.4f %12.4f\n", (long long)rows[i].samples, s->iters, s->train_loss,
               s->train_accuracy, rows[i].test_accuracy, s->seconds, s->iters ? 1e3 * s->seconds / s->iters : 0.0);
    }
    const lr_row *last = &rows[n - 1];
    if (last->streamed)
        printf("  streamed: X did not fit the memory caps; %.0f%% of the training rows kept in %s memory, the others "
               "by chunks of %lld rows: %.3g GB read from %s at %.2f GB/s\n",
               100.0 * last->resident[0] / (double)last->samples, ctx->be->host_memory ? "host" : "device",
               (long long)last->chunk_rows, last->bytes_moved / 1e9,
               last->stream_host ? "host memory (pinned)" : "the file", last->bytes_moved / last->stream_seconds / 1e9);
    printf("  stop: %s; total %.3g s with I/O\n", last->res.stop_reason, total);
}

// Rank 0 draws the objective by iteration, one line per size (at most 6).
static int logreg_plot(ds_ctx *ctx, const lr_run *r, const lr_row *rows, int n, const char *src)
{
    const char *path = opts_str(&r->args, "plot");
    if (!path || ctx->rank != 0)
        return DS_OK;
    int most = 0;
    for (int i = 0; i < n; i++)
        most = rows[i].res.iters > most ? rows[i].res.iters : most;
    double *it = malloc((size_t)(most + 1) * sizeof(double));
    if (!it)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int k = 0; k <= most; k++)
        it[k] = k;
    ds_series ser[6];
    char labels[6][48];
    int ns = n < 6 ? n : 6;
    for (int i = 0; i < ns; i++) {
        const lr_row *row = &rows[n - ns + i];
        snprintf(labels[i], sizeof labels[i], "%lld samples", (long long)row->samples);
        ser[i] = (ds_series){labels[i], it, row->res.loss, row->res.iters + 1, 0};
    }
    char title[400];
    snprintf(title, sizeof title, "logistic regression (%s, %s) on %s", model_name(r->o.model),
             optimizer_name(r->o.optimizer), src);
    int rc = plot_svg(path, title, "iteration", "objective (mean loss + L2)", 0, 1, ser, ns, &ctx->msg);
    free(it);
    return rc;
}

static int logreg_work(ds_ctx *ctx, lr_run *r, lr_row *rows, char *src, size_t len)
{
    lr_set test = {0};
    char test_src[4300];
    rows_caps caps;
    const char *cap_name = cli_memory_caps(ctx, &r->args, &caps);
    int64_t most = 0;  // the largest training size (0: all)
    for (int i = 0; i < r->nsizes && most >= 0; i++)
        most = r->sizes[i] == 0 ? -1 : r->sizes[i] > most ? r->sizes[i] : most;
    r->mem_train = r->mem_test = (lr_mem){.caps = caps, .cap_name = cap_name, .classes = r->o.classes, .iters = r->o.iters};
    logreg_stream_shares(ctx, &r->train, most > 0 ? most : 0, r->have_test ? &r->test : NULL, r->f32, &r->mem_train,
                         &r->mem_test);
    int rc = DS_OK;
    if (r->have_test)
        rc = logreg_load(ctx, &r->test, 0, 0, r->f32, r->o.classes, &r->mem_test, &test, test_src, sizeof test_src);
    for (int i = 0; rc == DS_OK && i < r->nsizes; i++)
        rc = logreg_one(ctx, r, &test, r->sizes[i], &rows[i], src, len);
    logreg_set_free(ctx, &test);
    if (rc == DS_OK)
        rc = ctx_agree(ctx, logreg_plot(ctx, r, rows, r->nsizes, src));
    return rc;
}

int cmd_logreg(MPI_Comm comm, int argc, char **argv, ds_msg *msg)
{
    lr_run r = {.t_start = MPI_Wtime()};
    DS_CHECK(logreg_parse(argc, argv, &r, msg));
    if (opts_flag(&r.args, "help")) {
        int rank;
        MPI_Comm_rank(comm, &rank);
        if (rank == 0)
            opts_help(stdout, &r.args, logreg_usage, logreg_about);
        return DS_OK;
    }
    ds_ctx ctx;
    int rc = ctx_open(&ctx, comm, opts_str(&r.args, "backend"));
    if (rc != DS_OK) {
        *msg = ctx.msg;
        ctx_close(&ctx);
        return rc;
    }
    report_settings(&ctx, &r.args);
    lr_row rows[MAX_SIZES];
    memset(rows, 0, sizeof rows);
    char src[4300] = "";
    rc = logreg_work(&ctx, &r, rows, src, sizeof src);
    if (rc == DS_OK && ctx.rank == 0) {
        double total = MPI_Wtime() - r.t_start;
        if (opts_flag(&r.args, "json"))
            logreg_json(&ctx, &r, rows, r.nsizes, src, total);
        else
            logreg_summary(&ctx, &r, rows, r.nsizes, src, total);
    }
    for (int i = 0; i < r.nsizes; i++)
        logreg_result_free(&rows[i].res);
    *msg = ctx.msg;
    ctx_close(&ctx);
    return rc;
}
