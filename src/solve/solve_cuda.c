// solve_cuda.c: SolveBak's operations on the CUDA backend (solve_ops.h states their contracts): the Gram
// products (cuBLAS: strided-batched GEMMs for the block Grams, a tiled split-K product or chunked DSYRK
// for XᵀX), the launches of kernels/solve for the fused passes, block steps and Gram sweeps, the block
// solve's (pseudo-inverses, block sums, coarse products and step), and the equilibrated Cholesky factor
// and solve (cuSOLVER potrf/potrs).
// provides: solve_ops_cuda
#define _POSIX_C_SOURCE 200809L

#include <limits.h>

#include "backend/backend_cuda.h"
#include "solve/solve_kernels.h"
#include "solve/solve_ops.h"

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

// The tiled Gram product (f64): the n columns are cut into tiles of t (a multiple of 32) and only the
// tiles on and above the diagonal are multiplied (about half of a full GEMM's flops, as in SYRK); each
// tile is split over ks chunks of rows so that the batched GEMMs (one per tile shape) fill the GPU, and
// a reduction sums the partials into the full symmetric G.
// DSOLVE_GRAM_TILE and DSOLVE_GRAM_KSPLIT override the plan; DSOLVE_GRAM_KSPLIT=0 selects cuBLAS DSYRK.
typedef struct gram_plan {
    int64_t t, T, ks, kc;  // tile width, tiles per side, row chunks, rows per chunk
} gram_plan;

typedef struct gram_group {
    int64_t wi, wj, k;  // the shape of its GEMMs
    int64_t off, cnt;   // its pointers: A at off, B at off + cnt, C at off + 2·cnt
} gram_group;

static int64_t env_int(const char *name, int64_t fallback)
{
    const char *v = getenv(name);
    char *end = NULL;
    long long x = v ? strtoll(v, &end, 10) : 0;
    return v && end != v && *end == '\0' && x >= 0 ? (int64_t)x : fallback;
}

static gram_plan gram_make_plan(const cuda_state *st, int64_t m, int64_t n)
{
    gram_plan p;
    // Measured on an H200 (n = 1 000; jobs/results): tiles of 128 in 16 row chunks took 2.54 ms for 10⁵
    // rows and 113 ms for 4·10⁶, against 3.07 and 127 ms for DSYRK on chunks of 32 768 rows; 8 chunks
    // took 2.90 ms, 24 to 48 chunks 2.61 to 3.05 ms, and tiles of 64, 96, 160, 192 or 256 were slower at
    // every chunk count tried (4 to 48).
    p.t = env_int("DSOLVE_GRAM_TILE", n <= 128 ? n : 128);
    p.t = p.t < 32 ? 32 : (p.t + 31) / 32 * 32;
    p.T = (n + p.t - 1) / p.t;
    int64_t ks = m / 1024;  // 16 chunks, each of at least 1 024 rows
    ks = ks > 16 ? 16 : ks < 1 ? 1 : ks;
    while (ks > 1 && (double)ks * n * n * 8 > 2e9)  // partials stay under 2 GB
        ks--;
    (void)st;
    p.ks = env_int("DSOLVE_GRAM_KSPLIT", ks);
    if (p.ks > 0 && (m + p.ks - 1) / p.ks > INT_MAX)  // cuBLAS's batched GEMM takes k as int
        p.ks = (m + INT_MAX - 1) / INT_MAX;
    p.kc = p.ks > 0 ? (m + p.ks - 1) / p.ks : m;
    if (p.ks > 0)
        p.ks = (m + p.kc - 1) / p.kc;  // no empty chunk
    return p;
}

static int ptrs_reserve(ds_ctx *ctx, size_t count)
{
    cuda_state *st = state(ctx);
    if (count <= st->ptrs_len)
        return DS_OK;
    DS_CHECK(cuda_wait(ctx, NULL));
    cudaFree(st->ptrs);
    st->ptrs = NULL;
    st->ptrs_len = 0;
    DS_CHECK(cuda_alloc(ctx, (void **)&st->ptrs, count * sizeof(double *)));
    st->ptrs_len = count;
    return DS_OK;
}

