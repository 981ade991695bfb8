// test_gpu.c: the CUDA backend against the CPU backend, op by op and on whole solves, on fresh random
// inputs (the seed is printed so a failure can be replayed with DSOLVE_TEST_SEED). Run with 1, 2 or 4
// ranks, one GPU each; exits 77 (skipped) where the ranks have no GPU of their own.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/data.h"
#include "harness.h"
#include "core/rng.h"
#include "solve/solvebak.h"

typedef struct pair {
    ds_ctx cpu, gpu;
    uint64_t seed;
} pair;

static uint64_t next_stream = 100;

static void fill_random(uint64_t seed, double *v, int64_t n, double lo, double hi)
{
    uint64_t s = next_stream++;
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * rng_uniform(seed, s, (uint64_t)i);
}

// The same host array in both backends' memory.
static void *to_backend(ds_ctx *ctx, const void *host, size_t bytes)
{
    void *p = NULL;
    CHECK(ctx->be->alloc(ctx, &p, bytes ? bytes : 8) == DS_OK, "alloc %zu on %s: %s", bytes, ctx->be->name, ctx->msg.text);
    CHECK(ctx->be->upload(ctx, p, host, bytes) == DS_OK, "upload on %s: %s", ctx->be->name, ctx->msg.text);
    return p;
}

static double *from_backend(ds_ctx *ctx, const void *dev, int64_t n)
{
    double *h = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    CHECK(ctx->be->download(ctx, h, dev, (size_t)n * sizeof(double)) == DS_OK, "download on %s: %s", ctx->be->name,
          ctx->msg.text);
    return h;
}

static void compare(ds_ctx *gpu, ds_ctx *cpu, const double *dg, const double *dc, int64_t n, double tol, const char *what)
{
    double *g = from_backend(gpu, dg, n), *c = from_backend(cpu, dc, n);
    double d = test_rel_diff(g, c, n);
    CHECK(d <= tol, "%s: cuda vs cpu relative difference %.3e > %.1e", what, d, tol);
    free(g);
    free(c);
}

typedef struct mats {
    ds_mat xc, xg;  // the same X in CPU and GPU memory
    double *yc, *yg;
    double *host;   // X as double
    void *raw;
} mats;

static void make_mats(pair *p, int64_t m, int64_t n, int f32, mats *M)
{
    M->host = malloc((size_t)(m * n + 1) * sizeof(double));
    fill_random(p->seed, M->host, m * n, -0.5, 0.5);
    size_t bytes = (size_t)(m * n) * (f32 ? 4 : 8);
    M->raw = malloc(bytes ? bytes : 8);
    for (int64_t i = 0; i < m * n; i++) {
        if (f32)
            ((float *)M->raw)[i] = (float)M->host[i];
        else
            ((double *)M->raw)[i] = M->host[i];
    }
    double *y = malloc((size_t)(m + 1) * sizeof(double));
    fill_random(p->seed, y, m, -1, 1);
    M->xc = (ds_mat){to_backend(&p->cpu, M->raw, bytes), m, n, f32};
    M->xg = (ds_mat){to_backend(&p->gpu, M->raw, bytes), m, n, f32};
    M->yc = to_backend(&p->cpu, y, (size_t)m * sizeof(double));
    M->yg = to_backend(&p->gpu, y, (size_t)m * sizeof(double));
    free(y);
}

static void free_mats(pair *p, mats *M)
{
    p->cpu.be->free(&p->cpu, (void *)M->xc.data);
    p->gpu.be->free(&p->gpu, (void *)M->xg.data);
    p->cpu.be->free(&p->cpu, M->yc);
    p->gpu.be->free(&p->gpu, M->yg);
    free(M->host);
    free(M->raw);
}

