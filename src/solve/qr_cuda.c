// qr_cuda.c: --method qr's operations on the CUDA backend (qr_ops.h states their contracts).
// cuSOLVER's Householder geqrf is slow on tall blocks (39 ms for 100 000 × 1 001 on an H200, 5 TFLOP/s:
// its 1 001 panel steps are latency-bound), so a tall local block is factored by a preconditioned
// Cholesky QR (randomized Householder-Cholesky QR; Higgins, Szyld, Boman, Yamazaki 2023), whose work is
// GEMMs: a sketch S·A of A = [X | y] (two CountSketches, then ±1 signs: 2·n1 rows), its factor R_s
// (LU with pivoting, then the Cholesky QR of L), Q1 = A·R_s⁻¹ (a blocked triangular solve), and the
// Cholesky factor R1 of Q1ᵀQ1 (solve_ops.gram), so that R = R1·R_s. cond(Q1) is about 10 whatever
// cond(X) (measured 7 to 15 on condition-1e12 and heavy-row matrices), and R's backward error is then
// Householder's (coefficients within 2× of LAPACK dgels on condition-1e12 problems in the CPU trials).
// When the check after R1 fails (a Cholesky breakdown or cond(R1) too large: a rank-deficient or
// unlucky sketch), and for short blocks, cuSOLVER's geqrf on a column-major copy does it.
// Measured on an H200, 100 000 × 1 000 f64 (2026-11-24): the whole qr solve 13.1 ms (the two sketches and
// their GEMM 1.2, getrf 3.0, the triangular solve 4.1, Q1ᵀQ1 2.5, the Cholesky steps 1.1), 40.6 ms with
// geqrf instead; torch.linalg.lstsq 42.8 ms. Every step is deterministic: the same bits every run.
// provides: qr_ops_cuda
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_cuda.h"
#include "solve/qr_kernels.h"
#include "solve/qr_ops.h"
#include "solve/solve_ops.h"

#define QR_SEED 0x5eedu           // the sketch's draws: the same every run
#define QR_PRECOND_RATIO 16.0     // accept R1 when its diagonal spans at most this (cond(Q1) ≲ 60)

// The sketch path's buffers in local_r's work (doubles, each region 32-aligned): the copies of X and y
// (then Q1), the two CountSketches B1 (2·b rows, ld), the ±1 signs (s × 2·b), the sketch B2 (s × n1,
// then L), U, LᵀL, R_s, Q1ᵀQ1 from gram (gout) and squared (g1), R1ᵀ·R_s (t), getrf's pivots, and chk:
// the devInfos of getrf and the two potrfs (ints), then R1's diagonal. n1 × n1 matrices have ld.
typedef struct qr_plan {
    int64_t m, n, n1, ld, b, s;
    double *wx, *wy, *b1, *sg, *b2, *u, *gl, *rs, *g1, *t, *gout, *piv, *chk;
} qr_plan;

static double *take(double *work, int64_t *at, int64_t count)
{
    double *p = work ? work + *at : NULL;
    *at += (count + 31) / 32 * 32;
    return p;
}

// The plan of an m × n block over work (NULL: sizes only). Returns the doubles it needs.
static int64_t plan_make(int64_t m, int64_t n, double *work, qr_plan *p)
{
    int64_t at = 0;
    p->m = m, p->n = n, p->n1 = n + 1;
    p->ld = (p->n1 + 7) / 8 * 8;
    p->b = 2 * p->n1;
    p->s = 2 * p->ld;
    p->wx = take(work, &at, m * n);
    p->wy = take(work, &at, m);
    p->b1 = take(work, &at, 2 * p->b * p->ld);
    p->sg = take(work, &at, p->s * 2 * p->b);
    p->b2 = take(work, &at, p->s * p->n1);
    double **sq[] = {&p->u, &p->gl, &p->rs, &p->g1, &p->t};
    for (int i = 0; i < 5; i++)
        *sq[i] = take(work, &at, p->ld * p->n1);
    p->gout = take(work, &at, n * n + n + 1);
    p->piv = take(work, &at, p->s);
    p->chk = take(work, &at, 4 + p->n1);
    return at;
}

