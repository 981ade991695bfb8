// bench_ann.c: the ann case of `dsolve bench`: the least-squares-trained network (ann.h) on the seed's
// problem (ROWS × 10 inputs, y = sin(Σ x)/2; K = min(1000, ROWS/10) neurons) trained on the CPU and the
// GPU backends; the GPU's model checked against the CPU's on a fresh test set, and the seed's own code
// (the peer) timed in the same run when --peer is given.
// provides: bench_case_ann
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ann/ann.h"
#include "ann/ann_gram.h"
#include "bench/bench.h"
#include "core/data.h"

enum { ANN_BENCH_INPUTS = 10, ANN_BENCH_MAX_NEURONS = 1000 };
#define ANN_BENCH_TOL_P 1e-7  // test outputs, relative (2-norm over all ranks' rows)
#define ANN_BENCH_TOL_W 1e-9  // hidden weights, relative (2-norm)

typedef struct ann_shape {
    int64_t rows_global, rows_local, n, K;
} ann_shape;

// The seed's shape: 100 000 rows get 1 000 neurons (100 rows per fit); fewer rows get one neuron per 10.
static void ann_shape_of(const bench_run *b, int64_t size, ann_shape *s)
{
    s->rows_global = b->weak ? size * b->cpu.nranks : size;
    s->rows_local = (s->rows_global + b->cpu.nranks - 1) / b->cpu.nranks;
    s->n = ANN_BENCH_INPUTS;
    s->K = s->rows_global / 10 < ANN_BENCH_MAX_NEURONS ? s->rows_global / 10 : ANN_BENCH_MAX_NEURONS;
    s->K = s->K < 1 ? 1 : s->K;
}

static int ann_need(bench_run *b, int64_t size, double *host, double *dev, ds_msg *msg)
{
    ann_shape s;
    ann_shape_of(b, size, &s);
    if (!b->weak && size < b->cpu.nranks)
        return ds_fail(msg, DS_ERR_INPUT, "bench ann: %lld rows are fewer than the %d ranks", (long long)size,
                       b->cpu.nranks);
    const double sets = 2.0 * (double)s.rows_local * (double)(s.n + 1) * 8;  // training and test X, y
    const double gram = 4.0 * (double)(s.K + 2) * (double)(s.K + 2) * 8 + 4.0 * (double)s.K * (s.n + 1) * 8;
    *host = 2 * sets + gram + 256e6 + 3.0 * 8 * (double)s.rows_local;  // ann's CPU chunk bound, predictions
    *dev = sets + gram + 2048e6;                                     // ann's CUDA chunk bound
    return DS_OK;
}

// One backend's trained model and its test outputs (host).
typedef struct ann_out {
    double *W;  // K × (n + 1)
    double *V;  // K + 1
    double *P;  // the rank's test rows
    int64_t failed;
} ann_out;

static void ann_out_free(ann_out *o)
{
    free(o->W);
    free(o->V);
    free(o->P);
    memset(o, 0, sizeof *o);
}

typedef struct ann_call {
    const ds_data *d;
    const ann_opts *o;
    ann_model *m;
} ann_call;

// One training; t[0]: its total seconds.
static int ann_once(ds_ctx *ctx, void *arg, int call, double *t)
{
    ann_call *c = arg;
    ann_times tm;
    ann_model_free(c->m);
    DS_CHECK(ann_train(ctx, c->d, c->o, c->m, &tm));
    t[0] = tm.total;
    return DS_OK;
}

// warmup + reps trainings (reps 0: one untimed); the median of the slowest rank's total training time.
static int ann_timed(bench_run *b, ds_ctx *ctx, const ds_data *d, const ann_opts *o, int reps, double *median,
                     ann_model *m)
{
    repeat_plan p = bench_repeat_plan(b, reps);
    ann_call c = {d, o, m};
    return repeat_timed(ctx, &p, ann_once, &c, NULL, median);
}

