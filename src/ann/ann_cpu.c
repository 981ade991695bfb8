// ann_cpu.c: the network's operations on the CPU backend (host memory): OpenBLAS for the products,
// LAPACK for the hidden fits and the output solve, POSIX threads for the element-wise tanh and the
// output Gram's blocks.
#define _GNU_SOURCE  // madvise, MADV_HUGEPAGE
#include <cblas.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ann/ann.h"
#include "ann/vtanh.h"
#include "core/exactsum.h"

static int cpu_gather_fit_rows(ds_ctx *ctx, const double *X, int64_t n, const double *z, const int64_t *idx,
                               int64_t count, double *dst)
{
    for (int64_t i = 0; i < count; i++) {
        double *d = dst + i * (n + 2);
        memcpy(d, X + idx[i] * n, (size_t)n * sizeof(double));
        d[n] = 1.0;
        d[n + 1] = z[idx[i]];
    }
    return DS_OK;
}

static int cpu_gather_chunk_rows(ds_ctx *ctx, const double *X, int64_t n, const double *z, int64_t c0,
                                 const int64_t *idx, const int64_t *pos, int64_t count, double *dst)
{
    for (int64_t i = 0; i < count; i++) {
        const int64_t r = idx[i] - c0;
        double *d = dst + pos[i] * (n + 2);
        memcpy(d, X + r * n, (size_t)n * sizeof(double));
        d[n] = 1.0;
        d[n + 1] = z[r];
    }
    return DS_OK;
}

// The routing of ann.h walks a neuron's subset owner by owner: its rows of owner r are one run of A
// and one run of the exchange layout.
static int cpu_route_requests(ds_ctx *ctx, const int64_t *L, int64_t nb, int64_t S, int p, const int64_t *tab,
                              int64_t *req)
{
    const int64_t *at = tab + nb * (p + 1), *start = at + nb * p;
    for (int64_t k = 0; k < nb; k++) {
        const int64_t *lo = tab + k * (p + 1);
        for (int r = 0; r < p; r++)
            for (int64_t j = lo[r]; j < lo[r + 1]; j++)
                req[at[k * p + r] + j - lo[r]] = L[k * S + j] - start[r];
    }
    return DS_OK;
}

static int cpu_route_place(ds_ctx *ctx, const double *recv, int64_t width, int64_t nb, int64_t S, int p,
                           const int64_t *tab, double *A)
{
    const int64_t *at = tab + nb * (p + 1);
    for (int64_t k = 0; k < nb; k++) {
        const int64_t *lo = tab + k * (p + 1);
        for (int r = 0; r < p; r++)
            memcpy(A + (k * S + lo[r]) * width, recv + at[k * p + r] * width,
                   (size_t)((lo[r + 1] - lo[r]) * width) * sizeof(double));
    }
    return DS_OK;
}

// One neuron: A is S rows of (x, 1, z), lda n + 2; t the target; w (n+1) out; G and u scratch.
static int fit_one(const double *A, int64_t S, int64_t n, const double *t, double *w, double *G, double *u)
{
    const int64_t n1 = n + 1, lda = n + 2;
    lapack_int info;
    if (S >= n1) {  // normal equations: (AᵀA) w = Aᵀt
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n1, (int)S, 1.0, A, (int)lda, 0.0, G, (int)n1);
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)S, (int)n1, 1.0, A, (int)lda, t, 1, 0.0, w, 1);
        info = LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', (lapack_int)n1, 1, G, (lapack_int)n1, w, 1);
    } else {  // minimum norm: w = Aᵀ (AAᵀ)⁻¹ t
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)S, (int)n1, 1.0, A, (int)lda, 0.0, G, (int)S);
        memcpy(u, t, (size_t)S * sizeof(double));
        info = LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', (lapack_int)S, 1, G, (lapack_int)S, u, 1);
        if (info == 0)
            cblas_dgemv(CblasRowMajor, CblasTrans, (int)S, (int)n1, 1.0, A, (int)lda, u, 1, 0.0, w, 1);
    }
    int ok = info == 0;
    for (int64_t j = 0; ok && j < n1; j++)
        ok = isfinite(w[j]);
    if (!ok)
        memset(w, 0, (size_t)n1 * sizeof(double));
    return ok;
}

