// test_backend_ops_qr.c: test_backend_ops's cases of --method qr's operations (solve/qr_ops.h): local_r,
// stack_r, solve and col_norms, against the CPU backend (gpu mode) or the loops here (unblocked
// Householder QR, back substitution, sums of squares). R factors are compared entry by entry relative to
// their column's norm (‖A_j‖ = ‖R_j‖): two backward-stable factorizations of A differ by at most about
// n1·u·cond(A) there, so the tolerance is 8·n1·u·κ₁ with κ₁ LAPACK dtrcon's estimate for the wanted R.
// In gpu mode local_r also runs with DSOLVE_QR_SKETCH=0 (cuSOLVER's Householder on every block) and =1
// (the preconditioned Cholesky QR wherever rows ≥ 2·n1), beside the default choice.
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "solve/qr_ops.h"
#include "solve/solve_ops.h"

// Row blocks m (+ rank) × n, none on the last rank with empty: one row, fewer rows than columns, n = 1,
// 1 001 rows (the CUDA backend's Householder by default), 4 099 (its sketch path by default).
typedef struct qshape {
    int64_t m, n;
    int empty;
} qshape;

static const qshape qshapes[] = {{1, 1, 0}, {3, 5, 0}, {17, 3, 0}, {40, 1, 0}, {130, 17, 1}, {1001, 130, 0},
                                 {4099, 130, 1}, {3, 1001, 0}};
enum { NQ = sizeof qshapes / sizeof qshapes[0] };

// ---------------------------------------------------------------------------------------------------
// References

// R (n1 × n1) of A (rows × n1, column-major, overwritten) by unblocked Householder, rows signed so that
// R_ii ≥ 0, zeros below the diagonal and past the rows.
static void ref_qr(double *A, int64_t rows, int64_t n1, double *R)
{
    for (int64_t j = 0; j < n1 && j < rows; j++) {
        double *x = A + j * rows + j, s = 0.0;
        const int64_t len = rows - j;
        for (int64_t i = 1; i < len; i++)
            s += x[i] * x[i];
        if (s == 0.0)
            continue;
        const double alpha = x[0], beta = alpha >= 0 ? -sqrt(alpha * alpha + s) : sqrt(alpha * alpha + s);
        const double tau = (beta - alpha) / beta, scal = 1.0 / (alpha - beta);
        for (int64_t i = 1; i < len; i++)
            x[i] *= scal;
        x[0] = beta;
        for (int64_t k = j + 1; k < n1; k++) {
            double *c = A + k * rows + j, w = c[0];
            for (int64_t i = 1; i < len; i++)
                w += x[i] * c[i];
            w *= tau;
            c[0] -= w;
            for (int64_t i = 1; i < len; i++)
                c[i] -= w * x[i];
        }
    }
    for (int64_t j = 0; j < n1; j++)
        for (int64_t i = 0; i < n1; i++) {
            const int keep = i <= j && i < rows;
            R[i + j * n1] = keep ? (A[i + i * rows] < 0 ? -A[i + j * rows] : A[i + j * rows]) : 0.0;
        }
}

// LAPACK dtrcon's estimate of κ₁ of R's leading k × k block (1 when k is 0).
static double tri_cond(const double *R, int64_t n1, int64_t k)
{
    double rcond = 0.0;
    if (k == 0)
        return 1.0;
    LAPACKE_dtrcon(LAPACK_COL_MAJOR, '1', 'U', 'N', (lapack_int)k, R, (lapack_int)n1, &rcond);
    return rcond > 0 ? 1.0 / rcond : INFINITY;
}

// Per entry of R, its column's norm (the scale of the comparison).
static void col_scales(const double *R, int64_t n1, double *scale)
{
    for (int64_t j = 0; j < n1; j++) {
        double s = 0.0;
        for (int64_t i = 0; i <= j; i++)
            s += R[i + j * n1] * R[i + j * n1];
        for (int64_t i = 0; i < n1; i++)
            scale[i + j * n1] = sqrt(s);
    }
}

