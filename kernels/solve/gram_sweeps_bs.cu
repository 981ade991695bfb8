// gram_sweeps_bs.cu: the Gram route's sweeps with the block solve (ds_gram_args with binv) and its coarse
// correction, every sweep in one launch of one CTA. Every sum runs in a fixed order (no floating-point
// atomics), so results are bit-identical run to run on the same device.
// provides: ds_k_gram_sweeps_bs
#include "solve/solve_kernels.h"
#include "common/reduce.cuh"

namespace {

// sweeps_bsolve: one CTA of 1 024 threads; per block b (columns b0 .. b0+nb−1):
//  1. g_b into shared memory, da = binv_b·g_b (8 threads per row of binv_b), num = da·g_b (warp 0, off
//     the path of the others);
//  2. w = G[:, b]·da, a thread per row i (kLoads loads of G in flight each), or where G has fewer rows
//     than half the CTA's threads the sum over j split across NJ thread groups and combined in order;
//     g_i −= w_i (alpha is 1), and den = Σ_{i in b} da·w_i = daᵀ G_bb da;
//  3. ee −= 2·num − den (thread 0), a_b += da.
// G (n² doubles) is read once a sweep, from L2 where it fits; binv_b adds nb² a block (n·batch a sweep).
// Then, with cinv, the coarse correction: t_c = Σ_{i in block c} g_i (a warp per block), δ = cinv·t and
// cmat·δ (a warp per row), g_i −= Σ_c wt[c, i]·δ_c and a_i += δ_{i / batch} where diag_i > 0 (a thread
// per i), ee −= 2·δ·t − δᵀ·cmat·δ. ee is carried by thread 0.
// One SM bounds it: at n = 1 000 it reads G at about 80 GB/s (H200: 1.04 ms for 10 sweeps, where the
// cluster kernel takes the seed's step in 0.42 ms); spreading the rows over a cluster is what would close
// the gap.

constexpr int kSbThreads = 1024;
// Loads of G in flight per thread (block_column). Measured on an H200, 10 sweeps with the coarse correction,
// batch 100: n = 1 000 (G in L2) 1.44 ms with 4, 1.09 with 8, 1.04 with 16; n = 4 000 (G from HBM) 35.7,
// 21.6 and 14.8 ms.
constexpr int kLoads = 16;

__device__ void coarse_sweep(const double *__restrict__ cinv, const double *__restrict__ cmat,
                             const double *__restrict__ wt, const double *__restrict__ diag, double *g, double *a,
                             int64_t n, int batch, int k, double *tc, double *dl, double *s_red, double *ee_run)
{
    const int t = threadIdx.x, nt = blockDim.x, lane = t % 32, warp = t / 32, nwarps = nt / 32;
    for (int c = warp; c < k; c += nwarps) {
        const int64_t c0 = (int64_t)c * batch, c1 = c0 + batch < n ? c0 + batch : n;
        double r = 0.0;
        for (int64_t i = c0 + lane; i < c1; i += 32)
            r += g[i];
        r = warp_sum(r);
        if (lane == 0)
            tc[c] = r;
    }
    __syncthreads();
    for (int c = warp; c < k; c += nwarps) {
        double r = 0.0;
        for (int q = lane; q < k; q += 32)
            r = fma(cinv[(int64_t)c * k + q], tc[q], r);
        r = warp_sum(r);
        if (lane == 0)
            dl[c] = r;
    }
    __syncthreads();
    double dt = 0.0, den = 0.0;  // this warp's rows, the same on every lane
    for (int c = warp; c < k; c += nwarps) {
        double r = 0.0;
        for (int q = lane; q < k; q += 32)
            r = fma(cmat[(int64_t)c * k + q], dl[q], r);
        den = fma(dl[c], warp_sum(r), den);
        dt = fma(dl[c], tc[c], dt);
    }
    for (int64_t i = t; i < n; i += nt) {
        double u = 0.0;
        for (int c = 0; c < k; c++)
            u = fma(wt[(int64_t)c * n + i], dl[c], u);
        g[i] -= u;
        if (diag[i] > 0.0)
            a[i] += dl[i / batch];
    }
    dt = block_sum(lane == 0 ? dt : 0.0, s_red);  // its barriers also order g before the next block reads it
    den = block_sum(lane == 0 ? den : 0.0, s_red);
    if (t == 0)
        *ee_run -= 2.0 * dt - den;
}

// da = Bi·gb (nb × nb, ld batch) by groups of 8 threads per row (every load of a row issued at once), then
// the group's sum by shuffles in a fixed order. A warp's four groups take rows 4w .. 4w+3 (+ the groups'
// stride), so rounding nb up to 4 gives every lane of a warp the same trip count for the shuffles.
__device__ __forceinline__ void block_solve_da(const double *__restrict__ Bi, int batch, int nb, const double *gb,
                                               double *da)
{
    const int t = threadIdx.x, sub = t % 8, groups = blockDim.x / 8, nb4 = (nb + 3) / 4 * 4;
    for (int j = t / 8; j < nb4; j += groups) {
        double r = 0.0;
        if (j < nb) {
            const double *row = Bi + (int64_t)j * batch;
            for (int l = sub; l < nb; l += 8)
                r = fma(row[l], gb[l], r);
        }
        for (int off = 4; off > 0; off /= 2)
            r += __shfl_xor_sync(kFullMask, r, off, 8);
        if (sub == 0 && j < nb)
            da[j] = r;
    }
}

// Σ_j G[b0 + j, i]·da_j over j = q, q + NJ, .. < nb (column i of G's rows b0 ..; G symmetric), with U
// loads in flight before their fmas: one SM reads G only as fast as it keeps loads outstanding.
template <int U>
__device__ __forceinline__ double block_column(const double *__restrict__ col, int64_t n, const double *da, int q,
                                               int NJ, int nb)
{
    double part = 0.0, x[U];
    int j = q;
    for (; j + (U - 1) * NJ < nb; j += U * NJ) {
#pragma unroll
        for (int u = 0; u < U; u++)
            x[u] = col[(int64_t)(j + u * NJ) * n];
#pragma unroll
        for (int u = 0; u < U; u++)
            part = fma(x[u], da[j + u * NJ], part);
    }
    for (; j < nb; j += NJ)
        part = fma(col[(int64_t)j * n], da[j], part);
    return part;
}

// Long: one launch runs every block step and coarse correction of every sweep, as sweeps_block does, so
// that the state stays on the SM and no launch or host round trip separates the steps.
__global__ void __launch_bounds__(kSbThreads, 1)
    sweeps_bsolve(const double *__restrict__ G, const double *__restrict__ diag, const double *__restrict__ binv,
                  double *g, double *a, double *ee, double *ee_hist, int64_t n, int batch, int sweeps,
                  const double *__restrict__ cinv, const double *__restrict__ cmat, const double *__restrict__ wt)
{
    extern __shared__ double s_dyn[];  // gb[nbmax], da[nbmax], then with cinv tc[k], δ[k]
    __shared__ double s_part[kSbThreads];  // the NJ partial sums of each row
    __shared__ double s_red[kSbThreads / 32];
    const int t = threadIdx.x, nt = blockDim.x, lane = t % 32, warp = t / 32;
    const int64_t k = (n + batch - 1) / batch, nbmax = batch < n ? batch : n;
    double *gb = s_dyn, *da = s_dyn + nbmax, *tc = da + nbmax, *dl = tc + k;
    double ee_run = (t == 0) ? *ee : 0.0;

    for (int s = 0; s < sweeps; s++) {
        for (int64_t bi = 0; bi < k; bi++) {
            const int64_t b0 = bi * batch;
            const int nb = (int)(n - b0 < batch ? n - b0 : batch);
            // NJ thread groups split the sum over j only when the CTA has more threads than G has rows.
            int NJ = 1;
            while (NJ < 8 && 2 * NJ <= nb && (int64_t)nt / (2 * NJ) >= n)
                NJ *= 2;
            const int TI = nt / NJ, ii = t % TI, q = t / TI;

            for (int j = t; j < nb; j += nt)
                gb[j] = g[b0 + j];
            __syncthreads();
            block_solve_da(binv + bi * (int64_t)batch * batch, batch, nb, gb, da);
            __syncthreads();
            double num = 0.0;  // warp 0 only, in a fixed order; thread 0 takes it into ee below
            if (warp == 0) {
                for (int j = lane; j < nb; j += 32)
                    num = fma(da[j], gb[j], num);
                num = warp_sum(num);
            }

            double den = 0.0;
            if (NJ == 1) {  // a thread per row i: no exchange, no barrier
                for (int64_t i = t; i < n; i += nt) {
                    const double w = block_column<kLoads>(G + b0 * n + i, n, da, 0, 1, nb);
                    if (i >= b0 && i < b0 + nb)
                        den = fma(da[i - b0], w, den);
                    g[i] -= w;  // alpha is 1
                }
            } else {  // all rows in one tile (TI ≥ n): NJ partial sums per row, combined in order
                const int64_t i = ii;
                s_part[t] = i < n ? block_column<kLoads>(G + b0 * n + i, n, da, q, NJ, nb) : 0.0;
                __syncthreads();
                if (q == 0 && i < n) {
                    double w = 0.0;
                    for (int qq = 0; qq < NJ; qq++)
                        w += s_part[qq * TI + ii];
                    if (i >= b0 && i < b0 + nb)
                        den = fma(da[i - b0], w, den);
                    g[i] -= w;
                }
            }
            den = block_sum(den, s_red);  // also orders g's updates before what follows
            if (t == 0)
                ee_run -= 2.0 * num - den;
            for (int j = t; j < nb; j += nt)
                a[b0 + j] += da[j];
            __syncthreads();  // gb and da free for the next block
        }
        if (cinv)
            coarse_sweep(cinv, cmat, wt, diag, g, a, n, batch, (int)k, tc, dl, s_red, &ee_run);
        if (t == 0 && ee_hist)
            ee_hist[s] = ee_run;
    }
    if (t == 0)
        *ee = ee_run;
}

}  // namespace

extern "C" cudaError_t ds_k_gram_sweeps_bs(const double *G, const double *diag, const double *binv, double *g,
                                           double *a, double *ee, double *ee_hist, int64_t n, int batch, int sweeps,
                                           const double *cinv, const double *cmat, const double *wt,
                                           cudaStream_t stream)
{
    if (batch < 1 || n < 0 || sweeps < 0 || !binv || (cinv && (!cmat || !wt)))
        return cudaErrorInvalidValue;
    if (sweeps == 0 || n == 0)
        return cudaSuccess;
    const int64_t nbmax = batch < n ? batch : n, k = ceil_div(n, batch);
    const size_t dyn = (size_t)(2 * nbmax + (cinv ? 2 * k : 0)) * sizeof(double);
    cudaError_t rc = cudaSuccess;
    if (dyn > 48 * 1024)
        rc = cudaFuncSetAttribute(sweeps_bsolve, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn);
    if (rc != cudaSuccess)
        return rc;
    sweeps_bsolve<<<1, kSbThreads, dyn, stream>>>(G, diag, binv, g, a, ee, ee_hist, n, batch, sweeps, cinv, cmat, wt);
    return cudaGetLastError();
}