// Visits every (chunk, tile) pair: fill == 0 sorts them into groups by shape and counts them; fill == 1
// writes their A, B and C pointers into host at their group's place.
static int gram_pairs(const double *X, double *P, int64_t m, int64_t n, const gram_plan *p, gram_group *g,
                      int *ng, const double **host, int fill)
{
    const int64_t r = n - (p->T - 1) * p->t;
    int64_t cursor[8] = {0};
    for (int64_t c = 0; c < p->ks; c++)
        for (int64_t I = 0; I < p->T; I++)
            for (int64_t J = I; J < p->T; J++) {
                const int64_t k0 = c * p->kc, k = m - k0 < p->kc ? m - k0 : p->kc;
                const int64_t wi = I == p->T - 1 ? r : p->t, wj = J == p->T - 1 ? r : p->t;
                int q = 0;
                while (q < *ng && !(g[q].wi == wi && g[q].wj == wj && g[q].k == k))
                    q++;
                if (q == *ng) {
                    DS_ASSERT(!fill && q < 8);
                    g[q] = (gram_group){wi, wj, k, 0, 0};
                    (*ng)++;
                }
                if (!fill) {
                    g[q].cnt++;
                    continue;
                }
                const int64_t at = g[q].off + cursor[q]++;
                host[at] = X + I * p->t + k0 * n;
                host[at + g[q].cnt] = X + J * p->t + k0 * n;
                host[at + 2 * g[q].cnt] = P + c * n * n + I * p->t + J * p->t * n;
            }
    return DS_OK;
}

static int gram_tiled(ds_ctx *ctx, const double *X, int64_t m, int64_t n, const gram_plan *p, double *G)
{
    cuda_state *st = state(ctx);
    double *P;
    DS_CHECK(scratch_reserve(ctx, (size_t)(p->ks * n * n), &P));
    const int64_t pairs = p->T * (p->T + 1) / 2 * p->ks;
    DS_CHECK(ptrs_reserve(ctx, (size_t)(3 * pairs)));
    const double **host = malloc((size_t)(3 * pairs) * sizeof *host);
    if (!host)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    gram_group g[8];
    int ng = 0;
    gram_pairs(X, P, m, n, p, g, &ng, host, 0);
    for (int q = 1; q < ng; q++)
        g[q].off = g[q - 1].off + 3 * g[q - 1].cnt;
    gram_pairs(X, P, m, n, p, g, &ng, host, 1);
    cudaError_t up = cudaMemcpyAsync(st->ptrs, host, (size_t)(3 * pairs) * sizeof *host, cudaMemcpyHostToDevice,
                                     st->stream);
    DS_CHECK(cuda_wait(ctx, NULL));  // host is pageable and freed next
    free(host);
    CUDA_CHECK(ctx, up);
    // The groups after the first (the last tile column and corner: for n = 1 000 and tiles of 128, 112 and
    // 16 GEMMs beside the first's 448) are too few to fill the GPU alone; DSOLVE_GRAM_CONCURRENT=1 runs them
    // on side streams 1.. (side 0 computes Xᵀy), under the first group's last wave. Each GEMM writes its own
    // part of P, and the reduction's order is fixed: G is the same bits either way. Off by default until
    // measured.
    const int side = env_int("DSOLVE_GRAM_CONCURRENT", 0) == 1 ? GRAM_STREAMS - 1 : 0;
    const int used = ng - 1 < side ? ng - 1 : side;
    if (used > 0)
        CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
    for (int s = 1; s <= used; s++)
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[s], st->fork, 0));
    const double one = 1.0, zero = 0.0;
    for (int q = 0; q < ng; q++) {
        const double **A = st->ptrs + g[q].off;
        cublasHandle_t h = q == 0 || used == 0 ? st->blas : st->side_blas[1 + (q - 1) % used];
        CUBLAS_CHECK(ctx, cublasDgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)g[q].wi, (int)g[q].wj, (int)g[q].k,
                                             &one, A, (int)n, A + g[q].cnt, (int)n, &zero,
                                             (double *const *)(A + 2 * g[q].cnt), (int)n, (int)g[q].cnt));
    }
    for (int s = 1; s <= used; s++) {
        CUDA_CHECK(ctx, cudaEventRecord(st->join[s], st->side[s]));
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[s], 0));
    }
    CUDA_CHECK(ctx, ds_k_gram_reduce(P, (int)p->ks, n, G, st->stream));
    return DS_OK;
}