// A well-conditioned upper triangular n1 × n1: diagonal in [1, 2], the rest in [−1, 1]/n1 (κ ≤ about 3).
static void tri_make(ops_run *r, ops_mem *h, int64_t n1, double *R)
{
    double *v = ops_new(h, (size_t)(n1 * n1) * 8);
    ops_fill(r, v, n1 * n1, -1, 1, 1);
    for (int64_t j = 0; j < n1; j++)
        for (int64_t i = 0; i < n1; i++)
            R[i + j * n1] = i > j ? 0.0 : i == j ? 1.5 + 0.5 * v[i + j * n1] : v[i + j * n1] / (double)n1;
}

// ---------------------------------------------------------------------------------------------------
// local_r

typedef struct qblock {
    int64_t m, rows, n, n1;
    int empty;
    ops_arr X;
    double *y;
} qblock;

static void qblock_make(ops_run *r, ops_mem *h, const qshape *s, int f32, qblock *q)
{
    q->m = ops_dim(r, s->m);
    q->n = ops_dim(r, s->n);
    q->n1 = q->n + 1;
    q->empty = s->empty;
    q->rows = ops_rows(r, q->m, s->empty);
    ops_arr_make(r, h, q->rows * q->n, f32, -0.5, 0.5, 1, &q->X);
    q->y = ops_new(h, (size_t)q->rows * 8);
    ops_fill(r, q->y, q->rows, -0.5, 0.5, 1);
}

static int local_r_on(ds_ctx *c, const qblock *q, double *R)
{
    ops_mem m = {c};
    const qr_ops *ops = c->be->solve->qr;
    const ds_mat X = {ops_put(&m, q->X.raw, ops_arr_bytes(&q->X)), q->rows, q->n, q->X.f32};
    const double *y = ops_put(&m, q->y, (size_t)q->rows * 8);
    double *work = ops_new(&m, (size_t)ops->local_work(c, q->rows, q->n) * 8), *Rd = ops_new(&m, (size_t)(q->n1 * q->n1) * 8);
    const int rc = ops_ran(c, ops->local_r(c, &X, y, work, Rd), "qr.local_r");
    ops_get(&m, R, Rd, (size_t)(q->n1 * q->n1) * 8);
    ops_release(&m);
    return rc;
}

static void local_r_ref(const qblock *q, double *R)
{
    double *A = malloc((size_t)(q->rows * q->n1 > 0 ? q->rows * q->n1 : 1) * 8);
    for (int64_t i = 0; i < q->rows; i++) {
        for (int64_t j = 0; j < q->n; j++)
            A[i + j * q->rows] = q->X.d[i * q->n + j];
        A[i + q->n * q->rows] = q->y[i];
    }
    ref_qr(A, q->rows, q->n1, R);
    free(A);
}

