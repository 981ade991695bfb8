// cmd_ann.c: `dsolve ann`: trains the least-squares network on an HDF5 input or the seed's built-in
// problem (checkpointed and resumed with --checkpoint and --restart), reports train (and test) metrics,
// and writes the model.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ann/ann.h"
#include "ann/ann_gram.h"
#include "ann/ann_io.h"
#include "cli/cmd_ann_stream.h"
#include "cli/cmds.h"
#include "cli/ckptopts.h"
#include "cli/memcaps.h"
#include "h5io.h"
#include "cli/opts.h"
#include "cli/report.h"
#include "core/ckpt.h"
#include "core/repeat.h"

static const ds_opt ann_table[] = {
    {"input", OPT_STRING, NULL, "F.h5", 0, 0, "training set: HDF5 with X (m × n) and y (m); without it, the built-in problem"},
    {"test", OPT_STRING, NULL, "F.h5", 0, 0, "test set, same layout (the built-in problem has its own)"},
    {"x-dataset", OPT_STRING, "X", "NAME", 0, 0, "dataset holding X"},
    {"y-dataset", OPT_STRING, "y", "NAME", 0, 0, "dataset holding y (regression)"},
    {"classes", OPT_INT, "0", "C", 0, 100000, "classification: C one-vs-rest outputs on integer labels 0 .. C-1"},
    {"labels", OPT_STRING, "labels", "NAME", 0, 0, "dataset holding the integer labels (with --classes)"},
    {"idx", OPT_STRING, NULL, "DIR", 0, 0, "MNIST-layout directory (train-* and t10k-* IDX files, gzip or not) instead of --input"},
    {"neurons", OPT_INT, "1000", "K", 1, 1e7, "hidden neurons"},
    {"subset", OPT_INT, "0", "ROWS", 0, 1e15, "rows each neuron is fitted on (0: rows / neurons)"},
    {"ridge", OPT_DOUBLE, NULL, "L", 0, 1e300, "lambda of the output layer (default: 1e-10 x the mean diagonal of H'H)"},
    {"seed", OPT_INT, "0", "S", 0, 9e18, "seed of the subsets (and of the built-in problem: test set seed + 1)"},
    {"rows", OPT_INT, "100000", "M", 1, 1e15, "rows of the built-in problem's training set"},
    {"test-rows", OPT_INT, NULL, "M", 1, 1e15, "rows of the built-in problem's test set (default: --rows)"},
    {"cols", OPT_INT, "10", "N", 1, 1e6, "inputs of the built-in problem"},
    {"noise", OPT_DOUBLE, "0", "SIGMA", 0, 1e300, "noise added to the built-in problem's y"},
    {"output", OPT_STRING, NULL, "F.h5", 0, 0, "write the model: /W, /V and attributes (atomically)"},
    {"plot", OPT_STRING, NULL, "F.svg", 0, 0, "predicted against actual on the test set (else the training set)"},
    {"repeat", OPT_INT, "1", "R", 1, 10000, "with R > 1: one warm-up training, then R timed ones; medians reported"},
    {"memory-mb", OPT_INT, "0", "MB", 0, 1e9, "bound on one exchange round or H chunk (0: 256 on cpu, 2048 on cuda; the CPU's Gram takes chunks as large but tiles them, never storing H)"},
    DS_MEMORY_OPTS("an --input or --test X"),
    DS_CHECKPOINT_OPTS("the training state", "", "after the hidden fits and every row chunk of H'H", "run"),
    DS_COMMON_OPTS,
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const char ann_usage[] =
    "dsolve ann [--input train.h5 [--test test.h5] | --idx DIR] [--classes C] [--neurons K] [--subset S] [--output model.h5]";
static const char ann_about[] =
    "A one-hidden-layer tanh network trained by least squares (Bakas et al. 2023): each neuron is a\n"
    "least-squares fit on a random subset of rows, then the output layer solves (H'H + lambda I) v = H'y.\n"
    "Without --input: the seed's problem, X uniform in [-0.5, 0.5), y = sin(sum x)/2. With --classes C:\n"
    "C one-vs-rest outputs sharing the hidden layer; neuron k fits the target of class k mod C.";

typedef struct ann_run {
    ds_args args;
    ann_opts o;
    ds_ckpt ck;  // --checkpoint, --restart
    ds_data train, test;
    int has_test;
    ann_model m;
    ann_times t;
    ann_metrics mtrain, mtest;
    double *Ptest;  // the rank's test (or train) predictions, for the plot
    ann_stream st;  // the streamed sets (st.train.open, st.test.open), when they do not fit the caps
    ann_plan plan;  // the training set's
    double stream_bytes, stream_seconds;
} ann_run;

static int ann_parse_ckpt(ann_run *r, ds_msg *msg)
{
    const ds_args *a = &r->args;
    r->ck = cli_checkpoint(a, "ann", ANN_CKPT_FORMAT);
    if (!r->ck.path && !r->ck.restart)
        return DS_OK;
    if (opts_int(a, "repeat") > 1)
        return ds_fail(msg, DS_ERR_USAGE, "--checkpoint and --restart take one training: --repeat 1");
    if (r->ck.path)
        DS_CHECK(h5io_output_dir_ok(r->ck.path, msg));
    r->o.ckpt = &r->ck;
    return DS_OK;
}

static int ann_parse(int argc, char **argv, ann_run *r, ds_msg *msg)
{
    DS_CHECK(opts_parse(ann_table, argc, argv, &r->args, msg));
    const ds_args *a = &r->args;
    r->o = (ann_opts){
        .neurons = opts_int(a, "neurons"),
        .subset = opts_int(a, "subset"),
        .ridge = opts_given(a, "ridge") ? opts_double(a, "ridge") : -1,
        .seed = (uint64_t)opts_int(a, "seed"),
        .budget_bytes = opts_int(a, "memory-mb") << 20,
        .classes = (int)opts_int(a, "classes"),
    };
    if (opts_given(a, "idx") && opts_given(a, "input"))
        return ds_fail(msg, DS_ERR_USAGE, "--idx and --input are two sources of the training set: give one");
    if (opts_given(a, "idx") && !r->o.classes)
        return ds_fail(msg, DS_ERR_USAGE, "--idx reads a labelled set: give --classes (10 for MNIST)");
    if (r->o.classes == 1)
        return ds_fail(msg, DS_ERR_USAGE, "--classes 1 is not a classification: give 2 or more, or 0 for regression");
    if (r->o.classes && opts_given(a, "plot"))
        return ds_fail(msg, DS_ERR_USAGE, "--plot draws predicted against actual y: it needs a regression (no --classes)");
    if (r->o.classes && !opts_given(a, "input") && !opts_given(a, "idx"))
        return ds_fail(msg, DS_ERR_USAGE, "--classes needs a labelled set: --input F.h5 (with --labels) or --idx DIR");
    if ((opts_given(a, "input") || opts_given(a, "idx")) && (opts_given(a, "rows") || opts_given(a, "test-rows") || opts_given(a, "cols") ||
                                                              opts_given(a, "noise")))
        return ds_fail(msg, DS_ERR_USAGE, "--rows, --test-rows, --cols and --noise describe the built-in problem; not with --input");
    if (!opts_given(a, "input") && opts_given(a, "test"))
        return ds_fail(msg, DS_ERR_USAGE, "--test goes with --input (the built-in problem makes its own test set)");
    return ann_parse_ckpt(r, msg);
}

// What a checkpoint must belong to: the training set (its source, datasets and size; the built-in
// problem's rows, columns, seed and noise) and every setting of the training. Not the rank count, nor
// --memory-mb: the Gram's sums are exact over fixed blocks (ann_gram.h), so a restart with either
// changed gives the uninterrupted run's bits.
static uint64_t ann_fingerprint(const ann_run *r)
{
    const ds_args *a = &r->args;
    const double v[] = {(double)r->o.neurons, (double)r->o.subset, r->o.ridge, (double)r->o.seed, r->o.classes,
                        (double)r->train.rows_global, (double)r->train.X.cols, opts_double(a, "noise")};
    uint64_t h = ckpt_hash(0, v, sizeof v);
    const char *names[] = {r->train.source, opts_str(a, "x-dataset"), opts_str(a, "y-dataset"), opts_str(a, "labels")};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        h = ckpt_hash(h, names[i], strlen(names[i]) + 1);
    return h;
}

// What the network needs besides X and y (cmd_ann_stream.h): its Grams, weights and a round of one
// neuron's rows; z, tc and the outputs by row.
static ann_weights ann_weigh(const ds_ctx *ctx, const ann_run *r, const ds_data *d)
{
    const int64_t K = r->o.neurons, n = d->X.cols, C = r->o.classes ? r->o.classes : 1, ld = K + 1 + C;
    int64_t S = r->o.subset > 0 ? r->o.subset : d->rows_global / K;
    S = S > 0 ? S : 1;
    const double gsize = (double)ld * (double)ld + (double)ld + 1;
    const int64_t block = d->block_rows ? d->block_rows(d->rows_global) : 0;
    const double gram = (double)ctx->be->ann->gram_scratch(ld, block);  // the output Gram's units of H
    const double neuron = ((ctx->nranks > 1 ? 3.0 : 1.0) * (double)S * (double)(n + 3) +
                           (double)ctx->be->ann->fit_scratch(1, S, n) + 5.0 * (double)S) * 8.0;
    return (ann_weights){.fixed = (3 * gsize + gram + 2.0 * (double)(K * (n + 1)) + (double)ld) * 8.0,
                         .row_extra = 16.0 + 8.0 * (double)C, .least = fmax(neuron, 8.0 * (double)ld * 8.0),
                         .budget = r->o.budget_bytes, .budget0 = ctx->be->host_memory ? (int64_t)256 << 20 : (int64_t)2 << 30,
                         .ld = ld, .block = block,
                         .what = "the network's neurons"};
}

// What streaming does not do yet, before anything is read. Collective callers agree on it.
static int ann_stream_refuse(ds_ctx *ctx, const ann_run *r, const char *why)
{
    const ds_args *a = &r->args;
    if (!opts_given(a, "input"))
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "%s does not fit the memory caps, and only --input files stream: "
                       "write it with dsolve gen and train on that file", why);
    if (r->o.ckpt)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "%s does not fit the memory caps, and --checkpoint and --restart do "
                       "not stream yet", why);
    if (opts_given(a, "plot"))
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "%s does not fit the memory caps, and --plot does not stream yet", why);
    return DS_OK;
}

