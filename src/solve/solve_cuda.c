// solve_cuda.c: SolveBak's operations on the CUDA backend (solve_ops.h states their contracts): the Gram
// products (cuBLAS: strided-batched GEMMs for the block Grams; XᵀX itself in gram_cuda.c), the launches
// of kernels/solve for the fused passes, block steps and Gram sweeps, the block solve's (pseudo-inverses,
// block sums, coarse products and step), and the equilibrated Cholesky factor and solve (cuSOLVER
// potrf/potrs).
// provides: solve_ops_cuda
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_cuda.h"
#include "solve/gram_cuda.h"
#include "solve/solve_kernels.h"
#include "solve/solve_ops.h"

// cholesky's FP16 attempt is set aside beyond this estimate of cond(X): its refinement steps shrink by
// about 5e-5·cond(X)² (simulated for TF32, whose mantissa FP16's equals, on uniform X of 50 000 × 1 000
// and 30 000 × 1 000: 4e-5 a step at cond 1.01, 1.8e-4 at 1.84), which is 5e-3 a step at 10.
#define HALF_COND_MAX 10.0

// The FP16 attempt's two more passes over X, two more solves and its rounding cost what the tensor
// cores save on X'X where X is narrow or short: --gram-precision auto takes it from HALF_MIN_COLS columns
// where a rank's rows·n² reach HALF_MIN_WORK. Measured on an H100 (2026-11-28, lease D; ms, FP16 against
// double, --repeat 5): 100 000 × 1 000 2.26 / 3.56, 50 000 × 1 000 1.62 / 2.14, 25 000 × 1 000 1.32 / 1.55,
// 25 000 × 2 000 2.47 / 3.32, 100 000 × 750 1.78 / 2.66, 50 000 × 750 1.31 / 1.68, 200 000 × 500 1.88 / 2.60,
// 100 000 × 400 1.19 / 1.32, 10⁶ × 250 4.02 / 4.40; below it 100 000 × 250 0.83 / 0.73 (there the passes
// outweigh the product). In TF32 (2026-11-27) the rule was 400 columns and 5e10.
#define HALF_MIN_COLS 250
#define HALF_MIN_WORK 1.5e10

// ---------------------------------------------------------------------------------------------------
// Gram products. cuBLAS is column-major: X (m × n row-major) is Xᵀ (n × m, ld n) to it, and the
// columns c0 .. c0+k of X are rows c0 .. c0+k of that matrix: A = X + c0 with ld n.

// Rows of X from r0 as doubles: X itself, or its rows widened into scratch (f32).
static int rows_f64(ds_ctx *ctx, const ds_mat *X, int64_t r0, int64_t nr, double *wide, const double **A)
{
    if (!X->f32) {
        *A = (const double *)X->data + r0 * X->cols;
        return DS_OK;
    }
    CUDA_CHECK(ctx, ds_k_f32_to_f64(wide, (const float *)X->data + r0 * X->cols, nr * X->cols,
                                    state(ctx)->stream));
    *A = wide;
    return DS_OK;
}

// Rows per pass (cuBLAS's k): ≤ GEMM_CHUNK_ROWS, and for f32 ≤ 256 MB of widened rows (then a
// scratch of that size).
static int row_chunks(ds_ctx *ctx, const ds_mat *X, int64_t *chunk, double **wide)
{
    *wide = NULL;
    int64_t c = X->rows < GEMM_CHUNK_ROWS ? X->rows : GEMM_CHUNK_ROWS;
    if (X->f32 && X->cols > 0 && c > F32_CHUNK_DOUBLES / X->cols)
        c = F32_CHUNK_DOUBLES / X->cols;
    if (c < 1)
        c = 1;
    *chunk = c;
    return X->f32 ? scratch_reserve(ctx, (size_t)(c * X->cols), wide) : DS_OK;
}

