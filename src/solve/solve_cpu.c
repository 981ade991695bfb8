// solve_cpu.c: SolveBak's operations on the CPU backend (solve_ops.h states their contracts): block
// Grams and the Gram of [X y] by OpenBLAS DSYRK/DGEMM over row chunks (or SSYRK, gram_single), the fused residual pass, the
// block step, the Gram sweeps, and the equilibrated Cholesky factor and solve (LAPACK dpotrf/dpotrs).
// f32 rows are widened to double chunk by chunk in the backend's scratch. The block solve's operations
// are in solve_blocks_cpu.c.
// provides: solve_ops_cpu
#include <cblas.h>
#include <lapacke.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_cpu.h"
#include "solve/solve_ops.h"

// solve_blocks_cpu.c: the block solve's operations, and its paths of block_step and gram_sweeps.
int cpu_block_pinv(ds_ctx *ctx, const double *A, int64_t n, int batch, int64_t astride, int64_t lda, double *out);
int cpu_block_sums(ds_ctx *ctx, const ds_mat *A, int batch, double *out, int64_t ld_row, int64_t ld_col);
int cpu_coarse_products(ds_ctx *ctx, const ds_mat *X, const double *Z, int64_t k, int64_t nw, double *out);
int cpu_coarse_step(ds_ctx *ctx, const ds_coarse_args *c);
int cpu_block_solve_step(ds_ctx *ctx, const ds_step_args *s);
int cpu_gram_sweeps_bs(ds_ctx *ctx, const ds_gram_args *s);

// Rows r0 .. r0+nr−1, columns c0 .. c0+nc−1 of X as doubles: a pointer into X itself when it holds
// doubles (leading dimension X->cols), else a converted copy in scratch (leading dimension nc).
static const double *cpu_rows_f64(const ds_mat *X, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                                  double *scratch, int64_t *ld)
{
    if (!X->f32) {
        *ld = X->cols;
        return (const double *)X->data + r0 * X->cols + c0;
    }
    const float *src = (const float *)X->data + r0 * X->cols + c0;
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < nc; c++)
            scratch[r * nc + c] = src[r * X->cols + c];
    *ld = nc;
    return scratch;
}

// Rows per BLAS call on double data, so that row counts passed to BLAS stay within int.
#define CPU_BLAS_ROWS ((int64_t)1 << 24)

// Rows per chunk so that a chunk of width cols is about 2 MB (stays in cache between its two uses).
static int64_t cpu_chunk_rows(int64_t cols)
{
    int64_t r = (2 << 20) / (8 * (cols > 0 ? cols : 1));
    return r < 16 ? 16 : r;
}

static void cpu_symmetrize(double *A, int64_t n, int64_t ld)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < i; j++)
            A[i * ld + j] = A[j * ld + i];
}

// C (nc × nc, leading dimension ldc) = Σ over the rows of X[:, c0 .. c0+nc−1]ᵀ X[:, c0 .. c0+nc−1].
static int cpu_syrk_cols(ds_ctx *ctx, const ds_mat *X, int64_t c0, int64_t nc, double *C, int64_t ldc)
{
    int64_t chunk = X->f32 ? cpu_chunk_rows(nc) : CPU_BLAS_ROWS;
    double *scratch = X->f32 ? cpu_scratch(ctx, (size_t)(chunk * nc)) : NULL;
    if (X->f32 && !scratch)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int64_t i = 0; i < nc; i++)
        memset(C + i * ldc, 0, (size_t)nc * sizeof(double));
    for (int64_t r0 = 0; r0 < X->rows; r0 += chunk) {
        int64_t nr = X->rows - r0 < chunk ? X->rows - r0 : chunk, ld;
        const double *A = cpu_rows_f64(X, r0, nr, c0, nc, scratch, &ld);
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)nc, (int)nr, 1.0, A, (int)ld, 1.0, C, (int)ldc);
    }
    cpu_symmetrize(C, nc, ldc);
    return DS_OK;
}

static int cpu_block_grams(ds_ctx *ctx, const ds_mat *X, int batch, double *out)
{
    for (int64_t b0 = 0, b = 0; b0 < X->cols; b0 += batch, b++) {
        int64_t nb = X->cols - b0 < batch ? X->cols - b0 : batch;
        DS_CHECK(cpu_syrk_cols(ctx, X, b0, nb, out + b * (int64_t)batch * batch, batch));
    }
    return DS_OK;
}

