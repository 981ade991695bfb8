// test_gpu.c: the CUDA backend against the CPU backend on whole solves (both SolveBak routes, batches of 1
// and more, f32 and f64, correlated columns; and --method cholesky, X'X in double and in FP16), on fresh
// random problems (the seed is printed so a failure can be replayed with DSOLVE_TEST_SEED). Their
// operations one by one are test_backend_ops's. Run with 1, 2 or 4 ranks, one GPU each; exits 77
// (skipped) where the ranks have no GPU of their own.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/data.h"
#include "harness.h"
#include "solve/solvebak.h"

typedef struct pair {
    ds_ctx cpu, gpu;
    uint64_t seed;
} pair;

// Edits of a generated f64 problem, the same on both backends, that keep y = X·a_true. EDIT_SCALED
// multiplies column j by 1e−100, 1, 1e100 in turn (a_true_j divided by it: y unchanged). EDIT_OUTLIER
// sets X[1][3] of every rank to 1e9, 2^30 times column 3's other values and more (a rank's row 1 is not
// in the CUDA FP16 Gram's sample of rows where it has 2 048 rows or more), and a_true_3 to a 1e9th of
// itself, y with them (so that the outlier's rows do not outweigh the rest of y: the residuals, relative
// to ‖y‖, then bound every coefficient's error as they do without it).
enum { EDIT_NONE, EDIT_SCALED, EDIT_OUTLIER };
static int edit_problem(ds_ctx *c, ds_data *d, int edit)
{
    const int64_t m = d->X.rows, n = d->X.cols;
    double *x = malloc((size_t)(m * n + m) * sizeof(double)), *y = x + m * n;
    int rc = x ? DS_OK : DS_ERR_RUNTIME;
    if (rc == DS_OK)
        rc = c->be->download(c, x, d->X.data, (size_t)(m * n) * sizeof(double));
    if (rc == DS_OK)
        rc = c->be->download(c, y, d->y, (size_t)m * sizeof(double));
    for (int64_t r = 0; rc == DS_OK && edit == EDIT_SCALED && r < m; r++)
        for (int64_t j = 0; j < n; j++)
            x[r * n + j] *= j % 3 == 0 ? 1e-100 : j % 3 == 1 ? 1.0 : 1e100;
    if (rc == DS_OK && edit == EDIT_OUTLIER && m > 1 && n > 3) {
        const double a3 = d->a_true[3], b3 = a3 * 1e-9;
        for (int64_t r = 0; r < m; r++)
            y[r] += x[r * n + 3] * (b3 - a3);
        y[1] += (1e9 - x[n + 3]) * b3;
        x[n + 3] = 1e9;
    }
    if (rc == DS_OK)
        rc = c->be->upload(c, (void *)d->X.data, x, (size_t)(m * n) * sizeof(double));
    if (rc == DS_OK)
        rc = c->be->upload(c, d->y, y, (size_t)m * sizeof(double));
    free(x);
    return rc;
}

// prob solved with o on each backend (r[0] the CPU's, r[1] CUDA's), each from its own copy of the data
// (edited by edit_problem); the second is not run when the first fails. 1 when both succeeded.
static int solve_edited(pair *p, const gen_lsq *prob, int f32, int edit, const sb_opts *o, sb_result r[2])
{
    ds_ctx *c[2] = {&p->cpu, &p->gpu};
    const char *what = o->method == SB_METHOD_CHOLESKY ? "cholesky" : "solve";
    for (int i = 0; i < 2; i++) {
        ds_data d = {0};
        CHECK(data_gen_lsq(c[i], prob, f32, &d) == DS_OK, "data_gen_lsq: %s", c[i]->msg.text);
        if (edit != EDIT_NONE)
            CHECK(!f32 && d.a_true && edit_problem(c[i], &d, edit) == DS_OK, "edit %d of the problem failed", edit);
        int rc = solvebak_run(c[i], &d.X, d.y, d.rows_global, o, &r[i]);
        CHECK(rc == DS_OK, "%s on %s: %s", what, c[i]->be->name, c[i]->msg.text);
        data_free(c[i], &d);
        if (rc != DS_OK)
            return 0;
    }
    return 1;
}

static int solve_both(pair *p, const gen_lsq *prob, int f32, const sb_opts *o, sb_result r[2])
{
    return solve_edited(p, prob, f32, EDIT_NONE, o, r);
}

// Whole solves on both backends, on a fresh problem: the same iterates up to rounding.
static void test_solve(pair *p, int64_t m, int64_t n, int f32, int batch, int method, double corr)
{
    gen_lsq prob = {.rows = m, .cols = n, .seed = p->seed, .corr = corr};
    sb_opts o = {.batch = batch, .iters = 5, .line_search = 1, .method = method};
    sb_result r[2] = {{0}};
    solve_both(p, &prob, f32, &o, r);
    double d = r[0].a && r[1].a ? test_rel_diff(r[1].a, r[0].a, n) : INFINITY;
    CHECK(d <= 1e-9, "solve %lld x %lld %s batch %d method %s: cuda vs cpu coefficients differ by %.3e", (long long)m,
          (long long)n, f32 ? "f32" : "f64", batch, r[1].method, d);
    CHECK_NEAR(r[1].rel_residual, r[0].rel_residual, 1e-9 + 1e-8 * r[0].rel_residual, "relative residual, cuda vs cpu");
    solvebak_result_free(&r[0]);
    solvebak_result_free(&r[1]);
}

