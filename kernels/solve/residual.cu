// residual.cu: the residual route of SolveBak on the GPU: the fused pass over X (grad_update) and
// the block step. X is rows × cols row-major, float or double (template T); vectors are double and
// every sum is double, in a fixed order (no floating-point atomics), so results are bit-identical run
// to run on the same device.
// provides: ds_k_grad_update, ds_k_grad_update_scratch, ds_k_block_step
#include "backend/backend_kernels.h"
#include "solve/solve_kernels.h"
#include "common/reduce.cuh"

namespace {

// ---------------------------------------------------------------------------------------------------
// grad_update, fast path (up_n, gr_n ≤ kFastMax): one pass over the rows.
//
// A group of G lanes (G = 8, 16 or 32) takes one row at a time; lane l of the group holds columns
// l, l+G, .., l+(K−1)G of both slabs, so consecutive lanes read consecutive columns (coalesced).
// Per row: s = X[i, up]·coef (a group reduction by shuffles), e_i −= s, then the lane accumulates
// X[i, gr]·e_i in registers and e_i². Rows are taken grid-stride, U at a time with all their loads
// issued before the first use, to keep enough bytes in flight for HBM.
// At the end, each CTA reduces its groups into partial[blockIdx][0 .. gr_n]; reduce_parts then sums
// the CTAs' partials in a fixed order, one CTA per column (a single CTA doing all columns was ~20 µs).

constexpr int kFastMax = 128;
constexpr int kGuThreads = 256;
constexpr int kGuBlocksPerSm = 4;  // with ≤ 64 registers per thread, 4 × 256 threads fit per SM

// One long kernel: the loads in flight, the group's update of e and the CTA's reduction share its
// registers and shared memory; split, e would go through memory once more.
template <typename T, int G, int K>
__global__ void __launch_bounds__(kGuThreads, kGuBlocksPerSm)
    grad_update_fused(const T *__restrict__ X, int64_t rows, int64_t cols, double *__restrict__ e,
                      int64_t up0, int up_n, const double *__restrict__ coef, int64_t gr0, int gr_n,
                      double *__restrict__ partial)
{
    constexpr int U = (K <= 2) ? 2 : 1;  // rows per iteration: more loads in flight for narrow slabs
    extern __shared__ double s_red[];    // groups·J doubles

    const int lane = threadIdx.x % G, group = threadIdx.x / G, groups = blockDim.x / G;
    // The lanes of this group within its warp, for the shuffles (other groups may be on other rows).
    const unsigned gmask =
        (G == 32) ? kFullMask : (((1u << G) - 1u) << (G * ((threadIdx.x % 32) / G)));
    const int J = gr_n + 1;

    double c[K], acc[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
        int j = lane + G * k;
        c[k] = (j < up_n) ? coef[j] : 0.0;
        acc[k] = 0.0;
    }
    double ee = 0.0;

    const int64_t stride = (int64_t)gridDim.x * groups;
    for (int64_t i0 = (int64_t)blockIdx.x * groups + group; i0 < rows; i0 += U * stride) {
        double xu[U][K], xg[U][K], ei[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t i = i0 + u * stride;
            const bool ok = i < rows;
            const T *row = X + (ok ? i : 0) * cols;
#pragma unroll
            for (int k = 0; k < K; k++) {
                int j = lane + G * k;
                xu[u][k] = (ok && j < up_n) ? ldx(row + up0 + j) : 0.0;
                xg[u][k] = (ok && j < gr_n) ? ldx(row + gr0 + j) : 0.0;
            }
            ei[u] = ok ? e[i] : 0.0;  // a missing row contributes exact zeros below
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (up_n > 0) {
                double s = 0.0;
#pragma unroll
                for (int k = 0; k < K; k++)
                    s = fma(xu[u][k], c[k], s);
#pragma unroll
                for (int off = G / 2; off > 0; off /= 2)
                    s += __shfl_xor_sync(gmask, s, off, G);
                ei[u] -= s;
                const int64_t i = i0 + u * stride;
                __syncwarp(gmask);  // the group's reads of e[i] are ordered before lane 0 writes it
                if (lane == 0 && i < rows)
                    e[i] = ei[u];
            }
#pragma unroll
            for (int k = 0; k < K; k++)
                acc[k] = fma(xg[u][k], ei[u], acc[k]);
            ee = fma(ei[u], ei[u], ee);
        }
    }

    // CTA reduction: groups in order.
    double *mine = s_red + group * J;
#pragma unroll
    for (int k = 0; k < K; k++) {
        int j = lane + G * k;
        if (j < gr_n)
            mine[j] = acc[k];
    }
    if (lane == 0)
        mine[gr_n] = ee;
    __syncthreads();
    for (int j = threadIdx.x; j < J; j += blockDim.x) {
        double s = 0.0;
        for (int q = 0; q < groups; q++)
            s += s_red[q * J + j];
        partial[(int64_t)blockIdx.x * J + j] = s;
    }
}

// ---------------------------------------------------------------------------------------------------
// grad_update, general path (wide slabs: the final residual and gradient over all n columns).
// Two passes: update_rows (a warp per row) then grad_cols (a thread per column over a chunk of rows,
// coalesced across the columns; column gr_n is eᵀe), and reduce_parts sums the row chunks in order.

constexpr int kUrThreads = 256;
constexpr int kGcThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kUrThreads)
    update_rows(const T *__restrict__ X, int64_t rows, int64_t cols, double *__restrict__ e, int64_t up0,
                int64_t up_n, const double *__restrict__ coef)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wpb = blockDim.x / 32;
    for (int64_t i = (int64_t)blockIdx.x * wpb + warp; i < rows; i += (int64_t)gridDim.x * wpb) {
        const T *row = X + i * cols + up0;
        double s = 0.0;
#pragma unroll 4
        for (int64_t j = lane; j < up_n; j += 32)
            s = fma(ldx(row + j), coef[j], s);
        s = warp_sum(s);
        if (lane == 0)
            e[i] -= s;
    }
}