static void test_grad_update(pair *p, mats *M, int64_t up0, int64_t upn, int64_t gr0, int64_t grn)
{
    const int64_t m = M->xc.rows;
    double *coef = malloc((size_t)(upn + 1) * sizeof(double));
    fill_random(p->seed, coef, upn, -1, 1);
    double *cc = to_backend(&p->cpu, coef, (size_t)upn * 8), *cg = to_backend(&p->gpu, coef, (size_t)upn * 8);
    double *ec = to_backend(&p->cpu, M->host, (size_t)m * 8), *eg = to_backend(&p->gpu, M->host, (size_t)m * 8);
    double *oc = NULL, *og = NULL;
    p->cpu.be->alloc(&p->cpu, (void **)&oc, (size_t)(grn + 1) * 8);
    p->gpu.be->alloc(&p->gpu, (void **)&og, (size_t)(grn + 1) * 8);
    int rc = p->gpu.be->solve->grad_update(&p->gpu, &M->xg, eg, up0, upn, cg, gr0, grn, og);
    CHECK(rc == DS_OK, "grad_update: %s", p->gpu.msg.text);
    p->cpu.be->solve->grad_update(&p->cpu, &M->xc, ec, up0, upn, cc, gr0, grn, oc);
    char what[160];
    snprintf(what, sizeof what, "grad_update %s m %lld up %lld+%lld gr %lld+%lld: e", M->xc.f32 ? "f32" : "f64",
             (long long)m, (long long)up0, (long long)upn, (long long)gr0, (long long)grn);
    compare(&p->gpu, &p->cpu, eg, ec, m, 1e-13, what);
    strcat(what, " gout");
    compare(&p->gpu, &p->cpu, og, oc, grn + 1, 1e-12, what);
    // Twice on the same input gives the same bits (deterministic reductions).
    double *first = from_backend(&p->gpu, og, grn + 1);
    p->gpu.be->upload(&p->gpu, eg, M->host, (size_t)m * 8);
    p->gpu.be->solve->grad_update(&p->gpu, &M->xg, eg, up0, upn, cg, gr0, grn, og);
    double *second = from_backend(&p->gpu, og, grn + 1);
    CHECK(memcmp(first, second, (size_t)(grn + 1) * 8) == 0, "%s: not deterministic", what);
    free(first);
    free(second);
    free(coef);
    p->cpu.be->free(&p->cpu, cc), p->gpu.be->free(&p->gpu, cg);
    p->cpu.be->free(&p->cpu, ec), p->gpu.be->free(&p->gpu, eg);
    p->cpu.be->free(&p->cpu, oc), p->gpu.be->free(&p->gpu, og);
}

static void test_grams(pair *p, mats *M, int batch)
{
    const int64_t n = M->xc.cols, nb = (n + batch - 1) / batch, len = nb * batch * batch;
    double *oc = NULL, *og = NULL;
    p->cpu.be->alloc(&p->cpu, (void **)&oc, (size_t)len * 8);
    p->gpu.be->alloc(&p->gpu, (void **)&og, (size_t)len * 8);
    // Entries past a tail block's nb × nb corner are unspecified: zero both first.
    p->cpu.be->fill(&p->cpu, oc, len, 0.0);
    p->gpu.be->fill(&p->gpu, og, len, 0.0);
    CHECK(p->gpu.be->solve->block_grams(&p->gpu, &M->xg, batch, og) == DS_OK, "block_grams: %s", p->gpu.msg.text);
    p->cpu.be->solve->block_grams(&p->cpu, &M->xc, batch, oc);
    char what[96];
    snprintf(what, sizeof what, "block_grams %s batch %d", M->xc.f32 ? "f32" : "f64", batch);
    compare(&p->gpu, &p->cpu, og, oc, len, 1e-12, what);
    p->cpu.be->free(&p->cpu, oc), p->gpu.be->free(&p->gpu, og);

    const int64_t glen = n * n + n + 1;
    p->cpu.be->alloc(&p->cpu, (void **)&oc, (size_t)glen * 8);
    p->gpu.be->alloc(&p->gpu, (void **)&og, (size_t)glen * 8);
    CHECK(p->gpu.be->solve->gram(&p->gpu, &M->xg, M->yg, og) == DS_OK, "gram: %s", p->gpu.msg.text);
    p->cpu.be->solve->gram(&p->cpu, &M->xc, M->yc, oc);
    snprintf(what, sizeof what, "gram %s m %lld n %lld", M->xc.f32 ? "f32" : "f64", (long long)M->xc.rows, (long long)n);
    compare(&p->gpu, &p->cpu, og, oc, glen, 1e-12, what);
    p->cpu.be->free(&p->cpu, oc), p->gpu.be->free(&p->gpu, og);
}

