// test_logreg.c: logistic regression on fresh random data (seed printed; DSOLVE_TEST_SEED replays it).
//   test_logreg cpu: the CPU ops against a plain reference written here (objective and gradient at a
//     random W, gd and Nesterov iterates), and the distributed run over all ranks against one rank
//     holding every row for every optimiser, model and precision: the same bits (rank-count independence).
//   test_logreg gpu: training on the CUDA ops against training on the CPU ops over the same ranks, for
//     every optimiser, model and precision, and against the CUDA ops with every row on rank 0 (the same
//     bits); exits 77 (skipped) where the ranks have no GPU of their own.
//     The ops one by one (the pass on the fused f32 shapes among them) are test_backend_ops's.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "logreg/logreg.h"
#include "core/rng.h"

enum { M = 1500, F = 40, K = 5, D = F + 1, DK = D * K };
static uint64_t seed_;
static int nudge_;  // make_set multiplies one element of X in seven by 1 + 2⁻⁵² (see lbfgs_horizon)

// Row i of the global problem: features in [0, 1), the bias 1, a label from a random linear model
// with noise, so that the classes overlap and the optimum is finite.
static void make_row(int64_t i, double *x, int32_t *label)
{
    double best = -1e300;
    for (int j = 0; j < F; j++)
        x[j] = rng_uniform(seed_, 1, (uint64_t)(i * F + j));
    x[F] = 1.0;
    for (int k = 0; k < K; k++) {
        double z = 2.0 * rng_normal(seed_, 3, (uint64_t)(i * K + k));
        for (int j = 0; j < F; j++)
            z += x[j] * (rng_uniform(seed_, 2, (uint64_t)(j * K + k)) - 0.5) * 8.0;
        if (z > best) {
            best = z;
            *label = k;
        }
    }
}

// The rows row0 .. row0+rows−1 in ctx's backend memory.
static void make_set(ds_ctx *ctx, int64_t row0, int64_t rows, int f32, lr_set *s)
{
    CHECK(logreg_set_alloc(ctx, s, rows, D, f32) == DS_OK, "alloc: %s", ctx->msg.text);
    s->rows_global = M;
    s->row0 = row0;
    double *x = malloc((size_t)(rows * D + 1) * sizeof(double));
    float *xf = malloc((size_t)(rows * D + 1) * sizeof(float));
    int32_t *y = malloc((size_t)(rows + 1) * sizeof(int32_t));
    for (int64_t i = 0; i < rows; i++)
        make_row(row0 + i, x + i * D, y + i);
    for (int64_t e = 0; nudge_ && e < rows * D; e++)  // by global position: the same elements on any ranks
        if ((uint64_t)(row0 * D + e) * 2654435761u % 7 == 0)
            x[e] *= 1.0 + 0x1p-52;
    for (int64_t i = 0; i < rows * D; i++)
        xf[i] = (float)x[i];
    CHECK(ctx->be->upload(ctx, s->X, f32 ? (void *)xf : (void *)x, (size_t)(rows * D) * (f32 ? 4 : 8)) == DS_OK, "upload");
    CHECK(ctx->be->upload(ctx, s->labels, y, (size_t)rows * sizeof(int32_t)) == DS_OK, "upload labels");
    free(x);
    free(xf);
    free(y);
}

static void make_local(ds_ctx *ctx, int f32, lr_set *s)
{
    int64_t row0 = 0, rows = 0;
    logreg_partition(M, ctx->nranks, ctx->rank, &row0, &rows);
    make_set(ctx, row0, rows, f32, s);
}

// The reference objective and gradient over all M rows, in plain double loops.
static double ref_eval(const double *W, int model, double l2, double *g)
{
    double f = 0, x[D];
    memset(g, 0, DK * sizeof(double));
    for (int64_t i = 0; i < M; i++) {
        int32_t y;
        make_row(i, x, &y);
        double z[K], mx = -1e300, sum = 0;
        for (int k = 0; k < K; k++) {
            z[k] = 0;
            for (int j = 0; j < D; j++)
                z[k] += x[j] * W[j * K + k];
            mx = z[k] > mx ? z[k] : mx;
        }
        for (int k = 0; k < K; k++)
            sum += exp(z[k] - mx);
        for (int k = 0; k < K; k++) {
            double r;
            if (model == LR_SOFTMAX) {
                r = exp(z[k] - mx) / sum - (k == y);
            } else {
                const double s = 1.0 / (1.0 + exp(-z[k]));
                f -= (k == y) ? log(s) : log(1.0 - s);
                r = s - (k == y);
            }
            for (int j = 0; j < D; j++)
                g[j * K + k] += x[j] * r / M;
        }
        if (model == LR_SOFTMAX)
            f += mx + log(sum) - z[y];
    }
    f /= M;
    for (int i = 0; i < (D - 1) * K; i++) {
        f += 0.5 * l2 * W[i] * W[i];
        g[i] += l2 * W[i];
    }
    return f;
}