// One run of the backend under test (in the mode named by sketch: NULL default, "0" or "1") against
// want (ref_st: the status of the run that made it), then again, which must give the same bits.
static void local_r_one(ops_run *r, const qblock *q, const double *want, int ref_st, const char *sketch)
{
    const int64_t nn = q->n1 * q->n1;
    ops_mem h = {NULL};
    double *got = ops_new(&h, (size_t)nn * 8), *again = ops_new(&h, (size_t)nn * 8), *sc = ops_new(&h, (size_t)nn * 8);
    if (sketch)
        setenv("DSOLVE_QR_SKETCH", sketch, 1);
    const int st = local_r_on(r->dut, q, got);
    const int st2 = local_r_on(r->dut, q, again);
    unsetenv("DSOLVE_QR_SKETCH");
    col_scales(want, q->n1, sc);
    const double cond = tri_cond(want, q->n1, q->rows < q->n1 ? q->rows : q->n1);
    char shape[128], empty[32] = "";
    if (q->empty)
        snprintf(empty, sizeof empty, ", rank %d none", r->nranks - 1);
    snprintf(shape, sizeof shape, "%lld+r x %lld%s, cond %.0e%s%s", (long long)q->m, (long long)q->n, empty, cond,
             sketch ? ", DSOLVE_QR_SKETCH=" : "", sketch ? sketch : "");
    double c = cond;  // the largest over the ranks: the tolerance must be the same everywhere
    MPI_Allreduce(MPI_IN_PLACE, &c, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    ops_report(r, "qr.local_r", shape, ops_dtype_name(q->X.f32), ops_err_each(got, want, sc, nn),
               8.0 * (double)q->n1 * OPS_U64 * c, st | ref_st);
    ops_report(r, "qr.local_r again", shape, ops_dtype_name(q->X.f32), ops_err_bytes(again, got, nn, 8), 0, st2);
    ops_release(&h);
}

void case_qr_local_r(ops_run *r)
{
    static const char *gpu_modes[] = {NULL, "0", "1"};
    for (int s = 0; s < NQ; s++)
        for (int f32 = 0; f32 <= 1; f32++) {
            ops_mem h = {NULL};
            qblock q;
            qblock_make(r, &h, &qshapes[s], f32, &q);
            double *want = ops_new(&h, (size_t)(q.n1 * q.n1) * 8);
            int st = DS_OK;
            if (r->cpu)
                st = local_r_on(r->cpu, &q, want);
            else
                local_r_ref(&q, want);
            for (int k = 0; k < (r->cpu ? 3 : 1); k++)
                local_r_one(r, &q, want, st, gpu_modes[k]);
            ops_release(&h);
        }
}

// ---------------------------------------------------------------------------------------------------
// stack_r, solve, col_norms on n1 × n1 factors

static const int64_t qsizes[] = {1, 2, 4, 18, 131, 1002};
enum { NQS = sizeof qsizes / sizeof qsizes[0] };

// stack_r into a fresh buffer, or (alias) into R0's own.
static int stack_on(ds_ctx *c, const double *R0, const double *R1, int64_t n1, int alias, double *out)
{
    ops_mem m = {c};
    const size_t bytes = (size_t)(n1 * n1) * 8;
    double *a = ops_put(&m, R0, bytes), *b = ops_put(&m, R1, bytes), *o = alias ? a : ops_new(&m, bytes);
    const int rc = ops_ran(c, c->be->solve->qr->stack_r(c, a, b, n1, o), "qr.stack_r");
    ops_get(&m, out, o, bytes);
    ops_release(&m);
    return rc;
}

static void stack_ref(const double *R0, const double *R1, int64_t n1, double *out)
{
    double *S = malloc((size_t)(2 * n1 * n1) * 8);
    for (int64_t j = 0; j < n1; j++) {
        memcpy(S + j * 2 * n1, R0 + j * n1, (size_t)n1 * 8);
        memcpy(S + j * 2 * n1 + n1, R1 + j * n1, (size_t)n1 * 8);
    }
    ref_qr(S, 2 * n1, n1, out);
    free(S);
}

// [R0; R1] of two well-conditioned triangles (the loops stop at 131 columns in cpu mode: they are
// cubic); out into its own buffer and into R0's (the tree's use), the same bits twice.
void case_qr_stack_r(ops_run *r)
{
    for (int s = 0; s < NQS; s++)
        for (int alias = 0; alias <= 1; alias++) {
            const int64_t n1 = qsizes[s], nn = n1 * n1;
            if (!r->cpu && n1 > 131)
                continue;
            ops_mem h = {NULL};
            double *R0 = ops_new(&h, (size_t)nn * 8), *R1 = ops_new(&h, (size_t)nn * 8), *got = ops_new(&h, (size_t)nn * 8);
            double *want = ops_new(&h, (size_t)nn * 8), *again = ops_new(&h, (size_t)nn * 8), *sc = ops_new(&h, (size_t)nn * 8);
            tri_make(r, &h, n1, R0);
            tri_make(r, &h, n1, R1);
            int st = stack_on(r->dut, R0, R1, n1, alias, got);
            const int st2 = stack_on(r->dut, R0, R1, n1, alias, again);
            if (r->cpu)
                st |= stack_on(r->cpu, R0, R1, n1, 0, want);
            else
                stack_ref(R0, R1, n1, want);
            col_scales(want, n1, sc);
            char shape[64];
            snprintf(shape, sizeof shape, "n1 %lld%s", (long long)n1, alias ? ", out = R0" : "");
            ops_report(r, "qr.stack_r", shape, "f64", ops_err_each(got, want, sc, nn),
                       8.0 * (double)n1 * OPS_U64 * tri_cond(want, n1, n1), st);
            ops_report(r, "qr.stack_r again", shape, "f64", ops_err_bytes(again, got, nn, 8), 0, st2);
            ops_release(&h);
        }
}

static int solve_on(ds_ctx *c, const double *R, int64_t n, double *a)
{
    ops_mem m = {c};
    const double *Rd = ops_put(&m, R, (size_t)((n + 1) * (n + 1)) * 8);
    double *ad = ops_new(&m, (size_t)n * 8);
    const int rc = ops_ran(c, c->be->solve->qr->solve(c, Rd, n, ad), "qr.solve");
    ops_get(&m, a, ad, (size_t)n * 8);
    ops_release(&m);
    return rc;
}

// a against back substitution in the loops (or the CPU backend): the forward error of a triangular
// solve, 4·n·u·κ₁(R11) relative to max |a|.
void case_qr_solve(ops_run *r)
{
    for (int s = 1; s < NQS; s++) {
        const int64_t n1 = qsizes[s], n = n1 - 1;
        ops_mem h = {NULL};
        double *R = ops_new(&h, (size_t)(n1 * n1) * 8), *got = ops_new(&h, (size_t)n * 8), *want = ops_new(&h, (size_t)n * 8);
        tri_make(r, &h, n1, R);
        int st = solve_on(r->dut, R, n, got);
        if (r->cpu) {
            st |= solve_on(r->cpu, R, n, want);
        } else {
            for (int64_t i = n - 1; i >= 0; i--) {
                double v = R[i + n * n1];
                for (int64_t k = i + 1; k < n; k++)
                    v -= R[i + k * n1] * want[k];
                want[i] = v / R[i + i * n1];
            }
        }
        char shape[32];
        snprintf(shape, sizeof shape, "n %lld", (long long)n);
        ops_report(r, "qr.solve", shape, "f64", ops_err_rel(got, want, n), 4.0 * (double)n1 * OPS_U64 * tri_cond(R, n1, n),
                   st);
        ops_release(&h);
    }
}

static int col_norms_on(ds_ctx *c, const double *R, int64_t n1, double *out)
{
    ops_mem m = {c};
    const double *Rd = ops_put(&m, R, (size_t)(n1 * n1) * 8);
    double *od = ops_new(&m, (size_t)n1 * 8);
    const int rc = ops_ran(c, c->be->solve->qr->col_norms(c, Rd, n1, od), "qr.col_norms");
    ops_get(&m, out, od, (size_t)n1 * 8);
    ops_release(&m);
    return rc;
}

// Sums of j + 1 squares, in any order: (j + 1)·u relative; 2·n1·u for all.
void case_qr_col_norms(ops_run *r)
{
    for (int s = 0; s < NQS; s++) {
        const int64_t n1 = qsizes[s];
        ops_mem h = {NULL};
        double *R = ops_new(&h, (size_t)(n1 * n1) * 8), *got = ops_new(&h, (size_t)n1 * 8), *want = ops_new(&h, (size_t)n1 * 8);
        ops_fill(r, R, n1 * n1, -1, 1, 1);
        for (int64_t j = 0; j < n1; j++)
            for (int64_t i = j + 1; i < n1; i++)
                R[i + j * n1] = 0.0;
        int st = col_norms_on(r->dut, R, n1, got);
        if (r->cpu) {
            st |= col_norms_on(r->cpu, R, n1, want);
        } else {
            for (int64_t j = 0; j < n1; j++) {
                want[j] = 0.0;
                for (int64_t i = 0; i <= j; i++)
                    want[j] += R[i + j * n1] * R[i + j * n1];
            }
        }
        char shape[32];
        snprintf(shape, sizeof shape, "n1 %lld", (long long)n1);
        ops_report(r, "qr.col_norms", shape, "f64", ops_err_each(got, want, want, n1), 2.0 * (double)n1 * OPS_U64, st);
        ops_release(&h);
    }
}