template <typename T>
__global__ void __launch_bounds__(kGcThreads)
    grad_cols(const T *__restrict__ X, int64_t rows, int64_t cols, const double *__restrict__ e,
              int64_t gr0, int64_t gr_n, int64_t chunk, double *__restrict__ partial)
{
    const int64_t J = gr_n + 1;
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= J)
        return;
    const int64_t r0 = (int64_t)blockIdx.y * chunk;
    const int64_t r1 = (r0 + chunk < rows) ? r0 + chunk : rows;
    double acc = 0.0;
    if (c < gr_n) {
        const T *col = X + gr0 + c;
#pragma unroll 4
        for (int64_t i = r0; i < r1; i++)
            acc = fma(ldx(col + i * cols), e[i], acc);
    } else {
#pragma unroll 4
        for (int64_t i = r0; i < r1; i++)
            acc = fma(e[i], e[i], acc);
    }
    partial[(int64_t)blockIdx.y * J + c] = acc;
}

// out[j] = Σ_p partial[p·J + j], one CTA per column j; fixed order (strided per thread, then block_sum).
constexpr int kRpThreads = 256;

__global__ void __launch_bounds__(kRpThreads)
    reduce_parts(const double *__restrict__ partial, int64_t nparts, int64_t J, double *__restrict__ out)
{
    __shared__ double s_red[kRpThreads / 32];
    const int64_t j = blockIdx.x;
    double s = 0.0;
    for (int64_t p = threadIdx.x; p < nparts; p += blockDim.x)
        s += partial[p * J + j];
    s = block_sum(s, s_red);
    if (threadIdx.x == 0)
        out[j] = s;
}

cudaError_t launch_reduce_parts(const double *partial, int64_t nparts, int64_t J, double *out,
                                cudaStream_t stream)
{
    if (J > 0x7fffffff)
        return cudaErrorInvalidValue;
    reduce_parts<<<(unsigned)J, kRpThreads, 0, stream>>>(partial, nparts, J, out);
    return cudaGetLastError();
}

// How a grad_update call is split; shared by the launcher and the scratch query.
struct GuPlan {
    bool fast;
    int64_t once;         // the same wide slab updated and read: residual_once.cu's partial rows, else 0
    int plan;             // DS_CERT_*: which of its kernels
    int G, K;             // fast path: lanes per row, columns per lane
    int64_t grid;         // fast path: CTAs
    int64_t tiles, splits, chunk;  // general path: column tiles × row chunks of chunk rows
    int64_t parts;        // partial rows of gr_n + 1 doubles in scratch
};