static int cpu_grad_update(ds_ctx *ctx, const ds_mat *X, double *e, int64_t up_col0, int64_t up_n,
                           const double *coef, int64_t gr_col0, int64_t gr_n, double *gout)
{
    int64_t width = up_n > gr_n ? up_n : gr_n;
    int64_t chunk = cpu_chunk_rows(width);
    double *conv = cpu_scratch(ctx, (size_t)(X->f32 ? chunk * width : 1)), ee = 0.0;
    if (!conv)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    memset(gout, 0, (size_t)(gr_n + 1) * sizeof(double));
    for (int64_t r0 = 0; r0 < X->rows; r0 += chunk) {
        int64_t nr = X->rows - r0 < chunk ? X->rows - r0 : chunk, ld;
        if (up_n > 0) {
            const double *A = cpu_rows_f64(X, r0, nr, up_col0, up_n, conv, &ld);
            cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)nr, (int)up_n, -1.0, A, (int)ld, coef, 1, 1.0,
                        e + r0, 1);
        }
        if (gr_n > 0) {
            const double *A = cpu_rows_f64(X, r0, nr, gr_col0, gr_n, conv, &ld);
            cblas_dgemv(CblasRowMajor, CblasTrans, (int)nr, (int)gr_n, 1.0, A, (int)ld, e + r0, 1, 1.0,
                        gout, 1);
        }
        ee += cblas_ddot((int)nr, e + r0, 1, e + r0, 1);
    }
    gout[gr_n] = ee;
    return DS_OK;
}

static int cpu_block_step(ds_ctx *ctx, const ds_step_args *s)
{
    if (s->binv)
        return cpu_block_solve_step(ctx, s);
    double *da = cpu_scratch(ctx, (size_t)s->nb);
    if (!da)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    double num = 0.0, den = 0.0;
    for (int j = 0; j < s->nb; j++) {
        da[j] = s->diag[j] > 0 ? s->gbuf[j] / s->diag[j] : 0.0;
        num += da[j] * s->gbuf[j];
    }
    for (int j = 0; j < s->nb; j++) {
        double row = 0.0;
        for (int k = 0; k < s->nb; k++)
            row += s->gbb[(int64_t)j * s->ld + k] * da[k];
        den += da[j] * row;
    }
    double alpha = s->line_search && s->nb > 1 ? (den > 0 ? num / den : 0.0) : 1.0;
    for (int j = 0; j < s->nb; j++) {
        s->coef[j] = alpha * da[j];
        s->a[j] += s->coef[j];
    }
    if (s->ee_slot)
        *s->ee_slot = s->gbuf[s->nb];
    return DS_OK;
}

// yᵀy over rows entries, by BLAS calls of int length.
static double cpu_sumsq(const double *y, int64_t rows)
{
    double yy = 0.0;
    for (int64_t r0 = 0; r0 < rows; r0 += CPU_BLAS_ROWS) {
        int64_t nr = rows - r0 < CPU_BLAS_ROWS ? rows - r0 : CPU_BLAS_ROWS;
        yy += cblas_ddot((int)nr, y + r0, 1, y + r0, 1);
    }
    return yy;
}

// OpenBLAS's DSYRK splits the result's columns among its threads and runs slower with fewer than about
// 64 columns a thread than with fewer threads (1 003 columns on 64 cores: 64 threads 1.16 s, 16 threads
// 0.19 s for the network's HᵀH), so the Gram of n columns takes at most n / 64 of them: the thread count
// to restore afterwards (cpu_threads_restore), or 0 when it is left as it is.
static int cpu_threads_cap(int64_t n)
{
    const int threads = openblas_get_num_threads(), cap = n / 64 < 1 ? 1 : n / 64 > INT_MAX ? INT_MAX : (int)(n / 64);
    if (cap >= threads)
        return 0;
    openblas_set_num_threads(cap);
    return threads;
}

static void cpu_threads_restore(int threads)
{
    if (threads > 0)
        openblas_set_num_threads(threads);
}