// The model's copies and its outputs on the test set.
static int ann_keep(bench_run *b, ds_ctx *ctx, const ann_model *m, const ds_data *test, ann_out *out)
{
    const size_t w = (size_t)(m->neurons * (m->n + 1)), v = (size_t)(m->neurons + 1);
    int rc = bench_host_alloc(b, (void **)&out->W, (double)w * 8);
    if (rc == DS_OK)
        rc = bench_host_alloc(b, (void **)&out->V, (double)v * 8);
    if (rc == DS_OK)
        rc = bench_host_alloc(b, (void **)&out->P, (double)test->X.rows * 8);
    rc = bench_agree(b, ctx, rc);
    if (rc != DS_OK)
        return rc;
    memcpy(out->W, m->W, w * sizeof(double));
    memcpy(out->V, m->V, v * sizeof(double));
    out->failed = m->failed;
    ann_metrics met;
    return bench_agree(b, ctx, ann_predict(ctx, m, test, 1, out->P, &met));
}

// Generates the training set (seed 0) and a fresh test set (seed 1) on ctx's backend, trains, predicts.
static int ann_on(bench_run *b, ds_ctx *ctx, const ann_shape *s, int reps, double *median, ann_out *out,
                  ds_data *test)
{
    gen_lsq p = {.kind = GEN_ANN, .rows = s->rows_global, .cols = s->n, .seed = 0, .noise = 0, .corr = 0};
    ann_opts o = {.neurons = s->K, .subset = 0, .ridge = -1, .seed = 0, .classes = 0, .budget_bytes = 0};
    ds_data d;
    ann_model m;
    memset(&d, 0, sizeof d);
    memset(&m, 0, sizeof m);
    d.block_rows = ann_block_rows;  // the training set's ranks hold whole blocks (ann_gram.h)
    int rc = bench_agree(b, ctx, data_gen_lsq(ctx, &p, 0, &d));
    p.seed = 1;
    if (rc == DS_OK)
        rc = bench_agree(b, ctx, data_gen_lsq(ctx, &p, 0, test));
    if (rc == DS_OK)
        rc = ann_timed(b, ctx, &d, &o, reps, median, &m);
    if (rc == DS_OK)
        rc = ann_keep(b, ctx, &m, test, out);
    ann_model_free(&m);
    data_free(ctx, &d);
    return rc;
}

// The CPU-only check's reference: the test outputs Σ_k V_k·tanh([x 1]·w_k) + V_K in a plain loop.
typedef struct ann_loop {
    const double *X, *W, *V;
    int64_t n, K;
    double *P;
} ann_loop;

static void ann_loop_part(void *arg, int part, int64_t lo, int64_t hi)
{
    const ann_loop *a = arg;
    (void)part;
    for (int64_t i = lo; i < hi; i++) {
        const double *x = a->X + i * a->n;
        double p = a->V[a->K];
        for (int64_t k = 0; k < a->K; k++) {
            const double *w = a->W + k * (a->n + 1);
            double z = w[a->n];
            for (int64_t j = 0; j < a->n; j++)
                z += x[j] * w[j];
            p += a->V[k] * tanh(z);
        }
        a->P[i] = p;
    }
}

static void ann_check_cpu(bench_run *b, const ann_shape *s, const ds_data *test, const ann_out *got, double *want,
                          bench_row *row)
{
    ann_loop a = {test->X.data, got->W, got->V, s->n, s->K, want};
    bench_parallel(b->threads, test->X.rows, ann_loop_part, &a);
    row->err = bench_rel_diff(got->P, want, test->X.rows, b->cpu.comm);
    snprintf(row->check, sizeof row->check, "cpu outputs vs plain loop, %lld test rows", (long long)s->rows_global);
}