// The sketch path for blocks tall enough that its extra memory (about 22·n1² doubles) is at most X's;
// DSOLVE_QR_SKETCH=0 never takes it, =1 takes it from 2·n1 rows (the tests).
static int use_sketch(int64_t m, int64_t n1)
{
    const char *v = getenv("DSOLVE_QR_SKETCH");
    if (v && v[0] == '0')
        return 0;
    if (v && v[0] == '1')
        return m >= 2 * n1;
    return n1 >= 64 && m >= 24 * n1;
}

static int global_wanted(void);

static int64_t cuda_local_work(const ds_ctx *ctx, int64_t rows, int64_t cols)
{
    qr_plan p;
    const int64_t direct = rows * (cols + 1) > 0 ? rows * (cols + 1) : 1;
    if (ctx->nranks > 1 && global_wanted()) {  // global_r's plan, or the tree's direct factor after it
        const int64_t plan = plan_make(rows, cols, NULL, &p);
        return plan > direct ? plan : direct;
    }
    return use_sketch(rows, cols + 1) ? plan_make(rows, cols, NULL, &p) : direct;
}

// ---------------------------------------------------------------------------------------------------
// Householder QR by cuSOLVER (the 64-bit API: rows may pass INT_MAX): A (rows × n1, ld lda) in place,
// then R taken from it. ws: Xgeqrf's workspace of dwords doubles, then min(rows, n1) + 1 for tau and
// devInfo.

static int geqrf_size(ds_ctx *ctx, cusolverDnParams_t prm, double *A, int64_t rows, int64_t n1, int64_t lda,
                      size_t *dwords)
{
    cusolverDnHandle_t h;
    DS_CHECK(cuda_solver(ctx, &h));
    size_t dbytes = 0, hbytes = 0;
    SOLVER_CHECK(ctx, cusolverDnXgeqrf_bufferSize(h, prm, rows, n1, CUDA_R_64F, A, lda, CUDA_R_64F, A, CUDA_R_64F,
                                                  &dbytes, &hbytes));
    if (hbytes > 0)  // none on the versions measured (CUDA 13); refused rather than kept alive across a wait
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "cusolverDnXgeqrf asks for %zu bytes of host workspace", hbytes);
    *dwords = (dbytes + sizeof(double) - 1) / sizeof(double);
    return DS_OK;
}

static int geqrf_run(ds_ctx *ctx, cusolverDnParams_t prm, double *A, int64_t rows, int64_t n1, int64_t lda,
                     double *ws, size_t dwords, double *R)
{
    cusolverDnHandle_t h;
    DS_CHECK(cuda_solver(ctx, &h));
    double *tau = ws + dwords;
    int *info = (int *)(tau + (rows < n1 ? rows : n1));
    SOLVER_CHECK(ctx, cusolverDnXgeqrf(h, prm, rows, n1, CUDA_R_64F, A, lda, CUDA_R_64F, tau, CUDA_R_64F, ws,
                                       dwords * sizeof(double), NULL, 0, info));
    CUDA_CHECK(ctx, ds_k_qr_take_r(A, lda, rows, n1, R, state(ctx)->stream));
    return DS_OK;
}

// [X | y] transposed into A (work, rows × n1), then geqrf.
static int direct_r(ds_ctx *ctx, const ds_mat *X, const double *y, double *A, double *R)
{
    const int64_t m = X->rows, n1 = X->cols + 1;
    CUDA_CHECK(ctx, ds_k_qr_cols(X->data, X->f32, y, m, X->cols, A, m, state(ctx)->stream));
    cusolverDnParams_t prm;
    SOLVER_CHECK(ctx, cusolverDnCreateParams(&prm));
    size_t dwords = 0;
    double *ws = NULL;
    int rc = geqrf_size(ctx, prm, A, m, n1, m, &dwords);
    if (rc == DS_OK)
        rc = scratch_reserve(ctx, dwords + (size_t)n1 + 1, &ws);
    if (rc == DS_OK)
        rc = geqrf_run(ctx, prm, A, m, n1, m, ws, dwords, R);
    cusolverDnDestroyParams(prm);
    return rc;
}

// ---------------------------------------------------------------------------------------------------
// The sketch path

