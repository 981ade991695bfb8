// test_solve_qr.c: --method qr (TSQR, solve_qr.c) end to end through solvebak_run, on the CPU backend
// (test_solve_qr cpu) or on the device backend (test_solve_qr gpu: also against the CPU backend; exit 77
// without a GPU on every rank). Problems X = G·diag(σ)·Vᵀ (G Gaussian, V orthogonal, σ geometric from 1
// to 1/cond), y = X·a_true (+ noise), made on rank 0 and split by rows over the ranks:
//   - condition 1e12 (2 000 × 100 and 20 000 × 300), y exact: the coefficients within 10× of LAPACK
//     dgels's error (where cholesky fails or is far off), and what the report says of a direct method;
//   - condition 1e4, noisy y: LAPACK's ratio ‖Xᵀr‖/(‖X‖_F·‖r‖·ε·n) < 30 (in long double). At condition
//     1e12 no method meets it (dgels itself gave 2 000 to 5e7 in the trials, and gelsd the same): it is
//     the coefficients that are compared with dgels's there;
//   - a column copied, copied times 3, the sum of two others, zero: exit 4, one line naming the column;
//   - every rank count up to this run's (agreeing to 1e-12 on a condition-1e3 problem), run to run the
//     same bits, f32 X, and fewer rows than columns on each rank.
#include <float.h>
#include <lapacke.h>
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "core/data.h"
#include "core/rng.h"
#include "harness.h"
#include "solve/solvebak.h"

typedef struct prob {
    const char *name;
    int64_t m, n;
    double cond, noise;  // noise: ‖y − X·a_true‖ as a share of ‖X·a_true‖ (Gaussian, not orthogonal to X)
    int f32;
    int dep;             // 0 none; column n/2 + 1 made 1: a copy of column 5, 2: 3 × column 7, 3: column 2 +
                         // column 9, 4: zero
    uint64_t seed;
    double *X, *y, *a;   // the whole problem on every rank: X row-major (float-rounded when f32)
} prob;

static int64_t dep_col(const prob *p)
{
    return p->n / 2 + 1;
}

// V (n × n) orthogonal: the Q of a Gaussian matrix.
static void orthogonal(double *V, int64_t n, uint64_t seed)
{
    double *tau = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n * n; i++)
        V[i] = rng_normal(seed, 2, (uint64_t)i);
    LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n, V, (lapack_int)n, tau);
    LAPACKE_dorgqr(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n, (lapack_int)n, V, (lapack_int)n, tau);
    free(tau);
}

// X, y and a_true on rank 0 (then sent to every rank).
static void prob_fill(prob *p)
{
    const int64_t m = p->m, n = p->n, d = dep_col(p);
    double *G = malloc((size_t)(m * n) * sizeof(double)), *V = malloc((size_t)(n * n) * sizeof(double));
    for (int64_t i = 0; i < m * n; i++)
        G[i] = rng_normal(p->seed, 1, (uint64_t)i) * pow(p->cond, -(double)(i % n) / (double)(n > 1 ? n - 1 : 1));
    orthogonal(V, n, p->seed);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)n, 1.0, G, (int)n, V, (int)n, 0.0, p->X,
                (int)n);
    for (int64_t i = 0; i < m; i++) {
        double *x = p->X + i * n;
        if (p->dep)
            x[d] = p->dep == 1 ? x[5] : p->dep == 2 ? 3.0 * x[7] : p->dep == 3 ? x[2] + x[9] : 0.0;
        for (int64_t j = 0; p->f32 && j < n; j++)
            x[j] = (float)x[j];
    }
    for (int64_t j = 0; j < n; j++)
        p->a[j] = rng_normal(p->seed, 3, (uint64_t)j);
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)m, (int)n, 1.0, p->X, (int)n, p->a, 1, 0.0, p->y, 1);
    const double scale = p->noise * cblas_dnrm2((int)m, p->y, 1) / sqrt((double)m);
    for (int64_t i = 0; i < m && p->noise > 0; i++)
        p->y[i] += scale * rng_normal(p->seed, 4, (uint64_t)i);
    free(G);
    free(V);
}