static int cpu_gram(ds_ctx *ctx, const ds_mat *X, const double *y, double *out)
{
    const int64_t n = X->cols;
    const int threads = cpu_threads_cap(n);
    int rc = cpu_syrk_cols(ctx, X, 0, n, out, n);
    cpu_threads_restore(threads);
    DS_CHECK(rc);
    double *c = out + n * n;
    memset(c, 0, (size_t)n * sizeof(double));
    int64_t chunk = X->f32 ? cpu_chunk_rows(n) : CPU_BLAS_ROWS;
    double *scratch = X->f32 ? cpu_scratch(ctx, (size_t)(chunk * n)) : NULL;
    if (X->f32 && !scratch)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int64_t r0 = 0; r0 < X->rows; r0 += chunk) {
        int64_t nr = X->rows - r0 < chunk ? X->rows - r0 : chunk, ld;
        const double *A = cpu_rows_f64(X, r0, nr, 0, n, scratch, &ld);
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)nr, (int)n, 1.0, A, (int)ld, y + r0, 1, 1.0, c, 1);
    }
    out[n * n + n] = cpu_sumsq(y, X->rows);
    return DS_OK;
}

// gram_single: [X y] rounded to float a chunk of rows at a time (about 16 MB, in the scratch beside the
// float Gram), one OpenBLAS SSYRK a chunk (about twice DSYRK's rate: 0.7-0.8 s against 1.45-1.6 s for
// 100 000 × 1 000 on the 2-core development machine, the conversion included), then widened to double.
static int cpu_gram_single(ds_ctx *ctx, const ds_mat *X, const double *y, double *out)
{
    const int64_t n = X->cols, n1 = n + 1;
    int64_t chunk = ((int64_t)16 << 20) / (4 * n1);
    chunk = chunk < 1024 ? 1024 : chunk > X->rows ? (X->rows > 0 ? X->rows : 1) : chunk;
    if (n1 > INT_MAX || chunk * n1 > ((int64_t)1 << 40))
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "single-precision X'X: %lld columns exceed BLAS's int", (long long)n);
    float *G32 = (float *)cpu_scratch(ctx, (size_t)((n1 * n1 + chunk * n1) / 2 + 1));
    if (!G32)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    float *A = G32 + n1 * n1;
    const int threads = cpu_threads_cap(n);
    memset(G32, 0, (size_t)(n1 * n1) * sizeof(float));
    for (int64_t r0 = 0; r0 < X->rows; r0 += chunk) {
        const int64_t nr = X->rows - r0 < chunk ? X->rows - r0 : chunk;
        for (int64_t r = 0; r < nr; r++) {
            float *dst = A + r * n1;
            if (X->f32)
                memcpy(dst, (const float *)X->data + (r0 + r) * n, (size_t)n * sizeof(float));
            else {
                const double *src = (const double *)X->data + (r0 + r) * n;
                for (int64_t j = 0; j < n; j++)
                    dst[j] = (float)src[j];
            }
            dst[n] = (float)y[r0 + r];
        }
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n1, (int)nr, 1.0f, A, (int)n1, 1.0f, G32, (int)n1);
    }
    cpu_threads_restore(threads);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i; j <= n; j++)  // row i of the upper triangle: G's row and column i, then c_i
            out[j < n ? i * n + j : n * n + i] = out[j < n ? j * n + i : n * n + i] = G32[i * n1 + j];
    out[n * n + n] = cpu_sumsq(y, X->rows);
    return DS_OK;
}

static int cpu_gram_sweeps(ds_ctx *ctx, const ds_gram_args *s)
{
    if (s->binv)
        return cpu_gram_sweeps_bs(ctx, s);
    const int64_t n = s->n;
    double *da = cpu_scratch(ctx, (size_t)s->batch);
    if (!da)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int sweep = 0; sweep < s->sweeps; sweep++) {
        for (int64_t b0 = 0; b0 < n; b0 += s->batch) {
            int nb = (int)(n - b0 < s->batch ? n - b0 : s->batch);
            double num = 0.0, den = 0.0;
            for (int j = 0; j < nb; j++) {
                da[j] = s->diag[b0 + j] > 0 ? s->g[b0 + j] / s->diag[b0 + j] : 0.0;
                num += da[j] * s->g[b0 + j];
            }
            for (int j = 0; j < nb; j++) {
                const double *Gj = s->G + (b0 + j) * n + b0;
                double row = 0.0;
                for (int k = 0; k < nb; k++)
                    row += Gj[k] * da[k];
                den += da[j] * row;
            }
            double alpha = s->line_search && nb > 1 ? (den > 0 ? num / den : 0.0) : 1.0;
            for (int j = 0; j < nb; j++) {
                s->a[b0 + j] += alpha * da[j];
                cblas_daxpy((int)n, -alpha * da[j], s->G + (b0 + j) * n, 1, s->g, 1);
            }
            *s->ee -= 2.0 * alpha * num - alpha * alpha * den;
        }
        if (s->ee_hist)
            s->ee_hist[sweep] = *s->ee;
    }
    return DS_OK;
}

