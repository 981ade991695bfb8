// test_solve_blocks.c: SolveBak's block solve (sb_opts.block_solve, with and without the coarse
// correction) on the CPU backend, on equicorrelated columns (ρ = 0.5) where the seed's step crawls:
// with the coarse correction both routes reach a relative residual of 1e-10 within 30 sweeps; the
// residual and Gram routes give the same iterates (1e-10 relative, before convergence); this run's rank
// count gives rank 0's one-rank coefficients (1e-10) and the same bits run to run; the block solve alone
// never raises the residual; a zero column keeps a zero coefficient, and a copy of a column inside its
// block (what the pseudo-inverse skips) leaves no NaN; sizes past the block solve's are refused.
// Run under mpirun with 1 to 3 ranks.
#include <stdlib.h>
#include <string.h>

#include "core/data.h"
#include "harness.h"
#include "solve/solvebak.h"

typedef struct bcase {
    const char *name;
    gen_lsq p;
    int f32;
    sb_opts o;
    int zero_col;          // a column set to 0, or −1
    int dup_col, dup_src;  // column dup_col an exact copy of column dup_src < dup_col, or dup_col 0
} bcase;

// The columns of case t in rows of X (rows × n, float when f32), the same on every rank's block, and
// y = X·a_true again from them, so that the problem stays consistent (its residual can reach 0).
static void tweak_rows(const bcase *t, void *X, double *y, int64_t rows)
{
    const int64_t n = t->p.cols;
    if (t->zero_col < 0 && t->dup_col == 0)
        return;
    double *a = malloc((size_t)n * sizeof(double));
    gen_a_true(&t->p, a);
    for (int64_t i = 0; i < rows; i++) {
        y[i] = 0.0;
        for (int64_t j = 0; j < n; j++) {
            const int64_t at = i * n + j, from = t->dup_col > 0 && j == t->dup_col ? i * n + t->dup_src : at;
            if (t->f32)
                ((float *)X)[at] = j == t->zero_col ? 0.0f : ((float *)X)[from];
            else
                ((double *)X)[at] = j == t->zero_col ? 0.0 : ((double *)X)[from];
            y[i] += (t->f32 ? ((float *)X)[at] : ((double *)X)[at]) * a[j];
        }
    }
    free(a);
}

// Solves t over comm with the given method; the status, with the result in res.
static int run_solve(MPI_Comm comm, const bcase *t, int method, sb_result *res)
{
    ds_ctx ctx;
    ds_data d = {0};
    int rc = ctx_open(&ctx, comm, "cpu");
    CHECK(rc == DS_OK, "%s: ctx_open: %s", t->name, ctx.msg.text);
    rc = data_gen_lsq(&ctx, &t->p, t->f32, &d);
    CHECK(rc == DS_OK, "%s: data_gen_lsq: %s", t->name, ctx.msg.text);
    tweak_rows(t, (void *)d.X.data, d.y, d.X.rows);  // the CPU backend's memory is the host's
    sb_opts o = t->o;
    o.method = method;
    rc = solvebak_run(&ctx, &d.X, d.y, d.rows_global, &o, res);
    data_free(&ctx, &d);
    ctx_close(&ctx);
    return rc;
}

static int rank0(void)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank == 0;
}

// Converges on both routes: stop reason "converged" within o.iters sweeps, the certificate's relative
// residual ≤ tol, no NaN, a zero column's coefficient 0; this rank count against one rank (rank 0) and
// run to run. Returns nothing; prints the sweeps taken.
static void check_converges(const bcase *t)
{
    const int methods[] = {SB_METHOD_RESIDUAL, SB_METHOD_GRAM};
    const int64_t n = t->p.cols;
    for (int m = 0; m < 2; m++) {
        const char *route = m ? "gram" : "residual";
        sb_result r = {0}, again = {0}, one = {0};
        int rc = run_solve(MPI_COMM_WORLD, t, methods[m], &r);
        CHECK(rc == DS_OK, "%s, %s route: solve failed (%d)", t->name, route, rc);
        if (rc != DS_OK)
            continue;
        CHECK(strcmp(r.stop_reason, "converged") == 0 && r.sweeps <= t->o.iters && r.rel_residual <= t->o.tol,
              "%s, %s route: %s after %d sweeps, relative residual %.3e (want ≤ %.0e within %d)", t->name, route,
              r.stop_reason, r.sweeps, r.rel_residual, t->o.tol, t->o.iters);
        if (t->zero_col >= 0)
            CHECK(r.a[t->zero_col] == 0.0, "%s, %s route: zero column's coefficient %.3e", t->name, route,
                  r.a[t->zero_col]);
        CHECK(run_solve(MPI_COMM_WORLD, t, methods[m], &again) == DS_OK &&
                  memcmp(r.a, again.a, (size_t)n * sizeof(double)) == 0,
              "%s, %s route: two runs differ", t->name, route);
        if (rank0()) {
            CHECK(run_solve(MPI_COMM_SELF, t, methods[m], &one) == DS_OK, "%s: one-rank solve failed", t->name);
            const double d = one.a ? test_rel_diff(r.a, one.a, n) : INFINITY;
            CHECK(d <= 1e-10, "%s, %s route: ranks vs one rank: relative difference %.3e", t->name, route, d);
            printf("  %s, %s route: %d sweeps (%s), relative residual %.2e\n", t->name, route, r.sweeps,
                   r.stop_reason, r.rel_residual);
            solvebak_result_free(&one);
        }
        solvebak_result_free(&again);
        solvebak_result_free(&r);
    }
}