static void test_block_step(pair *p, int nb, int ld, int line_search)
{
    double *g = malloc((size_t)(nb + 1) * 8), *diag = malloc((size_t)nb * 8), *gbb = calloc((size_t)nb * ld, 8);
    double *a = malloc((size_t)nb * 8);
    fill_random(p->seed, g, nb + 1, -1, 1);
    fill_random(p->seed, diag, nb, 0.5, 2);
    fill_random(p->seed, a, nb, -1, 1);
    diag[nb / 2] = 0.0;  // a zero column
    for (int j = 0; j < nb; j++)
        for (int k = 0; k < nb; k++)
            gbb[j * ld + k] = j == k ? diag[j] : 0.1 * (diag[j] + diag[k]) / nb;
    ds_ctx *c[2] = {&p->cpu, &p->gpu};
    double *ab[2], *coefb[2], *ee[2];
    for (int i = 0; i < 2; i++) {
        ds_step_args s = {.gbuf = to_backend(c[i], g, (size_t)(nb + 1) * 8), .diag = to_backend(c[i], diag, (size_t)nb * 8),
                          .gbb = to_backend(c[i], gbb, (size_t)nb * ld * 8), .nb = nb, .ld = ld, .line_search = line_search};
        s.a = ab[i] = to_backend(c[i], a, (size_t)nb * 8);
        c[i]->be->alloc(c[i], (void **)&coefb[i], (size_t)nb * 8);
        c[i]->be->alloc(c[i], (void **)&ee[i], 8);
        s.coef = coefb[i];
        s.ee_slot = ee[i];
        CHECK(c[i]->be->solve->block_step(c[i], &s) == DS_OK, "block_step on %s: %s", c[i]->be->name, c[i]->msg.text);
        c[i]->be->sync(c[i]);
        c[i]->be->free(c[i], (void *)s.gbuf), c[i]->be->free(c[i], (void *)s.diag), c[i]->be->free(c[i], (void *)s.gbb);
    }
    char what[64];
    snprintf(what, sizeof what, "block_step nb %d line search %d: a", nb, line_search);
    compare(&p->gpu, &p->cpu, ab[1], ab[0], nb, 1e-13, what);
    compare(&p->gpu, &p->cpu, coefb[1], coefb[0], nb, 1e-13, "block_step: coef");
    compare(&p->gpu, &p->cpu, ee[1], ee[0], 1, 0, "block_step: ee slot");
    for (int i = 0; i < 2; i++)
        c[i]->be->free(c[i], ab[i]), c[i]->be->free(c[i], coefb[i]), c[i]->be->free(c[i], ee[i]);
    free(g), free(diag), free(gbb), free(a);
}