static int64_t cpu_fit_scratch(int64_t nb, int64_t S, int64_t n)
{
    const int64_t g = S >= n + 1 ? n + 1 : S;
    return g * g + 2 * S;  // one neuron at a time: G, the target and u
}

static int cpu_fit(ds_ctx *ctx, const double *A, int64_t nb, int64_t S, int64_t n, int classes, int64_t k0,
                   double *W, int *failed, double *scratch)
{
    const int64_t n1 = n + 1, g = S >= n1 ? n1 : S;
    double *G = scratch, *t = scratch + g * g;
    const double hi = atanh(ANN_TARGET);
    for (int64_t i = 0; i < nb; i++) {
        const double *Ai = A + i * S * (n + 2);
        for (int64_t s = 0; s < S; s++) {
            double z = Ai[s * (n + 2) + n + 1];
            t[s] = classes ? (z == (double)((k0 + i) % classes) ? hi : -hi) : z;
        }
        failed[i] = !fit_one(Ai, S, n, t, W + i * n1, G, t + S);
    }
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// forward: tanh and the constant and target columns over threads, after the product by OpenBLAS; with
// few inputs (the seed's 10) the threads form the products themselves, so that H is written once. The
// tanh is src/vtanh.c's (vectorised, absolute error within 4e-16).

enum { FUSED_MAX_INPUTS = 32 };

typedef struct act_job {
    double *H;
    const double *X, *Wt, *y;  // X: NULL when H already holds the products; Wt: (n + 1) × K, bias row last
    int64_t row0, rows, n, K, outputs, ld;
} act_job;

static void *act_run(void *arg)
{
    const act_job *j = arg;
    for (int64_t i = j->row0; i < j->row0 + j->rows; i++) {
        double *h = j->H + i * j->ld;
        if (j->X)
            ds_tanh_affine(j->X + i * j->n, j->n, j->Wt, j->K, h);
        else
            ds_tanh_shift(h, j->Wt + j->n * j->K, j->K);
        h[j->K] = 1.0;
        if (!j->y)
            continue;
        if (j->outputs == 1 && j->ld > j->K + 1)
            h[j->K + 1] = j->y[i];
        else
            for (int64_t c = 0; c < j->outputs && j->ld > j->K + 1; c++)
                h[j->K + 1 + c] = (double)c == j->y[i] ? 1.0 : 0.0;
    }
    return NULL;
}

// The layer's weights input-major with the bias row last ((n + 1) × K), as act_run takes them.
static double *weights_t(const double *W, int64_t n, int64_t K)
{
    double *Wt = malloc((size_t)((n + 1) * K) * sizeof(double));
    for (int64_t k = 0; Wt && k < K; k++)
        for (int64_t c = 0; c <= n; c++)
            Wt[c * K + k] = W[k * (n + 1) + c];
    return Wt;
}

// Rows row0 .. row0+rows−1 of H into the tile T (proto holds the whole X and y): the product by
// OpenBLAS first when the inputs are too many for act_run to form it.
static void forward_rows(const act_job *proto, const double *W, int64_t row0, int64_t rows, double *T)
{
    act_job j = *proto;
    j.H = T, j.row0 = 0, j.rows = rows;
    j.X = proto->X + row0 * j.n;
    j.y = proto->y ? proto->y + row0 : NULL;
    if (j.n > FUSED_MAX_INPUTS) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)j.K, (int)j.n, 1.0, j.X, (int)j.n, W,
                    (int)(j.n + 1), 0.0, T, (int)j.ld);
        j.X = NULL;
    }
    act_run(&j);
}

enum { MAX_JOBS = 256 };  // threads of run_jobs