// The routes' iterates after o.iters sweeps (tol 0), before convergence: coefficients within 1e-10
// relative, the Gram route's running residuals within 1e-8·‖y‖ of the residual route's exact ones; on
// the residual route ‖e‖ never rises (each block step and coarse step minimizes over its directions).
static void check_routes_agree(const bcase *t)
{
    sb_result r1 = {0}, r2 = {0};
    CHECK(run_solve(MPI_COMM_WORLD, t, SB_METHOD_RESIDUAL, &r1) == DS_OK, "%s: residual route failed", t->name);
    CHECK(run_solve(MPI_COMM_WORLD, t, SB_METHOD_GRAM, &r2) == DS_OK, "%s: gram route failed", t->name);
    if (r1.a && r2.a) {
        const double d = test_rel_diff(r1.a, r2.a, t->p.cols);
        CHECK(d <= 1e-10, "%s: residual vs gram route: relative difference %.3e", t->name, d);
        CHECK(r1.rel_residual > 1e-7, "%s: compare before convergence (relative residual %.3e)", t->name,
              r1.rel_residual);
        for (int s = 0; s <= r1.sweeps && s <= r2.sweeps; s++) {
            CHECK_NEAR(r2.history[s], r1.history[s], 1e-8, "relative residual, gram vs residual route");
            CHECK(s == 0 || r1.history[s] <= r1.history[s - 1] * (1 + 1e-12), "%s: residual rose at sweep %d: %.6e > %.6e",
                  t->name, s, r1.history[s], r1.history[s - 1]);
        }
    }
    solvebak_result_free(&r1);
    solvebak_result_free(&r2);
}

// A size the block solve does not take: DS_ERR_USAGE with a message, on both routes.
static void check_refused(const char *name, int64_t cols, int batch, int coarse)
{
    const bcase t = {.name = name, .p = {.rows = 40, .cols = cols, .seed = 5}, .zero_col = -1,
                     .o = {.batch = batch, .iters = 2, .line_search = 1, .block_solve = 1, .coarse = coarse}};
    for (int m = 0; m < 2; m++) {
        sb_result r = {0};
        const int rc = run_solve(MPI_COMM_WORLD, &t, m ? SB_METHOD_GRAM : SB_METHOD_RESIDUAL, &r);
        CHECK_EQ_INT(rc, DS_ERR_USAGE, name);
        solvebak_result_free(&r);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const sb_opts coarse = {.batch = 30, .iters = 30, .tol = 1e-10, .line_search = 1, .block_solve = 1, .coarse = 1};
    const gen_lsq rho = {.rows = 6001, .cols = 310, .seed = 21, .corr = 0.5};
    const bcase conv[] = {
        {"rho 0.5, 6001 x 310, batch 30, coarse", rho, 0, coarse, -1, 0, 0},
        {"rho 0.5, batch 30, coarse, a zero column and a copy in its block", rho, 0, coarse, 44, 77, 61},
        {"rho 0.5, batch 1, coarse", {.rows = 2003, .cols = 60, .seed = 22, .corr = 0.5}, 0,
         {.batch = 1, .iters = 30, .tol = 1e-10, .block_solve = 1, .coarse = 1}, 7, 0, 0},
        {"rho 0.5, float32 X, batch 17, coarse", {.rows = 3001, .cols = 100, .seed = 23, .corr = 0.5}, 1,
         {.batch = 17, .iters = 30, .tol = 1e-10, .block_solve = 1, .coarse = 1}, -1, 0, 0},
    };
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++)
        check_converges(&conv[i]);
    sb_opts early = coarse;
    early.tol = 0;
    early.iters = 4;
    check_routes_agree(&(bcase){"routes agree, coarse", rho, 0, early, 44, 77, 61});
    early.coarse = 0;
    early.iters = 8;
    check_routes_agree(&(bcase){"routes agree, block solve alone", rho, 0, early, 44, 77, 61});
    check_refused("batch 2049 with the block solve", 2049, 2049, 0);
    check_refused("2049 blocks with the coarse correction", 2049, 1, 1);
    int rc = test_finish("test_solve_blocks");
    MPI_Finalize();
    return rc;
}
