// gram_cuda.c: G = XᵀX and c = Xᵀy for f64 X on the CUDA backend, the product that dominates the Gram
// route, cholesky and the network's output fit. Two plans, each writing the same symmetric G on every run
// (the reduction's order is fixed):
//   tiled (below 2 000 columns) the n columns in tiles of t, the tiles on and above the diagonal (about half of a full
//         GEMM's flops, as in SYRK), each split over ks chunks of rows; one batched GEMM per tile shape,
//         the smaller shapes on side streams beside the first (DSOLVE_GRAM_CONCURRENT=0: one after another,
//         the same bits);
//   syrk  cuBLAS DSYRK on row chunks: X of 2 000 columns and more (measured faster there), or any X
//         with DSOLVE_GRAM_KSPLIT=0 (DSOLVE_GRAM_KSPLIT=K > 0 gives the tiles K row chunks at any width).
// Uniform tiles (the default; DSOLVE_GRAM_UNIFORM=0: a narrower last tile): where n is not a multiple of
// t, the last tile starts at n − t (overlapping the one before it), so that every GEMM is t × t, one
// batched call for each row-chunk length (the narrow last tile column ran at 2/3 of the others' rate on an
// H100; uniform tiles took XᵀX from 2.56 to 2.52 ms there, 2026-11-26); its GEMMs write their own slots of
// partials padded to T·t, and the reduction reads G's last columns from there.
// DSOLVE_GRAM_TILE and DSOLVE_GRAM_KSPLIT override the tiled plan's shape. Tried on 2 × H100 (2026-11-26,
// docs/performance.md) and not kept: the same tile GEMMs in one grouped batched call (1.5× slower), and one
// strided-batched GEMM per panel of t rows of G (5-86 % slower for t = 32..128). On one H200 (2026-11-28,
// 8f6a9fe, reverted): such panels of 64 on cuBLASLt with its 64 × 64 CTA tile, 8 row chunks, 4 streams,
// 2.68 against 2.47 ms for the seed problem and 132 against 107 ms for 4 M rows; one cuBLASLt call a
// 128-wide tile over 8 streams ran 13 % faster than these batched GEMMs in jobs/experiments/gram_lt.cu
// (not tried inside dsolve).
// The FP16 Gram (gram_xtx_half, cholesky's first attempt): each column of [X y] scaled by a power of two
// from a sample of 1 024 rows (the sample's largest magnitude near 2^−6, 21 binades under FP16's largest),
// rounded to FP16 (TF32's 10 bits of mantissa, twice its tensor-core rate and half its bytes) a group of
// rows at a time into one of two buffers (zero columns pad a row to a whole number of tiles), while the
// group before it is multiplied: one batched tensor-core GEMM a group (float sums), a tile pair (I ≤ J, as
// in the tiled plan) of each of ks row chunks (half_chunks: about HALF_KSPLIT, as many as fill whole waves
// of the GPU's multiprocessors), each chunk summing into its own float partial, the partials added in
// double and scaled back at the end. A value that leaves FP16's range after its column's scale becomes
// infinite, and so does G's diagonal, which the range check after the product sees (then X'X in double).
// Measured on one H100 (2026-11-28, jobs/experiments/gram_half.cu, [X y] of 100 000 × 1 001, tiles of 128,
// 11 chunks): the rounding 335 µs and the products 195 µs in FP16 against 445 and 569 µs in TF32 (the
// previous plan), G's error of the same size (4-6e-5 of √(G_ii·G_jj) at most); tiles of 256 (16 chunks)
// 201 µs, of 512 224 µs. Before that, in TF32 (2026-11-27): tiles of 128 1.19 ms with the conversion, of
// 256 1.20, of 64 1.45, one full product a chunk 1.48, and the product 1 001 wide, unpadded, 2.37 ms
// (cuBLAS's kernels for sides not a multiple of 4 are far slower).
// provides: gram_xtx_f64, gram_xtx_half
#define _POSIX_C_SOURCE 200809L

#include <limits.h>

#include "backend/backend_cuda.h"
#include "solve/gram_cuda.h"
#include "solve/solve_kernels.h"