// The built-in problem must fit: only files stream.
static int ann_builtin_fits(ds_ctx *ctx, ann_run *r)
{
    const ds_args *a = &r->args;
    ds_data shape = {.X = {.cols = opts_int(a, "cols")}, .block_rows = ann_block_rows};
    if (opts_int(a, "rows") < ctx->nranks)
        return DS_OK;  // data_gen_lsq says so
    data_place(ctx, &shape, opts_int(a, "rows"));
    const ann_weights w = ann_weigh(ctx, r, &shape);
    DS_CHECK(ann_cli_plan(ctx, a, &shape, &w, &r->plan));
    return r->plan.stream ? ann_stream_refuse(ctx, r, "the built-in problem") : DS_OK;
}

// One set (training, or test) from --input or --test: in memory when it fits the caps, else streamed.
static int ann_load_set(ds_ctx *ctx, ann_run *r, const char *path, ds_data *d, ann_source *src, ann_plan *p,
                        const ann_plan *train)
{
    const ds_args *a = &r->args;
    const char *x = opts_str(a, "x-dataset"), *y = opts_str(a, r->o.classes ? "labels" : "y-dataset");
    d->block_rows = train ? NULL : ann_block_rows;  // the training set's ranks hold whole blocks (ann_gram.h)
    DS_CHECK(ann_cli_probe(ctx, path, x, y, r->o.classes, d));
    const ann_weights w = ann_weigh(ctx, r, train ? &r->train : d);
    DS_CHECK(ann_cli_plan(ctx, a, d, &w, p));
    if (train && train->stream && (!p->stream || p->chunk > train->chunk))  // the test set streams with it
        *p = *train;
    if (!p->stream)
        return r->o.classes ? data_load_labelled(ctx, path, x, y, d) : data_load_lsq(ctx, path, x, y, 0, d);
    DS_CHECK(ctx_agree(ctx, ann_stream_refuse(ctx, r, path)));
    return ann_cli_open(ctx, p, path, x, y, r->o.classes, d, src, train ? "ann: streaming the test X" : "ann: streaming X");
}