// G by cuBLAS DSYRK (DSOLVE_GRAM_KSPLIT=0) on chunks of at most GEMM_CHUNK_ROWS rows (one DSYRK over
// 4 M rows ran 7× slower than chunks of 32 768), dealt round-robin to S side streams (DSOLVE_GRAM_STREAMS,
// default 1: 4 concurrent streams were measured slower), each summing into its own partial; c = Xᵀy
// runs meanwhile on the main stream, and a reduction adds the partials into the full symmetric G.
static int gram_syrk_streams(ds_ctx *ctx, const double *X, int64_t m, int64_t n, const double *y, double *out)
{
    cuda_state *st = state(ctx);
    const int64_t chunks = (m + GEMM_CHUNK_ROWS - 1) / GEMM_CHUNK_ROWS;
    int64_t S = env_int("DSOLVE_GRAM_STREAMS", 1);
    S = S < 1 ? 1 : S > GRAM_STREAMS ? GRAM_STREAMS : S;
    S = S > chunks ? chunks : S;
    while (S > 1 && (double)S * n * n * 8 > 2e9)  // partials stay under 2 GB
        S--;
    const int64_t kc = (m + chunks - 1) / chunks;  // near-equal chunks
    double *P = out;  // one stream sums straight into G
    if (S > 1)
        DS_CHECK(scratch_reserve(ctx, (size_t)(S * n * n), &P));
    const double one = 1.0, zero = 0.0;
    CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
    for (int64_t s = 0; s < S; s++)
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[s], st->fork, 0));
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t s = c % S, r0 = c * kc, k = m - r0 < kc ? m - r0 : kc;
        // Partials: the column-major upper triangle (row ≤ column), as ds_k_gram_reduce reads it; G
        // itself: the column-major lower, which is the row-major upper that ds_k_mirror_upper copies.
        CUBLAS_CHECK(ctx, cublasDsyrk_64(st->side_blas[s], S > 1 ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER,
                                         CUBLAS_OP_N, n, k, &one,
                                         X + r0 * n, n, c < S ? &zero : &one, P + s * n * n, n));
    }
    for (int64_t s = 0; s < S; s++)
        CUDA_CHECK(ctx, cudaEventRecord(st->join[s], st->side[s]));
    CUBLAS_CHECK(ctx, cublasDgemv_64(st->blas, CUBLAS_OP_N, n, m, &one, X, n, y, 1, &zero, out + n * n, 1));
    for (int64_t s = 0; s < S; s++)
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[s], 0));
    if (S > 1)
        CUDA_CHECK(ctx, ds_k_gram_reduce(P, (int)S, n, out, st->stream));
    else
        CUDA_CHECK(ctx, ds_k_mirror_upper(out, n, st->stream));
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
    const gram_plan plan = gram_make_plan(st, m, n);
    if (!X->f32 && n > 0 && plan.ks == 0) {
        DS_CHECK(gram_syrk_streams(ctx, (const double *)X->data, m, n, y, out));
    } else if (!X->f32 && n > 0) {
        // c = Xᵀy (memory-bound) on a side stream, under the compute-bound GEMMs.
        const double one = 1.0, zero = 0.0;
        CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[0], st->fork, 0));
        CUBLAS_CHECK(ctx, cublasDgemv_64(st->side_blas[0], CUBLAS_OP_N, n, m, &one, (const double *)X->data, n, y,
                                         1, &zero, out + n * n, 1));
        CUDA_CHECK(ctx, cudaEventRecord(st->join[0], st->side[0]));
        DS_CHECK(gram_tiled(ctx, (const double *)X->data, m, n, &plan, out));
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[0], 0));
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

