// bench_logreg.c: the logreg case of `dsolve bench`: the seed's run of logistic regression on the first
// SAMPLES items of Fashion-MNIST (one-vs-rest, gradient descent, lr 0.1, --iters iterations, l2 1e-4)
// trained on the CPU and the GPU backends, the GPU's objective history and weights checked against the
// CPU's. The data: DSOLVE_FASHION_DIR, else /usr/share/datasets/fashion-mnist (IDX files).
// provides: bench_case_logreg
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "logreg/logreg_data.h"

enum { LRB_CLASSES = 10 };
#define LRB_LR 0.1
#define LRB_L2 1e-4

static const char *lrb_dir(void)
{
    const char *d = getenv("DSOLVE_FASHION_DIR");
    return d && *d ? d : "/usr/share/datasets/fashion-mnist";
}

// The training images and labels, gzipped or not.
static int lrb_available(const bench_run *b, char *why, size_t len)
{
    (void)b;
    static const char *const files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};
    for (int i = 0; i < 2; i++) {
        char plain[4200], gz[4208];
        snprintf(plain, sizeof plain, "%s/%s", lrb_dir(), files[i]);
        snprintf(gz, sizeof gz, "%s.gz", plain);
        if (access(plain, R_OK) != 0 && access(gz, R_OK) != 0) {
            snprintf(why, len, "no Fashion-MNIST: %s[.gz] is not readable; DSOLVE_FASHION_DIR names the directory", plain);
            return 0;
        }
    }
    return 1;
}

static int64_t lrb_samples(const bench_run *b, int64_t size)
{
    return b->weak ? size * b->cpu.nranks : size;
}

static int lrb_need(bench_run *b, int64_t size, double *host, double *dev, ds_msg *msg)
{
    char why[4400];
    if (!lrb_available(b, why, sizeof why))
        return ds_fail(msg, DS_ERR_INPUT, "bench logreg: %s", why);
    if (!b->weak && size < b->cpu.nranks)
        return ds_fail(msg, DS_ERR_INPUT, "bench logreg: %lld samples are fewer than the %d ranks", (long long)size,
                       b->cpu.nranks);
    const double rows = (double)(lrb_samples(b, size) + b->cpu.nranks - 1) / b->cpu.nranks;
    const double set = rows * (785.0 * (b->f32 ? 4 : 8) + 4);
    *host = 2 * set + 60000.0 * 784 + 4 * rows * LRB_CLASSES * 8;  // the set, its staging, the file's pixels
    *dev = set + 4 * rows * LRB_CLASSES * 8;
    return DS_OK;
}

typedef struct lrb_call {
    const lr_set *s;
    const lr_opts *o;
    lr_result *res;
} lrb_call;

// One training; t[0]: its seconds.
static int lrb_once(ds_ctx *ctx, void *arg, int call, double *t)
{
    lrb_call *c = arg;
    logreg_result_free(c->res);
    DS_CHECK(logreg_train(ctx, c->s, c->o, c->res));
    t[0] = c->res->seconds;
    return DS_OK;
}

// warmup + reps trainings (reps 0: one untimed); the median of the slowest rank's training time.
static int lrb_timed(bench_run *b, ds_ctx *ctx, const lr_set *s, const lr_opts *o, int reps, double *median,
                     lr_result *res)
{
    repeat_plan p = bench_repeat_plan(b, reps);
    lrb_call c = {s, o, res};
    return repeat_timed(ctx, &p, lrb_once, &c, NULL, median);
}

static int lrb_load(bench_run *b, ds_ctx *ctx, int64_t samples, lr_set *s)
{
    lr_source src = {.dir = lrb_dir(), .split = "train"};
    char desc[512];
    return bench_agree(b, ctx, logreg_load(ctx, &src, samples, 0, b->f32, LRB_CLASSES, NULL, s, desc, sizeof desc));
}

// Σ over the rank's rows of the one-vs-rest loss at W (cols × classes), in plain double loops.
static double lrb_loss_loop(const lr_set *s, const double *W)
{
    double f = 0;
    for (int64_t i = 0; i < s->rows; i++)
        for (int k = 0; k < LRB_CLASSES; k++) {
            double z = 0;
            for (int64_t j = 0; j < s->cols; j++) {
                const int64_t at = i * s->cols + j;
                z += (s->f32 ? (double)((const float *)s->X)[at] : ((const double *)s->X)[at]) * W[j * LRB_CLASSES + k];
            }
            f += fmax(z, 0.0) + log1p(exp(-fabs(z))) - (s->labels[i] == k) * z;  // softplus(z) − y·z
        }
    return f;
}

