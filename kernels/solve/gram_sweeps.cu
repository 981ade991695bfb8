// gram_sweeps.cu: whole sweeps of the Gram route of SolveBak in one launch (see backend.h for the
// formulas): single-CTA kernels for batch 1 and, where clusters cannot run, for batches; batches go to a
// thread-block cluster first (gram_sweeps_cluster.cu). Every sum runs in a fixed order (no floating-point
// atomics), so results are bit-identical run to run on the same device.
// provides: ds_k_gram_sweeps, ds_k_gram_sweeps_scratch
#include "solve/solve_kernels.h"
#include "solve/gram_sweeps.cuh"
#include "common/reduce.cuh"

namespace {

// ---------------------------------------------------------------------------------------------------
// gram_sweeps. sweeps_cluster (gram_sweeps_cluster.cu: batch > 1 on sm_90) or one of three kernels,
// each a single CTA running all the sweeps:
//  - sweeps_seq_reg<R> (batch 1, n ≤ 4096): thread t owns g_i, diag_i, a_i for i = t + nt·r (r < R)
//    in registers. A column step is: read da_j (broadcast through shared memory), g_i −= da_j·G[j, i]
//    for the own i (row j of G was prefetched during the previous step), and the owner of column j+1
//    computes da_{j+1} from its now final g_{j+1} and publishes it into the other half of a
//    double-buffered slot. One barrier per column.
//  - sweeps_seq_global (batch 1, n > 4096): the same with g, diag, a in global memory.
//  - sweeps_block (batch > 1 where clusters cannot run): per block, da and num; w = G[:, b]·da by tiles of rows i, with the
//    sum over j split across NJ thread groups so that one SM keeps many loads in flight; den = da·w_b
//    (w_b = G_bb·da); alpha; g −= alpha·w; a_b += alpha·da.
// ee is carried by thread 0 and follows ee −= 2·alpha·num − alpha²·den. With one column (batch 1, or a
// block of one column), alpha is 1, as backend.h states.

constexpr int kSwThreads = 1024;
constexpr int kSeqRegMax = 4;  // registers per thread: g, diag, a, next row of G, each R doubles

// da for one column and the ee decrement it causes (alpha = 1): 2·num − den.
__device__ __forceinline__ void publish_column(double *slot, double gj, double dj)
{
    const double da = dj > 0.0 ? gj / dj : 0.0;
    const double num = da * gj, den = da * dj * da;
    slot[0] = da;
    slot[1] = 2.0 * num - den;
}

// Long: one launch runs every sweep, so g, diag and a stay in registers from the first column to the last;
// a kernel per column (or per sweep) would cost a launch and a reload of the state per step.
template <int R>
__global__ void __launch_bounds__(kSwThreads, 1)
    sweeps_seq_reg(const double *__restrict__ G, const double *__restrict__ diag, double *g, double *a,
                   double *ee, double *ee_hist, int n, int sweeps)
{
    __shared__ double s_bc[2][2];  // [step parity][da, ee decrement]
    const int t = threadIdx.x, nt = blockDim.x;
    double gr[R], dr[R], ar[R], gn[R];  // gn: the row of G for the current step
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int i = t + nt * r;
        const bool ok = i < n;
        gr[r] = ok ? g[i] : 0.0;
        dr[r] = ok ? diag[i] : 0.0;
        ar[r] = ok ? a[i] : 0.0;
        gn[r] = ok ? G[i] : 0.0;  // row 0
    }
    if (t == 0)
        publish_column(s_bc[0], gr[0], dr[0]);
    double ee_run = (t == 0) ? *ee : 0.0;
    __syncthreads();

    int p = 0;
    for (int s = 0; s < sweeps; s++) {
        int ot = 0, orr = 0;  // owner of column j: thread ot, slot orr
        for (int j = 0; j < n; j++) {
            const double da = s_bc[p][0];
            if (t == 0)
                ee_run -= s_bc[p][1];
#pragma unroll
            for (int r = 0; r < R; r++)
                gr[r] = fma(-da, gn[r], gr[r]);
            if (t == ot) {
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (r == orr)
                        ar[r] += da;
            }
            // Next column (wrapping into the next sweep) and its owner.
            const int jn = (j + 1 == n) ? 0 : j + 1;
            int nt_owner = ot + 1, nr_owner = orr;
            if (nt_owner == nt) {
                nt_owner = 0;
                nr_owner++;
            }
            if (jn == 0)
                nt_owner = nr_owner = 0;
            const double *row = G + (int64_t)jn * n;
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int i = t + nt * r;
                gn[r] = (i < n) ? row[i] : 0.0;  // used after the barrier: its latency is hidden
            }
            if (t == nt_owner) {
                double gj = 0.0, dj = 0.0;
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (r == nr_owner) {
                        gj = gr[r];
                        dj = dr[r];
                    }
                publish_column(s_bc[p ^ 1], gj, dj);
            }
            ot = nt_owner;
            orr = nr_owner;
            p ^= 1;
            __syncthreads();
        }
        if (t == 0 && ee_hist)
            ee_hist[s] = ee_run;
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int i = t + nt * r;
        if (i < n) {
            g[i] = gr[r];
            a[i] = ar[r];
        }
    }
    if (t == 0)
        *ee = ee_run;
}