GuPlan gu_plan(int64_t rows, int64_t up_n, int64_t gr_n, int f32, int nsm, int plan)
{
    GuPlan p = {};
    const int64_t maxb = up_n > gr_n ? up_n : gr_n;
    if (nsm < 1)
        nsm = 1;
    if (maxb <= kFastMax) {
        p.fast = true;
        p.G = maxb <= 8 ? 8 : maxb <= 16 ? 16 : 32;
        p.K = maxb <= p.G ? 1 : (int)ceil_div(maxb, p.G);
        const int64_t groups = kGuThreads / p.G;
        int64_t want = ceil_div(rows, groups);
        p.grid = (int64_t)nsm * kGuBlocksPerSm;
        if (want < p.grid)
            p.grid = want;
        if (p.grid < 1)
            p.grid = 1;
        p.parts = p.grid;
    } else {
        p.tiles = ceil_div(gr_n + 1, kGcThreads);
        int64_t splits = ceil_div((int64_t)nsm * 16, p.tiles);  // ~16 CTAs of 128 threads per SM
        int64_t by_rows = ceil_div(rows, 256);                   // at least 256 rows per chunk
        if (splits > by_rows)
            splits = by_rows;
        if (splits > 65535)
            splits = 65535;
        if (splits < 1)
            splits = 1;
        p.chunk = ceil_div(rows > 0 ? rows : 1, splits);
        p.splits = ceil_div(rows > 0 ? rows : 1, p.chunk);
        p.parts = p.splits;
        if (up_n == gr_n && plan != DS_CERT_TWO_PASS) {
            p.once = ds_k_grad_once_parts(rows, gr_n, f32, nsm, plan);
            p.plan = plan;
            p.parts = p.once > p.splits ? p.once : p.splits;
        }
    }
    return p;
}

template <typename T, int G, int K>
cudaError_t launch_fused(const GuPlan &p, const void *X, int64_t rows, int64_t cols, double *e,
                         int64_t up0, int64_t up_n, const double *coef, int64_t gr0, int64_t gr_n,
                         double *gout, double *scratch, cudaStream_t stream)
{
    const int64_t J = gr_n + 1, groups = kGuThreads / G;
    grad_update_fused<T, G, K><<<(unsigned)p.grid, kGuThreads, groups * J * sizeof(double), stream>>>(
        (const T *)X, rows, cols, e, up0, (int)up_n, coef, gr0, (int)gr_n, scratch);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess)
        return rc;
    return launch_reduce_parts(scratch, p.grid, J, gout, stream);
}

template <typename T>
cudaError_t launch_fused_t(const GuPlan &p, const void *X, int64_t rows, int64_t cols, double *e,
                           int64_t up0, int64_t up_n, const double *coef, int64_t gr0, int64_t gr_n,
                           double *gout, double *scratch, cudaStream_t stream)
{
#define DS_FUSED(G_, K_) \
    launch_fused<T, G_, K_>(p, X, rows, cols, e, up0, up_n, coef, gr0, gr_n, gout, scratch, stream)
    if (p.G == 8)
        return DS_FUSED(8, 1);
    if (p.G == 16)
        return DS_FUSED(16, 1);
    switch (p.K) {
    case 1: return DS_FUSED(32, 1);
    case 2: return DS_FUSED(32, 2);
    case 3: return DS_FUSED(32, 3);
    case 4: return DS_FUSED(32, 4);
    default: return cudaErrorInvalidValue;
    }
#undef DS_FUSED
}

template <typename T>
cudaError_t launch_general(const GuPlan &p, const void *X, int64_t rows, int64_t cols, double *e,
                           int64_t up0, int64_t up_n, const double *coef, int64_t gr0, int64_t gr_n,
                           double *gout, double *scratch, int nsm, cudaStream_t stream)
{
    if (p.once > 0) {
        cudaError_t rc = ds_k_grad_once(X, sizeof(T) == 4, rows, cols, e, gr0, gr_n, coef, scratch, p.once, p.plan,
                                        stream);
        return rc != cudaSuccess ? rc : launch_reduce_parts(scratch, p.once, gr_n + 1, gout, stream);
    }
    if (up_n > 0) {
        const int64_t wpb = kUrThreads / 32;
        int64_t grid = ceil_div(rows, wpb), cap = (int64_t)nsm * 8;
        if (grid > cap)
            grid = cap;
        update_rows<T><<<(unsigned)grid, kUrThreads, 0, stream>>>((const T *)X, rows, cols, e, up0, up_n,
                                                                  coef);
        cudaError_t rc = cudaGetLastError();
        if (rc != cudaSuccess)
            return rc;
    }
    const int64_t J = gr_n + 1;
    dim3 grid((unsigned)p.tiles, (unsigned)p.splits);
    grad_cols<T><<<grid, kGcThreads, 0, stream>>>((const T *)X, rows, cols, e, gr0, gr_n, p.chunk, scratch);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess)
        return rc;
    return launch_reduce_parts(scratch, p.splits, J, gout, stream);
}

// ---------------------------------------------------------------------------------------------------
// block_step: one CTA. da (kept in coef until alpha is known), num = da·g, den = daᵀ G_bb da (a warp
// per row of G_bb, lanes along the row), alpha, then coef = alpha·da and a += coef.

