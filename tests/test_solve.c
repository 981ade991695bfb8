// test_solve.c: SolveBak on the CPU backend against LAPACK's least-squares solution (dgelsd), between
// its two routes, between this run's rank count and one rank, and run to run; and --method cholesky
// (the equilibrated normal equations with one refinement step): exact and noisy problems, columns
// scaled by 1e±100, a duplicated column (exit 4, naming it), a zero column, every rank count up to
// this run's, and X'X in single precision with its refinement against X'X in double. Run under mpirun with 1 to 4 ranks; rank 0 computes the references on the whole problem.
#include <ctype.h>
#include <float.h>
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
    int dup_col;         // a column (≥ 1) made an exact copy of column dup_src < dup_col, or 0
    int dup_src;
    int scaled;          // columns multiplied by 1e−100, 1, 1e100 in turn (f64 only)
} tcase;

// Column j's factor in case t.
static double col_scale(const tcase *t, int64_t j)
{
    static const double c[3] = {1e-100, 1.0, 1e100};
    return t->scaled ? c[j % 3] : 1.0;
}

// Case t's changes to rows of X (rows × n, float when f32): columns scaled, duplicated, zeroed. The
// same on the ranks' blocks and on the host's whole problem, bit for bit.
static void tweak_rows(const tcase *t, void *X, int64_t rows, int f32)
{
    const int64_t n = t->p.cols;
    for (int64_t k = 0; k < rows * n; k++) {
        const int64_t j = k % n, row0 = k - j;
        double v = f32 ? ((float *)X)[k] : ((double *)X)[k] * col_scale(t, j);
        if (j == t->zero_col)
            v = 0.0;
        else if (t->dup_col > 0 && j == t->dup_col)  // column dup_src is already final
            v = f32 ? ((float *)X)[row0 + t->dup_src] : ((double *)X)[row0 + t->dup_src];
        if (f32)
            ((float *)X)[k] = (float)v;
        else
            ((double *)X)[k] = v;
    }
}

// The whole problem on one process, as double (X rounded through float when f32), tweak_rows applied.
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
    tweak_rows(t, X, m, 0);
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

