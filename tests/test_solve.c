// test_solve.c: SolveBak on the CPU backend against LAPACK's least-squares solution (dgelsd), between
// its two routes, between this run's rank count and one rank, and run to run. Run under mpirun with
// 1 to 4 ranks; rank 0 computes the references on the whole problem.
#include <lapacke.h>
#include <stdlib.h>
#include <string.h>

#include "core/data.h"
#include "harness.h"
#include "solve/solvebak.h"

typedef struct tcase {
    const char *name;
    gen_lsq p;
    int f32;
    sb_opts o;
    int zero_col;        // a column set to zero, or −1
    double tol_lapack;   // ‖a − a_lapack‖ / ‖a_lapack‖ (0: not compared)
} tcase;

// The whole problem on one process, as double (X rounded through float when f32), zero column applied.
static void full_problem(const tcase *t, double *X, double *y)
{
    const int64_t m = t->p.rows, n = t->p.cols;
    double *a_true = malloc((size_t)n * sizeof(double));
    gen_a_true(&t->p, a_true);
    if (t->f32) {
        float *Xf = malloc((size_t)(m * n) * sizeof(float));
        gen_lsq_rows(&t->p, a_true, 0, m, 1, Xf, y);
        for (int64_t i = 0; i < m * n; i++)
            X[i] = Xf[i];
        free(Xf);
    } else {
        gen_lsq_rows(&t->p, a_true, 0, m, 0, X, y);
    }
    if (t->zero_col >= 0)
        for (int64_t i = 0; i < m; i++)
            X[i * n + t->zero_col] = 0.0;
    free(a_true);
}

static void lapack_solution(const tcase *t, double *a)
{
    const int64_t m = t->p.rows, n = t->p.cols;
    double *X = malloc((size_t)(m * n) * sizeof(double)), *y = malloc((size_t)m * sizeof(double));
    double *s = malloc((size_t)n * sizeof(double));
    lapack_int rank = 0;
    full_problem(t, X, y);
    int info = LAPACKE_dgelsd(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)n, 1, X, (lapack_int)n, y, 1, s, 1e-12, &rank);
    CHECK(info == 0, "%s: dgelsd info %d", t->name, info);
    memcpy(a, y, (size_t)n * sizeof(double));
    free(X);
    free(y);
    free(s);
}

// Solves t over comm; returns the status, with the coefficients in res.
static int run_solve(MPI_Comm comm, const tcase *t, sb_result *res)
{
    ds_ctx ctx;
    ds_data d;
    int rc = ctx_open(&ctx, comm, "cpu");
    CHECK(rc == DS_OK, "%s: ctx_open: %s", t->name, ctx.msg.text);
    rc = data_gen_lsq(&ctx, &t->p, t->f32, &d);
    CHECK(rc == DS_OK, "%s: data_gen_lsq: %s", t->name, ctx.msg.text);
    if (t->zero_col >= 0)
        for (int64_t i = 0; i < d.X.rows; i++) {
            if (t->f32)
                ((float *)d.X.data)[i * d.X.cols + t->zero_col] = 0.0f;
            else
                ((double *)d.X.data)[i * d.X.cols + t->zero_col] = 0.0;
        }
    rc = solvebak_run(&ctx, &d.X, d.y, d.rows_global, &t->o, res);
    data_free(&ctx, &d);
    ctx_close(&ctx);
    return rc;
}

static void check_case(const tcase *t)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int64_t n = t->p.cols;
    sb_result res = {0}, again = {0}, one = {0};
    int rc = run_solve(MPI_COMM_WORLD, t, &res);
    CHECK(rc == DS_OK, "%s: solve failed (%d)", t->name, rc);
    int rc2 = run_solve(MPI_COMM_WORLD, t, &again);
    CHECK(rc2 == DS_OK && memcmp(res.a, again.a, (size_t)n * sizeof(double)) == 0,
          "%s: two runs with the same seed differ", t->name);
    if (rank == 0) {
        CHECK(run_solve(MPI_COMM_SELF, t, &one) == DS_OK, "%s: one-rank solve failed", t->name);
        double d1 = test_rel_diff(res.a, one.a, n);
        CHECK(d1 <= 1e-10, "%s: ranks vs one rank: relative difference %.3e > 1e-10", t->name, d1);
        if (t->tol_lapack > 0) {
            double *ref = malloc((size_t)n * sizeof(double));
            lapack_solution(t, ref);
            double dl = test_rel_diff(res.a, ref, n);
            CHECK(dl <= t->tol_lapack, "%s: vs dgelsd: relative difference %.3e > %.1e (rel residual %.3e, %d sweeps, %s)",
                  t->name, dl, t->tol_lapack, res.rel_residual, res.sweeps, res.stop_reason);
            free(ref);
        }
        CHECK(res.normal_residual < 1e-8 || t->tol_lapack == 0, "%s: normal residual %.3e", t->name, res.normal_residual);
        if (t->zero_col >= 0) {
            CHECK(res.a[t->zero_col] == 0.0, "%s: zero column's coefficient %.3e", t->name, res.a[t->zero_col]);
            CHECK_EQ_INT(res.zero_columns, 1, "zero columns counted");
        }
        solvebak_result_free(&one);
    }
    solvebak_result_free(&res);
    solvebak_result_free(&again);
}