// --method cholesky on both backends, on a fresh consistent problem (y = X·a_true): the coefficients
// within 1e-10 of each other (relative), and each backend's certificate, the relative and the normal
// residual, ≤ 1e-12. low: --gram-precision low (X'X in FP16 on the GPU, refined). want: the GPU's
// gram_precision, where the case decides it (NULL: either, as an ill-conditioned X may set FP16 aside);
// fallback: the start of why the GPU set its FP16 X'X aside (NULL: it kept it or had none).
static void test_cholesky_edited(pair *p, int64_t m, int64_t n, int f32, double corr, int low, int edit,
                                 const char *want, const char *fallback)
{
    gen_lsq prob = {.rows = m, .cols = n, .seed = p->seed + 1, .corr = corr};
    sb_opts o = {.batch = 100, .iters = 10, .line_search = 1, .method = SB_METHOD_CHOLESKY, .gram_low = low};
    ds_ctx *c[2] = {&p->cpu, &p->gpu};
    sb_result r[2] = {{0}};
    const int solved = solve_edited(p, &prob, f32, edit, &o, r);
    for (int i = 0; solved && i < 2; i++) {
        CHECK(strcmp(r[i].method, "cholesky") == 0, "method %s on %s", r[i].method, c[i]->be->name);
        CHECK(r[i].rel_residual <= 1e-12 && r[i].normal_residual <= 1e-12,
              "cholesky %lld x %lld %s on %s: relative residual %.3e, normal residual %.3e (refined %d), want ≤ 1e-12",
              (long long)m, (long long)n, f32 ? "f32" : "f64", c[i]->be->name, r[i].rel_residual, r[i].normal_residual,
              r[i].refined);
    }
    if (solved && want)
        CHECK(strcmp(r[1].gram_precision, want) == 0, "cholesky %lld x %lld%s on cuda: X'X in %s (%s), want %s",
              (long long)m, (long long)n, low ? " low" : "", r[1].gram_precision, r[1].gram_fallback, want);
    if (solved && fallback)
        CHECK(strncmp(r[1].gram_fallback, fallback, strlen(fallback)) == 0,
              "cholesky %lld x %lld edit %d on cuda: X'X set aside for \"%s\", want \"%s...\"", (long long)m,
              (long long)n, edit, r[1].gram_fallback, fallback);
    double d = r[0].a && r[1].a ? test_rel_diff(r[1].a, r[0].a, n) : INFINITY;
    CHECK(d <= 1e-10, "cholesky %lld x %lld %s rho %.1f: cuda vs cpu coefficients differ by %.3e", (long long)m,
          (long long)n, f32 ? "f32" : "f64", corr, d);
    solvebak_result_free(&r[0]);
    solvebak_result_free(&r[1]);
}

static void test_cholesky(pair *p, int64_t m, int64_t n, int f32, double corr, int low, const char *want)
{
    test_cholesky_edited(p, m, n, f32, corr, low, EDIT_NONE, want, NULL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    pair p;
    int rc = test_open_pair("test_gpu", &p.cpu, &p.gpu);
    if (rc == 77) {
        MPI_Finalize();
        return 77;
    }
    p.seed = test_seed("test_gpu");
    if (rc == 0) {
        test_solve(&p, 20000, 300, 0, 100, SB_METHOD_RESIDUAL, 0.0);
        test_solve(&p, 20000, 300, 0, 100, SB_METHOD_GRAM, 0.0);
        test_solve(&p, 20000, 300, 0, 1, SB_METHOD_RESIDUAL, 0.0);
        test_solve(&p, 20000, 300, 0, 1, SB_METHOD_GRAM, 0.0);
        test_solve(&p, 20000, 300, 1, 32, SB_METHOD_RESIDUAL, 0.5);
        test_solve(&p, 20000, 300, 1, 32, SB_METHOD_GRAM, 0.5);
        test_solve(&p, 50000, 1000, 0, 100, SB_METHOD_SOLVEBAK, 0.0);
        int ranks;
        MPI_Comm_size(MPI_COMM_WORLD, &ranks);
        test_cholesky(&p, 20000, 300, 0, 0.0, 0, "double");  // below the rule of --gram-precision auto
        test_cholesky(&p, 20000, 300, 1, 0.5, 0, "double");
        test_cholesky(&p, 40000, 1000, 0, 0.3, 0, NULL);  // by the rule FP16 on 1 and 2 ranks, double on 4
        test_cholesky(&p, 20000, 300, 0, 0.0, 1, "fp16");
        test_cholesky(&p, 20000, 300, 1, 0.0, 1, "fp16");
        test_cholesky(&p, 20000, 300, 0, 0.5, 1, NULL);
        test_cholesky(&p, 50000, 1000, 0, 0.3, 1, NULL);
        // 20 000 × 1 000: FP16 by the rule (rows·n² ≥ 1.5e10) on one rank, double on more
        test_cholesky(&p, 20000, 1000, 0, 0.0, 0, ranks == 1 ? "fp16" : "double");
        // FP16 with its columns scaled by powers of two: columns of 1e±100 kept (the CPU's float sets them
        // aside); a value 2^30 above the rest of its column, outside the sample, sets it aside
        test_cholesky_edited(&p, 20000, 300, 0, 0.0, 1, EDIT_SCALED, "fp16", NULL);
        test_cholesky_edited(&p, 20000, 300, 0, 0.0, 1, EDIT_OUTLIER, "double", "column 3 of X leaves the range");
    }
    ctx_close(&p.gpu);
    ctx_close(&p.cpu);
    rc = test_finish("test_gpu");
    MPI_Finalize();
    return rc;
}