static int ann_load(ds_ctx *ctx, ann_run *r)
{
    const ds_args *a = &r->args;
    if (opts_given(a, "input")) {
        DS_CHECK(ann_load_set(ctx, r, opts_str(a, "input"), &r->train, &r->st.train, &r->plan, NULL));
        if (r->plan.stream)
            r->o.budget_bytes = r->plan.budget, r->o.hidden_bytes = r->plan.hidden, r->o.stream = &r->st;
        r->has_test = opts_given(a, "test");
        ann_plan tp;
        return r->has_test ? ann_load_set(ctx, r, opts_str(a, "test"), &r->test, &r->st.test, &tp, &r->plan) : DS_OK;
    }
    r->train.block_rows = ann_block_rows;
    if (opts_given(a, "idx")) {
        DS_CHECK(data_load_idx(ctx, opts_str(a, "idx"), "train", &r->train));
        r->has_test = 1;
        return data_load_idx(ctx, opts_str(a, "idx"), "t10k", &r->test);
    }
    DS_CHECK(ann_builtin_fits(ctx, r));
    gen_lsq p = {.kind = GEN_ANN, .rows = opts_int(a, "rows"), .cols = opts_int(a, "cols"),
                 .seed = (uint64_t)opts_int(a, "seed"), .noise = opts_double(a, "noise")};
    DS_CHECK(data_gen_lsq(ctx, &p, 0, &r->train));
    snprintf(r->train.source, sizeof r->train.source, "built-in problem (seed %llu)", (unsigned long long)p.seed);
    p.seed++;
    p.rows = opts_given(a, "test-rows") ? opts_int(a, "test-rows") : p.rows;
    r->has_test = 1;
    DS_CHECK(data_gen_lsq(ctx, &p, 0, &r->test));
    snprintf(r->test.source, sizeof r->test.source, "built-in test set (seed %llu)", (unsigned long long)p.seed);
    return DS_OK;
}