// From GRAM_SYRK_COLS columns the plan is DSYRK, and from GRAM_SYRK_COLS_TALL when a rank has at least
// GRAM_SYRK_ROWS rows (gram_make_plan).
enum { GRAM_SYRK_COLS = 2000, GRAM_SYRK_COLS_TALL = 1500, GRAM_SYRK_ROWS = 200000 };
#define HALF_GROUP_BYTES ((int64_t)256 << 20)
enum { HALF_TILE = 128, HALF_KSPLIT = 16, HALF_GROUPS = 1 };

typedef struct gram_plan {
    int64_t t, T, ks, kc;  // tile width, tiles per side, row chunks, rows per chunk
    int64_t ldp;           // the partials' side: n, or T·t for uniform tiles
} gram_plan;

typedef struct gram_group {
    int64_t wi, wj, k;  // the shape of its GEMMs
    int64_t off, cnt;   // its pointers: A at off, B at pairs + off, C at 2·pairs + off
} gram_group;

static int64_t env_int(const char *name, int64_t fallback)
{
    const char *v = getenv(name);
    char *end = NULL;
    long long x = v ? strtoll(v, &end, 10) : 0;
    return v && end != v && *end == '\0' && x >= 0 ? (int64_t)x : fallback;
}

static gram_plan gram_make_plan(int64_t m, int64_t n)
{
    gram_plan p;
    // Measured on an H200 (n = 1 000; jobs/results): tiles of 128 in 16 row chunks took 2.54 ms for 10⁵
    // rows and 113 ms for 4·10⁶, against 3.07 and 127 ms for DSYRK on chunks of 32 768 rows; 8 chunks
    // took 2.90 ms, 24 to 48 chunks 2.61 to 3.05 ms, and tiles of 64, 96, 160, 192 or 256 were slower at
    // every chunk count tried (4 to 48).
    p.t = env_int("DSOLVE_GRAM_TILE", n <= 128 ? n : 128);
    p.t = p.t < 32 ? 32 : (p.t + 31) / 32 * 32;
    p.T = (n + p.t - 1) / p.t;
    p.ldp = p.T > 1 && n % p.t != 0 && env_int("DSOLVE_GRAM_UNIFORM", 1) != 0 ? p.T * p.t : n;
    int64_t ks = m / 1024;  // 16 chunks, each of at least 1 024 rows
    ks = ks > 16 ? 16 : ks < 1 ? 1 : ks;
    while (ks > 1 && (double)ks * p.ldp * p.ldp * 8 > 2e9)  // partials stay under 2 GB
        ks--;
    // Wide X: cuBLAS DSYRK on row chunks beats the tiles from 2 000 columns (one H100, 2026-11-27, XᵀX in
    // ms, DSYRK against tiles: 200 000 × 2 000 15.6 / 21.9, 200 000 × 3 000 36.4 / 52.1, 150 000 × 4 000
    // 49.4 / 63.9, 100 000 × 6 000 80.0 / 95.8), the tiles below it (100 000 × 1 000 3.63 / 2.56, 10⁶ × 1 000
    // 36.4 / 25.9). Between them (the same H100s, 2026-11-27, afternoon): DSYRK holds 37-39 TFLOP/s of
    // m·n² at 1 500 columns while the tiles fall with the rows (100 000 × 1 500 5.73 / 5.18, 200 000 × 1 500
    // 11.5 / 13.2, 400 000 × 1 500 23.8 / 29.9, 10⁶ × 1 500 60.6 / 88.2); the tiles keep 1 250 (100 000 and
    // 200 000 rows: 5.09 / 3.94, 10.2 / 9.2) and 1 750 (100 000 rows: 9.97 / 7.06; 200 000: 19.0 / 18.4,
    // within 3 %).
    const int syrk = n >= GRAM_SYRK_COLS || (n >= GRAM_SYRK_COLS_TALL && m >= GRAM_SYRK_ROWS);
    p.ks = env_int("DSOLVE_GRAM_KSPLIT", syrk ? 0 : ks);
    if (p.ks > 0 && (m + p.ks - 1) / p.ks > INT_MAX)  // cuBLAS's batched GEMMs take k as int
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
    cuda_release(ctx, st->ptrs);
    st->ptrs = NULL;
    st->ptrs_len = 0;
    DS_CHECK(cuda_alloc(ctx, (void **)&st->ptrs, count * sizeof(double *)));
    st->ptrs_len = count;
    return DS_OK;
}