__global__ void __launch_bounds__(kSwThreads, 1)
    sweeps_seq_global(const double *__restrict__ G, const double *__restrict__ diag, double *g,
                      double *a, double *ee, double *ee_hist, int64_t n, int sweeps)
{
    __shared__ double s_bc[2][2];
    const int t = threadIdx.x, nt = blockDim.x;
    if (t == 0)
        publish_column(s_bc[0], g[0], diag[0]);
    double ee_run = (t == 0) ? *ee : 0.0;
    __syncthreads();
    int p = 0;
    for (int s = 0; s < sweeps; s++) {
        for (int64_t j = 0; j < n; j++) {
            const double da = s_bc[p][0];
            if (t == 0)
                ee_run -= s_bc[p][1];
            const double *row = G + j * n;
            for (int64_t i = t; i < n; i += nt)
                g[i] = fma(-da, row[i], g[i]);
            if (j % nt == t)
                a[j] += da;
            const int64_t jn = (j + 1 == n) ? 0 : j + 1;
            if (jn % nt == t)  // this thread just wrote g[jn]
                publish_column(s_bc[p ^ 1], g[jn], diag[jn]);
            p ^= 1;
            __syncthreads();
        }
        if (t == 0 && ee_hist)
            ee_hist[s] = ee_run;
    }
    if (t == 0)
        *ee = ee_run;
}

// da lives in dynamic shared memory when batch doubles fit there, else in da_glob (scratch).
__global__ void __launch_bounds__(kSwThreads, 1)
    sweeps_block(const double *__restrict__ G, const double *__restrict__ diag, double *g, double *a,
                 double *ee, double *ee_hist, int64_t n, int batch, int line_search, int sweeps,
                 double *wbuf, double *da_glob, int da_in_smem)
{
    extern __shared__ double s_dyn[];
    __shared__ double s_part[2][kSwThreads];  // double-buffered per tile: one barrier per tile
    __shared__ double s_red[kSwThreads / 32];
    double *da = da_in_smem ? s_dyn : da_glob;
    const int t = threadIdx.x, nt = blockDim.x;
    double ee_run = (t == 0) ? *ee : 0.0;

    for (int s = 0; s < sweeps; s++) {
        for (int64_t b0 = 0; b0 < n; b0 += batch) {
            const int nb = (int)((n - b0 < batch) ? n - b0 : batch);
            const int NJ = nb >= 8 ? 8 : nb >= 4 ? 4 : nb >= 2 ? 2 : 1;
            const int TI = nt / NJ, ii = t % TI, q = t / TI;

            double num = 0.0;
            for (int j = t; j < nb; j += nt) {
                const double gj = g[b0 + j], dj = diag[b0 + j];
                const double d = dj > 0.0 ? gj / dj : 0.0;
                da[j] = d;
                num += d * gj;
            }
            num = block_sum(num, s_red);  // publishes da

            // w_i = Σ_j G[b0+j, i]·da_j (= (G[:, b]·da)_i by symmetry; rows of G are contiguous).
            double den = 0.0;
            int buf = 0;
            for (int64_t i0 = 0; i0 < n; i0 += TI, buf ^= 1) {
                const int64_t i = i0 + ii;
                double part = 0.0;
                if (i < n) {
                    const double *col = G + b0 * n + i;
#pragma unroll 4
                    for (int j = q; j < nb; j += NJ)
                        part = fma(col[(int64_t)j * n], da[j], part);
                }
                s_part[buf][t] = part;  // t == q·TI + ii
                __syncthreads();
                if (q == 0 && i < n) {
                    double w = 0.0;
                    for (int qq = 0; qq < NJ; qq++)
                        w += s_part[buf][qq * TI + ii];
                    if (i >= b0 && i < b0 + nb)
                        den = fma(da[i - b0], w, den);
                    if (line_search && nb > 1)
                        wbuf[i] = w;
                    else
                        g[i] -= w;  // alpha is 1
                }
            }
            den = block_sum(den, s_red);  // also publishes wbuf
            const bool unit = !line_search || nb == 1;
            const double alpha = unit ? 1.0 : (den > 0.0 ? num / den : 0.0);
            if (t == 0)
                ee_run -= 2.0 * alpha * num - alpha * alpha * den;
            for (int j = t; j < nb; j += nt)
                a[b0 + j] += alpha * da[j];
            if (!unit)
                for (int64_t i = t; i < n; i += nt)
                    g[i] -= alpha * wbuf[i];
            __syncthreads();  // g final before the next block reads it; da free for reuse
        }
        if (t == 0 && ee_hist)
            ee_hist[s] = ee_run;
    }
    if (t == 0)
        *ee = ee_run;
}

}  // namespace