static int cuda_block_grams(ds_ctx *ctx, const ds_mat *X, int batch, double *out)
{
    cuda_state *st = state(ctx);
    DS_ASSERT(batch >= 1);
    const int64_t n = X->cols, m = X->rows, bb = (int64_t)batch * batch;
    const int64_t nfull = n / batch, tail = n % batch, nblocks = nfull + (tail > 0);
    if (n == 0)
        return DS_OK;
    if (m == 0) {
        CUDA_CHECK(ctx, ds_k_fill(out, nblocks * bb, 0.0, st->stream));
        return DS_OK;
    }
    if (tail > 0)  // gemm writes only the tail × tail corner of the last slab: zero the rest
        CUDA_CHECK(ctx, ds_k_fill(out + nfull * bb, bb, 0.0, st->stream));
    int64_t chunk;
    double *wide;
    DS_CHECK(row_chunks(ctx, X, &chunk, &wide));
    const double one = 1.0, zero = 0.0;
    for (int64_t r0 = 0; r0 < m; r0 += chunk) {
        const int64_t nr = m - r0 < chunk ? m - r0 : chunk;
        const double *A = NULL, *beta = r0 == 0 ? &zero : &one;
        DS_CHECK(rows_f64(ctx, X, r0, nr, wide, &A));
        // G_b = A_b·A_bᵀ with A_b = A + b·batch (batch × nr, ld n); C_b at out + b·batch², ld batch.
        if (nfull > 0)
            CUBLAS_CHECK(ctx, cublasDgemmStridedBatched_64(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, batch, batch, nr,
                                                           &one, A, n, batch, A, n, batch, beta, out, batch,
                                                           bb, nfull));
        if (tail > 0)
            CUBLAS_CHECK(ctx, cublasDgemm_64(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, tail, tail, nr, &one,
                                             A + nfull * batch, n, A + nfull * batch, n, beta,
                                             out + nfull * bb, batch));
    }
    return DS_OK;
}

// ‖y‖² straight into device memory: the only call in device pointer mode, restored afterwards.
static int dot_self(ds_ctx *ctx, const double *y, int64_t m, double *result)
{
    cuda_state *st = state(ctx);
    CUBLAS_CHECK(ctx, cublasSetPointerMode(st->blas, CUBLAS_POINTER_MODE_DEVICE));
    cublasStatus_t rc = cublasDdot_64(st->blas, m, y, 1, y, 1, result);
    CUBLAS_CHECK(ctx, cublasSetPointerMode(st->blas, CUBLAS_POINTER_MODE_HOST));
    CUBLAS_CHECK(ctx, rc);
    return DS_OK;
}

static int cuda_gram(ds_ctx *ctx, const ds_mat *X, const double *y, double *out)
{
    cuda_state *st = state(ctx);
    const int64_t n = X->cols, m = X->rows;
    if (m == 0) {
        CUDA_CHECK(ctx, ds_k_fill(out, n * n + n + 1, 0.0, st->stream));
        return DS_OK;
    }
    if (!X->f32 && n > 0) {
        DS_CHECK(gram_xtx_f64(ctx, (const double *)X->data, m, n, y, out));
    } else if (n > 0) {
        int64_t chunk;
        double *wide;
        DS_CHECK(row_chunks(ctx, X, &chunk, &wide));
        const double one = 1.0, zero = 0.0;
        for (int64_t r0 = 0; r0 < m; r0 += chunk) {
            const int64_t nr = m - r0 < chunk ? m - r0 : chunk;
            const double *A = NULL, *beta = r0 == 0 ? &zero : &one;
            DS_CHECK(rows_f64(ctx, X, r0, nr, wide, &A));
            // G = A·Aᵀ (A: n × nr, ld n); column-major lower = row-major upper, mirrored below.
            CUBLAS_CHECK(ctx, cublasDsyrk_64(st->blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, nr, &one, A, n,
                                             beta, out, n));
            // c = A·y
            CUBLAS_CHECK(ctx, cublasDgemv_64(st->blas, CUBLAS_OP_N, n, nr, &one, A, n, y + r0, 1, beta,
                                             out + n * n, 1));
        }
        CUDA_CHECK(ctx, ds_k_mirror_upper(out, n, st->stream));
    }
    return dot_self(ctx, y, m, out + n * n + n);
}

static int cuda_single_pays(int64_t rows, int64_t n)
{
    return n >= HALF_MIN_COLS && (double)rows * (double)n * (double)n >= HALF_MIN_WORK;
}

// gram_single here: [G | c] from [X y] scaled and rounded to FP16, summed on the tensor cores
// (gram_xtx_half, at many times DGEMM's rate), ‖y‖² in double.
static int cuda_gram_single(ds_ctx *ctx, const ds_mat *X, const double *y, double *out)
{
    const int64_t n = X->cols, m = X->rows;
    if (m == 0 || n == 0)
        CUDA_CHECK(ctx, ds_k_fill(out, n * n + n + 1, 0.0, state(ctx)->stream));
    else
        DS_CHECK(gram_xtx_half(ctx, X->data, X->f32, m, n, y, out));
    return dot_self(ctx, y, m, out + n * n + n);
}

// ---------------------------------------------------------------------------------------------------
// SolveBak