// ---------------------------------------------------------------------------------------------------
// SolveBak

static int cuda_grad_update(ds_ctx *ctx, const ds_mat *X, double *e, int64_t up_col0, int64_t up_n,
                            const double *coef, int64_t gr_col0, int64_t gr_n, double *gout)
{
    cuda_state *st = state(ctx);
    double *scratch;
    DS_CHECK(scratch_reserve(ctx, ds_k_grad_update_scratch(X->rows, up_n, gr_n, st->nsm), &scratch));
    CUDA_CHECK(ctx, ds_k_grad_update(X->data, X->f32, X->rows, X->cols, e, up_col0, up_n, coef, gr_col0, gr_n,
                                     gout, scratch, st->nsm, st->stream));
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
                                     s->line_search, s->sweeps, scratch, state(ctx)->stream));
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

// cuSOLVER sees the row-major symmetric G as its transpose, the same matrix: its lower triangle (the
// upper of ours) holds the factor, which chol_solve passes back to potrs with the same fill mode.
static int cuda_chol_factor(ds_ctx *ctx, double *G, int64_t n, double *s, int *info)
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
    SOLVER_CHECK(ctx, cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, (int)n, G, (int)n, &lwork));
    double *work;
    DS_CHECK(scratch_reserve(ctx, (size_t)lwork + (size_t)n + 1, &work));  // then the diagonal, then devInfo
    double *diag = work + lwork;
    int *dev_info = (int *)(diag + n);
    SOLVER_CHECK(ctx, cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, (int)n, G, (int)n, work, lwork, dev_info));
    CUDA_CHECK(ctx, ds_k_gather(diag, G, n, n + 1, st->stream));
    double *d = malloc((size_t)n * sizeof(double));  // once a solve, not in a loop
    if (!d)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int rc = ctx->be->download(ctx, info, dev_info, sizeof(int));
    if (rc == DS_OK)
        rc = ctx->be->download(ctx, d, diag, (size_t)n * sizeof(double));
    if (rc == DS_OK && *info == 0)
        *info = chol_pivot_info(d, n);
    free(d);
    return rc;
}

static int cuda_chol_solve(ds_ctx *ctx, const double *F, const double *s, int64_t n, const double *b, double *x,
                           int add)
{
    cuda_state *st = state(ctx);
    if (n == 0)
        return DS_OK;
    cusolverDnHandle_t h;
    DS_CHECK(cuda_solver(ctx, &h));
    double *t;
    DS_CHECK(scratch_reserve(ctx, (size_t)n + 1, &t));  // t[n] holds devInfo
    CUDA_CHECK(ctx, ds_k_scale_vec(s, b, t, n, 0, st->stream));
    SOLVER_CHECK(ctx, cusolverDnDpotrs(h, CUBLAS_FILL_MODE_LOWER, (int)n, 1, F, (int)n, t, (int)n, (int *)(t + n)));
    CUDA_CHECK(ctx, ds_k_scale_vec(s, t, x, n, add, st->stream));
    return DS_OK;
}

extern const struct qr_ops qr_ops_cuda;  // qr_cuda.c

const solve_ops solve_ops_cuda = {
    .block_grams = cuda_block_grams,
    .grad_update = cuda_grad_update,
    .block_step = cuda_block_step,
    .gram = cuda_gram,
    .gram_sweeps = cuda_gram_sweeps,
    .block_pinv = cuda_block_pinv,
    .block_sums = cuda_block_sums,
    .coarse_products = cuda_coarse_products,
    .coarse_step = cuda_coarse_step,
    .chol_factor = cuda_chol_factor,
    .chol_solve = cuda_chol_solve,
    .qr = &qr_ops_cuda,
};
