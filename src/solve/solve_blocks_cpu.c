// solve_blocks_cpu.c: the block solve's operations on the CPU backend (solve_ops.h states their
// contracts): the blocks' pseudo-inverses (an equilibrated Cholesky factor that skips dependent columns,
// then OpenBLAS DTRSM and DSYRK), the block sums and coarse products (Z = X·P, ZᵀX_0, ZᵀZ), the coarse
// step, and the block-solve paths of block_step and gram_sweeps; solve_cpu.c's table reaches them.
// provides: cpu_block_pinv, cpu_block_sums, cpu_coarse_products, cpu_coarse_step, cpu_block_solve_step,
//           cpu_gram_sweeps_bs
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "backend/backend_cpu.h"
#include "solve/solve_ops.h"

// One block's pseudo-inverse (block_pinv). Scratch: H and V (nb × nb each) and s (nb).
// The factor is row-oriented (row i of L from the rows before it). A skipped column i keeps L_ii = 0
// while factoring, so that L_li = 0 below it and it drops out of every later sum; then s_i = 0 marks it,
// and for DTRSM its row of L becomes e_i, which makes row and column i of V = L⁻¹ the unit vector e_i:
// it touches only M_ii of M = VᵀV, which s_i = 0 clears with the rest of row and column i.
static void pinv_one(const double *A, int64_t lda, int nb, double *out, int64_t ldo, double *H, double *V,
                     double *s)
{
    const double tol = BS_PIVOT_TOL1 * nb;
    for (int j = 0; j < nb; j++)
        s[j] = A[j * lda + j] > 0 ? 1.0 / sqrt(A[j * lda + j]) : 0.0;
    for (int i = 0; i < nb; i++)
        for (int j = 0; j <= i; j++)
            H[(int64_t)i * nb + j] = A[i * lda + j] * s[i] * s[j];
    for (int i = 0; i < nb; i++) {
        double *Li = H + (int64_t)i * nb;
        for (int c = 0; c < i; c++) {
            const double *Lc = H + (int64_t)c * nb;
            double v = Li[c];
            for (int q = 0; q < c; q++)
                v -= Li[q] * Lc[q];
            Li[c] = Lc[c] > 0 ? v / Lc[c] : 0.0;
        }
        double d = Li[i];
        for (int q = 0; q < i; q++)
            d -= Li[q] * Li[q];
        Li[i] = s[i] > 0 && d > tol ? sqrt(d) : 0.0;
    }
    for (int i = 0; i < nb; i++) {
        double *Li = H + (int64_t)i * nb;
        if (Li[i] == 0.0) {
            s[i] = 0.0;
            memset(Li, 0, (size_t)i * sizeof(double));
            Li[i] = 1.0;
        }
        memset(V + (int64_t)i * nb, 0, (size_t)nb * sizeof(double));
        V[(int64_t)i * nb + i] = 1.0;
    }
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, nb, nb, 1.0, H, nb, V, nb);
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, nb, nb, 1.0, V, nb, 0.0, out, (int)ldo);
    for (int i = 0; i < nb; i++)
        for (int j = 0; j <= i; j++)
            out[i * ldo + j] = out[j * ldo + i] = out[i * ldo + j] * s[i] * s[j];
}

int cpu_block_pinv(ds_ctx *ctx, const double *A, int64_t n, int batch, int64_t astride, int64_t lda, double *out)
{
    const int64_t nbmax = batch < n ? batch : n;
    double *H = cpu_scratch(ctx, (size_t)(2 * nbmax * nbmax + nbmax + 1));
    if (!H)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int64_t b = 0; b * batch < n; b++) {
        const int nb = (int)(n - b * batch < batch ? n - b * batch : batch);
        pinv_one(A + b * astride, lda, nb, out + b * batch * (int64_t)batch, batch, H, H + nbmax * nbmax,
                 H + 2 * nbmax * nbmax);
    }
    return DS_OK;
}

int cpu_block_sums(ds_ctx *ctx, const ds_mat *A, int batch, double *out, int64_t ld_row, int64_t ld_col)
{
    const int64_t n = A->cols;
    for (int64_t i = 0; i < A->rows; i++)
        for (int64_t c0 = 0, c = 0; c0 < n; c0 += batch, c++) {
            const int64_t nb = n - c0 < batch ? n - c0 : batch;
            double v = 0.0;
            if (A->f32)
                for (int64_t j = 0; j < nb; j++)
                    v += ((const float *)A->data)[i * n + c0 + j];
            else
                for (int64_t j = 0; j < nb; j++)
                    v += ((const double *)A->data)[i * n + c0 + j];
            out[i * ld_row + c * ld_col] = v;
        }
    return DS_OK;
}

// Rows per DGEMM call: 2 MB of widened f32 rows, and within BLAS's int.
static int64_t coarse_chunk(const ds_mat *X, int64_t nw)
{
    return X->f32 ? ((2 << 20) / (8 * nw) > 16 ? (2 << 20) / (8 * nw) : 16) : (int64_t)1 << 24;
}