static void random_w(double *W, uint64_t stream)
{
    for (int i = 0; i < DK; i++)
        W[i] = rng_uniform(seed_, stream, (uint64_t)i) - 0.5;
}

// The work's fixed point (logreg.c's lr_fix, from the generated rows' column maxima) in fix (backend).
static void fix_on(ds_ctx *ctx, lr_work *w, double *fix)
{
    double xmax[D] = {0}, x[D], host[2 * D];
    for (int64_t i = 0; i < M; i++) {
        int32_t y;
        make_row(i, x, &y);
        for (int j = 0; j < D; j++)
            xmax[j] = fabs(x[j]) > xmax[j] ? fabs(x[j]) : xmax[j];
    }
    w->fix_lo = logreg_fix_scales(xmax, D, M, host);
    CHECK(ctx->be->upload(ctx, fix, host, sizeof host) == DS_OK, "upload fix");
    w->fix = fix;
}

// The CPU ops' pass + allreduce + finish at a random W against ref_eval.
static void test_eval_vs_ref(ds_ctx *ctx, int model, int f32)
{
    lr_set s;
    make_local(ctx, f32, &s);
    lr_opts o = {.model = model, .classes = K, .l2 = 0.01};
    lr_work w;
    logreg_work_init(&w, &s, &o);
    const int64_t len = logreg_gbuf_len(&w);
    double W[DK], g[DK], gref[DK], out[2], *gbuf = calloc((size_t)len, sizeof(double)), fix[2 * D];
    random_w(W, 7);
    CHECK(ctx->be->logreg->open(ctx, &w) == DS_OK, "open");
    fix_on(ctx, &w, fix);
    ctx->be->logreg->pass(ctx, &w, &s, W, 1, gbuf);
    ctx->be->allreduce_sum(ctx, gbuf, len);
    ctx->be->logreg->finish(ctx, &w, gbuf, W, g, out, NULL);
    ctx->be->logreg->close(ctx, &w);
    const double f = ref_eval(W, model, o.l2, gref), tol = f32 ? 1e-5 : 1e-12;
    CHECK(fabs(out[0] - f) <= tol * fabs(f), "model %d f32 %d: objective %.15g, reference %.15g", model, f32, out[0], f);
    const double d = test_rel_diff(g, gref, DK);
    CHECK(d <= (f32 ? 1e-4 : 1e-11), "model %d f32 %d: gradient differs from the reference by %.3e", model, f32, d);
    free(gbuf);
    logreg_set_free(ctx, &s);
}

// gd and Nesterov iterates from the reference gradient, against logreg_train.
static void test_first_order_vs_ref(ds_ctx *ctx, int optimizer, int model)
{
    lr_set s;
    make_local(ctx, 0, &s);
    lr_opts o = {.model = model, .optimizer = optimizer, .iters = 6, .classes = K, .lr = 0.5, .l2 = 0.01};
    lr_result res;
    CHECK(logreg_train(ctx, &s, &o, &res) == DS_OK, "train: %s", ctx->msg.text);
    double x[DK] = {0}, y[DK] = {0}, g[DK], t = 1, f0 = 0;
    for (int it = 0; it < o.iters; it++) {
        const double f = ref_eval(y, model, o.l2, g);
        if (it == 0)
            f0 = f;
        CHECK(fabs(res.loss[it] - f) <= 1e-12 * f, "opt %d model %d: objective at iteration %d %.15g, reference %.15g",
              optimizer, model, it, res.loss[it], f);
        if (optimizer == LR_GD) {
            for (int i = 0; i < DK; i++)
                y[i] -= o.lr * g[i];
            continue;
        }
        double restart = 0, xn[DK];
        for (int i = 0; i < DK; i++) {
            xn[i] = y[i] - o.lr * g[i];
            restart += (y[i] - xn[i]) * (xn[i] - x[i]);
        }
        const double t0 = restart > 0 ? 1 : t, t1 = 0.5 * (1 + sqrt(1 + 4 * t0 * t0));
        for (int i = 0; i < DK; i++) {
            y[i] = xn[i] + (t0 - 1) / t1 * (xn[i] - x[i]);
            x[i] = xn[i];
        }
        t = t1;
    }
    const double d = test_rel_diff(res.W, optimizer == LR_GD ? y : x, DK);
    CHECK(d <= 1e-11, "opt %d model %d: weights differ from the reference iterates by %.3e", optimizer, model, d);
    CHECK(res.loss[o.iters] < f0, "opt %d: objective %.6g did not fall below %.6g", optimizer, res.loss[o.iters], f0);
    logreg_result_free(&res);
    logreg_set_free(ctx, &s);
}