// Visits every (chunk, tile) pair: fill == 0 sorts them into groups by shape and counts them; fill == 1
// writes their A, B and C pointers into host at their group's place (all A, then all B, then all C).
static void gram_pairs(const double *X, double *P, int64_t m, int64_t n, const gram_plan *p, gram_group *g,
                       int *ng, const double **host, int fill)
{
    const int uniform = p->ldp != n;  // the last tile t wide from n − t, else r wide from (T − 1)·t
    const int64_t pairs = p->T * (p->T + 1) / 2 * p->ks, last = uniform ? n - p->t : (p->T - 1) * p->t;
    const int64_t r = n - last;
    int64_t cursor[8] = {0};
    for (int64_t c = 0; c < p->ks; c++)
        for (int64_t I = 0; I < p->T; I++)
            for (int64_t J = I; J < p->T; J++) {
                const int64_t k0 = c * p->kc, k = m - k0 < p->kc ? m - k0 : p->kc;
                const int64_t wi = I == p->T - 1 ? r : p->t, wj = J == p->T - 1 ? r : p->t;
                int q = 0;
                while (q < *ng && !(g[q].wi == wi && g[q].wj == wj && g[q].k == k))
                    q++;
                if (q == *ng) {  // shapes: (t, t), (t, r), (r, r), each with kc or the last chunk's k
                    DS_ASSERT(!fill && q < 8);
                    g[q] = (gram_group){wi, wj, k, 0, 0};
                    (*ng)++;
                }
                if (!fill) {
                    g[q].cnt++;
                    continue;
                }
                const int64_t at = g[q].off + cursor[q]++;
                host[at] = X + (I == p->T - 1 ? last : I * p->t) + k0 * n;
                host[pairs + at] = X + (J == p->T - 1 ? last : J * p->t) + k0 * n;
                host[2 * pairs + at] = P + c * p->ldp * p->ldp + I * p->t + J * p->t * p->ldp;
            }
}

// The side streams 1 .. used start after what the main stream has queued (side 0 computes Xᵀy).
static int fork_sides(ds_ctx *ctx, int used)
{
    cuda_state *st = state(ctx);
    if (used > 0)
        CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
    for (int s = 1; s <= used; s++)
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[s], st->fork, 0));
    return DS_OK;
}

static int join_sides(ds_ctx *ctx, int used)
{
    cuda_state *st = state(ctx);
    for (int s = 1; s <= used; s++) {
        CUDA_CHECK(ctx, cudaEventRecord(st->join[s], st->side[s]));
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[s], 0));
    }
    return DS_OK;
}

// The tiled plan: every (chunk, tile) GEMM from pointer arrays, into the partials P.
static int gram_tiled(ds_ctx *ctx, const double *X, int64_t m, int64_t n, const gram_plan *p, double *P)
{
    cuda_state *st = state(ctx);
    const int64_t pairs = p->T * (p->T + 1) / 2 * p->ks;
    DS_CHECK(ptrs_reserve(ctx, (size_t)(3 * pairs)));
    const double **host = malloc((size_t)(3 * pairs) * sizeof *host);
    if (!host)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    gram_group g[8];
    int ng = 0;
    gram_pairs(X, P, m, n, p, g, &ng, host, 0);
    for (int q = 1; q < ng; q++)
        g[q].off = g[q - 1].off + g[q - 1].cnt;
    gram_pairs(X, P, m, n, p, g, &ng, host, 1);
    cudaError_t up = cudaMemcpyAsync(st->ptrs, host, (size_t)(3 * pairs) * sizeof *host, cudaMemcpyHostToDevice,
                                     st->stream);
    DS_CHECK(cuda_wait(ctx, NULL));  // host is pageable and freed next
    free(host);
    CUDA_CHECK(ctx, up);
    const double **A = st->ptrs, **B = st->ptrs + pairs;
    double *const *C = (double *const *)(st->ptrs + 2 * pairs);
    // The groups after the first (the last tile column and corner: for n = 1 000 and tiles of 128, 112 and
    // 16 GEMMs beside the first's 448) are too few to fill the GPU alone: they run on side streams, under
    // the first group's last wave (2-2.5 % less time for XᵀX on an H100, n = 1 000).
    const int side = env_int("DSOLVE_GRAM_CONCURRENT", 1) == 1 ? GRAM_STREAMS - 1 : 0;
    const int used = ng - 1 < side ? ng - 1 : side;
    DS_CHECK(fork_sides(ctx, used));
    const double one = 1.0, zero = 0.0;
    for (int q = 0; q < ng; q++) {
        cublasHandle_t h = q == 0 || used == 0 ? st->blas : st->side_blas[1 + (q - 1) % used];
        CUBLAS_CHECK(ctx, cublasDgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)g[q].wi, (int)g[q].wj, (int)g[q].k,
                                             &one, A + g[q].off, (int)n, B + g[q].off, (int)n, &zero, C + g[q].off,
                                             (int)p->ldp, (int)g[q].cnt));
    }
    return join_sides(ctx, used);
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