// Sweeps on the Gram system of a random X (so G is a real Gram matrix).
static void test_gram_sweeps(pair *p, int64_t m, int64_t n, int batch, int line_search, int sweeps)
{
    mats M;
    make_mats(p, m, n, 0, &M);
    ds_ctx *c[2] = {&p->cpu, &p->gpu};
    double *sys[2], *diag[2], *g[2], *a[2], *ee[2], *hist[2];
    for (int i = 0; i < 2; i++) {
        const ds_backend *be = c[i]->be;
        be->alloc(c[i], (void **)&sys[i], (size_t)(n * n + n + 1) * 8);
        be->alloc(c[i], (void **)&diag[i], (size_t)n * 8);
        be->alloc(c[i], (void **)&g[i], (size_t)n * 8);
        be->alloc(c[i], (void **)&a[i], (size_t)n * 8);
        be->alloc(c[i], (void **)&ee[i], 8);
        be->alloc(c[i], (void **)&hist[i], (size_t)sweeps * 8);
        be->solve->gram(c[i], i ? &M.xg : &M.xc, i ? M.yg : M.yc, sys[i]);
        be->gather(c[i], diag[i], sys[i], n, n + 1);
        be->copy(c[i], g[i], sys[i] + n * n, (size_t)n * 8);
        be->copy(c[i], ee[i], sys[i] + n * n + n, 8);
        be->fill(c[i], a[i], n, 0.0);
        ds_gram_args ga = {.G = sys[i], .diag = diag[i], .g = g[i], .a = a[i], .ee = ee[i], .ee_hist = hist[i], .n = n,
                           .batch = batch, .line_search = line_search, .sweeps = sweeps};
        CHECK(be->solve->gram_sweeps(c[i], &ga) == DS_OK, "gram_sweeps on %s: %s", be->name, c[i]->msg.text);
    }
    char what[96];
    snprintf(what, sizeof what, "gram_sweeps n %lld batch %d ls %d: a", (long long)n, batch, line_search);
    compare(&p->gpu, &p->cpu, a[1], a[0], n, 1e-10, what);
    compare(&p->gpu, &p->cpu, g[1], g[0], n, 1e-9, "gram_sweeps: g");
    compare(&p->gpu, &p->cpu, hist[1], hist[0], sweeps, 1e-9, "gram_sweeps: ee history");
    for (int i = 0; i < 2; i++) {
        double *all[] = {sys[i], diag[i], g[i], a[i], ee[i], hist[i]};
        for (int k = 0; k < 6; k++)
            c[i]->be->free(c[i], all[k]);
    }
    free_mats(p, &M);
}

static void test_collectives(pair *p)
{
    const int64_t n = 1000;
    double *h = malloc(n * 8);
    fill_random(p->seed + (uint64_t)p->gpu.rank, h, n, -1, 1);
    double *c = to_backend(&p->cpu, h, n * 8), *g = to_backend(&p->gpu, h, n * 8);
    CHECK(p->gpu.be->allreduce_sum(&p->gpu, g, n) == DS_OK, "allreduce: %s", p->gpu.msg.text);
    p->cpu.be->allreduce_sum(&p->cpu, c, n);
    compare(&p->gpu, &p->cpu, g, c, n, 1e-15, "allreduce_sum");
    double *c2 = to_backend(&p->cpu, h, 10 * 8), *g2 = to_backend(&p->gpu, h, 10 * 8);
    CHECK(p->gpu.be->gather(&p->gpu, g2, g, 10, 3) == DS_OK, "gather");
    p->cpu.be->gather(&p->cpu, c2, c, 10, 3);
    compare(&p->gpu, &p->cpu, g2, c2, 10, 1e-15, "gather (stride 3)");
    p->cpu.be->free(&p->cpu, c), p->gpu.be->free(&p->gpu, g);
    p->cpu.be->free(&p->cpu, c2), p->gpu.be->free(&p->gpu, g2);
    free(h);
}

