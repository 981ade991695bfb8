// test_ann.c: the least-squares network. `test_ann cpu` (any rank count): the model does not depend on
// the rank count or on the memory budget (rounds and chunks), is reproducible, fits the seed's
// function, takes the minimum-norm route, classifies and refuses bad targets; the subsets, the row
// routing and the CPU's Gram of H by threads and tiles. `test_ann gpu`: the CUDA backend against the
// CPU one on fresh data, and the routing (exits 77 where the ranks have no GPU of their own; the seed
// is printed and DSOLVE_TEST_SEED replays it). The ops one by one (the output solve's eigen route among
// them) are test_backend_ops's.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ann/ann.h"
#include "ann/ann_gram.h"
#include "ann/ann_rows.h"
#include "core/data.h"
#include "harness.h"
#include "core/exactsum.h"
#include "core/rng.h"

typedef struct trained {
    ann_model m;
    ann_metrics train, test;
    double *P;          // the outputs on the rank's test rows
    int64_t row0, rows;  // those rows
    int rc;
} trained;

// The seed's problem (kind GEN_ANN) of rows × cols; with classes, y becomes the class of the
// quantile of sin(Σx)/2 that y falls in (labels 0 .. classes−1).
static int make_data(ds_ctx *ctx, int64_t rows, int64_t cols, uint64_t seed, int classes, ds_data *d)
{
    gen_lsq p = {.kind = GEN_ANN, .rows = rows, .cols = cols, .seed = seed};
    DS_CHECK(data_gen_lsq(ctx, &p, 0, d));
    if (!classes)
        return DS_OK;
    double *y = malloc((size_t)d->X.rows * sizeof(double));
    DS_CHECK(ctx->be->download(ctx, y, d->y, (size_t)d->X.rows * sizeof(double)));
    for (int64_t i = 0; i < d->X.rows; i++) {
        int c = (int)((y[i] + 0.5) * classes);
        y[i] = c < 0 ? 0 : c >= classes ? classes - 1 : c;
    }
    int rc = ctx->be->upload(ctx, d->y, y, (size_t)d->X.rows * sizeof(double));
    free(y);
    return rc;
}

static trained train_on(ds_ctx *ctx, int64_t rows, int64_t cols, uint64_t seed, const ann_opts *o)
{
    trained t;
    memset(&t, 0, sizeof t);
    ds_data d = {.block_rows = ann_block_rows}, e = {0};  // the training set's ranks hold whole blocks
    ann_times times;
    t.rc = make_data(ctx, rows, cols, seed, o->classes, &d);
    if (t.rc == DS_OK)
        t.rc = make_data(ctx, rows, cols, seed + 1, o->classes, &e);
    if (t.rc == DS_OK)
        t.rc = ann_train(ctx, &d, o, &t.m, &times);
    if (t.rc == DS_OK)
        t.rc = ann_predict(ctx, &t.m, &d, 1, NULL, &t.train);
    t.row0 = e.row0, t.rows = e.X.rows;
    t.P = malloc((size_t)(e.X.rows + 1) * (size_t)(o->classes ? o->classes : 1) * sizeof(double));
    if (t.rc == DS_OK)
        t.rc = ann_predict(ctx, &t.m, &e, 1, t.P, &t.test);
    data_free(ctx, &d);
    data_free(ctx, &e);
    return t;
}

static void trained_free(trained *t)
{
    ann_model_free(&t->m);
    free(t->P);
}

// a's test outputs against b's on the same global rows (b may hold more rows than a).
static double outputs_diff(const trained *a, const trained *b)
{
    const int64_t C = a->m.outputs;
    return test_rel_diff(a->P, b->P + (a->row0 - b->row0) * C, a->rows * C);
}

// The same model: W (from the same fits) to tol_w; V, the output solve's solution, to tol_v; the
// outputs, which is what the model is, to tol_p.
static void compare_models(const trained *a, const trained *b, double tol_w, double tol_v, double tol_p,
                           const char *what)
{
    CHECK(a->rc == DS_OK && b->rc == DS_OK, "%s: training failed (%d, %d)", what, a->rc, b->rc);
    if (a->rc != DS_OK || b->rc != DS_OK)
        return;
    const ann_model *x = &a->m, *y = &b->m;
    double dw = test_rel_diff(x->W, y->W, x->neurons * (x->n + 1));
    double dv = test_rel_diff(x->V, y->V, (x->neurons + 1) * x->outputs);
    CHECK(dw <= tol_w, "%s: W differs by %.3e (tol %.1e)", what, dw, tol_w);
    CHECK(dv <= tol_v, "%s: V differs by %.3e (tol %.1e)", what, dv, tol_v);
    double dp = outputs_diff(a, b);
    CHECK(dp <= tol_p, "%s: the test outputs differ by %.3e (tol %.1e)", what, dp, tol_p);
    CHECK_EQ_INT(x->failed, y->failed, what);
}