// Runs fn on jobs 1 .. count−1 (count ≤ MAX_JOBS) in threads and job 0 here; a job whose thread cannot
// start runs here too.
static void run_jobs(void *(*fn)(void *), void *jobs, size_t size, int count)
{
    pthread_t tid[MAX_JOBS];
    int started[MAX_JOBS] = {0};
    for (int t = 1; t < count; t++)
        started[t] = pthread_create(&tid[t], NULL, fn, (char *)jobs + t * size) == 0;
    for (int t = 0; t < count; t++)
        if (!started[t])
            fn((char *)jobs + t * size);
    for (int t = 1; t < count; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
}

static int cpu_forward(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K,
                       const double *y, int64_t outputs, double *H, int64_t ld)
{
    enum { MAX_THREADS = 64 };
    const int fused = n <= FUSED_MAX_INPUTS;
    double *Wt = weights_t(W, n, K);
    if (!Wt)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (!fused)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)K, (int)n, 1.0, X, (int)n, W, (int)(n + 1),
                    0.0, H, (int)ld);
    int threads = ctx_cores(ctx) < MAX_THREADS ? ctx_cores(ctx) : MAX_THREADS;
    if (rows < 64 * threads)
        threads = 1;
    act_job job[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        int64_t a = rows * t / threads, b = rows * (t + 1) / threads;
        job[t] = (act_job){H, fused ? X : NULL, Wt, y, a, b - a, n, K, outputs, ld};
    }
    run_jobs(act_run, job, sizeof job[0], threads);
    free(Wt);
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// gram_digits: the Gram of H without H, block by block. The rank's cores take whole blocks (the call's
// block b goes to thread b mod T); a thread forms its block GRAM_TILE_BYTES of H at a time (a tile that
// stays in its cache; the tiles are cut from the block's first row, by ld alone) and adds each tile's
// DSYRK, on one OpenBLAS thread, to the block's Gram, whose upper triangle it then splits into digits of
// its own (thread 0 into dig itself). The threads' digits are added into dig at the end: exact, so the
// result does not depend on the thread count, nor a block's Gram on where the block lies. The blocks
// are the unit of parallelism: a rank with fewer blocks than cores leaves some idle (OpenBLAS's own
// threads inside a DSYRK could order the sums by their count). DSOLVE_TRACE=1 prints each rank's phases.

enum { GRAM_TILE_BYTES = 8 << 20, MAX_GRAM_THREADS = MAX_JOBS };
static const int64_t GRAM_MAX_BYTES = (int64_t)2 << 30;

typedef struct gram_job {
    act_job fwd;        // X, Wt, y, n, K, outputs, ld; H is the tile
    const double *W;    // for the product when n > FUSED_MAX_INPUTS
    const ann_fix *fx;
    double *P, *dig;    // the block's Gram (ld × ld, upper triangle); the thread's digits (2·tri)
    int zero;           // 1: dig is this thread's own, zeroed here (its first touch)
    int64_t rows, tile_rows, first, step;  // the call's rows; the blocks first, first + step, …
} gram_job;

// Rows of H a tile: GRAM_TILE_BYTES of them, at least 64, at most a block.
static int64_t gram_tile_rows(int64_t ld, int64_t block)
{
    int64_t t = GRAM_TILE_BYTES / (ld * (int64_t)sizeof(double));
    t = t < 64 ? 64 : t;
    return t < block ? t : block;
}

// dig += the digits of P's upper triangle (ld × ld, row-major) at fx's scales (packed, ann_ops.gram_digits).
static void split_upper(const double *P, int64_t ld, const ann_fix *fx, double *dig)
{
    const int64_t tri = ld * (ld + 1) / 2;
    for (int64_t i = 0, at = 0; i < ld; i++) {
        const double si = fx->s0 * fx->col[i];
        for (int64_t j = i; j < ld; j++, at++)
            exactsum_split(P[i * ld + j], si * fx->col[j], fx->lo, &dig[at], &dig[tri + at]);
    }
}

static void *gram_run(void *arg)
{
    gram_job *j = arg;
    const int64_t ld = j->fwd.ld, block = j->fx->block;
    if (j->zero)
        memset(j->dig, 0, (size_t)(ld * (ld + 1)) * sizeof(double));
    for (int64_t b0 = j->first * block; b0 < j->rows; b0 += j->step * block) {
        const int64_t b1 = b0 + block < j->rows ? b0 + block : j->rows;
        for (int64_t r = b0; r < b1; r += j->tile_rows) {
            const int64_t nr = b1 - r < j->tile_rows ? b1 - r : j->tile_rows;
            forward_rows(&j->fwd, j->W, r, nr, j->fwd.H);
            cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)ld, (int)nr, 1.0, j->fwd.H, (int)ld,
                        r == b0 ? 0.0 : 1.0, j->P, (int)ld);
        }
        split_upper(j->P, ld, j->fx, j->dig);
    }
    return NULL;
}

typedef struct sum_job {
    double *dig;
    double *const *own;  // the other threads' digits
    int count;
    int64_t at0, at1;    // the entries of dig this job adds
} sum_job;