constexpr int kBsThreads = 256;

__global__ void __launch_bounds__(kBsThreads)
    block_step_kernel(const double *__restrict__ gbuf, const double *__restrict__ diag,
                      const double *__restrict__ gbb, int nb, int ld, int line_search,
                      double *__restrict__ a, double *__restrict__ coef, double *ee_slot)
{
    __shared__ double s_red[kBsThreads / 32];
    const int t = threadIdx.x, nt = blockDim.x, lane = t % 32, warp = t / 32, nwarps = nt / 32;

    double num = 0.0;
    for (int j = t; j < nb; j += nt) {
        const double gj = gbuf[j], dj = diag[j];
        const double da = dj > 0.0 ? gj / dj : 0.0;
        coef[j] = da;
        num += da * gj;
    }
    num = block_sum(num, s_red);  // its barriers also publish coef (= da) to the whole CTA

    double alpha = 1.0;  // also for one column, where the exact line search gives 1 (backend.h)
    if (line_search && nb > 1) {
        double den = 0.0;  // this warp's rows; equal on every lane
        for (int j = warp; j < nb; j += nwarps) {
            const double *row = gbb + (int64_t)j * ld;
            double r = 0.0;
            for (int k = lane; k < nb; k += 32)
                r = fma(row[k], coef[k], r);
            den += coef[j] * warp_sum(r);
        }
        den = block_sum(lane == 0 ? den : 0.0, s_red);  // also: every read of coef is done
        alpha = den > 0.0 ? num / den : 0.0;
    }

    for (int j = t; j < nb; j += nt) {
        const double cj = alpha * coef[j];  // this thread wrote coef[j] above
        coef[j] = cj;
        a[j] += cj;
    }
    if (t == 0 && ee_slot)
        *ee_slot = gbuf[nb];
}

}  // namespace

extern "C" size_t ds_k_grad_update_scratch(int64_t rows, int64_t up_n, int64_t gr_n, int nsm)
{
    const GuPlan a = gu_plan(rows, up_n, gr_n, 0, nsm, DS_CERT_AUTO);
    const GuPlan c = gu_plan(rows, up_n, gr_n, 0, nsm, DS_CERT_CHUNKS);
    const GuPlan w = gu_plan(rows, up_n, gr_n, 0, nsm, DS_CERT_CTA);
    const int64_t parts = a.parts > c.parts ? a.parts : c.parts;
    return (size_t)(parts > w.parts ? parts : w.parts) * (size_t)(gr_n + 1);  // enough for any plan
}

extern "C" cudaError_t ds_k_grad_update(const void *X, int f32, int64_t rows, int64_t cols, double *e,
                                        int64_t up0, int64_t up_n, const double *coef, int64_t gr0,
                                        int64_t gr_n, double *gout, double *scratch, int nsm,
                                        int plan, cudaStream_t stream)
{
    if (up_n < 0 || gr_n < 0 || up0 < 0 || gr0 < 0 || up0 + up_n > cols || gr0 + gr_n > cols)
        return cudaErrorInvalidValue;
    if (rows <= 0)
        return ds_k_fill(gout, gr_n + 1, 0.0, stream);
    GuPlan p = gu_plan(rows, up_n, gr_n, f32, nsm, up0 == gr0 && up_n > 0 ? plan : DS_CERT_TWO_PASS);
    if (p.fast)
        return f32 ? launch_fused_t<float>(p, X, rows, cols, e, up0, up_n, coef, gr0, gr_n, gout, scratch,
                                           stream)
                   : launch_fused_t<double>(p, X, rows, cols, e, up0, up_n, coef, gr0, gr_n, gout, scratch,
                                            stream);
    return f32 ? launch_general<float>(p, X, rows, cols, e, up0, up_n, coef, gr0, gr_n, gout, scratch, nsm,
                                       stream)
               : launch_general<double>(p, X, rows, cols, e, up0, up_n, coef, gr0, gr_n, gout, scratch, nsm,
                                        stream);
}

extern "C" cudaError_t ds_k_block_step(const double *gbuf, const double *diag, const double *gbb, int nb,
                                       int ld, int line_search, double *a, double *coef, double *ee_slot,
                                       cudaStream_t stream)
{
    if (nb < 0 || ld < nb)
        return cudaErrorInvalidValue;
    block_step_kernel<<<1, kBsThreads, 0, stream>>>(gbuf, diag, gbb, nb, ld, line_search, a, coef, ee_slot);
    return cudaGetLastError();
}