// ---------------------------------------------------------------------------------------------------

static void test_rank_independence(ds_ctx *world, ds_ctx *self)
{
    // W comes from the same fits on any rank count, and the output Gram is summed exactly over fixed
    // blocks (ann_gram.h): W and V are the same bits on any rank count and memory budget (rounds and H
    // chunks). The test outputs to 1e-13: BLAS may order a row's products by the shape of the rows
    // around it. 13 000 rows are 4 blocks, the last short, for up to 4 ranks; 5 000 rows are 2 blocks,
    // which leave ranks 3 and 4 without rows.
    const int64_t sets[] = {13000, 5000};
    ann_opts o = {.neurons = 120, .seed = 11, .ridge = -1};
    for (int i = 0; i < 2; i++) {
        char what[96];
        trained a = train_on(world, sets[i], 6, 3, &o), b = train_on(self, sets[i], 6, 3, &o);
        snprintf(what, sizeof what, "%lld rows: all ranks against one", (long long)sets[i]);
        compare_models(&a, &b, 0, 0, 1e-13, what);
        trained_free(&a), trained_free(&b);
    }
    ann_opts small = o;
    small.budget_bytes = 40000;  // many exchange rounds, and Gram chunks of one block
    trained a = train_on(world, 13000, 6, 3, &o), c = train_on(world, 13000, 6, 3, &small);
    compare_models(&c, &a, 0, 0, 0, "small memory budget against the default");
    trained d = train_on(world, 13000, 6, 3, &o);
    compare_models(&d, &a, 0, 0, 0, "a second run");
    trained_free(&a), trained_free(&c), trained_free(&d);
}

static void test_accuracy(ds_ctx *ctx)
{
    ann_opts o = {.neurons = 200, .seed = 5, .ridge = -1};
    trained t = train_on(ctx, 20000, 10, 1, &o);
    CHECK(t.rc == DS_OK, "seed problem: %s", ctx->msg.text);
    CHECK(t.test.r >= 0.99999, "seed problem 20000 x 10, 200 neurons: test r %.8f < 0.99999", t.test.r);
    CHECK(t.train.r2 >= 0.99998, "train R2 %.8f", t.train.r2);
    CHECK_EQ_INT(t.m.failed, 0, "failed neurons");
    CHECK(strcmp(t.m.route, "cholesky") == 0, "route %s", t.m.route);
    trained_free(&t);

    ann_opts mn = {.neurons = 100, .seed = 2, .ridge = -1};  // subset 3000/100 = 30 < 41: minimum norm
    trained u = train_on(ctx, 3000, 40, 4, &mn);
    CHECK(u.rc == DS_OK, "minimum-norm fits: %s", ctx->msg.text);
    CHECK(u.m.subset == 30 && u.m.failed == 0, "subset %lld, failed %lld", (long long)u.m.subset, (long long)u.m.failed);
    CHECK(u.train.r > 0.5, "minimum-norm fits: train r %.4f", u.train.r);
    trained_free(&u);

    ann_opts cl = {.neurons = 300, .seed = 9, .ridge = -1, .classes = 3};
    trained v = train_on(ctx, 6000, 8, 7, &cl);
    CHECK(v.rc == DS_OK, "classes: %s", ctx->msg.text);
    CHECK(v.train.accuracy > 0.9 && v.test.accuracy > 0.85, "3 classes: train accuracy %.4f, test %.4f",
          v.train.accuracy, v.test.accuracy);
    trained_free(&v);
}