// X widened and y copied into wx, wy on the side stream, under the sketch's factorization; the main
// stream waits for st->join[0] before it uses them.
static int copy_side(ds_ctx *ctx, const ds_mat *X, const double *y, const qr_plan *p)
{
    cuda_state *st = state(ctx);
    CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
    CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[0], st->fork, 0));
    if (X->f32)
        CUDA_CHECK(ctx, ds_k_f32_to_f64(p->wx, X->data, p->m * p->n, st->side[0]));
    else
        CUDA_CHECK(ctx, cudaMemcpyAsync(p->wx, X->data, (size_t)(p->m * p->n) * sizeof(double),
                                        cudaMemcpyDeviceToDevice, st->side[0]));
    CUDA_CHECK(ctx, cudaMemcpyAsync(p->wy, y, (size_t)p->m * sizeof(double), cudaMemcpyDeviceToDevice, st->side[0]));
    CUDA_CHECK(ctx, cudaEventRecord(st->join[0], st->side[0]));
    return DS_OK;
}

// The lower Cholesky factor of A (n × n, ld) in place; the devInfo goes to info (device).
static int potrf_lower(ds_ctx *ctx, double *A, int64_t n, int64_t ld, int *info)
{
    cusolverDnHandle_t h;
    DS_CHECK(cuda_solver(ctx, &h));
    int lwork = 0;
    SOLVER_CHECK(ctx, cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, (int)n, A, (int)ld, &lwork));
    double *ws;
    DS_CHECK(scratch_reserve(ctx, (size_t)lwork + 1, &ws));
    SOLVER_CHECK(ctx, cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, (int)n, A, (int)ld, ws, lwork, info));
    return DS_OK;
}

// R_s: the sketch B2 = signs·B1 (s × n1) of the two CountSketches B1 of [X | y], B2 = P·L·U by getrf,
// then R_s = Cᵀ·U with C the lower Cholesky factor of LᵀL (L's cond is small under partial pivoting,
// so C is accurate and L·C⁻ᵀ orthonormal), its diagonal clamped so that R_s is nonsingular.
static int sketch_fold(ds_ctx *ctx, const ds_mat *X, const double *y, const qr_plan *p, uint64_t seed)
{
    CUDA_CHECK(ctx, ds_k_qr_fold(X->data, X->f32, y, p->m, p->n, p->b, p->ld, seed, p->b1, state(ctx)->stream));
    return DS_OK;
}

static int sketch_finish(ds_ctx *ctx, const qr_plan *p)
{
    cuda_state *st = state(ctx);
    cusolverDnHandle_t h;
    DS_CHECK(cuda_solver(ctx, &h));
    const int64_t n1 = p->n1, s = p->s, k = 2 * p->b;
    const double one = 1.0, zero = 0.0;
    int *info = (int *)p->chk;
    CUDA_CHECK(ctx, ds_k_qr_signs(p->sg, s * k, QR_SEED, st->stream));
    CUBLAS_CHECK(ctx, cublasDgemm_64(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, s, n1, k, &one, p->sg, s, p->b1, p->ld, &zero,
                                     p->b2, s));
    int lwork = 0;
    SOLVER_CHECK(ctx, cusolverDnDgetrf_bufferSize(h, (int)s, (int)n1, p->b2, (int)s, &lwork));
    double *ws;
    DS_CHECK(scratch_reserve(ctx, (size_t)lwork + 1, &ws));
    // (The 64-bit API's CUSOLVER_ALG_1 took the seed problem's qr from 13.1 to 20.9 ms on an H200, 2026-11-28.)
    SOLVER_CHECK(ctx, cusolverDnDgetrf(h, (int)s, (int)n1, p->b2, (int)s, ws, (int *)p->piv, info));
    CUDA_CHECK(ctx, ds_k_qr_split_lu(p->b2, s, n1, p->u, p->ld, st->stream));
    CUBLAS_CHECK(ctx, cublasDsyrk_64(st->blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n1, s, &one, p->b2, s, &zero,
                                     p->gl, p->ld));
    DS_CHECK(potrf_lower(ctx, p->gl, n1, p->ld, info + 1));
    CUBLAS_CHECK(ctx, cublasDtrmm_64(st->blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T,
                                     CUBLAS_DIAG_NON_UNIT, n1, n1, &one, p->gl, p->ld, p->u, p->ld, p->rs, p->ld));
    CUDA_CHECK(ctx, ds_k_qr_clamp(p->rs, p->ld, n1, st->stream));
    return DS_OK;
}