static int cuda_grad_update(ds_ctx *ctx, const ds_mat *X, double *e, int64_t up_col0, int64_t up_n,
                            const double *coef, int64_t gr_col0, int64_t gr_n, double *gout)
{
    cuda_state *st = state(ctx);
    double *scratch;
    DS_CHECK(scratch_reserve(ctx, ds_k_grad_update_scratch(X->rows, up_n, gr_n, st->nsm), &scratch));
    CUDA_CHECK(ctx, ds_k_grad_update(X->data, X->f32, X->rows, X->cols, e, up_col0, up_n, coef, gr_col0, gr_n,
                                     gout, scratch, st->nsm, st->cert_plan, st->stream));
    return DS_OK;
}

static int cuda_block_step(ds_ctx *ctx, const ds_step_args *s)
{
    if (s->binv) {
        CUDA_CHECK(ctx, ds_k_block_solve_step(s->gbuf, s->binv, s->nb, s->ld, s->a, s->coef, s->ee_slot,
                                              state(ctx)->stream));
        return DS_OK;
    }
    CUDA_CHECK(ctx, ds_k_block_step(s->gbuf, s->diag, s->gbb, s->nb, s->ld, s->line_search, s->a, s->coef,
                                    s->ee_slot, state(ctx)->stream));
    return DS_OK;
}

static int cuda_gram_sweeps(ds_ctx *ctx, const ds_gram_args *s)
{
    if (s->binv) {  // one CTA (gram_sweeps_bs.cu); the cluster kernel takes the seed's step only
        CUDA_CHECK(ctx, ds_k_gram_sweeps_bs(s->G, s->diag, s->binv, s->g, s->a, s->ee, s->ee_hist, s->n, s->batch,
                                            s->sweeps, s->cinv, s->cmat, s->wt, state(ctx)->stream));
        return DS_OK;
    }
    double *scratch;
    DS_CHECK(scratch_reserve(ctx, ds_k_gram_sweeps_scratch(s->n, s->batch), &scratch));
    CUDA_CHECK(ctx, ds_k_gram_sweeps(s->G, s->diag, s->g, s->a, s->ee, s->ee_hist, s->n, s->batch,
                                     s->line_search, s->sweeps, scratch, state(ctx)->sweeps_cluster,
                                     state(ctx)->sweeps_tx, state(ctx)->stream));
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// The block solve (block_solve.cu, gram_sweeps_bs.cu)

static int cuda_block_pinv(ds_ctx *ctx, const double *A, int64_t n, int batch, int64_t astride, int64_t lda,
                           double *out)
{
    size_t need = 0;
    double *scratch = NULL;
    CUDA_CHECK(ctx, ds_k_block_pinv_plan(n, batch, &need));
    if (need > 0)
        DS_CHECK(scratch_reserve(ctx, need, &scratch));
    CUDA_CHECK(ctx, ds_k_block_pinv(A, n, batch, astride, lda, BS_PIVOT_TOL1, out, scratch, state(ctx)->stream));
    return DS_OK;
}

static int cuda_block_sums(ds_ctx *ctx, const ds_mat *A, int batch, double *out, int64_t ld_row, int64_t ld_col)
{
    cuda_state *st = state(ctx);
    CUDA_CHECK(ctx, ds_k_block_sums(A->data, A->f32, A->rows, A->cols, batch, out, ld_row, ld_col, st->nsm, st->stream));
    return DS_OK;
}

// Row chunks as for the block Grams (f32 rows widened whole). cuBLAS is column-major: X's rows are the
// columns of an n × m matrix (ld n), Z's the columns of a k × m matrix (ld k), and the row-major k × nw
// result is column-major nw × k: X[:, 0 .. nw)ᵀ·Z = A·Zᵀ with A the first nw rows of that n × m matrix.
static int cuda_coarse_products(ds_ctx *ctx, const ds_mat *X, const double *Z, int64_t k, int64_t nw, double *out)
{
    cuda_state *st = state(ctx);
    const int64_t m = X->rows, n = X->cols;
    if (m == 0) {
        CUDA_CHECK(ctx, ds_k_fill(out, k * nw + k * k, 0.0, st->stream));
        return DS_OK;
    }
    int64_t chunk;
    double *wide;
    DS_CHECK(row_chunks(ctx, X, &chunk, &wide));
    const double one = 1.0, zero = 0.0;
    for (int64_t r0 = 0; r0 < m; r0 += chunk) {
        const int64_t nr = m - r0 < chunk ? m - r0 : chunk;
        const double *A = NULL, *beta = r0 == 0 ? &zero : &one, *Zr = Z + r0 * k;
        DS_CHECK(rows_f64(ctx, X, r0, nr, wide, &A));
        CUBLAS_CHECK(ctx, cublasDgemm_64(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, nw, k, nr, &one, A, n, Zr, k, beta, out,
                                         nw));
        CUBLAS_CHECK(ctx, cublasDgemm_64(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, k, k, nr, &one, Zr, k, Zr, k, beta,
                                         out + k * nw, k));
    }
    return DS_OK;
}

static int cuda_coarse_step(ds_ctx *ctx, const ds_coarse_args *c)
{
    CUDA_CHECK(ctx, ds_k_coarse_step(c->cinv, c->cmat, c->wt, c->ldw, c->t, c->diag, c->g, c->gn, c->a, c->n,
                                     c->batch, c->ee, c->delta, c->k, state(ctx)->stream));
    return DS_OK;
}

// The inverses of the factor's diagonal blocks (state's trsv) and the solves' work (trsv_work, set up
// when allocated), each grown only when too small.
static int trsv_reserve(ds_ctx *ctx, int64_t n)
{
    cuda_state *st = state(ctx);
    const size_t inv = ds_k_trsv_inverse_len(n), work = ds_k_trsv_work_len(n);
    if (inv > st->trsv_doubles || work > st->trsv_work_len)
        DS_CHECK(cuda_wait(ctx, NULL));  // queued solves may still use the old buffers
    if (inv > st->trsv_doubles) {
        cuda_release(ctx, st->trsv);
        st->trsv = NULL;
        st->trsv_doubles = 0;
        st->trsv_of = NULL;
        void *p = NULL;
        DS_CHECK(cuda_alloc(ctx, &p, inv * sizeof(double)));
        st->trsv = p;
        st->trsv_doubles = inv;
    }
    if (work > st->trsv_work_len) {
        cuda_release(ctx, st->trsv_work);
        st->trsv_work = NULL;
        st->trsv_work_len = 0;
        void *p = NULL;
        DS_CHECK(cuda_alloc(ctx, &p, work * sizeof(double)));
        st->trsv_work = p;
        st->trsv_work_len = work;
        CUDA_CHECK(ctx, ds_k_trsv_work_init(st->trsv_work, n, st->stream));
    }
    return DS_OK;
}

// What the triangular solves read of factor F: its upper triangle mirrored and its diagonal blocks
// inverted (ds_k_trsv_prepare), on the side stream 0; trsv_ready marks its end, which the stream must
// wait for before F's next use. Queued.
static int trsv_prepare(ds_ctx *ctx, double *F, int64_t n)
{
    cuda_state *st = state(ctx);
    DS_CHECK(trsv_reserve(ctx, n));
    if (!st->trsv_ready)
        CUDA_CHECK(ctx, cudaEventCreateWithFlags(&st->trsv_ready, cudaEventDisableTiming));
    CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
    CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[0], st->fork, 0));
    CUDA_CHECK(ctx, ds_k_trsv_prepare(F, n, st->trsv, st->side[0]));
    CUDA_CHECK(ctx, cudaEventRecord(st->trsv_ready, st->side[0]));
    st->trsv_of = F;
    st->trsv_n = n;
    return DS_OK;
}