static void test_bad_targets(ds_ctx *ctx)
{
    ds_data d = {.block_rows = ann_block_rows};
    ann_model m;
    ann_times t;
    ann_opts o = {.neurons = 10, .seed = 1, .ridge = -1};
    CHECK(make_data(ctx, 200, 3, 1, 0, &d) == DS_OK, "data");
    double *y = malloc((size_t)d.X.rows * sizeof(double));
    for (int64_t i = 0; i < d.X.rows; i++)
        y[i] = 0.25;
    ctx->be->upload(ctx, d.y, y, (size_t)d.X.rows * sizeof(double));
    CHECK_EQ_INT(ann_train(ctx, &d, &o, &m, &t), DS_ERR_INPUT, "constant y");
    CHECK(strstr(ctx->msg.text, "constant") != NULL, "message: %s", ctx->msg.text);
    ann_model_free(&m);
    ctx->msg.text[0] = '\0', ctx->agreed_failure = DS_OK;
    for (int64_t i = 0; i < d.X.rows; i++)
        y[i] = (double)(i % 4);  // labels 0 .. 3 with 3 classes
    ctx->be->upload(ctx, d.y, y, (size_t)d.X.rows * sizeof(double));
    o.classes = 3;
    CHECK_EQ_INT(ann_train(ctx, &d, &o, &m, &t), DS_ERR_INPUT, "label out of range");
    ann_model_free(&m);
    ctx->msg.text[0] = '\0', ctx->agreed_failure = DS_OK;
    o.classes = 0, o.neurons = 201;
    CHECK_EQ_INT(ann_train(ctx, &d, &o, &m, &t), DS_ERR_USAGE, "neurons > rows");
    ctx->msg.text[0] = '\0', ctx->agreed_failure = DS_OK;
    free(y);
    data_free(ctx, &d);
}

// Subsets: sorted, distinct, in [0, m), the same for a neuron whatever batch draws it; m of 1 row,
// of digits that split unevenly, and of 32 bits (three radix passes).
static void test_subsets(ds_ctx *ctx)
{
    const int64_t ms[] = {1, 8193, 3000000001ll, 40000000}, Ss[] = {1, 8193, 1000, 20000};
    for (int c = 0; c < 4; c++) {
        const int64_t m = ms[c], S = Ss[c], nb = 5;
        int64_t *L = malloc((size_t)(nb * S) * sizeof(int64_t)), *one = malloc((size_t)S * sizeof(int64_t));
        CHECK(ann_subsets_draw(ctx, 3, m, S, 10, nb, L) == DS_OK, "draw m %lld", (long long)m);
        CHECK(ann_subsets_draw(ctx, 3, m, S, 13, 1, one) == DS_OK, "draw m %lld", (long long)m);
        int64_t bad = -1;
        for (int64_t e = 0; e < nb * S && bad < 0; e++)
            if (L[e] < 0 || L[e] >= m || (e % S > 0 && L[e] <= L[e - 1]))
                bad = e;
        CHECK(bad < 0, "m %lld, S %lld: subset entry %lld = %lld is out of range or order", (long long)m, (long long)S,
              (long long)bad, (long long)(bad < 0 ? 0 : L[bad]));
        CHECK(memcmp(one, L + 3 * S, (size_t)S * sizeof(int64_t)) == 0, "m %lld: neuron 13 differs by batch",
              (long long)m);
        free(L), free(one);
    }
}

// Round r's subsets for the routing test: drawn (r even) or, r odd, all in rank 0's first rows.
static void routing_subsets(ds_ctx *ctx, int64_t r, int64_t m, int64_t S, int64_t nb, int64_t *L)
{
    if (r % 2 == 0) {
        CHECK(ann_subsets_draw(ctx, 17 + (uint64_t)r, m, S, 5 * ctx->rank, nb, L) == DS_OK, "draw");
        return;
    }
    for (int64_t k = 0; k < nb; k++)
        for (int64_t j = 0; j < S; j++)
            L[k * S + j] = j + k;
}