// B (w rows from i0 of an n × m matrix, ld ldb: X's rows are its columns) = R⁻ᵀ·B, that is X·R⁻¹ for
// row-major X, R upper (ld ldr). Recursive halves, each coupling one GEMM; leaves by the kernel.
// (cuBLAS's own DTRSM took 10 ms on this shape for 100 000 × 1 000 on an H200; this, 4.1.)
static int trsm_rows(ds_ctx *ctx, const double *R, int64_t ldr, double *B, int64_t ldb, int64_t i0, int64_t w,
                     int64_t m)
{
    cuda_state *st = state(ctx);
    if (w <= QR_TRSM_LEAF) {
        CUDA_CHECK(ctx, ds_k_qr_trsm_leaf(R + i0 + i0 * ldr, ldr, (int)w, B + i0, ldb, m, st->stream));
        return DS_OK;
    }
    const int64_t h = (w / 2 + QR_TRSM_LEAF - 1) / QR_TRSM_LEAF * QR_TRSM_LEAF;  // < w for w > the leaf
    const double one = 1.0, mone = -1.0;
    DS_CHECK(trsm_rows(ctx, R, ldr, B, ldb, i0, h, m));
    CUBLAS_CHECK(ctx, cublasDgemm_64(st->blas, CUBLAS_OP_T, CUBLAS_OP_N, w - h, m, h, &mone, R + i0 + (i0 + h) * ldr,
                                     ldr, B + i0, ldb, &one, B + i0 + h, ldb));
    return trsm_rows(ctx, R, ldr, B, ldb, i0 + h, w - h, m);
}

// Q1 = [X | y]·R_s⁻¹ over the copies: X's columns by trsm_rows, then y's, (y − Q1x·R_s[0:n, n]) / R_s[n][n].
static int precondition(ds_ctx *ctx, const qr_plan *p)
{
    cuda_state *st = state(ctx);
    const double one = 1.0, mone = -1.0;
    CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[0], 0));
    if (p->n > 0) {
        DS_CHECK(trsm_rows(ctx, p->rs, p->ld, p->wx, p->n, 0, p->n, p->m));
        CUBLAS_CHECK(ctx, cublasDgemv_64(st->blas, CUBLAS_OP_T, p->n, p->m, &mone, p->wx, p->n, p->rs + p->n * p->ld, 1,
                                         &one, p->wy, 1));
    }
    CUDA_CHECK(ctx, ds_k_qr_div(p->wy, p->m, p->rs + p->n + p->n * p->ld, st->stream));
    return DS_OK;
}

// Q1ᵀQ1 by solve_ops.gram (Q1 is in gram's layout: row-major columns of X, y apart), squared into g1,
// its lower Cholesky factor C1 = R1ᵀ, and the check on the host (this waits): *ok when both Cholesky
// factors exist and C1's diagonal is finite and spans at most QR_PRECOND_RATIO.
static int q1_gram(ds_ctx *ctx, const qr_plan *p)
{
    const ds_mat Q = {.data = p->wx, .rows = p->m, .cols = p->n, .f32 = 0};
    if (p->m == 0)  // a rank without rows in global_r
        return ctx->be->fill(ctx, p->gout, p->n * p->n + p->n + 1, 0.0);
    return ctx->be->solve->gram(ctx, &Q, p->wy, p->gout);
}

static int cholesky_check(ds_ctx *ctx, const qr_plan *p, int *ok)
{
    cuda_state *st = state(ctx);
    int *info = (int *)p->chk;
    CUDA_CHECK(ctx, ds_k_qr_square(p->gout, p->n, p->g1, p->ld, st->stream));
    DS_CHECK(potrf_lower(ctx, p->g1, p->n1, p->ld, info + 2));
    CUDA_CHECK(ctx, ds_k_gather(p->chk + 4, p->g1, p->n1, p->ld + 1, st->stream));
    double *host = malloc((size_t)(4 + p->n1) * sizeof(double));  // once a solve
    if (!host)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int rc = ctx->be->download(ctx, host, p->chk, (size_t)(4 + p->n1) * sizeof(double));
    int flags[3] = {0, 0, 0}, finite = 1;
    double lo = INFINITY, hi = 0.0;
    for (int64_t j = 0; rc == DS_OK && j < p->n1; j++) {
        finite = finite && isfinite(host[4 + j]);
        lo = fmin(lo, host[4 + j]);
        hi = fmax(hi, host[4 + j]);
    }
    if (rc == DS_OK)
        memcpy(flags, host, sizeof flags);
    *ok = rc == DS_OK && flags[1] == 0 && flags[2] == 0 && finite && lo > 0 && hi <= QR_PRECOND_RATIO * lo;
    free(host);
    return rc;
}