int cpu_coarse_products(ds_ctx *ctx, const ds_mat *X, const double *Z, int64_t k, int64_t nw, double *out)
{
    const int64_t n = X->cols, chunk = coarse_chunk(X, nw);
    double *W = out, *C = out + k * nw, *wide = X->f32 ? cpu_scratch(ctx, (size_t)(chunk * nw)) : NULL;
    if (X->f32 && !wide)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    memset(out, 0, (size_t)(k * nw + k * k) * sizeof(double));
    for (int64_t r0 = 0; r0 < X->rows; r0 += chunk) {
        const int64_t nr = X->rows - r0 < chunk ? X->rows - r0 : chunk;
        const double *A = (const double *)X->data + r0 * n;
        int64_t ld = n;
        if (X->f32) {
            for (int64_t r = 0; r < nr; r++)
                for (int64_t j = 0; j < nw; j++)
                    wide[r * nw + j] = ((const float *)X->data)[(r0 + r) * n + j];
            A = wide;
            ld = nw;
        }
        const double *Zr = Z + r0 * k;
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)nw, (int)nr, 1.0, Zr, (int)k, A, (int)ld,
                    1.0, W, (int)nw);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)k, (int)nr, 1.0, Zr, (int)k, Zr, (int)k,
                    1.0, C, (int)k);
    }
    return DS_OK;
}

int cpu_coarse_step(ds_ctx *ctx, const ds_coarse_args *c)
{
    const int64_t k = c->k;
    double dt = 0.0, den = 0.0;
    for (int64_t p = 0; p < k; p++) {
        double v = 0.0;
        for (int64_t q = 0; q < k; q++)
            v += c->cinv[p * k + q] * c->t[q];
        c->delta[p] = v;
        dt += v * c->t[p];
    }
    for (int64_t p = 0; p < k; p++) {
        double r = 0.0;
        for (int64_t q = 0; q < k; q++)
            r += c->cmat[p * k + q] * c->delta[q];
        den += c->delta[p] * r;
    }
    for (int64_t i = 0; i < c->gn; i++) {
        double u = 0.0;
        for (int64_t q = 0; q < k; q++)
            u += c->wt[q * c->ldw + i] * c->delta[q];
        c->g[i] -= u;
    }
    for (int64_t i = 0; i < c->n; i++)
        c->a[i] += c->diag[i] > 0 ? c->delta[i / c->batch] : 0.0;
    *c->ee -= 2.0 * dt - den;
    return DS_OK;
}

int cpu_block_solve_step(ds_ctx *ctx, const ds_step_args *s)
{
    for (int j = 0; j < s->nb; j++) {
        double v = 0.0;
        for (int q = 0; q < s->nb; q++)
            v += s->binv[(int64_t)j * s->ld + q] * s->gbuf[q];
        s->coef[j] = v;
        s->a[j] += v;
    }
    if (s->ee_slot)
        *s->ee_slot = s->gbuf[s->nb];
    return DS_OK;
}

// One block step of the block solve on the Gram system (ds_gram_args): da = binv_b·g_b, alpha = 1.
static void gram_block_step(const ds_gram_args *s, int64_t b, double *da)
{
    const int64_t n = s->n, b0 = b * s->batch;
    const int nb = (int)(n - b0 < s->batch ? n - b0 : s->batch);
    const double *Bi = s->binv + b * s->batch * (int64_t)s->batch, *gb = s->g + b0;
    double num = 0.0, den = 0.0;
    for (int j = 0; j < nb; j++) {
        double v = 0.0;
        for (int q = 0; q < nb; q++)
            v += Bi[(int64_t)j * s->batch + q] * gb[q];
        da[j] = v;
        num += v * gb[j];
    }
    for (int j = 0; j < nb; j++) {
        const double *Gj = s->G + (b0 + j) * n + b0;
        double row = 0.0;
        for (int q = 0; q < nb; q++)
            row += Gj[q] * da[q];
        den += da[j] * row;
    }
    for (int j = 0; j < nb; j++) {
        s->a[b0 + j] += da[j];
        cblas_daxpy((int)n, -da[j], s->G + (b0 + j) * n, 1, s->g, 1);
    }
    *s->ee -= 2.0 * num - den;
}

int cpu_gram_sweeps_bs(ds_ctx *ctx, const ds_gram_args *s)
{
    const int64_t n = s->n, k = (n + s->batch - 1) / s->batch;
    double *da = cpu_scratch(ctx, (size_t)(s->batch + 2 * k + 1));
    if (!da)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    double *t = da + s->batch, *delta = t + k;
    ds_coarse_args c = {.cinv = s->cinv, .cmat = s->cmat, .wt = s->wt, .t = t, .diag = s->diag, .g = s->g, .a = s->a,
                        .ee = s->ee, .delta = delta, .n = n, .gn = n, .ldw = n, .k = k, .batch = s->batch};
    for (int sweep = 0; sweep < s->sweeps; sweep++) {
        for (int64_t b = 0; b < k; b++)
            gram_block_step(s, b, da);
        if (s->cinv) {
            for (int64_t b = 0; b < k; b++) {
                const int64_t b0 = b * s->batch, nb = n - b0 < s->batch ? n - b0 : s->batch;
                double v = 0.0;
                for (int64_t j = 0; j < nb; j++)
                    v += s->g[b0 + j];
                t[b] = v;
            }
            cpu_coarse_step(ctx, &c);
        }
        if (s->ee_hist)
            s->ee_hist[sweep] = *s->ee;
    }
    return DS_OK;
}