// ann_rows_fetch must give A[e] = (x, 1, z) of row L[e]. The rows split unevenly (103 over the ranks),
// rank 1 has no neurons in the even rounds, the rounds change size, and in the odd ones every rank asks
// rank 0 alone for all its rows, more than rank 0's send buffer holds at first: it must grow.
static void test_routing(ds_ctx *ctx, const ann_ops *ops)
{
    const int64_t m = 103, n = 3, S = 7, nb_max = 3, sizes[] = {3, 3, 1, 3};
    int64_t row0, rows;
    data_partition(m, ctx->nranks, ctx->rank, &row0, &rows);
    double *X = malloc((size_t)(rows * n + 1) * sizeof(double)), *z = malloc((size_t)(rows + 1) * sizeof(double));
    double *A = malloc((size_t)(nb_max * S * (n + 2)) * sizeof(double));
    int64_t *L = malloc((size_t)(nb_max * S) * sizeof(int64_t));
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t c = 0; c < n; c++)
            X[i * n + c] = (double)(row0 + i) * 10 + (double)c + 0.5;
        z[i] = -(double)(row0 + i);
    }
    void *Xd = NULL, *zd = NULL, *Ad = NULL;
    ann_rows rw;
    CHECK(ann_upload_new(ctx, &Xd, X, (size_t)(rows * n) * sizeof(double)) == DS_OK, "upload X");
    CHECK(ann_upload_new(ctx, &zd, z, (size_t)rows * sizeof(double)) == DS_OK, "upload z");
    CHECK(ctx->be->alloc(ctx, &Ad, (size_t)(nb_max * S * (n + 2)) * sizeof(double)) == DS_OK, "alloc A");
    ds_mat Xm = {Xd, rows, n, 0};
    ann_dev dv = {&Xm, zd, row0, m};
    CHECK(ann_rows_open(ctx, &dv, S, nb_max, nb_max, &rw) == DS_OK, "open: %s", ctx->msg.text);
    for (int64_t r = 0; r < 4 && test_failures_ == 0; r++) {
        const int64_t nb = ctx->rank == 1 && r % 2 == 0 ? 0 : sizes[r];
        routing_subsets(ctx, r, m, S, nb, L);
        CHECK(ann_rows_fetch(ctx, ops, &dv, &rw, L, nb, Ad, -1) == DS_OK, "fetch: %s", ctx->msg.text);
        CHECK(ctx->be->download(ctx, A, Ad, (size_t)(nb * S * (n + 2)) * sizeof(double)) == DS_OK, "download");
        int64_t bad = -1;
        for (int64_t e = 0; e < nb * S && bad < 0; e++)
            for (int64_t c = 0; c < n + 2; c++) {
                double want = c < n ? (double)L[e] * 10 + (double)c + 0.5 : c == n ? 1.0 : -(double)L[e];
                if (A[e * (n + 2) + c] != want)
                    bad = e;
            }
        CHECK(bad < 0, "%s rank %d round %lld: row %lld of A is not row %lld", ctx->be->name, ctx->rank, (long long)r,
              (long long)bad, (long long)(bad < 0 ? 0 : L[bad]));
    }
    CHECK(ctx->rank != 0 || ctx->nranks == 1 || rw.grown > 0, "rank 0's send buffer never grew");
    ann_rows_close(ctx, &rw);
    ctx->be->free(ctx, Xd), ctx->be->free(ctx, zd), ctx->be->free(ctx, Ad);
    free(X), free(z), free(A), free(L);
}

// ---------------------------------------------------------------------------------------------------

// The CPU's Gram of H by blocks (ann_cpu_gram_digits) against H formed by forward and multiplied out
// here, with few (act_run's product) and many inputs (OpenBLAS's), a regression target and one-hot
// classes, in blocks of 300 rows (a short one last; tiles of at most a block): on 1, 2, 3 and 7 threads
// the digits are the same bits, and their join is the Gram to 1e-13.
static void test_cpu_gram(ds_ctx *ctx)
{
    const int64_t rows = 2000, K = 50, block = 300;
    const int64_t shapes[][2] = {{6, 1}, {40, 3}};  // inputs, outputs
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t n = shapes[s][0], outputs = shapes[s][1], ld = K + 1 + outputs, dlen = 2 * ann_tri(ld);
        double *X = malloc((size_t)(rows * n) * sizeof(double)), *W = malloc((size_t)(K * (n + 1)) * sizeof(double));
        double *y = malloc((size_t)rows * sizeof(double)), *H = malloc((size_t)(rows * ld) * sizeof(double));
        double *ref = calloc((size_t)(ld * ld), sizeof(double)), *S = malloc((size_t)(ld * ld) * sizeof(double));
        double *dig = malloc((size_t)dlen * sizeof(double)), *dig1 = malloc((size_t)dlen * sizeof(double));
        double *col = malloc((size_t)ld * sizeof(double));
        ann_fix fx = {.block = block, .col = col};
        (void)ann_fix_scales(rows, K + 1, outputs, 1.0, col, &fx.s0);
        fx.lo = exactsum_lo((rows + block - 1) / block);
        for (int64_t i = 0; i < rows * n; i++)
            X[i] = rng_uniform(5, s, (uint64_t)i) - 0.5;
        for (int64_t i = 0; i < K * (n + 1); i++)
            W[i] = (rng_uniform(6, s, (uint64_t)i) - 0.5) * 4 / (double)n;
        for (int64_t i = 0; i < rows; i++)
            y[i] = outputs == 1 ? rng_uniform(7, s, (uint64_t)i) - 0.5 : (double)(i % outputs);
        CHECK(ctx->be->ann->forward(ctx, X, rows, n, W, K, y, outputs, H, ld) == DS_OK, "forward");
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < ld; i++)
                for (int64_t j = 0; j < ld; j++)
                    ref[i * ld + j] += H[r * ld + i] * H[r * ld + j];
        const int threads[] = {1, 2, 3, 7};
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
            double *d = t == 0 ? dig1 : dig;
            memset(d, 0, (size_t)dlen * sizeof(double));
            int rc = ann_cpu_gram_digits(ctx, X, rows, n, W, K, y, outputs, ld, &fx, threads[t], d);
            if (rc == DS_OK)
                rc = ctx->be->ann->gram_join(ctx, d, ld, &fx, S);
            const double e = test_rel_diff(S, ref, ld * ld);
            CHECK(rc == DS_OK && e <= 1e-13, "ann_cpu_gram_digits n %lld outputs %lld, %d threads: %.3e from the Gram "
                  "of forward's H", (long long)n, (long long)outputs, threads[t], e);
            CHECK(memcmp(d, dig1, (size_t)dlen * sizeof(double)) == 0, "ann_cpu_gram_digits n %lld outputs %lld: "
                  "the digits on %d threads differ from one thread's", (long long)n, (long long)outputs, threads[t]);
        }
        free(X), free(W), free(y), free(H), free(ref), free(S), free(dig), free(dig1), free(col);
    }
}