static void prob_make(prob *p)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    p->X = malloc((size_t)(p->m * p->n) * sizeof(double));
    p->y = malloc((size_t)p->m * sizeof(double));
    p->a = malloc((size_t)p->n * sizeof(double));
    if (rank == 0)
        prob_fill(p);
    MPI_Bcast(p->X, (int)(p->m * p->n), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(p->y, (int)p->m, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(p->a, (int)p->n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

static void prob_free(prob *p)
{
    free(p->X);
    free(p->y);
    free(p->a);
}

// Solves p over comm on backend be with method; the status, the result, and the context's message.
static int run_solve(MPI_Comm comm, const char *be, const prob *p, int method, sb_result *res, char *msg, size_t len)
{
    ds_ctx ctx;
    int rank, size, rc = ctx_open(&ctx, comm, be);
    CHECK(rc == DS_OK, "%s: ctx_open %s: %s", p->name, be, ctx.msg.text);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int64_t row0, rows;
    data_partition(p->m, size, rank, &row0, &rows);
    const size_t xb = (size_t)(rows * p->n) * (p->f32 ? sizeof(float) : sizeof(double));
    void *host = malloc(xb > 0 ? xb : 1), *X = NULL;
    double *y = NULL;
    for (int64_t k = 0; k < rows * p->n; k++)
        if (p->f32)
            ((float *)host)[k] = (float)p->X[row0 * p->n + k];
        else
            ((double *)host)[k] = p->X[row0 * p->n + k];
    if (rc == DS_OK)
        rc = ctx.be->alloc(&ctx, &X, xb > 0 ? xb : 8);
    if (rc == DS_OK)
        rc = ctx.be->alloc(&ctx, (void **)&y, (size_t)(rows > 0 ? rows : 1) * sizeof(double));
    if (rc == DS_OK && xb > 0)
        rc = ctx.be->upload(&ctx, X, host, xb);
    if (rc == DS_OK && rows > 0)
        rc = ctx.be->upload(&ctx, y, p->y + row0, (size_t)rows * sizeof(double));
    const sb_opts o = {.batch = 100, .iters = 1, .line_search = 1, .method = method};
    const ds_mat A = {X, rows, p->n, p->f32};
    if (rc == DS_OK)
        rc = solvebak_run(&ctx, &A, y, p->m, &o, res);
    if (msg)
        snprintf(msg, len, "%s", ctx.msg.text);
    if (X)
        ctx.be->free(&ctx, X);
    if (y)
        ctx.be->free(&ctx, y);
    free(host);
    ctx_close(&ctx);
    return rc;
}

// LAPACK dgels's solution of the whole problem.
static void dgels_solution(const prob *p, double *a)
{
    double *X = malloc((size_t)(p->m * p->n) * sizeof(double)), *y = malloc((size_t)p->m * sizeof(double));
    memcpy(X, p->X, (size_t)(p->m * p->n) * sizeof(double));
    memcpy(y, p->y, (size_t)p->m * sizeof(double));
    int info = LAPACKE_dgels(LAPACK_ROW_MAJOR, 'N', (lapack_int)p->m, (lapack_int)p->n, 1, X, (lapack_int)p->n, y, 1);
    CHECK(info == 0, "%s: dgels info %d", p->name, info);
    memcpy(a, y, (size_t)p->n * sizeof(double));
    free(X);
    free(y);
}

// LAPACK's least-squares test ratio ‖Xᵀr‖/(‖X‖_F·‖r‖·ε·n), r = y − X·a, in long double; *rel = ‖r‖/‖y‖.
static double ls_ratio(const prob *p, const double *a, double *rel)
{
    const int64_t m = p->m, n = p->n;
    long double *r = malloc((size_t)m * sizeof(long double)), rr = 0, yy = 0, xx = 0, g2 = 0;
    for (int64_t i = 0; i < m; i++) {
        long double v = p->y[i];
        for (int64_t j = 0; j < n; j++)
            v -= (long double)p->X[i * n + j] * a[j];
        r[i] = v;
        rr += v * v;
        yy += (long double)p->y[i] * p->y[i];
    }
    for (int64_t j = 0; j < n; j++) {
        long double g = 0;
        for (int64_t i = 0; i < m; i++) {
            g += (long double)p->X[i * n + j] * r[i];
            xx += (long double)p->X[i * n + j] * p->X[i * n + j];
        }
        g2 += g * g;
    }
    free(r);
    *rel = (double)sqrtl(rr / yy);
    return (double)(sqrtl(g2) / (sqrtl(xx) * sqrtl(rr) * (DBL_EPSILON / 2) * n));
}

// What qr reports besides the coefficients: method qr, one "sweep", stop reason solved, history
// [1, rel_residual], a condition estimate ≥ 1.
static void check_report(const char *name, const sb_result *r)
{
    CHECK(r->method && strcmp(r->method, "qr") == 0, "%s: method %s", name, r->method ? r->method : "(none)");
    CHECK_EQ_INT(r->sweeps, 1, "qr: sweeps");
    CHECK(r->stop_reason && strcmp(r->stop_reason, "solved") == 0, "%s: stop reason %s", name,
          r->stop_reason ? r->stop_reason : "(none)");
    CHECK(r->history && r->history[0] == 1.0 && r->history[1] == r->rel_residual,
          "%s: history [%.3e, %.3e], want [1, rel_residual %.3e]", name, r->history ? r->history[0] : NAN,
          r->history ? r->history[1] : NAN, r->rel_residual);
    CHECK(r->cond_estimate >= 1.0, "%s: condition estimate %.3g", name, r->cond_estimate);
}

// Condition 1e12, exact y: qr's coefficient error ≤ 10× dgels's (+ 1e-12), its relative residual at
// rounding level; cholesky fails (exit 4) or is at least 100× further off.
static void check_ill(const char *be, prob *p)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    prob_make(p);
    sb_result q = {0}, c = {0};
    const int rc = run_solve(MPI_COMM_WORLD, be, p, SB_METHOD_QR, &q, NULL, 0);
    const int rcc = run_solve(MPI_COMM_WORLD, be, p, SB_METHOD_CHOLESKY, &c, NULL, 0);
    CHECK(rc == DS_OK, "%s on %s: qr failed (%d)", p->name, be, rc);
    if (rc == DS_OK && rank == 0) {
        double *ref = malloc((size_t)p->n * sizeof(double));
        dgels_solution(p, ref);
        const double e = test_rel_diff(q.a, p->a, p->n), el = test_rel_diff(ref, p->a, p->n);
        const double ec = rcc == DS_OK ? test_rel_diff(c.a, p->a, p->n) : INFINITY;
        printf("%s on %s: coefficient error qr %.3e, dgels %.3e, cholesky %.3e (status %d); cond estimate %.2e\n",
               p->name, be, e, el, ec, rcc, q.cond_estimate);
        CHECK(e <= 10 * el + 1e-12, "%s on %s: qr's coefficient error %.3e > 10 x dgels's %.3e", p->name, be, e, el);
        CHECK(rcc == DS_ERR_NUMERIC || ec > 100 * e, "%s on %s: cholesky (status %d) error %.3e, qr's %.3e", p->name, be,
              rcc, ec, e);
        CHECK(q.rel_residual <= 1e-12, "%s on %s: relative residual %.3e", p->name, be, q.rel_residual);
        check_report(p->name, &q);
        free(ref);
    }
    solvebak_result_free(&q);
    solvebak_result_free(&c);
    prob_free(p);
}

// Noisy y: the test ratio < 30, the reported relative residual the host's to 1e-10, and (tol_lapack > 0)
// the coefficients within tol_lapack of dgels's, relative.
static void check_noisy(const char *be, prob *p, double tol_lapack)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    prob_make(p);
    sb_result q = {0};
    const int rc = run_solve(MPI_COMM_WORLD, be, p, SB_METHOD_QR, &q, NULL, 0);
    CHECK(rc == DS_OK, "%s on %s: qr failed (%d)", p->name, be, rc);
    if (rc == DS_OK && rank == 0) {
        double rel, rel_ref, *ref = malloc((size_t)p->n * sizeof(double));
        dgels_solution(p, ref);
        const double ratio = ls_ratio(p, q.a, &rel), ratio_ref = ls_ratio(p, ref, &rel_ref);
        const double d = test_rel_diff(q.a, ref, p->n);
        printf("%s on %s: ratio qr %.3g, dgels %.3g; vs dgels %.3e\n", p->name, be, ratio, ratio_ref, d);
        CHECK(ratio < 30, "%s on %s: ||X'r||/(||X|| ||r|| eps n) = %.3g >= 30 (dgels: %.3g)", p->name, be, ratio, ratio_ref);
        CHECK(fabs(q.rel_residual - rel) <= 1e-10 * rel, "%s on %s: relative residual %.17g, the host's %.17g", p->name,
              be, q.rel_residual, rel);
        CHECK(tol_lapack == 0 || d <= tol_lapack, "%s on %s: vs dgels %.3e > %.1e", p->name, be, d, tol_lapack);
        check_report(p->name, &q);
        free(ref);
    }
    solvebak_result_free(&q);
    prob_free(p);
}

// A dependent column: exit 4, no coefficients, one line naming the column.
static void check_deficient(const char *be, prob *p)
{
    prob_make(p);
    sb_result q = {0};
    char msg[512] = "", want[40];
    const int rc = run_solve(MPI_COMM_WORLD, be, p, SB_METHOD_QR, &q, msg, sizeof msg);
    CHECK_EQ_INT(rc, DS_ERR_NUMERIC, p->name);
    CHECK(q.a == NULL, "%s on %s: coefficients reported for a rank-deficient X", p->name, be);
    snprintf(want, sizeof want, "column %lld ", (long long)dep_col(p));
    CHECK(strstr(msg, want) && strstr(msg, "rank deficient") && !strchr(msg, '\n'),
          "%s on %s: message '%s' should be one line naming '%s'", p->name, be, msg, want);
    solvebak_result_free(&q);
    prob_free(p);
}

// The problem on the first k ranks for each k below this run's: within 1e-12 of this run's; and this
// run's twice, the same bits.
static void check_ranks(const char *be, prob *p)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    prob_make(p);
    sb_result all = {0}, again = {0};
    CHECK(run_solve(MPI_COMM_WORLD, be, p, SB_METHOD_QR, &all, NULL, 0) == DS_OK, "%s: %d ranks failed", p->name, size);
    CHECK(run_solve(MPI_COMM_WORLD, be, p, SB_METHOD_QR, &again, NULL, 0) == DS_OK, "%s: again failed", p->name);
    CHECK(all.a && again.a && memcmp(all.a, again.a, (size_t)p->n * sizeof(double)) == 0,
          "%s on %s: two runs differ", p->name, be);
    for (int k = 1; k < size; k++) {
        MPI_Comm sub;
        MPI_Comm_split(MPI_COMM_WORLD, rank < k ? 0 : MPI_UNDEFINED, rank, &sub);
        if (sub == MPI_COMM_NULL)
            continue;
        sb_result r = {0};
        CHECK(run_solve(sub, be, p, SB_METHOD_QR, &r, NULL, 0) == DS_OK, "%s: %d ranks failed", p->name, k);
        if (rank == 0 && r.a && all.a) {
            const double d = test_rel_diff(r.a, all.a, p->n);
            CHECK(d <= 1e-12, "%s on %s: %d vs %d ranks: relative difference %.3e > 1e-12", p->name, be, k, size, d);
        }
        solvebak_result_free(&r);
        MPI_Comm_free(&sub);
    }
    solvebak_result_free(&all);
    solvebak_result_free(&again);
    prob_free(p);
}