// cuSOLVER sees the row-major symmetric G as its transpose, the same matrix: its lower triangle (the
// upper of ours) holds the factor L; the other triangle then holds Lᵀ, for cuda_chol_solve. With low,
// spotrf on G rounded to float (n = 1 000 on an H100: 337 µs against dpotrf's 419), widened back.
static int cuda_chol_factor(ds_ctx *ctx, double *G, int64_t n, double *s, int low, int *info, double *cond)
{
    cuda_state *st = state(ctx);
    *info = 0;
    if (n == 0)
        return DS_OK;
    if (n > INT_MAX)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "cholesky: %lld columns exceed cuSOLVER's int", (long long)n);
    cusolverDnHandle_t h;
    DS_CHECK(cuda_solver(ctx, &h));
    CUDA_CHECK(ctx, ds_k_chol_scale(G, n, s, st->stream));
    int lwork = 0;
    size_t gf = low ? ((size_t)n * (size_t)n + 1) / 2 : 0;  // doubles of G in float
    if (low)
        SOLVER_CHECK(ctx, cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, (int)n, (float *)G, (int)n, &lwork));
    else
        SOLVER_CHECK(ctx, cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, (int)n, G, (int)n, &lwork));
    const size_t wd = low ? ((size_t)lwork + 1) / 2 : (size_t)lwork;
    double *work;
    DS_CHECK(scratch_reserve(ctx, gf + wd + (size_t)n + 1, &work));  // [G in float] work, the diagonal, devInfo
    double *diag = work + gf + wd;
    int *dev_info = (int *)(diag + n);
    if (low) {
        float *Gf = (float *)work;
        CUDA_CHECK(ctx, ds_k_f64_to_f32(Gf, G, n * n, st->stream));
        SOLVER_CHECK(ctx, cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, (int)n, Gf, (int)n, (float *)(work + gf), lwork,
                                           dev_info));
        CUDA_CHECK(ctx, ds_k_f32_to_f64(G, Gf, n * n, st->stream));
    } else
        SOLVER_CHECK(ctx, cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, (int)n, G, (int)n, work, lwork, dev_info));
    CUDA_CHECK(ctx, ds_k_gather(diag, G, n, n + 1, st->stream));
    double *d = malloc((size_t)(n + 1) * sizeof(double));  // once a solve, not in a loop
    if (!d)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int rc = trsv_prepare(ctx, G, n);  // beside the wait below (a failed factor's is not used)
    if (rc != DS_OK) {
        free(d);
        return rc;
    }
    rc = ctx->be->download(ctx, d, diag, (size_t)(n + 1) * sizeof(double));  // the diagonal and devInfo
    if (rc == DS_OK)
        memcpy(info, d + n, sizeof(int));
    // cuSOLVER's dpotrf can name a later column than the first whose pivot is not positive (n = 1 090 with a
    // pivot of −3 at column 1 087 gave 1 089): LAPACK's info is the first diagonal entry it left not positive
    for (int j = 0; rc == DS_OK && j + 1 < *info; j++)
        if (!(d[j] > 0)) {
            *info = j + 1;
            break;
        }
    if (rc == DS_OK && *info == 0)
        *info = chol_pivot_info(d, n);
    if (rc == DS_OK && *info == 0)
        *cond = chol_diag_cond(d, n);
    free(d);
    CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->trsv_ready, 0));  // G's next user comes after it
    return rc;
}