int gram_xtx_f64(ds_ctx *ctx, const double *X, int64_t m, int64_t n, const double *y, double *out)
{
    cuda_state *st = state(ctx);
    const gram_plan plan = gram_make_plan(m, n);
    if (plan.ks == 0)
        return gram_syrk_streams(ctx, X, m, n, y, out);
    // c = Xᵀy (memory-bound) on side stream 0, under the compute-bound GEMMs.
    const double one = 1.0, zero = 0.0;
    CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
    CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[0], st->fork, 0));
    CUBLAS_CHECK(ctx, cublasDgemv_64(st->side_blas[0], CUBLAS_OP_N, n, m, &one, X, n, y, 1, &zero, out + n * n, 1));
    CUDA_CHECK(ctx, cudaEventRecord(st->join[0], st->side[0]));
    double *P;
    DS_CHECK(scratch_reserve(ctx, (size_t)(plan.ks * plan.ldp * plan.ldp), &P));
    DS_CHECK(gram_tiled(ctx, X, m, n, &plan, P));
    if (plan.ldp == n)
        CUDA_CHECK(ctx, ds_k_gram_reduce(P, (int)plan.ks, n, out, st->stream));
    else
        CUDA_CHECK(ctx, ds_k_gram_reduce_shifted(P, (int)plan.ks, n, plan.ldp, (plan.T - 1) * plan.t, out,
                                                 st->stream));
    CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[0], 0));
    return DS_OK;
}

typedef struct half_plan {
    int64_t ld;          // the side of the products and the rows' stride: n + 1 rounded up to t
    int64_t t, T;        // tile width, tiles a side (T = 1: one full product a chunk)
    int64_t ks, kc;      // chunks a group, rows a chunk (cuBLAS's k)
    int64_t groups;      // groups of ks·kc rows, the last padded with zero rows
} half_plan;

// The row chunks of a group for pairs tile products on nsm multiprocessors: of the counts within a
// third of HALF_KSPLIT either way, the one whose pairs·ks products fill the most of their last wave (the
// timings follow that count as though each product took one CTA), the nearest to HALF_KSPLIT among
// equals. Measured on one H100 in TF32 (2026-11-27, leases AD and AE; XᵀX in ms, 100 000 rows, this
// count against 16; in FP16 11 chunks took 195 µs against 221 for 16, 2026-11-28): 500 columns (13) 0.456 / 0.546, 750 (18) 0.745 / 0.805, 1 000 (11) 1.071 / 1.156, 1 250
// (12) 1.485 / 1.518, 1 500 (22) 2.065 / 2.087, 400 000 × 1 000 (11) 4.05 / 4.11. (The double tiles'
// batched DGEMMs did not follow it: 1 000 columns gained 2 %, 1 250 lost 13 %.)
static int64_t half_chunks(int64_t pairs, int nsm)
{
    int64_t best = HALF_KSPLIT;
    double best_fill = 0;
    for (int64_t ks = HALF_KSPLIT - HALF_KSPLIT / 3; ks <= HALF_KSPLIT + HALF_KSPLIT / 2; ks++) {
        const int64_t ctas = pairs * ks, waves = (ctas + nsm - 1) / nsm;
        const double fill = (double)ctas / (double)(waves * nsm);
        const int64_t d = ks > HALF_KSPLIT ? ks - HALF_KSPLIT : HALF_KSPLIT - ks;
        const int64_t db = best > HALF_KSPLIT ? best - HALF_KSPLIT : HALF_KSPLIT - best;
        if (fill > best_fill + 1e-9 || (fill > best_fill - 1e-9 && d < db)) {
            best = ks;
            best_fill = fill;
        }
    }
    return best;
}