// The residual and Gram routes give the same iterates (here after a few sweeps, far from converged).
static void check_routes_agree(const char *name, gen_lsq p, int batch, int line_search)
{
    tcase t = {.name = name, .p = p, .zero_col = -1,
               .o = {.batch = batch, .iters = 4, .line_search = line_search, .method = SB_METHOD_RESIDUAL}};
    sb_result r1 = {0}, r2 = {0};
    CHECK(run_solve(MPI_COMM_WORLD, &t, &r1) == DS_OK, "%s: residual route failed", name);
    t.o.method = SB_METHOD_GRAM;
    CHECK(run_solve(MPI_COMM_WORLD, &t, &r2) == DS_OK, "%s: gram route failed", name);
    double d = test_rel_diff(r1.a, r2.a, p.cols);
    CHECK(d <= 1e-9, "%s: residual vs gram route: relative difference %.3e", name, d);
    CHECK(r1.rel_residual > 1e-6, "%s: the comparison should be made before convergence (rel residual %.3e)", name,
          r1.rel_residual);
    for (int s = 0; s <= r1.sweeps; s++)
        CHECK_NEAR(r2.history[s], r1.history[s], 1e-8 * r1.history[0], "residual history, gram vs residual route");
    solvebak_result_free(&r1);
    solvebak_result_free(&r2);
}

// The seed's raw block update on correlated columns diverges, and says so.
static void check_divergence(void)
{
    tcase t = {.name = "raw update, rho 0.5", .p = {.rows = 2000, .cols = 64, .seed = 3, .corr = 0.5}, .zero_col = -1,
               .o = {.batch = 32, .iters = 60, .line_search = 0, .method = SB_METHOD_RESIDUAL}};
    sb_result r = {0};
    int rc = run_solve(MPI_COMM_WORLD, &t, &r);
    CHECK_EQ_INT(rc, DS_ERR_NUMERIC, "status of a diverging raw update");
    CHECK(r.stop_reason && strcmp(r.stop_reason, "diverged") == 0, "stop reason %s", r.stop_reason ? r.stop_reason : "(none)");
    solvebak_result_free(&r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const sb_opts ls = {.batch = 8, .iters = 300, .line_search = 1, .method = SB_METHOD_AUTO};
    tcase cases[] = {
        {"well-conditioned", {.rows = 400, .cols = 30, .seed = 1}, 0, ls, -1, 1e-9},
        {"well-conditioned, residual route", {.rows = 400, .cols = 30, .seed = 1}, 0,
         {.batch = 8, .iters = 300, .line_search = 1, .method = SB_METHOD_RESIDUAL}, -1, 1e-9},
        {"sequential (batch 1)", {.rows = 400, .cols = 30, .seed = 2}, 0,
         {.batch = 1, .iters = 200, .line_search = 1, .method = SB_METHOD_RESIDUAL}, -1, 1e-9},
        {"correlated rho 0.5, batch 32, line search", {.rows = 2000, .cols = 64, .seed = 3, .corr = 0.5}, 0,
         {.batch = 32, .iters = 2000, .line_search = 1, .method = SB_METHOD_RESIDUAL}, -1, 1e-8},
        {"noisy", {.rows = 600, .cols = 20, .seed = 4, .noise = 0.1}, 0, ls, -1, 1e-9},
        {"zero column", {.rows = 300, .cols = 16, .seed = 5}, 0,
         {.batch = 4, .iters = 300, .line_search = 1, .method = SB_METHOD_RESIDUAL}, 5, 1e-9},
        {"float32 input", {.rows = 500, .cols = 24, .seed = 6}, 1, ls, -1, 1e-9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
    check_routes_agree("routes agree, batch 8", (gen_lsq){.rows = 500, .cols = 40, .seed = 7, .corr = 0.3}, 8, 1);
    check_routes_agree("routes agree, batch 1", (gen_lsq){.rows = 500, .cols = 40, .seed = 8, .corr = 0.3}, 1, 1);
    check_routes_agree("routes agree, raw update", (gen_lsq){.rows = 500, .cols = 40, .seed = 9}, 10, 0);
    check_divergence();
    int rc = test_finish("test_solve");
    MPI_Finalize();
    return rc;
}