// Where the rows are: spread over the ranks (logreg_partition), all on every rank (a context of one
// rank), or all on rank 0 and none on the others (the sums must not see the difference).
enum { ROWS_SPREAD, ROWS_ALL, ROWS_FIRST };

// Trains the same problem on ctx with the rows placed as `where` says and returns the result.
static void train_on(ds_ctx *ctx, int where, const lr_opts *o, int f32, lr_result *res)
{
    lr_set s;
    if (where == ROWS_ALL || (where == ROWS_FIRST && ctx->rank == 0))
        make_set(ctx, 0, M, f32, &s);
    else if (where == ROWS_FIRST)
        make_set(ctx, 0, 0, f32, &s);
    else
        make_local(ctx, f32, &s);
    CHECK(logreg_train(ctx, &s, o, res) == DS_OK, "train on %s: %s", ctx->be->name, ctx->msg.text);
    logreg_set_free(ctx, &s);
}

// The bits of a and b: weights and objective history.
static void same_bits(const lr_result *a, const lr_result *b, const char *what, const lr_opts *o, int f32)
{
    CHECK(a->iters == b->iters && memcmp(a->W, b->W, sizeof(double) * DK) == 0 &&
              memcmp(a->loss, b->loss, sizeof(double) * (size_t)(a->iters + 1)) == 0,
          "%s (opt %d model %d f32 %d): not the same bits (objective %.17g against %.17g)", what, o->optimizer,
          o->model, f32, a->loss[a->iters], b->loss[b->iters]);
}

// a (the distributed or device run) against b (one rank, or the CPU): objective history over its first
// `upto` entries (all of it when upto > iters), and weights and accuracy when the whole history is compared.
static void compare_runs(const lr_result *a, const lr_result *b, double tol, const char *what, const lr_opts *o, int f32,
                         int upto)
{
    CHECK(a->iters == b->iters, "%s (opt %d model %d f32 %d): %d iterations against %d", what, o->optimizer, o->model,
          f32, a->iters, b->iters);
    const int all = (a->iters < b->iters ? a->iters : b->iters) + 1, n = upto < all ? upto : all, whole = n == all;
    const double dl = test_rel_diff(a->loss, b->loss, n), dw = whole ? test_rel_diff(a->W, b->W, DK) : 0.0;
    // f32 L-BFGS: float rounding that differs between two correct runs (another summation order) changes
    // the curvature pairs, and the iterates part along directions where the objective is flat, so only
    // the objective is held to the tolerance there (the passes themselves are checked exactly elsewhere).
    const int loose = f32 && o->optimizer == LR_LBFGS;
    CHECK(dl <= tol && (loose || dw <= 10 * tol),
          "%s (opt %d model %d f32 %d): objective history differs by %.3e, weights by %.3e (tol %.0e)", what,
          o->optimizer, o->model, f32, dl, dw, tol);
    CHECK(!whole || fabs(a->train_accuracy - b->train_accuracy) <= (loose ? 0.01 : 2.0 / M),
          "%s: train accuracy %.6f against %.6f", what, a->train_accuracy, b->train_accuracy);
}