// The plan: tiles of HALF_TILE, half_chunks chunks a group (fewer where their partials would pass 2 GB:
// from about 5 600 columns), and HALF_GROUPS groups (more where a group's buffer would pass
// HALF_GROUP_BYTES or an eighth of the memory free, fewer where a chunk would have fewer than 64 rows).
// DSOLVE_HALF_TILE (0: one full product), _KSPLIT and _GROUPS override them.
static half_plan half_make_plan(const cuda_state *st, int64_t m, int64_t n)
{
    half_plan p;
    const int64_t n1 = n + 1, side = (n1 + 31) / 32 * 32;
    p.t = env_int("DSOLVE_HALF_TILE", HALF_TILE);
    p.t = p.t <= 0 || p.t >= side ? side : (p.t + 31) / 32 * 32;
    p.ld = (n1 + p.t - 1) / p.t * p.t;
    p.T = p.ld / p.t;
    p.ks = env_int("DSOLVE_HALF_KSPLIT", half_chunks(p.T * (p.T + 1) / 2, st->nsm > 0 ? st->nsm : 1));
    p.ks = p.ks < 1 ? 1 : p.ks;
    while (p.ks > 1 && (double)p.ks * p.ld * p.ld * 4 > 2e9)  // the float partials stay under 2 GB (wide X)
        p.ks--;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        free_b = 0;
    int64_t budget = (int64_t)((free_b + cuda_kept_bytes(st) + st->scratch_doubles * sizeof(double)) / 8);
    budget = budget < HALF_GROUP_BYTES ? budget : HALF_GROUP_BYTES;
    const int64_t fit = budget / (2 * p.ld) / p.ks, most = (m + 64 * p.ks - 1) / (64 * p.ks);
    p.groups = env_int("DSOLVE_HALF_GROUPS", HALF_GROUPS);
    p.groups = p.groups > most ? most : p.groups;
    const int64_t need = fit > 0 ? (m + fit * p.ks - 1) / (fit * p.ks) : 1;  // groups within the budget
    p.groups = need > p.groups ? need : p.groups;
    p.groups = p.groups < 1 ? 1 : p.groups;
    const int64_t rows = (m + p.groups - 1) / p.groups;
    p.kc = (rows + p.ks - 1) / p.ks;
    p.groups = (m + p.ks * p.kc - 1) / (p.ks * p.kc);  // no empty group
    return p;
}

// The pointers of the tile products for buffer b: (I ≤ J, chunk c) reads columns I·t and J·t of chunk c's
// rows and writes tile (I, J) of partial c, all A, then all B, then all C.
static void half_pointers(const half_plan *p, const uint16_t *buf, float *P, const void **host)
{
    const int64_t pairs = p->T * (p->T + 1) / 2 * p->ks;
    int64_t at = 0;
    for (int64_t c = 0; c < p->ks; c++)
        for (int64_t I = 0; I < p->T; I++)
            for (int64_t J = I; J < p->T; J++, at++) {
                host[at] = buf + c * p->kc * p->ld + I * p->t;
                host[pairs + at] = buf + c * p->kc * p->ld + J * p->t;
                host[2 * pairs + at] = P + c * p->ld * p->ld + I * p->t + J * p->t * p->ld;
            }
}