// One training; t: its total, fit, hidden and solve seconds.
static int ann_once(ds_ctx *ctx, void *arg, int call, double *t)
{
    ann_run *r = arg;
    ann_model_free(&r->m);
    DS_CHECK(ann_train(ctx, &r->train, &r->o, &r->m, &r->t));
    t[0] = r->t.total, t[1] = r->t.fit, t[2] = r->t.hidden, t[3] = r->t.solve;
    if (call < 0)
        ctx_log(ctx, "warm-up training: %.3f s", r->t.total);
    return DS_OK;
}

// One warm-up and R timed trainings when --repeat R > 1; the model of the last, median phase times.
static int ann_timed(ds_ctx *ctx, ann_run *r)
{
    const int reps = (int)opts_int(&r->args, "repeat");
    repeat_plan p = {.warmup = reps > 1, .repeat = reps, .nt = 4};
    double m[4];
    DS_CHECK(repeat_timed(ctx, &p, ann_once, r, NULL, m));
    r->t.total = m[0], r->t.fit = m[1], r->t.hidden = m[2], r->t.solve = m[3];
    return DS_OK;
}

// The metrics of a set: in memory, or by passes over its stream.
static int ann_metrics_of(ds_ctx *ctx, ann_run *r, ds_data *d, ann_source *src, double *P, ann_metrics *met)
{
    if (src->open)
        return ann_stream_predict(ctx, &r->m, src, d->source, 1, NULL, met);
    return ann_predict(ctx, &r->m, d, 1, P, met);
}