// The device backend against the CPU backend on a condition-1e3 problem: within 1e-10.
static void check_against_cpu(const char *be, prob *p)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    prob_make(p);
    sb_result g = {0}, c = {0};
    CHECK(run_solve(MPI_COMM_WORLD, be, p, SB_METHOD_QR, &g, NULL, 0) == DS_OK, "%s on %s failed", p->name, be);
    CHECK(run_solve(MPI_COMM_WORLD, "cpu", p, SB_METHOD_QR, &c, NULL, 0) == DS_OK, "%s on cpu failed", p->name);
    if (rank == 0 && g.a && c.a) {
        const double d = test_rel_diff(g.a, c.a, p->n);
        CHECK(d <= 1e-10, "%s: %s vs cpu: relative difference %.3e > 1e-10", p->name, be, d);
    }
    solvebak_result_free(&g);
    solvebak_result_free(&c);
    prob_free(p);
}

// Every check on backend be (a device backend: sketch also forces the CUDA sketch path where the block
// allows it).
static void check_all(const char *be, int device)
{
    check_ill(be, &(prob){.name = "qr, cond 1e12, 2000 x 100, exact y", .m = 2000, .n = 100, .cond = 1e12, .seed = 31});
    check_ill(be, &(prob){.name = "qr, cond 1e12, 20000 x 300, exact y", .m = 20000, .n = 300, .cond = 1e12, .seed = 32});
    check_noisy(be, &(prob){.name = "qr, cond 1e4, noisy y", .m = 2000, .n = 60, .cond = 1e4, .noise = 0.5, .seed = 33},
                1e-10);
    check_noisy(be, &(prob){.name = "qr, cond 1e3, f32 X", .m = 1500, .n = 50, .cond = 1e3, .noise = 0.1, .f32 = 1,
                            .seed = 34}, 1e-10);
    check_noisy(be, &(prob){.name = "qr, fewer rows than columns per rank", .m = 40, .n = 30, .cond = 1e2, .noise = 0.1,
                            .seed = 35}, 1e-10);
    check_noisy(be, &(prob){.name = "qr, n = 1", .m = 7, .n = 1, .cond = 1, .noise = 2, .seed = 36}, 1e-12);
    static const char *deps[] = {"", "a copy of column 5", "3 x column 7", "column 2 + column 9", "zero"};
    for (int d = 1; d <= 4; d++) {
        char name[96];
        snprintf(name, sizeof name, "qr, cond 1e3, column 21 %s", deps[d]);
        check_deficient(be, &(prob){.name = name, .m = 600, .n = 40, .cond = 1e3, .dep = d, .seed = 40 + d});
    }
    check_ranks(be, &(prob){.name = "qr, rank counts", .m = 1001, .n = 40, .cond = 1e3, .noise = 0.1, .seed = 37});
    if (device)
        check_against_cpu(be, &(prob){.name = "qr, gpu vs cpu", .m = 30000, .n = 200, .cond = 1e3, .noise = 0.1,
                                      .seed = 38});
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    int status = 0;
    if (gpu && !test_gpus_for_all()) {
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0)
            printf("test_solve_qr gpu: skipped: not every rank has a GPU of its own\n");
        status = 77;
    } else if (gpu) {
        const char *why = NULL, *be = ds_backend_device(&why)->name;
        setenv("DSOLVE_QR_GLOBAL", "0", 1);  // the tree over the ranks' own factors (global_r's fallback)
        check_all(be, 1);
        setenv("DSOLVE_QR_SKETCH", "1", 1);  // the preconditioned Cholesky QR on every block it can take
        check_ill(be, &(prob){.name = "qr, cond 1e12, 2000 x 100, exact y, sketch", .m = 2000, .n = 100, .cond = 1e12,
                              .seed = 31});
        check_against_cpu(be, &(prob){.name = "qr, gpu vs cpu, sketch", .m = 3000, .n = 100, .cond = 1e3, .noise = 0.1,
                                      .seed = 39});
        for (int d = 1; d <= 4; d++)  // a copy passes the sketch's check, a zero column falls back to geqrf
            check_deficient(be, &(prob){.name = "qr, a dependent column, sketch", .m = 3000, .n = 40, .cond = 1e3,
                                        .dep = d, .seed = 50 + d});
        // The sketch over every rank's rows (qr_ops.global_r: on 2 and 4 ranks), its fallback to the tree
        // where the check fails (the zero column), and the ranks' agreement: the default.
        unsetenv("DSOLVE_QR_GLOBAL");
        check_ill(be, &(prob){.name = "qr, cond 1e12, 2000 x 100, exact y, global", .m = 2000, .n = 100,
                              .cond = 1e12, .seed = 31});
        check_against_cpu(be, &(prob){.name = "qr, gpu vs cpu, global", .m = 3000, .n = 100, .cond = 1e3, .noise = 0.1,
                                      .seed = 39});
        for (int d = 1; d <= 4; d++)
            check_deficient(be, &(prob){.name = "qr, a dependent column, global", .m = 3000, .n = 40, .cond = 1e3,
                                        .dep = d, .seed = 50 + d});
        check_ranks(be, &(prob){.name = "qr, rank counts, global", .m = 1001, .n = 40, .cond = 1e3, .noise = 0.1,
                                .seed = 37});
        unsetenv("DSOLVE_QR_SKETCH");
        status = test_finish("test_solve_qr gpu");
    } else {
        check_all("cpu", 0);
        status = test_finish("test_solve_qr cpu");
    }
    MPI_Finalize();
    return status;
}