static int cpu_chol_factor(ds_ctx *ctx, double *G, int64_t n, double *s, int low, int *info, double *cond)
{
    (void)low;  // in double: LAPACK's spotrf would save little beside the single-precision X'X
    for (int64_t j = 0; j < n; j++)
        s[j] = G[j * n + j] > 0 ? 1.0 / sqrt(G[j * n + j]) : 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            G[i * n + j] = i == j && s[i] == 0.0 ? 1.0 : G[i * n + j] * s[i] * s[j];
    if (n > INT_MAX)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "cholesky: %lld columns exceed LAPACK's int", (long long)n);
    lapack_int rc = n > 0 ? LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', (lapack_int)n, G, (lapack_int)n) : 0;
    if (rc < 0)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "LAPACK dpotrf: argument %d invalid", (int)-rc);
    *info = (int)rc;
    if (*info == 0) {
        double *d = cpu_scratch(ctx, (size_t)(n > 0 ? n : 1));
        if (!d)
            return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
        for (int64_t j = 0; j < n; j++)
            d[j] = G[j * n + j];
        *info = chol_pivot_info(d, n);
        *cond = chol_diag_cond(d, n);
    }
    return DS_OK;
}

static int cpu_chol_solve(ds_ctx *ctx, const double *F, const double *s, int64_t n, const double *b, double *x,
                          int add)
{
    double *t = cpu_scratch(ctx, (size_t)(n > 0 ? n : 1));
    if (!t)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int64_t j = 0; j < n; j++)
        t[j] = s[j] * b[j];
    lapack_int rc = n > 0 ? LAPACKE_dpotrs(LAPACK_ROW_MAJOR, 'L', (lapack_int)n, 1, F, (lapack_int)n, t, 1) : 0;
    if (rc != 0)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "LAPACK dpotrs: argument %d invalid", (int)-rc);
    for (int64_t j = 0; j < n; j++)
        x[j] = add ? x[j] + s[j] * t[j] : s[j] * t[j];
    return DS_OK;
}

static int cpu_step_size(ds_ctx *ctx, const double *a, const double *b, int64_t n, double *out)
{
    (void)ctx;
    double step = 0, big = 0;
    for (int64_t j = 0; j < n; j++) {
        step = fmax(step, fabs(a[j] - b[j]));
        big = fmax(big, fabs(a[j]));
    }
    out[0] = step;
    out[1] = big;
    return DS_OK;
}

extern const struct qr_ops qr_ops_cpu;  // qr_cpu.c

const solve_ops solve_ops_cpu = {
    .block_grams = cpu_block_grams,
    .grad_update = cpu_grad_update,
    .block_step = cpu_block_step,
    .gram = cpu_gram,
    .gram_single = cpu_gram_single,
    .single_name = "single",
    .single_unit = FLT_EPSILON / 2,
    .single_cond_max = 300.0,  // its steps shrink by about cond(X)²·ε_float: 300² · 6e-8 = 5e-3 a step
    .single_range = {1e-30, 1e37},  // float's normal range with room
    .gram_sweeps = cpu_gram_sweeps,
    .block_pinv = cpu_block_pinv,
    .block_sums = cpu_block_sums,
    .coarse_products = cpu_coarse_products,
    .coarse_step = cpu_coarse_step,
    .chol_factor = cpu_chol_factor,
    .chol_solve = cpu_chol_solve,
    .step_size = cpu_step_size,
    .qr = &qr_ops_cpu,
};