// R = R1·R_s into R (n1 × n1) from the factors in the plan.
static int sketch_take(ds_ctx *ctx, const qr_plan *p, double *R)
{
    cuda_state *st = state(ctx);
    const double one = 1.0;
    CUBLAS_CHECK(ctx, cublasDtrmm_64(st->blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T,
                                     CUBLAS_DIAG_NON_UNIT, p->n1, p->n1, &one, p->g1, p->ld, p->rs, p->ld, p->t, p->ld));
    CUDA_CHECK(ctx, ds_k_qr_take_r(p->t, p->ld, p->n1, p->n1, R, st->stream));
    return DS_OK;
}

static int sketch_r(ds_ctx *ctx, const ds_mat *X, const double *y, const qr_plan *p, double *R, int *ok)
{
    DS_CHECK(copy_side(ctx, X, y, p));
    DS_CHECK(sketch_fold(ctx, X, y, p, QR_SEED));
    qr_trace(ctx, "local: fold (the copy beside it)");
    DS_CHECK(sketch_finish(ctx, p));
    qr_trace(ctx, "local: sketch factor");
    DS_CHECK(precondition(ctx, p));
    qr_trace(ctx, "local: precondition");
    DS_CHECK(q1_gram(ctx, p));
    qr_trace(ctx, "local: Q1'Q1");
    DS_CHECK(cholesky_check(ctx, p, ok));
    qr_trace(ctx, "local: Cholesky check");
    return *ok ? sketch_take(ctx, p, R) : DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// The sketch path over every rank's rows (qr_ops.global_r), the default on several GPUs (DSOLVE_QR_GLOBAL=0
// keeps the tree; on 4 H100s, 4 M × 1 000: 109.4 ms against the tree's 114.3): the tree's
// combines are geqrfs of 2·n1 × n1 on one GPU a level (about 18 ms of 101 for 4 M × 1 000 on 4 H200s),
// where here every step that does not shrink with the rows is done once on every rank (the sketch's
// factor, the Cholesky steps) and the ranks only sum: the sketches of their rows (each its own seed;
// the sum is a sketch of all rows), then their blocks' Q1ᵀQ1. R_s is rank 0's, so Q1 is one matrix.

static int global_wanted(void)
{
    const char *v = getenv("DSOLVE_QR_GLOBAL");
    return !(v && v[0] == '0');
}

static int cuda_global_r(ds_ctx *ctx, const ds_mat *X, const double *y, double *work, double *R, int *done)
{
    const int64_t m = X->rows, n1 = X->cols + 1;
    *done = 0;
    // Every rank must ask for it, and all rows together must be tall enough for the sketch (use_sketch:
    // DSOLVE_QR_SKETCH applies).
    int64_t mine[2] = {m, global_wanted()}, all[2] = {0, 0};
    if (MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_SUM, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "qr: MPI_Allreduce failed on rank %d", ctx->rank);
    if (all[1] != ctx->nranks || n1 > INT_MAX / 4 || !use_sketch(all[0], n1))
        return DS_OK;
    qr_plan p;
    plan_make(m, X->cols, work, &p);
    const uint64_t seed = QR_SEED ^ (0x9e3779b97f4a7c15ull * (uint64_t)(ctx->rank + 1));
    int rc = m > 0 ? copy_side(ctx, X, y, &p) : DS_OK;
    if (rc == DS_OK)
        rc = sketch_fold(ctx, X, y, &p, seed);
    qr_trace(ctx, "global: copy and fold");
    DS_CHECK(ctx_agree(ctx, rc));
    DS_CHECK(ctx->be->allreduce_sum(ctx, p.b1, 2 * p.b * p.ld));
    qr_trace(ctx, "global: sketch allreduce");
    DS_CHECK(ctx_agree(ctx, sketch_finish(ctx, &p)));
    qr_trace(ctx, "global: sketch factor");
    DS_CHECK(qr_bcast(ctx, p.rs, p.ld * p.n1));  // rank 0's R_s on every rank, bit for bit
    qr_trace(ctx, "global: R_s broadcast");
    rc = m > 0 ? precondition(ctx, &p) : DS_OK;
    qr_trace(ctx, "global: precondition");
    if (rc == DS_OK)
        rc = q1_gram(ctx, &p);
    qr_trace(ctx, "global: Q1'Q1");
    DS_CHECK(ctx_agree(ctx, rc));
    DS_CHECK(ctx->be->allreduce_sum(ctx, p.gout, p.n * p.n + p.n + 1));
    qr_trace(ctx, "global: Q1'Q1 allreduce");
    int ok = 0, every = 0;
    DS_CHECK(ctx_agree(ctx, cholesky_check(ctx, &p, &ok)));
    qr_trace(ctx, "global: Cholesky check");
    if (MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "qr: MPI_Allreduce failed on rank %d", ctx->rank);
    if (!every)  // a breakdown or a poor sketch: each rank's local_r, then the tree
        return DS_OK;
    DS_CHECK(sketch_take(ctx, &p, R));
    *done = 1;
    return DS_OK;
}

static int cuda_local_r(ds_ctx *ctx, const ds_mat *X, const double *y, double *work, double *R)
{
    const int64_t m = X->rows, n1 = X->cols + 1;
    if (n1 > INT_MAX / 4)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "qr: %lld columns exceed cuSOLVER's int", (long long)X->cols);
    if (m == 0) {
        CUDA_CHECK(ctx, ds_k_fill(R, n1 * n1, 0.0, state(ctx)->stream));
        return DS_OK;
    }
    if (use_sketch(m, n1)) {
        qr_plan p;
        int ok = 0;
        plan_make(m, X->cols, work, &p);
        DS_CHECK(sketch_r(ctx, X, y, &p, R, &ok));
        if (ok)
            return DS_OK;
    }
    return direct_r(ctx, X, y, work, R);
}