static void test_gpu_against_cpu(ds_ctx *cpu, ds_ctx *gpu, uint64_t seed)
{
    struct {
        int64_t rows, cols, neurons, budget;
        int classes;
        const char *what;
    } cases[] = {
        {20000, 10, 200, 0, 0, "regression (normal equations)"},
        {3000, 40, 100, 0, 0, "regression (minimum norm)"},
        {6000, 8, 300, 0, 3, "3 classes"},
        {9000, 6, 150, 60000, 0, "small memory budget"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ann_opts o = {.neurons = cases[i].neurons, .seed = seed, .ridge = -1, .classes = cases[i].classes,
                      .budget_bytes = cases[i].budget};
        trained c = train_on(cpu, cases[i].rows, cases[i].cols, seed + 1, &o);
        trained g = train_on(gpu, cases[i].rows, cases[i].cols, seed + 1, &o);
        CHECK(c.rc == DS_OK && g.rc == DS_OK, "%s: cpu %s / cuda %s", cases[i].what, cpu->msg.text, gpu->msg.text);
        if (c.rc == DS_OK && g.rc == DS_OK) {
            double dw = test_rel_diff(g.m.W, c.m.W, c.m.neurons * (c.m.n + 1));
            CHECK(dw <= 1e-9, "%s: W cuda vs cpu %.3e", cases[i].what, dw);
            CHECK_EQ_INT(g.m.failed, c.m.failed, cases[i].what);
            if (o.classes) {
                CHECK(fabs(g.test.accuracy - c.test.accuracy) <= 2.0 / (double)cases[i].rows, "%s: accuracy %.5f vs %.5f",
                      cases[i].what, g.test.accuracy, c.test.accuracy);
            } else {
                CHECK(fabs(g.test.r - c.test.r) <= 1e-7 && fabs(g.test.rmse - c.test.rmse) <= 1e-6 * (1 + c.test.rmse),
                      "%s: test r %.10f vs %.10f, rmse %.6e vs %.6e", cases[i].what, g.test.r, c.test.r, g.test.rmse,
                      c.test.rmse);
            }
            CHECK(strcmp(g.m.route, c.m.route) == 0, "%s: route %s vs %s", cases[i].what, g.m.route, c.m.route);
        }
        trained_free(&c), trained_free(&g);
    }
}

static int run_gpu(void)
{
    ds_ctx cpu, gpu;
    int rc = test_open_pair("test_ann gpu", &cpu, &gpu);
    if (rc == 77)
        return 77;
    uint64_t seed = test_seed("test_ann gpu");
    if (rc == 0) {
        test_gpu_against_cpu(&cpu, &gpu, seed);
        test_routing(&gpu, gpu.be->ann);
    }
    ctx_close(&gpu);
    ctx_close(&cpu);
    return test_finish("test_ann gpu");
}

static int run_cpu(void)
{
    ds_ctx world, self;
    test_open_pair("test_ann cpu", &world, NULL);
    CHECK(ctx_open(&self, MPI_COMM_SELF, "cpu") == DS_OK, "self ctx: %s", self.msg.text);
    self.quiet = 1;
    if (test_failures_ == 0) {
        test_rank_independence(&world, &self);
        test_accuracy(&world);
        test_bad_targets(&world);
        test_subsets(&world);
        test_routing(&world, world.be->ann);
        test_cpu_gram(&self);
    }
    ctx_close(&self);
    ctx_close(&world);
    return test_finish("test_ann cpu");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rc = argc > 1 && strcmp(argv[1], "gpu") == 0 ? run_gpu() : run_cpu();
    MPI_Finalize();
    return rc;
}