static int ann_evaluate(ds_ctx *ctx, ann_run *r)
{
    ds_data *pd = r->has_test ? &r->test : &r->train;
    const int streamed = r->has_test ? r->st.test.open : r->st.train.open;  // no plot: no predictions kept
    r->Ptest = malloc((size_t)(pd->X.rows && !streamed ? pd->X.rows : 1) * (size_t)r->m.outputs * sizeof(double));
    int rc = ctx_agree(ctx, r->Ptest ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory"));
    if (rc == DS_OK)
        rc = ann_metrics_of(ctx, r, &r->train, &r->st.train, r->has_test ? NULL : r->Ptest, &r->mtrain);
    if (rc == DS_OK && r->has_test)
        rc = ann_metrics_of(ctx, r, &r->test, &r->st.test, r->Ptest, &r->mtest);
    return rc;
}

static int ann_plot(ds_ctx *ctx, ann_run *r)
{
    const char *path = opts_str(&r->args, "plot");
    if (!path)
        return DS_OK;
    ds_data *pd = r->has_test ? &r->test : &r->train;
    double *y = malloc((size_t)(pd->X.rows ? pd->X.rows : 1) * sizeof(double));
    int rc = y ? ctx->be->download(ctx, y, pd->y, (size_t)pd->X.rows * sizeof(double))
               : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    rc = ctx_agree(ctx, rc);
    char title[400];
    snprintf(title, sizeof title, "dsolve ann, %lld neurons: %s (r = %.6f)", (long long)r->m.neurons, pd->source,
             r->has_test ? r->mtest.r : r->mtrain.r);
    if (rc == DS_OK)
        rc = ann_scatter_plot(ctx, pd, r->Ptest, y, path, title);
    free(y);
    return rc;
}

static void metrics_json(ds_json *j, const char *prefix, const ann_metrics *m, int valid)
{
    char k[32];
    const double nan = NAN;
    snprintf(k, sizeof k, "%s_r", prefix), json_num(j, k, valid ? m->r : nan);
    snprintf(k, sizeof k, "%s_rmse", prefix), json_num(j, k, valid ? m->rmse : nan);
    snprintf(k, sizeof k, "%s_r2", prefix), json_num(j, k, valid ? m->r2 : nan);
    snprintf(k, sizeof k, "%s_accuracy", prefix), json_num(j, k, valid ? m->accuracy : nan);
}

// The model's bytes (W, then V), FNV-1a, as 16 hex digits into buf: equal digests, bitwise equal models.
static const char *ann_digest(const ann_model *m, char buf[20])
{
    uint64_t h = ckpt_hash(0, m->W, (size_t)(m->neurons * (m->n + 1)) * sizeof(double));
    h = ckpt_hash(h, m->V, (size_t)((m->neurons + 1) * m->outputs) * sizeof(double));
    snprintf(buf, 20, "%016llx", (unsigned long long)h);
    return buf;
}

static void ann_json(const ds_ctx *ctx, const ann_run *r, double total)
{
    char digest[20];
    ds_json j;
    json_begin(&j);
    json_int(&j, "rows", r->train.rows_global);
    json_int(&j, "cols", r->train.X.cols);
    json_int(&j, "test_rows", r->has_test ? r->test.rows_global : 0);
    json_int(&j, "neurons", r->m.neurons);
    json_int(&j, "subset", r->m.subset);
    json_int(&j, "classes", r->m.classes);
    json_int(&j, "ranks", ctx->nranks);
    json_str(&j, "backend", ctx->be->name);
    json_str(&j, "backend_note", ctx->backend_note);
    json_str(&j, "device_name", ctx->device_name);
    json_str(&j, "source", r->train.source);
    json_str(&j, "test_source", r->has_test ? r->test.source : "");
    metrics_json(&j, "train", &r->mtrain, 1);
    metrics_json(&j, "test", &r->mtest, r->has_test);
    json_num(&j, "seconds", r->t.total);
    json_num(&j, "fit_seconds", r->t.fit);
    json_num(&j, "hidden_seconds", r->t.hidden);
    json_num(&j, "solve_seconds", r->t.solve);
    json_num(&j, "total_seconds", total);
    json_int(&j, "repeat", opts_int(&r->args, "repeat"));
    json_str(&j, "output_route", r->m.route);
    json_num(&j, "ridge", r->m.ridge);
    json_int(&j, "failed_neurons", r->m.failed);
    json_num(&j, "y_scale", r->m.y_scale);
    json_num(&j, "y_shift", r->m.y_shift);
    json_str(&j, "weights_digest", ann_digest(&r->m, digest));
    const int streamed = r->st.train.open || r->st.test.open;
    json_bool(&j, "streamed", streamed);
    json_str(&j, "stream_source", !streamed ? "" : r->plan.from_memory ? "host memory" : "file");
    json_int(&j, "chunk_rows", streamed ? (r->st.train.open ? r->st.train : r->st.test).rows.chunk_rows : 0);
    json_int(&j, "bytes_moved", (int64_t)r->stream_bytes);  // a count: every digit
    json_num(&j, "stream_rate_gbps", streamed ? r->stream_bytes / r->stream_seconds / 1e9 : NAN);
    json_str(&j, "output", opts_str(&r->args, "output") ? opts_str(&r->args, "output") : "");
    json_end(&j, stdout);
}

static void metrics_line(const char *what, const ann_metrics *m, int classes)
{
    if (classes)
        printf("  %-5s %lld rows: accuracy %.4f\n", what, (long long)m->rows, m->accuracy);
    else
        printf("  %-5s %lld rows: r %.7f  rmse %.3e  R2 %.7f\n", what, (long long)m->rows, m->r, m->rmse, m->r2);
}

static void ann_summary(const ds_ctx *ctx, const ann_run *r, double total)
{
    printf("dsolve ann: %lld x %lld from %s, %lld neurons (subset %lld rows), %d rank%s on %s%s%s\n",
           (long long)r->train.rows_global, (long long)r->train.X.cols, r->train.source, (long long)r->m.neurons,
           (long long)r->m.subset, ctx->nranks, ctx->nranks > 1 ? "s" : "", ctx->be->name,
           ctx->device_name[0] ? ", " : "", ctx->device_name);
    if (ctx->backend_note[0])
        printf("  note: %s\n", ctx->backend_note);
    metrics_line("train", &r->mtrain, r->m.classes);
    if (r->has_test)
        metrics_line("test", &r->mtest, r->m.classes);
    printf("  training %.4f s%s: hidden fits %.4f s, H and H'H %.4f s, output solve %.4f s (%s, ridge %.3g)\n",
           r->t.total, opts_int(&r->args, "repeat") > 1 ? " (median)" : "", r->t.fit, r->t.hidden, r->t.solve,
           r->m.route, r->m.ridge);
    if (r->m.failed)
        printf("  %lld neurons' fits failed and were zeroed\n", (long long)r->m.failed);
    if (r->st.train.open || r->st.test.open)
        printf("  streamed: X did not fit the memory caps; chunks of %lld rows, %.3g GB read from %s at %.2f GB/s\n",
               (long long)(r->st.train.open ? r->st.train : r->st.test).rows.chunk_rows, r->stream_bytes / 1e9,
               r->plan.from_memory ? "host memory (pinned)" : "the file", r->stream_bytes / r->stream_seconds / 1e9);
    if (opts_str(&r->args, "output"))
        printf("  model written to %s\n", opts_str(&r->args, "output"));
    printf("  total %.2f s with loading and evaluation\n", total);
}

static int ann_body(ds_ctx *ctx, ann_run *r, const char *cmdline)
{
    const double t0 = MPI_Wtime();
    const char *out = opts_str(&r->args, "output");
    int rc = out && ctx->rank == 0 ? h5io_output_dir_ok(out, &ctx->msg) : DS_OK;
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = ann_load(ctx, r);
    if (rc == DS_OK && r->o.ckpt)
        r->ck.fingerprint = ann_fingerprint(r);
    if (rc == DS_OK)
        rc = ann_timed(ctx, r);
    if (rc == DS_OK)
        rc = ann_evaluate(ctx, r);
    if (rc == DS_OK)
        ann_cli_stats(ctx, &r->st.train, &r->st.test, &r->stream_bytes, &r->stream_seconds);
    if (rc == DS_OK && out)
        rc = ann_model_write(ctx, &r->m, out, r->train.source, cmdline);
    if (rc == DS_OK)
        rc = ann_plot(ctx, r);
    if (rc == DS_OK && ctx->rank == 0) {
        if (opts_flag(&r->args, "json"))
            ann_json(ctx, r, MPI_Wtime() - t0);
        else
            ann_summary(ctx, r, MPI_Wtime() - t0);
    }
    return rc;
}

int cmd_ann(MPI_Comm comm, int argc, char **argv, ds_msg *msg)
{
    ann_run *r = calloc(1, sizeof *r);
    if (!r)
        return ds_fail(msg, DS_ERR_RUNTIME, "out of host memory");
    int rank, rc = ann_parse(argc, argv, r, msg);
    MPI_Comm_rank(comm, &rank);
    if (rc == DS_OK && opts_flag(&r->args, "help")) {
        if (rank == 0)
            opts_help(stdout, &r->args, ann_usage, ann_about);
        free(r);
        return DS_OK;
    }
    if (rc != DS_OK) {
        free(r);
        return rc;
    }
    ds_ctx ctx;
    rc = ctx_open(&ctx, comm, opts_str(&r->args, "backend"));
    report_settings(&ctx, &r->args);
    char cmdline[2048];
    report_cmdline("ann", argc, argv, cmdline, sizeof cmdline);
    if (rc == DS_OK)
        rc = ann_body(&ctx, r, cmdline);
    *msg = ctx.msg;
    ann_model_free(&r->m);
    free(r->Ptest);
    ann_stream_close(&ctx, &r->st);
    data_free(&ctx, &r->train);
    data_free(&ctx, &r->test);
    ctx_close(&ctx);
    free(r);
    return rc;
}