// How many entries of the f64 L-BFGS history of b (the CPU run) are well posed at tolerance tol: those
// before the first that moves by more than tol / 100 when one element of X in seven changes by one ulp.
// From some data the iteration amplifies rounding by 10³-10⁴ an iteration once it reaches flat
// directions (from seed 1 795 746 164, opt 2 model 1: 9e-16 at iteration 16, 9e-12 at 17, 2e-4 at 19),
// so two correct runs that round differently part there, and only what comes before can be compared.
// At least the first 8 entries must be well posed (150 seeds, that one among them, both models: 297 of 300
// histories whole, the shortest 18 entries).
static int lbfgs_horizon(ds_ctx *cpu, const lr_opts *o, const lr_result *b, double tol)
{
    lr_result p;
    nudge_ = 1;
    train_on(cpu, ROWS_SPREAD, o, 0, &p);
    nudge_ = 0;
    int n = 0;
    while (n <= b->iters && n <= p.iters && fabs(p.loss[n] - b->loss[n]) <= tol / 100 * fabs(b->loss[n]))
        n++;
    CHECK(n >= 8, "opt %d model %d: the CPU's own run moves by more than %.0e from entry %d when X moves by one ulp",
          o->optimizer, o->model, tol / 100, n);
    if (n <= b->iters && cpu->rank == 0)
        printf("test_logreg gpu: opt %d model %d f32 0: the objective history compared over its first %d entries "
               "(one ulp of X moves the CPU's own run by %.1e at entry %d)\n", o->optimizer, o->model, n,
               fabs(p.loss[n] - b->loss[n]) / fabs(b->loss[n]), n);
    logreg_result_free(&p);
    return n;
}

static void test_cpu(ds_ctx *world, ds_ctx *self)
{
    for (int model = 0; model <= 1; model++)
        for (int f32 = 0; f32 <= 1; f32++)
            test_eval_vs_ref(world, model, f32);
    for (int model = 0; model <= 1; model++) {
        test_first_order_vs_ref(world, LR_GD, model);
        test_first_order_vs_ref(world, LR_NESTEROV, model);
    }
    for (int opt = 0; opt <= 2; opt++)
        for (int cfg = 0; cfg < 4; cfg++) {
            const int f32 = cfg % 2, model = cfg / 2 ? LR_OVR : LR_SOFTMAX;
            lr_opts o = {.model = model, .optimizer = opt, .iters = 25, .classes = K, .lr = 0.5, .l2 = 1e-3};
            lr_result a, b = {0}, c;
            train_on(world, ROWS_SPREAD, &o, f32, &a);
            train_on(world, ROWS_FIRST, &o, f32, &c);
            same_bits(&a, &c, "ranks against rank 0 holding every row", &o, f32);
            if (world->rank == 0) {
                train_on(self, ROWS_ALL, &o, f32, &b);
                same_bits(&a, &b, "ranks against one rank", &o, f32);
                if (opt == LR_LBFGS)
                    CHECK(a.loss[a.iters] < 0.9 * a.loss[0], "lbfgs: objective %.6g from %.6g", a.loss[a.iters], a.loss[0]);
            }
            logreg_result_free(&a);
            logreg_result_free(&b);
            logreg_result_free(&c);
        }
}

static void test_gpu(ds_ctx *cpu, ds_ctx *gpu)
{
    for (int opt = 0; opt <= 2; opt++)
        for (int model = 0; model <= 1; model++)
            for (int f32 = 0; f32 <= 1; f32++) {
                lr_opts o = {.model = model, .optimizer = opt, .iters = 30, .classes = K, .lr = 0.5, .l2 = 1e-3};
                lr_result a, b, c;
                train_on(gpu, ROWS_SPREAD, &o, f32, &a);
                train_on(cpu, ROWS_SPREAD, &o, f32, &b);
                const double tol = opt == LR_LBFGS ? (f32 ? 3e-3 : 1e-8) : (f32 ? 1e-4 : 1e-9);
                const int upto = opt == LR_LBFGS && !f32 ? lbfgs_horizon(cpu, &o, &b, tol) : o.iters + 1;
                compare_runs(&a, &b, tol, "cuda against cpu", &o, f32, upto);
                train_on(gpu, ROWS_FIRST, &o, f32, &c);  // the GPU's bits do not depend on the ranks either
                same_bits(&a, &c, "cuda: ranks against rank 0 holding every row", &o, f32);
                logreg_result_free(&a);
                logreg_result_free(&b);
                logreg_result_free(&c);
            }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    const char *name = gpu ? "test_logreg gpu" : "test_logreg cpu";
    ds_ctx a, b;
    int rc = test_open_pair(name, &a, gpu ? &b : NULL);
    if (rc == 77) {
        MPI_Finalize();
        return 77;
    }
    seed_ = test_seed(name);
    if (!gpu)
        CHECK(ctx_open(&b, MPI_COMM_SELF, "cpu") == DS_OK, "self ctx: %s", b.msg.text);
    if (test_failures_ == 0 && gpu)
        test_gpu(&a, &b);
    else if (test_failures_ == 0)
        test_cpu(&a, &b);
    ctx_close(&b);
    ctx_close(&a);
    rc = test_finish(name);
    MPI_Finalize();
    return rc;
}