extern "C" size_t ds_k_gram_sweeps_scratch(int64_t n, int batch)
{
    int64_t nb = batch < n ? batch : n;
    if (nb < 0)
        nb = 0;
    // sweeps_block: w [n], then da [batch] when it does not fit in shared memory. sweeps_cluster with its
    // exchange in global memory: x [2][nb] (double2), then da [2][nb] and nump [nb] for each of ≤ 16 CTAs.
    const int64_t blk = n + nb, cl = (4 + 3 * (int64_t)kClMax) * nb;
    return (size_t)(blk > cl ? blk : cl);
}

extern "C" cudaError_t ds_k_gram_sweeps(const double *G, const double *diag, double *g, double *a,
                                        double *ee, double *ee_hist, int64_t n, int batch, int line_search,
                                        int sweeps, double *scratch, int cluster, int tx, cudaStream_t stream)
{
    if (batch < 1 || n < 0 || sweeps < 0)
        return cudaErrorInvalidValue;
    if (sweeps == 0)
        return cudaSuccess;
    if (batch == 1 && n > 0 && n <= (int64_t)kSwThreads * kSeqRegMax) {
        const int nn = (int)n;
        if (nn <= kSwThreads) {
            const int nt = (nn + 31) / 32 * 32;  // fewer warps: cheaper barriers for small n
            sweeps_seq_reg<1><<<1, nt, 0, stream>>>(G, diag, g, a, ee, ee_hist, nn, sweeps);
        } else if (nn <= 2 * kSwThreads) {
            sweeps_seq_reg<2><<<1, kSwThreads, 0, stream>>>(G, diag, g, a, ee, ee_hist, nn, sweeps);
        } else {
            sweeps_seq_reg<4><<<1, kSwThreads, 0, stream>>>(G, diag, g, a, ee, ee_hist, nn, sweeps);
        }
        return cudaGetLastError();
    }
    if (batch == 1 && n > 0) {
        sweeps_seq_global<<<1, kSwThreads, 0, stream>>>(G, diag, g, a, ee, ee_hist, n, sweeps);
        return cudaGetLastError();
    }
    {
        const cudaError_t crc =
            gram_sweeps_launch_cluster(G, diag, g, a, ee, ee_hist, n, batch, line_search, sweeps, scratch, stream,
                                       cluster, 0, kClThreads, -1, tx);
        if (crc != cudaErrorNotSupported)
            return crc;
    }
    // No clusters here (or too many rows per CTA): one CTA.
    const int64_t nbmax = batch < n ? batch : n;
    int dev = 0, optin = 0;
    cudaError_t rc = cudaGetDevice(&dev);
    if (rc == cudaSuccess)
        rc = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (rc != cudaSuccess)
        return rc;
    const size_t static_bytes = sizeof(double) * (2 * kSwThreads + kSwThreads / 32);
    size_t dyn = (size_t)(nbmax > 0 ? nbmax : 1) * sizeof(double);
    const int in_smem = static_bytes + dyn <= (size_t)optin;
    if (!in_smem)
        dyn = 0;
    if (dyn > 0) {
        rc = cudaFuncSetAttribute(sweeps_block, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn);
        if (rc != cudaSuccess)
            return rc;
    }
    sweeps_block<<<1, kSwThreads, dyn, stream>>>(G, diag, g, a, ee, ee_hist, n, batch, line_search, sweeps,
                                                 scratch, scratch + n, in_smem);
    return cudaGetLastError();
}