// The CPU-only check: the final objective against the plain loop's at the final weights.
static void lrb_check_cpu(bench_run *b, const lr_set *s, const lr_result *res, bench_row *row)
{
    double f = lrb_loss_loop(s, res->W);
    MPI_Allreduce(MPI_IN_PLACE, &f, 1, MPI_DOUBLE, MPI_SUM, b->cpu.comm);
    f /= (double)s->rows_global;
    for (int64_t i = 0; i < (s->cols - 1) * LRB_CLASSES; i++)
        f += 0.5 * LRB_L2 * res->W[i] * res->W[i];
    row->err = fabs(res->loss[res->iters] - f) / fabs(f);
    snprintf(row->check, sizeof row->check, "cpu final objective vs plain loop");
}

// The GPU's run against the CPU's: objective history (err) and weights (#wrong when beyond 10·tol),
// the iteration count (#wrong when it differs); replicated results count once, on rank 0.
static void lrb_check_gpu(bench_run *b, const lr_set *s, const lr_result *got, const lr_result *want, bench_row *row)
{
    const int n = (got->iters < want->iters ? got->iters : want->iters) + 1;
    row->err = bench_rel_diff(got->loss, want->loss, n, MPI_COMM_NULL);
    const double dw = bench_rel_diff(got->W, want->W, s->cols * LRB_CLASSES, MPI_COMM_NULL);
    if (b->cpu.rank == 0) {
        row->wrong += !(dw <= 10 * row->tol) + (got->iters != want->iters);
        if (!(dw <= 10 * row->tol) || got->iters != want->iters)
            ctx_log(&b->cpu, "bench logreg: weights cuda vs cpu %.3e (tol %.0e); %d iterations vs %d", dw,
                    10 * row->tol, got->iters, want->iters);
    }
    snprintf(row->check, sizeof row->check, "cuda vs cpu, objective history; weights to 10 tol");
}

static int lrb_run(bench_run *b, int64_t size, bench_row *row)
{
    const int64_t samples = lrb_samples(b, size);
    const lr_opts o = {.model = LR_OVR, .optimizer = LR_GD, .iters = (int)opts_int(&b->args, "iters"),
                       .classes = LRB_CLASSES, .lr = LRB_LR, .l2 = LRB_L2};
    lr_set sc, sg;
    lr_result rc_cpu, rc_gpu;
    memset(&sc, 0, sizeof sc), memset(&sg, 0, sizeof sg);
    memset(&rc_cpu, 0, sizeof rc_cpu), memset(&rc_gpu, 0, sizeof rc_gpu);
    int rc = lrb_load(b, &b->cpu, samples, &sc);
    snprintf(row->shape, sizeof row->shape, "%lldx%lld, %d it", (long long)samples, (long long)sc.cols, o.iters);
    // Two GEMMs per iteration (logits and gradient), 2·N·D·C flops each; D counts the bias column.
    row->work = 4.0 * (double)samples * (double)(sc.cols > 0 ? sc.cols : 785) * LRB_CLASSES * o.iters;
    row->tol = b->f32 ? 1e-4 : 1e-9;  // test_logreg's cuda-against-cpu tolerances for gd
    const int cpu_run = bench_cpu_wanted(b, row->work, 2e9 * b->threads * b->cpu.nranks);
    if (rc == DS_OK)
        rc = lrb_timed(b, &b->cpu, &sc, &o, cpu_run ? b->repeat : 0, &row->cpu_s, &rc_cpu);
    if (rc == DS_OK && b->have_gpu)
        rc = lrb_load(b, &b->gpu, samples, &sg);
    if (rc == DS_OK && b->have_gpu)
        rc = lrb_timed(b, &b->gpu, &sg, &o, b->repeat, &row->gpu_s, &rc_gpu);
    if (rc == DS_OK) {
        lr_result *got = b->have_gpu ? &rc_gpu : &rc_cpu;
        if (b->corrupt)  // replicated on every rank: perturb it everywhere
            got->loss[got->iters] += 1.0 + fabs(got->loss[got->iters]);
        if (b->have_gpu)
            lrb_check_gpu(b, &sc, &rc_gpu, &rc_cpu, row);
        else
            lrb_check_cpu(b, &sc, &rc_cpu, row);
    }
    logreg_result_free(&rc_cpu);
    logreg_result_free(&rc_gpu);
    logreg_set_free(&b->cpu, &sc);
    if (b->have_gpu)
        logreg_set_free(&b->gpu, &sg);
    return rc;
}

const bench_case bench_case_logreg = {
    .name = "logreg",
    .about = "one-vs-rest logistic regression, gd, on SAMPLES Fashion-MNIST items (--iters); GFLOP/s of its GEMMs",
    .unit = "GFLOP/s",
    .size_label = "samples",
    .default_sizes = "60,600,6000",
    .ref_label = "",
    .need = lrb_need,
    .run = lrb_run,
    .available = lrb_available,
};