static void test_ops(pair *p)
{
    const int f32s[2] = {0, 1};
    for (int k = 0; k < 2; k++) {
        mats M;
        make_mats(p, 20011 + 7 * p->gpu.rank, 250, f32s[k], &M);
        test_grad_update(p, &M, 0, 0, 0, 32);
        test_grad_update(p, &M, 100, 100, 200, 50);
        test_grad_update(p, &M, 7, 13, 3, 1);
        test_grad_update(p, &M, 0, 1, 1, 1);
        test_grad_update(p, &M, 0, 250, 0, 250);
        test_grams(p, &M, 32);
        test_grams(p, &M, 100);
        test_grams(p, &M, 1);
        free_mats(p, &M);
    }
    mats E;  // a rank with no rows contributes zeros
    make_mats(p, 0, 40, 0, &E);
    test_grad_update(p, &E, 0, 8, 8, 8);
    test_grams(p, &E, 8);
    free_mats(p, &E);
    test_block_step(p, 100, 100, 1);
    test_block_step(p, 37, 64, 1);
    test_block_step(p, 37, 64, 0);
    test_gram_sweeps(p, 3000, 300, 1, 1, 3);
    test_gram_sweeps(p, 3000, 300, 32, 1, 3);
    test_gram_sweeps(p, 3000, 300, 100, 0, 2);
    test_gram_sweeps(p, 2000, 1100, 100, 1, 2);
    test_collectives(p);
}

// Whole solves on both backends, on a fresh problem: the same iterates up to rounding.
static void test_solve(pair *p, int64_t m, int64_t n, int f32, int batch, int method, double corr)
{
    gen_lsq prob = {.rows = m, .cols = n, .seed = p->seed, .corr = corr};
    sb_opts o = {.batch = batch, .iters = 5, .line_search = 1, .method = method};
    ds_ctx *c[2] = {&p->cpu, &p->gpu};
    sb_result r[2] = {{0}};
    for (int i = 0; i < 2; i++) {
        ds_data d;
        CHECK(data_gen_lsq(c[i], &prob, f32, &d) == DS_OK, "data_gen_lsq: %s", c[i]->msg.text);
        int rc = solvebak_run(c[i], &d.X, d.y, d.rows_global, &o, &r[i]);
        CHECK(rc == DS_OK, "solve on %s: %s", c[i]->be->name, c[i]->msg.text);
        data_free(c[i], &d);
    }
    double d = test_rel_diff(r[1].a, r[0].a, n);
    CHECK(d <= 1e-9, "solve %lld x %lld %s batch %d method %s: cuda vs cpu coefficients differ by %.3e", (long long)m,
          (long long)n, f32 ? "f32" : "f64", batch, r[1].method, d);
    CHECK_NEAR(r[1].rel_residual, r[0].rel_residual, 1e-9 + 1e-8 * r[0].rel_residual, "relative residual, cuda vs cpu");
    solvebak_result_free(&r[0]);
    solvebak_result_free(&r[1]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, all = test_gpus_for_all();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!all) {
        if (rank == 0)
            printf("test_gpu: skipped: not every rank has a GPU of its own\n");
        MPI_Finalize();
        return 77;
    }
    pair p;
    p.seed = test_seed("test_gpu");
    CHECK(ctx_open(&p.cpu, MPI_COMM_WORLD, "cpu") == DS_OK, "cpu ctx: %s", p.cpu.msg.text);
    CHECK(ctx_open(&p.gpu, MPI_COMM_WORLD, "cuda") == DS_OK, "cuda ctx: %s", p.gpu.msg.text);
    if (test_failures_ == 0) {
        test_ops(&p);
        test_solve(&p, 20000, 300, 0, 100, SB_METHOD_RESIDUAL, 0.0);
        test_solve(&p, 20000, 300, 0, 100, SB_METHOD_GRAM, 0.0);
        test_solve(&p, 20000, 300, 0, 1, SB_METHOD_RESIDUAL, 0.0);
        test_solve(&p, 20000, 300, 0, 1, SB_METHOD_GRAM, 0.0);
        test_solve(&p, 20000, 300, 1, 32, SB_METHOD_RESIDUAL, 0.5);
        test_solve(&p, 20000, 300, 1, 32, SB_METHOD_GRAM, 0.5);
        test_solve(&p, 50000, 1000, 0, 100, SB_METHOD_AUTO, 0.0);
    }
    ctx_close(&p.gpu);
    ctx_close(&p.cpu);
    int rc = test_finish("test_gpu");
    MPI_Finalize();
    return rc;
}