// The GPU's model against the CPU's: test outputs (err), W beyond 1e-9 and a different count of
// failed fits (each one #wrong, counted on rank 0: the model is replicated).
static void ann_check_gpu(bench_run *b, const ann_shape *s, const ds_data *test, const ann_out *got,
                          const ann_out *want, bench_row *row)
{
    row->err = bench_rel_diff(got->P, want->P, test->X.rows, b->cpu.comm);
    const double dw = bench_rel_diff(got->W, want->W, s->K * (s->n + 1), MPI_COMM_NULL);
    if (b->cpu.rank == 0) {
        row->wrong += !(dw <= ANN_BENCH_TOL_W);
        row->wrong += got->failed != want->failed;
        if (!(dw <= ANN_BENCH_TOL_W) || got->failed != want->failed)
            ctx_log(&b->cpu, "bench ann: W cuda vs cpu %.3e (tol %.0e); failed fits %lld vs %lld", dw, ANN_BENCH_TOL_W,
                    (long long)got->failed, (long long)want->failed);
    }
    snprintf(row->check, sizeof row->check, "cuda vs cpu, %lld test outputs; W to 1e-9, failed fits",
             (long long)s->rows_global);
}

static void ann_peer(bench_run *b, const ann_shape *s, bench_row *row)
{
    char args[256];
    snprintf(args, sizeof args, "ann --xp %s --obs %lld --vars %lld --neurons %lld", b->have_gpu ? "cupy" : "numpy",
             (long long)s->rows_global, (long long)s->n, (long long)s->K);
    row->peer_s = bench_peer(b, args);
}

static int ann_case_run(bench_run *b, int64_t size, bench_row *row)
{
    ann_shape s;
    ann_shape_of(b, size, &s);
    snprintf(row->shape, sizeof row->shape, "%lldx%lld K=%lld", (long long)s.rows_global, (long long)s.n,
             (long long)s.K);
    row->work = (double)s.rows_global * (double)(s.K + 1) * (double)(s.K + 1);  // the output layer's Gram
    row->tol = ANN_BENCH_TOL_P;
    const int cpu_run = bench_cpu_wanted(b, row->work, 1e9 * b->threads * b->cpu.nranks);
    ann_out cpu = {0}, gpu = {0};
    ds_data tc, tg;
    memset(&tc, 0, sizeof tc);
    memset(&tg, 0, sizeof tg);
    int rc = ann_on(b, &b->cpu, &s, cpu_run ? b->repeat : 0, &row->cpu_s, &cpu, &tc);
    if (rc == DS_OK && b->have_gpu)
        rc = ann_on(b, &b->gpu, &s, b->repeat, &row->gpu_s, &gpu, &tg);
    double *want = NULL;
    if (rc == DS_OK && !b->have_gpu)
        rc = bench_agree(b, &b->cpu, bench_host_alloc(b, (void **)&want, (double)tc.X.rows * 8));
    if (rc == DS_OK) {
        ann_out *got = b->have_gpu ? &gpu : &cpu;
        if (b->corrupt && b->cpu.rank == 0 && tc.X.rows > 0)
            got->P[0] += 10 * (1 + fabs(got->P[0]));
        if (b->have_gpu)
            ann_check_gpu(b, &s, &tc, &gpu, &cpu, row);
        else
            ann_check_cpu(b, &s, &tc, &cpu, want, row);
        ann_peer(b, &s, row);
    }
    free(want);
    ann_out_free(&cpu);
    ann_out_free(&gpu);
    data_free(&b->cpu, &tc);
    if (b->have_gpu)
        data_free(&b->gpu, &tg);
    return rc;
}

const bench_case bench_case_ann = {
    .name = "ann",
    .about = "least-squares network on the seed's problem (ROWS x 10, K = min(1000, ROWS/10)); GFLOP/s of its Gram",
    .unit = "GFLOP/s",
    .size_label = "rows",
    .default_sizes = "1e3:1e4:x10",
    .ref_label = "",
    .need = ann_need,
    .run = ann_case_run,
    .dtype = "f64",
    .available = NULL,
    .timing = "both sides timed as training wall time between synchronised points (host work inside)",
};