// Solves t over comm; returns the status, with the coefficients in res and, when msg is given, the
// context's message (of a failure).
static int run_solve(MPI_Comm comm, const tcase *t, sb_result *res, char *msg, size_t msg_len)
{
    ds_ctx ctx;
    ds_data d = {0};
    int rc = ctx_open(&ctx, comm, "cpu");
    CHECK(rc == DS_OK, "%s: ctx_open: %s", t->name, ctx.msg.text);
    rc = data_gen_lsq(&ctx, &t->p, t->f32, &d);
    CHECK(rc == DS_OK, "%s: data_gen_lsq: %s", t->name, ctx.msg.text);
    tweak_rows(t, (void *)d.X.data, d.X.rows, t->f32);  // the CPU backend's memory is the host's
    rc = solvebak_run(&ctx, &d.X, d.y, d.rows_global, &t->o, res);
    if (msg)
        snprintf(msg, msg_len, "%s", ctx.msg.text);
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
    int rc = run_solve(MPI_COMM_WORLD, t, &res, NULL, 0);
    CHECK(rc == DS_OK, "%s: solve failed (%d)", t->name, rc);
    int rc2 = run_solve(MPI_COMM_WORLD, t, &again, NULL, 0);
    CHECK(rc2 == DS_OK && memcmp(res.a, again.a, (size_t)n * sizeof(double)) == 0,
          "%s: two runs with the same seed differ", t->name);
    if (rank == 0) {
        CHECK(run_solve(MPI_COMM_SELF, t, &one, NULL, 0) == DS_OK, "%s: one-rank solve failed", t->name);
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
    CHECK(run_solve(MPI_COMM_WORLD, &t, &r1, NULL, 0) == DS_OK, "%s: residual route failed", name);
    t.o.method = SB_METHOD_GRAM;
    CHECK(run_solve(MPI_COMM_WORLD, &t, &r2, NULL, 0) == DS_OK, "%s: gram route failed", name);
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
    int rc = run_solve(MPI_COMM_WORLD, &t, &r, NULL, 0);
    CHECK_EQ_INT(rc, DS_ERR_NUMERIC, "status of a diverging raw update");
    CHECK(r.stop_reason && strcmp(r.stop_reason, "diverged") == 0, "stop reason %s", r.stop_reason ? r.stop_reason : "(none)");
    solvebak_result_free(&r);
}

// ---------------------------------------------------------------------------------------------------
// --method cholesky

// What cholesky reports besides the coefficients: one "sweep", history [1, rel_residual], stop reason
// solved, its Gram's precision and refinement steps (at most 1 from a double G), and the refinement's
// time inside the solve's.
static void check_chol_report(const char *name, const sb_result *r)
{
    CHECK(r->method && strcmp(r->method, "cholesky") == 0, "%s: method %s", name, r->method ? r->method : "(none)");
    CHECK_EQ_INT(r->sweeps, 1, "cholesky: sweeps");
    CHECK(r->stop_reason && strcmp(r->stop_reason, "solved") == 0, "%s: stop reason %s", name,
          r->stop_reason ? r->stop_reason : "(none)");
    CHECK(r->history && r->history[0] == 1.0 && r->history[1] == r->rel_residual,
          "%s: history [%.3e, %.3e], want [1, rel_residual %.3e]", name, r->history ? r->history[0] : NAN,
          r->history ? r->history[1] : NAN, r->rel_residual);
    const int single = r->gram_precision && strcmp(r->gram_precision, "single") == 0;
    CHECK(single || (r->gram_precision && strcmp(r->gram_precision, "double") == 0), "%s: gram precision %s", name,
          r->gram_precision ? r->gram_precision : "(none)");
    CHECK(r->refined >= 0 && r->refined <= (single ? 8 : 1) && r->passes >= 2 + r->refined && r->passes <= 11,
          "%s: refined %d in %d passes (X'X in %s)", name, r->refined, r->passes, r->gram_precision);
    CHECK(r->refine_seconds >= 0 && r->refine_seconds <= r->solve_seconds, "%s: refine %.3g s of a %.3g s solve",
          name, r->refine_seconds, r->solve_seconds);
}

// y = X·a_true (exact but for y's rounding): a_true recovered to 1e-10 (in the scaled case as c_j·a_j, the
// coefficients of the unscaled columns) and the relative residual at rounding level (≤ 1e-13).
static void check_chol_exact(const tcase *t)
{
    const int64_t n = t->p.cols;
    sb_result r = {0};
    int rc = run_solve(MPI_COMM_WORLD, t, &r, NULL, 0);
    CHECK(rc == DS_OK, "%s: solve failed (%d)", t->name, rc);
    if (rc == DS_OK) {
        double *a_true = malloc((size_t)n * sizeof(double)), *ca = malloc((size_t)n * sizeof(double));
        gen_a_true(&t->p, a_true);
        for (int64_t j = 0; j < n; j++)
            ca[j] = r.a[j] * col_scale(t, j);
        const double err = test_rel_diff(ca, a_true, n);
        CHECK(err <= 1e-10, "%s: coefficient error %.3e > 1e-10 (refined %d)", t->name, err, r.refined);
        CHECK(r.rel_residual <= 1e-13, "%s: relative residual %.3e > 1e-13", t->name, r.rel_residual);
        check_chol_report(t->name, &r);
        free(a_true);
        free(ca);
    }
    solvebak_result_free(&r);
}

typedef struct host_cert {
    double rel, ratio, ratio_scaled;
} host_cert;

// From the whole problem of t and a, in long double: rel = ‖r‖/‖y‖ with r = y − X·a; LAPACK's
// least-squares test ratio ‖Xᵀr‖/(‖X‖_F·‖r‖·ε·n) (ε = 2⁻⁵³, dlamch's); and the same ratio for X·D⁻¹, D
// the column norms (‖X·D⁻¹‖_F = √n), which equilibration promises whatever the columns' scales.
static host_cert host_certificate(const tcase *t, const double *a)
{
    const int64_t m = t->p.rows, n = t->p.cols;
    double *X = malloc((size_t)(m * n) * sizeof(double)), *y = malloc((size_t)m * sizeof(double));
    long double *r = malloc((size_t)m * sizeof(long double)), rr = 0, yy = 0, xx = 0, g2 = 0, g2s = 0;
    full_problem(t, X, y);
    for (int64_t i = 0; i < m; i++) {
        long double v = y[i];
        for (int64_t j = 0; j < n; j++)
            v -= (long double)X[i * n + j] * a[j];
        r[i] = v;
        rr += v * v;
        yy += (long double)y[i] * y[i];
    }
    for (int64_t j = 0; j < n; j++) {
        long double g = 0, c = 0;
        for (int64_t i = 0; i < m; i++) {
            g += (long double)X[i * n + j] * r[i];
            c += (long double)X[i * n + j] * X[i * n + j];
        }
        xx += c;
        g2 += g * g;
        g2s += c > 0 ? g * g / c : 0;
    }
    const long double eps = DBL_EPSILON / 2, nn = (long double)n;
    host_cert h = {(double)sqrtl(rr / yy), (double)(sqrtl(g2) / (sqrtl(xx) * sqrtl(rr) * eps * nn)),
                   (double)(sqrtl(g2s) / (sqrtl(nn) * sqrtl(rr) * eps * nn))};
    free(X);
    free(y);
    free(r);
    return h;
}

// A noisy y (rank 0 checks on the whole problem): the reported relative residual within 1e-10 of the
// host's from res.a; both test ratios of host_certificate < 30; c_j·a_j within 1e-10 of dgelsd's
// solution of the unscaled problem.
static void check_chol_noisy(const tcase *t)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int64_t n = t->p.cols;
    sb_result r = {0};
    int rc = run_solve(MPI_COMM_WORLD, t, &r, NULL, 0);
    CHECK(rc == DS_OK, "%s: solve failed (%d)", t->name, rc);
    if (rc == DS_OK && rank == 0) {
        check_chol_report(t->name, &r);
        const host_cert h = host_certificate(t, r.a);
        CHECK(fabs(r.rel_residual - h.rel) <= 1e-10 * h.rel, "%s: relative residual %.17g, the host's %.17g",
              t->name, r.rel_residual, h.rel);
        CHECK(h.ratio < 30 && h.ratio_scaled < 30, "%s: ‖Xᵀr‖/(‖X‖·‖r‖·ε·n) %.3g, with unit columns %.3g (≥ 30)",
              t->name, h.ratio, h.ratio_scaled);
        tcase u = *t;
        u.scaled = 0;
        double *ref = malloc((size_t)n * sizeof(double)), *ca = malloc((size_t)n * sizeof(double));
        lapack_solution(&u, ref);
        for (int64_t j = 0; j < n; j++)
            ca[j] = r.a[j] * col_scale(t, j);
        const double d = test_rel_diff(ca, ref, n);
        CHECK(d <= 1e-10, "%s: vs dgelsd (unscaled): relative difference %.3e > 1e-10", t->name, d);
        free(ref);
        free(ca);
    }
    solvebak_result_free(&r);
}