// x (+)= S·(L·Lᵀ)⁻¹·S·b by the two triangle kernels of chol_trsv.cu (DSOLVE_CHOL_POTRS=1: cuSOLVER's
// potrs, for comparison; read once, when the backend starts).
static int cuda_chol_solve(ds_ctx *ctx, const double *F, const double *s, int64_t n, const double *b, double *x,
                           int add)
{
    cuda_state *st = state(ctx);
    if (n == 0)
        return DS_OK;
    if (st->chol_potrs) {
        double *t;
        DS_CHECK(scratch_reserve(ctx, (size_t)n + 1, &t));  // t[n] holds devInfo
        cusolverDnHandle_t h;
        DS_CHECK(cuda_solver(ctx, &h));
        CUDA_CHECK(ctx, ds_k_scale_vec(s, b, t, n, 0, st->stream));
        SOLVER_CHECK(ctx, cusolverDnDpotrs(h, CUBLAS_FILL_MODE_LOWER, (int)n, 1, F, (int)n, t, (int)n, (int *)(t + n)));
        CUDA_CHECK(ctx, ds_k_scale_vec(s, t, x, n, add, st->stream));
        return DS_OK;
    }
    if (F != st->trsv_of || n != st->trsv_n) {  // a factor this backend did not prepare last
        DS_CHECK(trsv_prepare(ctx, (double *)F, n));
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->trsv_ready, 0));
    }
    CUDA_CHECK(ctx, ds_k_chol_trsv(F, n, st->trsv, s, b, x, add, st->trsv_work, st->stream));
    return DS_OK;
}

static int cuda_step_size(ds_ctx *ctx, const double *a, const double *b, int64_t n, double *out)
{
    CUDA_CHECK(ctx, ds_k_step_size(a, b, n, out, state(ctx)->stream));
    return DS_OK;
}

extern const struct qr_ops qr_ops_cuda;  // qr_cuda.c

const solve_ops solve_ops_cuda = {
    .block_grams = cuda_block_grams,
    .grad_update = cuda_grad_update,
    .block_step = cuda_block_step,
    .gram = cuda_gram,
    .gram_single = cuda_gram_single,
    .single_name = "fp16",
    .single_unit = 1.0 / 2048,  // FP16's 10 bits of mantissa, rounded to nearest (its normal range)
    .single_cond_max = HALF_COND_MAX,
    .single_range = {1e-290, 1e290},
    .single_pays = cuda_single_pays,
    .gram_sweeps = cuda_gram_sweeps,
    .block_pinv = cuda_block_pinv,
    .block_sums = cuda_block_sums,
    .coarse_products = cuda_coarse_products,
    .coarse_step = cuda_coarse_step,
    .chol_factor = cuda_chol_factor,
    .chol_solve = cuda_chol_solve,
    .step_size = cuda_step_size,
    .qr = &qr_ops_cuda,
};