static void *sum_run(void *arg)
{
    const sum_job *s = arg;
    for (int g = 0; g < s->count; g++)
        for (int64_t i = s->at0; i < s->at1; i++)
            s->dig[i] += s->own[g][i];
    return NULL;
}

// One block of memory for the threads: each its block's Gram and tile, and (but thread 0) its digits,
// 2 MB-aligned and advised for transparent huge pages, so that the first touches fault 2 MB at a time.
typedef struct gram_mem {
    char *base;
    size_t per;
} gram_mem;

static int gram_mem_open(ds_ctx *ctx, int64_t ld, int64_t tile, int threads, gram_mem *gm)
{
    const size_t huge = (size_t)2 << 20;
    const size_t doubles = (size_t)(ld * ld + tile * ld + ld * (ld + 1));
    gm->per = ((doubles * sizeof(double) + huge - 1) / huge) * huge;
    gm->base = aligned_alloc(huge, gm->per * (size_t)threads);
    if (!gm->base)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for the Gram of H (%d threads of %.0f MB)",
                       threads, (double)gm->per / 1e6);
    (void)madvise(gm->base, gm->per * (size_t)threads, MADV_HUGEPAGE);  // a hint: no huge pages is no error
    return DS_OK;
}

int ann_cpu_gram_digits(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K,
                        const double *y, int64_t outputs, int64_t ld, const ann_fix *fx, int threads, double *dig)
{
    const int64_t blocks = (rows + fx->block - 1) / fx->block, tile = gram_tile_rows(ld, fx->block);
    threads = threads < 1 ? 1 : threads > MAX_GRAM_THREADS ? MAX_GRAM_THREADS : threads;
    threads = blocks < threads ? (blocks > 0 ? (int)blocks : 1) : threads;
    double *Wt = weights_t(W, n, K), *own[MAX_GRAM_THREADS] = {NULL};
    gram_mem gm = {NULL, 0};
    int rc = Wt ? gram_mem_open(ctx, ld, tile, threads, &gm) : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc != DS_OK) {
        free(Wt);
        return rc;
    }
    gram_job job[MAX_GRAM_THREADS];
    for (int t = 0; t < threads; t++) {
        double *P = (double *)(gm.base + gm.per * (size_t)t), *tl = P + ld * ld;
        own[t] = t == 0 ? dig : tl + tile * ld;
        job[t] = (gram_job){{tl, X, Wt, y, 0, 0, n, K, outputs, ld}, W, fx, P, own[t], t > 0, rows, tile, t, threads};
    }
    const double t0 = MPI_Wtime();
    const int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    run_jobs(gram_run, job, sizeof job[0], threads);
    openblas_set_num_threads(blas_threads);
    const double t1 = MPI_Wtime();
    sum_job sj[MAX_GRAM_THREADS];
    const int64_t len = ld * (ld + 1);
    for (int t = 0; t < threads; t++)  // the threads' digits into dig, over equal shares of its entries
        sj[t] = (sum_job){dig, own + 1, threads - 1, len * t / threads, len * (t + 1) / threads};
    if (threads > 1)
        run_jobs(sum_run, sj, sizeof sj[0], threads);
    const char *trace = getenv("DSOLVE_TRACE");
    if (trace && *trace && strcmp(trace, "0") != 0)
        fprintf(stderr, "trace: ann gram rank %d/%d (cpu): %lld rows in %lld blocks, %d threads, tiles of %lld rows; "
                "tiles, DSYRK and digits %.4f s, sum %.4f s\n", ctx->rank, ctx->nranks, (long long)rows,
                (long long)blocks, threads, (long long)tile, t1 - t0, MPI_Wtime() - t1);
    free(gm.base), free(Wt);
    return DS_OK;
}

static int64_t cpu_gram_scratch(int64_t ld, int64_t block)
{
    return 0;  // the op takes host memory of its own, by its thread count
}

static int cpu_gram_digits(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K,
                           const double *y, int64_t outputs, int64_t ld, const ann_fix *fx, double *scratch,
                           double *dig)
{
    const int64_t per_thread = (2 * ld * ld + gram_tile_rows(ld, fx->block) * ld) * (int64_t)sizeof(double);
    int64_t threads = ctx_cores(ctx) < MAX_GRAM_THREADS ? ctx_cores(ctx) : MAX_GRAM_THREADS;
    threads = threads * per_thread > GRAM_MAX_BYTES ? GRAM_MAX_BYTES / per_thread : threads;
    return ann_cpu_gram_digits(ctx, X, rows, n, W, K, y, outputs, ld, fx, threads > 1 ? (int)threads : 1, dig);
}