// Column dup an exact copy of column src: exit 4 with a one-line message naming column dup (0-based, as
// the input checks name rows and columns), never a success. (With src = 0 the pivot of column dup comes
// out ≤ 0 in floating point; with another src it is as often a rounding-level positive number, which
// dpotrf's info alone does not catch.)
static void check_chol_duplicate(const char *name, gen_lsq p, int src, int dup)
{
    tcase t = {.name = name, .p = p, .zero_col = -1, .dup_col = dup, .dup_src = src,
               .o = {.batch = 100, .iters = 10, .line_search = 1, .method = SB_METHOD_CHOLESKY}};
    sb_result r = {0};
    char msg[512] = "", want[40];
    int rc = run_solve(MPI_COMM_WORLD, &t, &r, msg, sizeof msg);
    CHECK_EQ_INT(rc, DS_ERR_NUMERIC, name);
    int finite = 1;
    for (int64_t j = 0; rc == DS_OK && r.a && j < p.cols; j++)
        finite = finite && isfinite(r.a[j]);
    CHECK(finite, "%s: a success with coefficients that are not finite", name);
    snprintf(want, sizeof want, "column %d", dup);
    const char *at = strstr(msg, want);
    CHECK(rc == DS_OK || (at && !isdigit((unsigned char)at[strlen(want)]) && !strchr(msg, '\n')),
          "%s: message '%s' should be one line naming '%s'", name, msg, want);
    solvebak_result_free(&r);
}

