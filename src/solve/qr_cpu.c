// qr_cpu.c: --method qr's operations on the CPU backend (qr_ops.h states their contracts): Householder
// QR by LAPACK dgeqrf (OpenBLAS's threads in its block updates) on a column-major copy of the rows of
// [X | y], the stacked factor, the triangular solve (cblas_dtrsv) and the column norms.
// provides: qr_ops_cpu
#include <cblas.h>
#include <lapacke.h>
#include <limits.h>
#include <string.h>

#include "backend/backend_cpu.h"
#include "solve/qr_ops.h"

static int64_t cpu_local_work(const ds_ctx *ctx, int64_t rows, int64_t cols)
{
    return rows * (cols + 1);
}

// A (rows × n1, column-major, ld rows) = [X | y], X widened to double. In tiles of 64 rows, so that
// the strided reads of X stay in cache between columns.
static void cpu_gather_cols(const ds_mat *X, const double *y, double *A)
{
    const int64_t m = X->rows, n = X->cols;
    for (int64_t i0 = 0; i0 < m; i0 += 64) {
        const int64_t i1 = m - i0 < 64 ? m : i0 + 64;
        for (int64_t j = 0; j < n; j++) {
            double *col = A + j * m;
            if (X->f32)
                for (int64_t i = i0; i < i1; i++)
                    col[i] = ((const float *)X->data)[i * n + j];
            else
                for (int64_t i = i0; i < i1; i++)
                    col[i] = ((const double *)X->data)[i * n + j];
        }
    }
    memcpy(A + n * m, y, (size_t)m * sizeof(double));
}

// R (n1 × n1) from dgeqrf's output A (rows × n1, ld lda): its upper triangle (the first min(rows, n1)
// rows), zeros elsewhere, each row negated where its diagonal entry is negative.
static void cpu_take_r(const double *A, int64_t lda, int64_t rows, int64_t n1, double *R)
{
    for (int64_t j = 0; j < n1; j++)
        for (int64_t i = 0; i < n1; i++) {
            const int keep = i <= j && i < rows;
            const double sign = keep && A[i + i * lda] < 0 ? -1.0 : 1.0;
            R[i + j * n1] = keep ? sign * A[i + j * lda] : 0.0;
        }
}

// dgeqrf in place on A (rows × n1, ld lda), then R taken from it.
static int cpu_geqrf_r(ds_ctx *ctx, double *A, int64_t rows, int64_t n1, int64_t lda, double *R)
{
    if (rows > INT_MAX || n1 > INT_MAX)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "qr: %lld x %lld rows exceed LAPACK's int", (long long)rows,
                       (long long)n1);
    double *tau = cpu_scratch(ctx, (size_t)(n1 > 0 ? n1 : 1));
    if (!tau)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    lapack_int rc = rows > 0 ? LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)rows, (lapack_int)n1, A, (lapack_int)lda, tau)
                             : 0;
    if (rc != 0)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "LAPACK dgeqrf: argument %d invalid", (int)-rc);
    cpu_take_r(A, lda, rows, n1, R);
    return DS_OK;
}

static int cpu_local_r(ds_ctx *ctx, const ds_mat *X, const double *y, double *work, double *R)
{
    cpu_gather_cols(X, y, work);
    return cpu_geqrf_r(ctx, work, X->rows, X->cols + 1, X->rows > 0 ? X->rows : 1, R);
}

static int cpu_stack_r(ds_ctx *ctx, const double *R0, const double *R1, int64_t n1, double *out)
{
    const int64_t ld = 2 * n1;
    double *S = cpu_scratch(ctx, (size_t)(ld * n1 + n1));  // then dgeqrf's tau, past S
    if (!S)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int64_t j = 0; j < n1; j++) {
        memcpy(S + j * ld, R0 + j * n1, (size_t)n1 * sizeof(double));
        memcpy(S + j * ld + n1, R1 + j * n1, (size_t)n1 * sizeof(double));
    }
    if (ld > INT_MAX)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "qr: %lld columns exceed LAPACK's int", (long long)n1);
    lapack_int rc = LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)ld, (lapack_int)n1, S, (lapack_int)ld, S + ld * n1);
    if (rc != 0)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "LAPACK dgeqrf: argument %d invalid", (int)-rc);
    cpu_take_r(S, ld, ld, n1, out);
    return DS_OK;
}

static int cpu_solve(ds_ctx *ctx, const double *R, int64_t n, double *a)
{
    if (n > INT_MAX)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "qr: %lld columns exceed BLAS's int", (long long)n);
    memcpy(a, R + n * (n + 1), (size_t)n * sizeof(double));
    if (n > 0)
        cblas_dtrsv(CblasColMajor, CblasUpper, CblasNoTrans, CblasNonUnit, (int)n, R, (int)(n + 1), a, 1);
    return DS_OK;
}

static int cpu_col_norms(ds_ctx *ctx, const double *R, int64_t n1, double *out)
{
    for (int64_t j = 0; j < n1; j++) {
        double s = 0.0;
        for (int64_t i = 0; i <= j; i++)
            s += R[i + j * n1] * R[i + j * n1];
        out[j] = s;
    }
    return DS_OK;
}

const qr_ops qr_ops_cpu = {
    .local_work = cpu_local_work,
    .local_r = cpu_local_r,
    .stack_r = cpu_stack_r,
    .solve = cpu_solve,
    .col_norms = cpu_col_norms,
};