static int cpu_gram_join(ds_ctx *ctx, const double *dig, int64_t ld, const ann_fix *fx, double *S)
{
    const int64_t tri = ld * (ld + 1) / 2;
    for (int64_t i = 0, at = 0; i < ld; i++)
        for (int64_t j = i; j < ld; j++, at++)
            S[i * ld + j] = S[j * ld + i] =
                exactsum_join(dig[at], dig[tri + at], fx->s0 * fx->col[i] * fx->col[j], fx->lo);
    return DS_OK;
}

static int cpu_output(ds_ctx *ctx, const double *H, int64_t rows, int64_t ld, int64_t K, const double *V,
                      int64_t outputs, double *P)
{
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)outputs, (int)(K + 1), 1.0, H, (int)ld, V,
                (int)outputs, 0.0, P, (int)outputs);
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// The output solve: Cholesky of HᵀH + λI, else the eigendecomposition with small eigenvalues dropped.

static int solve_eigen(ds_ctx *ctx, double *A, int64_t K1, const double *B, int64_t ldb, int64_t outputs, double *V)
{
    double *e = malloc((size_t)K1 * sizeof(double)), *QtB = malloc((size_t)(K1 * outputs) * sizeof(double));
    int rc = e && QtB ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for the output solve");
    if (rc == DS_OK && LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)K1, A, (lapack_int)K1, e) != 0)
        rc = ds_fail(&ctx->msg, DS_ERR_NUMERIC, "the output layer's eigendecomposition did not converge");
    if (rc == DS_OK) {  // A now holds the eigenvectors as columns: V = Q diag(1/e) Qᵀ B
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K1, (int)outputs, (int)K1, 1.0, A, (int)K1, B,
                    (int)ldb, 0.0, QtB, (int)outputs);
        const double cut = e[K1 - 1] * (double)K1 * ANN_EIGEN_CUT;
        for (int64_t i = 0; i < K1; i++)
            for (int64_t c = 0; c < outputs; c++)
                QtB[i * outputs + c] = e[i] > cut ? QtB[i * outputs + c] / e[i] : 0.0;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)K1, (int)outputs, (int)K1, 1.0, A, (int)K1, QtB,
                    (int)outputs, 0.0, V, (int)outputs);
    }
    free(e), free(QtB);
    return rc;
}

static int cpu_solve(ds_ctx *ctx, double *S, int64_t ld, int64_t K1, int64_t outputs, double lambda, double *V,
                     char *route, size_t route_len)
{
    double *A = malloc((size_t)(K1 * K1) * sizeof(double));
    if (!A)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for the output solve");
    for (int64_t i = 0; i < K1; i++) {
        memcpy(A + i * K1, S + i * ld, (size_t)K1 * sizeof(double));
        A[i * K1 + i] += lambda;
        for (int64_t c = 0; c < outputs; c++)
            V[i * outputs + c] = S[i * ld + K1 + c];
    }
    int rc = DS_OK;
    if (LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', (lapack_int)K1, (lapack_int)outputs, A, (lapack_int)K1, V,
                      (lapack_int)outputs) == 0) {
        snprintf(route, route_len, "cholesky");
    } else {  // A and V were overwritten: take them from S again
        for (int64_t i = 0; i < K1; i++) {
            memcpy(A + i * K1, S + i * ld, (size_t)K1 * sizeof(double));
            A[i * K1 + i] += lambda;
        }
        rc = solve_eigen(ctx, A, K1, S + K1, ld, outputs, V);
        snprintf(route, route_len, "eigen");
    }
    free(A);
    return rc;
}

const ann_ops ann_ops_cpu = {
    .gather_fit_rows = cpu_gather_fit_rows,
    .gather_chunk_rows = cpu_gather_chunk_rows,
    .route_requests = cpu_route_requests,
    .route_place = cpu_route_place,
    .fit_scratch = cpu_fit_scratch,
    .fit = cpu_fit,
    .forward = cpu_forward,
    .gram_scratch = cpu_gram_scratch,
    .gram_digits = cpu_gram_digits,
    .gram_join = cpu_gram_join,
    .output = cpu_output,
    .solve = cpu_solve,
};