// The problem of t on the first k ranks of this run for each k < p: coefficients within 1e-12 relative
// of this run's (rank 0 compares).
static void check_chol_ranks(const tcase *t)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sb_result all = {0};
    CHECK(run_solve(MPI_COMM_WORLD, t, &all, NULL, 0) == DS_OK, "%s: solve on %d ranks failed", t->name, size);
    for (int k = 1; k < size; k++) {
        MPI_Comm sub;
        MPI_Comm_split(MPI_COMM_WORLD, rank < k ? 0 : MPI_UNDEFINED, rank, &sub);
        if (sub == MPI_COMM_NULL)
            continue;
        sb_result r = {0};
        CHECK(run_solve(sub, t, &r, NULL, 0) == DS_OK, "%s: solve on %d ranks failed", t->name, k);
        if (rank == 0 && r.a && all.a) {
            const double d = test_rel_diff(r.a, all.a, t->p.cols);
            CHECK(d <= 1e-12, "%s: %d vs %d ranks: relative difference %.3e > 1e-12", t->name, k, size, d);
        }
        solvebak_result_free(&r);
        MPI_Comm_free(&sub);
    }
    solvebak_result_free(&all);
}

// X'X in single precision and its refinement (the CPU backend's default) against X'X in double: the same
// coefficients to ≤ tol (relative), a normal residual as low (within 4× and ε²), and on each problem the
// precision expected: single kept (fallback NULL) or set aside for double with a reason that starts with
// `fallback`, whose coefficients are then the double run's, bit for bit.
static void check_chol_single(const tcase *t, const char *fallback, double tol)
{
    tcase d = *t;
    d.o.gram_double = 1;
    sb_result rs = {0}, rd = {0};
    int rc = run_solve(MPI_COMM_WORLD, t, &rs, NULL, 0), rc2 = run_solve(MPI_COMM_WORLD, &d, &rd, NULL, 0);
    CHECK(rc == DS_OK && rc2 == DS_OK, "%s: solve failed (%d, %d)", t->name, rc, rc2);
    if (rc == DS_OK && rc2 == DS_OK) {
        check_chol_report(t->name, &rs);
        const double diff = test_rel_diff(rs.a, rd.a, t->p.cols);
        CHECK(diff <= tol, "%s: single vs double X'X: coefficients differ by %.3e > %.1e (%d steps)", t->name, diff,
              tol, rs.refined);
        CHECK(rs.normal_residual <= 4 * rd.normal_residual + DBL_EPSILON * DBL_EPSILON,
              "%s: normal residual %.3e from single X'X, %.3e from double", t->name, rs.normal_residual,
              rd.normal_residual);
        CHECK(strcmp(rd.gram_precision, "double") == 0 && !rd.gram_fallback[0], "%s: --gram-precision double took %s",
              t->name, rd.gram_precision);
        if (!fallback)
            CHECK(strcmp(rs.gram_precision, "single") == 0 && !rs.gram_fallback[0],
                  "%s: single X'X set aside: %s", t->name, rs.gram_fallback);
        else
            CHECK(strcmp(rs.gram_precision, "double") == 0 && strncmp(rs.gram_fallback, fallback, strlen(fallback)) == 0 &&
                  rs.fallback_seconds > 0 && memcmp(rs.a, rd.a, (size_t)t->p.cols * sizeof(double)) == 0,
                  "%s: want the single X'X set aside (%s...), got %s (%s)", t->name, fallback, rs.gram_precision,
                  rs.gram_fallback);
    }
    solvebak_result_free(&rs);
    solvebak_result_free(&rd);
}