// ---------------------------------------------------------------------------------------------------
// The tree's step, the solve and the norms

static int cuda_stack_r(ds_ctx *ctx, const double *R0, const double *R1, int64_t n1, double *out)
{
    const int64_t ld = 2 * n1;
    cusolverDnParams_t prm;
    SOLVER_CHECK(ctx, cusolverDnCreateParams(&prm));
    size_t dwords = 0;
    double *S = NULL;
    int rc = geqrf_size(ctx, prm, (double *)R0, ld, n1, ld, &dwords);
    if (rc == DS_OK)
        rc = scratch_reserve(ctx, (size_t)(ld * n1) + dwords + (size_t)n1 + 1, &S);
    if (rc == DS_OK && ds_k_qr_stack(R0, R1, n1, S, state(ctx)->stream) != cudaSuccess)
        rc = ds_fail(&ctx->msg, DS_ERR_RUNTIME, "qr: the stacking kernel failed to launch");
    if (rc == DS_OK)
        rc = geqrf_run(ctx, prm, S, ld, n1, ld, S + ld * n1, dwords, out);
    cusolverDnDestroyParams(prm);
    return rc;
}

static int cuda_solve(ds_ctx *ctx, const double *R, int64_t n, double *a)
{
    cuda_state *st = state(ctx);
    if (n == 0)
        return DS_OK;
    CUDA_CHECK(ctx, cudaMemcpyAsync(a, R + n * (n + 1), (size_t)n * sizeof(double), cudaMemcpyDeviceToDevice,
                                    st->stream));
    CUBLAS_CHECK(ctx, cublasDtrsv_64(st->blas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, n, R, n + 1,
                                     a, 1));
    return DS_OK;
}

static int cuda_col_norms(ds_ctx *ctx, const double *R, int64_t n1, double *out)
{
    CUDA_CHECK(ctx, ds_k_qr_col_norms(R, n1, out, state(ctx)->stream));
    return DS_OK;
}

const qr_ops qr_ops_cuda = {
    .local_work = cuda_local_work,
    .local_r = cuda_local_r,
    .global_r = cuda_global_r,
    .stack_r = cuda_stack_r,
    .solve = cuda_solve,
    .col_norms = cuda_col_norms,
};