// The groups are pipelined: the rounding of one on side stream 0 beside the products of the one before
// it on the main stream, two buffers in turn (in TF32 a single group on one H100 took 1.13-1.17 ms for
// 100 000 × 1 000, two to eight 1.17-1.33 ms: the rounding barely overlaps the products, which fill the
// GPU). The column scales come first, on the main stream.
int gram_xtx_half(ds_ctx *ctx, const void *X, int f32, int64_t m, int64_t n, const double *y, double *out)
{
    cuda_state *st = state(ctx);
    const half_plan p = half_make_plan(st, m, n);
    const int64_t part = p.ld * p.ld, rows = p.ks * p.kc, pairs = p.T * (p.T + 1) / 2 * p.ks;
    if (p.ld > INT_MAX / 4 || p.kc > INT_MAX)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "FP16 X'X: %lld columns or %lld rows a chunk exceed cuBLAS's int",
                       (long long)n, (long long)p.kc);
    const int nbuf = p.groups > 1 ? 2 : 1;
    // scratch, in doubles: the buffers (rows·ld halves each), the float partials, then M and S (ld each)
    // and E (ld ints)
    const int64_t bufs = (nbuf * rows * p.ld + 3) / 4, parts = (p.ks * part + 1) / 2;
    double *scratch;
    DS_CHECK(scratch_reserve(ctx, (size_t)(bufs + parts + 3 * p.ld), &scratch));
    uint16_t *buf[2] = {(uint16_t *)scratch, (uint16_t *)scratch + rows * p.ld};
    float *P = (float *)(scratch + bufs);
    double *S = scratch + bufs + parts + p.ld;
    unsigned long long *M = (unsigned long long *)(scratch + bufs + parts);
    int *E = (int *)(S + p.ld);
    DS_CHECK(ptrs_reserve(ctx, (size_t)(nbuf * 3 * pairs)));
    const void **host = malloc((size_t)(nbuf * 3 * pairs) * sizeof *host);
    if (!host)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int b = 0; b < nbuf; b++)
        half_pointers(&p, buf[b], P, host + b * 3 * pairs);
    cudaError_t up = cudaMemcpyAsync(st->ptrs, host, (size_t)(nbuf * 3 * pairs) * sizeof *host, cudaMemcpyHostToDevice,
                                     st->stream);
    DS_CHECK(cuda_wait(ctx, NULL));  // host is pageable and freed next
    free(host);
    CUDA_CHECK(ctx, up);
    CUDA_CHECK(ctx, ds_k_half_scales(X, f32, y, m, n, p.ld, M, E, S, st->stream));
    // Events: join[b] a rounding into buffer b done, join[2 + b] the products that read it done.
    CUDA_CHECK(ctx, cudaEventRecord(st->fork, st->stream));
    CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[0], st->fork, 0));
    const float one = 1.0f, zero = 0.0f;
    for (int64_t g = 0; g < p.groups; g++) {
        const int b = (int)(g % 2);
        const int64_t r0 = g * rows, nr = m - r0 < rows ? m - r0 : rows;
        if (g >= 2)
            CUDA_CHECK(ctx, cudaStreamWaitEvent(st->side[0], st->join[2 + b], 0));
        CUDA_CHECK(ctx, ds_k_half_rows(X, f32, y, n, r0, nr, rows, p.ld, S, buf[b], st->side[0]));
        CUDA_CHECK(ctx, cudaEventRecord(st->join[b], st->side[0]));
        CUDA_CHECK(ctx, cudaStreamWaitEvent(st->stream, st->join[b], 0));
        const void *const *A = (const void *const *)st->ptrs + b * 3 * pairs;
        // C = Aᵀ·B on every tile pair (column-major: the t × kc slices of the ld × kc chunk, one transposed)
        CUBLAS_CHECK(ctx, cublasGemmBatchedEx(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)p.t, (int)p.t, (int)p.kc, &one,
                                              A, CUDA_R_16F, (int)p.ld, A + pairs, CUDA_R_16F, (int)p.ld,
                                              g == 0 ? &zero : &one, (void *const *)(A + 2 * pairs), CUDA_R_32F,
                                              (int)p.ld, (int)pairs, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CUDA_CHECK(ctx, cudaEventRecord(st->join[2 + b], st->stream));
    }
    CUDA_CHECK(ctx, ds_k_gram_reduce_aug_half(P, (int)p.ks, n, p.ld, part, E, out, st->stream));
    return DS_OK;
}