// The cholesky checks above, on their problems.
static void check_cholesky(void)
{
    const sb_opts chol = {.batch = 100, .iters = 10, .line_search = 1, .method = SB_METHOD_CHOLESKY};
    const gen_lsq exact = {.rows = 2000, .cols = 60, .seed = 11, .corr = 0.3};
    const gen_lsq noisy = {.rows = 2000, .cols = 40, .seed = 12, .noise = 0.1};
    check_chol_exact(&(tcase){.name = "cholesky, exact y", .p = exact, .o = chol, .zero_col = -1});
    check_chol_exact(&(tcase){.name = "cholesky, exact y, columns scaled by 1e±100", .p = exact, .o = chol,
                              .zero_col = -1, .scaled = 1});
    check_chol_noisy(&(tcase){.name = "cholesky, noisy y", .p = noisy, .o = chol, .zero_col = -1});
    check_chol_noisy(&(tcase){.name = "cholesky, noisy y, columns scaled by 1e±100", .p = noisy, .o = chol,
                              .zero_col = -1, .scaled = 1});
    for (int k = 0; k < 6; k++) {  // sources 0 .. 5: most of them leave a positive rounding-level pivot
        char name[80];
        snprintf(name, sizeof name, "cholesky, column %d a copy of column %d", 17 + 2 * k, k);
        check_chol_duplicate(name, (gen_lsq){.rows = 1000 + 7 * k, .cols = 30 + 5 * k, .seed = 20 + k}, k, 17 + 2 * k);
    }
    check_chol_duplicate("cholesky, the last column a copy of column 40, rho 0.5",
                         (gen_lsq){.rows = 3000, .cols = 64, .seed = 14, .corr = 0.5}, 40, 63);
    check_chol_ranks(&(tcase){.name = "cholesky, rank counts", .p = {.rows = 1001, .cols = 40, .seed = 15, .noise = 0.1,
                              .corr = 0.3}, .o = chol, .zero_col = -1});
    const struct {
        const char *name;
        gen_lsq p;
        int f32, scaled;
        const char *fallback;
        double tol;
    } sd[] = {
        {"single X'X, exact y", exact, 0, 0, NULL, 1e-13},
        {"single X'X, noisy y", noisy, 0, 0, NULL, 1e-13},
        {"single X'X, float32 input", noisy, 1, 0, NULL, 1e-13},
        {"single X'X, rho 0.999", {.rows = 3000, .cols = 50, .seed = 16, .corr = 0.999}, 0, 0, NULL, 1e-11},
        {"single X'X, columns scaled by 1e±100", noisy, 0, 1, "column 0 of X leaves the range", 0},
        {"single X'X, rho 0.99999", {.rows = 3000, .cols = 50, .seed = 17, .corr = 0.99999}, 0, 0, "cond(X) about", 0},
    };
    for (size_t i = 0; i < sizeof sd / sizeof sd[0]; i++)
        check_chol_single(&(tcase){.name = sd[i].name, .p = sd[i].p, .f32 = sd[i].f32, .o = chol, .zero_col = -1,
                                   .scaled = sd[i].scaled}, sd[i].fallback, sd[i].tol);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const sb_opts ls = {.batch = 8, .iters = 300, .line_search = 1, .method = SB_METHOD_SOLVEBAK};
    const sb_opts chol = {.batch = 8, .iters = 10, .line_search = 1, .method = SB_METHOD_CHOLESKY};
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
        {"cholesky, well-conditioned", {.rows = 400, .cols = 30, .seed = 1}, 0, chol, -1, 1e-9},
        {"cholesky, correlated rho 0.5", {.rows = 2000, .cols = 64, .seed = 3, .corr = 0.5}, 0, chol, -1, 1e-9},
        {"cholesky, zero column", {.rows = 300, .cols = 16, .seed = 5}, 0, chol, 5, 1e-9},
        {"cholesky, float32 input", {.rows = 500, .cols = 24, .seed = 6}, 1, chol, -1, 1e-9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
    check_routes_agree("routes agree, batch 8", (gen_lsq){.rows = 500, .cols = 40, .seed = 7, .corr = 0.3}, 8, 1);
    check_routes_agree("routes agree, batch 1", (gen_lsq){.rows = 500, .cols = 40, .seed = 8, .corr = 0.3}, 1, 1);
    check_routes_agree("routes agree, raw update", (gen_lsq){.rows = 500, .cols = 40, .seed = 9}, 10, 0);
    check_divergence();
    check_cholesky();
    int rc = test_finish("test_solve");
    MPI_Finalize();
    return rc;
}
