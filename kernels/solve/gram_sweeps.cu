// gram_sweeps.cu: whole sweeps of the Gram route of SolveBak in one launch (see backend.h for the
// formulas): single-CTA kernels for batch 1 and a thread-block cluster for batches. Every sum runs in a
// fixed order (no floating-point atomics), so results are bit-identical run to run on the same device.
// provides: ds_k_gram_sweeps, ds_k_gram_sweeps_scratch
#include "solve/solve_kernels.h"
#include "common/reduce.cuh"

#include <cooperative_groups.h>

namespace {

// ---------------------------------------------------------------------------------------------------
// gram_sweeps. sweeps_cluster (below, batch > 1 on sm_90) or one of three kernels, each a single CTA
// running all the sweeps:
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

// ---------------------------------------------------------------------------------------------------
// sweeps_cluster (batch > 1, sm_90): the block steps spread over one thread-block cluster of C CTAs
// (C = 16 where the device allows it, else 8, 4, 2). CTA r owns rows [r·R, r·R + R) of g and a and
// keeps them in registers: row i = r0 + ii + k·TI (k < KT) lives in thread ii of the first TI threads.
//
// Step k (block b, columns b0 .. b0+nb−1) starts after a cluster barrier and does:
//  1. alpha of step k−1 from its den partials (pushed by every CTA, summed in rank order) and num;
//     ee −= 2·alpha·num − alpha²·den; own rows: g_i −= alpha·w_i, a_i += alpha·da_i.
//  2. da for block b, in every CTA (redundantly, the same bits): the owners pushed (g_j, w_j) of the
//     block's rows during step k−1, so g_j' = g_j − alpha·w_j (the same fma the owner applies) and
//     da_j = g_j'/diag_j. num = Σ da_j·g_j' in a fixed order (one warp).
//  3. w_i = Σ_j G[b0+j, i]·da_j for own rows (G symmetric: rows of G are contiguous, coalesced along i);
//     with few rows per CTA the sum over j is split over NJ thread groups and combined in order.
//  4. den partial = Σ_{own i in block} da·w_i, pushed to every CTA; the owners of the next block's rows
//     push (g_i, w_i) to every CTA (distributed shared memory; or global scratch when nb is too large
//     for shared memory); then the cluster barrier (release/acquire at cluster scope).
// One cluster barrier per step. Every sum has a fixed order, so results are bit-identical run to run.

namespace cg = cooperative_groups;

__device__ __forceinline__ void cp_async8(double *smem, const double *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem) : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ __forceinline__ void cp_async_wait1()
{
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

constexpr int kClMax = 16;
constexpr int kClThreads = 512;  // ≤ 128 registers per thread (1024 threads spill at KT = 1)

template <int NT, int KT, bool SM>
__global__ void __launch_bounds__(NT, 1)
    sweeps_cluster(const double *__restrict__ G, const double *__restrict__ diag, double *g, double *a,
                   double *ee, double *ee_hist, int64_t n, int batch, int line_search, int sweeps,
                   int64_t R, int NJ, int TI, int P, double2 *gx, double *gc)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ double2 s_x2[];  // SM: x[2][nbmax], da[2][nbmax], nump[nbmax], diag[2][nbmax]
    __shared__ double s_den[2][kClMax];
    __shared__ double s_part[NT];
    __shared__ double s_red[NT / 32];
    __shared__ double s_num[2];

    cg::cluster_group cl = cg::this_cluster();
    const int C = (int)cl.num_blocks(), rank = (int)cl.block_rank();
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const int nbmax = (int)(batch < n ? batch : n);
    double2 *xb;
    double *dab, *numpb, *diagb;
    double *pfb;  // [2][P][KT][NT]: each thread's prefetched elements of G for a step
    if (SM) {
        xb = s_x2;
        dab = (double *)(s_x2 + 2 * (size_t)nbmax);
        numpb = dab + 2 * (size_t)nbmax;
        diagb = numpb + nbmax;
        pfb = diagb + 2 * (size_t)nbmax;
    } else {
        xb = gx;
        dab = gc + (size_t)rank * 3 * nbmax;
        numpb = dab + 2 * (size_t)nbmax;
        diagb = nullptr;
        pfb = (double *)s_x2;
    }

    const int64_t nblocks = (n + batch - 1) / batch, K = nblocks * sweeps;
    const int q = t / TI, ii = t - q * TI;
    const bool wq = q < NJ;
    const int64_t r0 = (int64_t)rank * R, r1 = (r0 + R < n) ? r0 + R : n;
    double gr[KT], dr[KT], ar[KT], wv[KT];
    int64_t ik[KT], ikc[KT];
    bool own[KT], okw[KT];
#pragma unroll
    for (int k = 0; k < KT; k++) {
        const int64_t i = r0 + ii + (int64_t)k * TI;
        okw[k] = wq && i < r1;
        own[k] = okw[k] && q == 0;
        ik[k] = i;
        ikc[k] = okw[k] ? i : 0;  // a safe address for the unconditional loads
        gr[k] = own[k] ? g[i] : 0.0;
        dr[k] = own[k] ? diag[i] : 0.0;
        ar[k] = own[k] ? a[i] : 0.0;
        wv[k] = 0.0;
    }
    double ee_run = (rank == 0 && t == 0) ? *ee : 0.0;

    auto push_x = [&](int par, int64_t j, double gv, double wvv) {
        const double2 v = make_double2(gv, wvv);
        if (SM) {
            for (int r = 0; r < C; r++)
                cl.map_shared_rank(xb, r)[(size_t)par * nbmax + j] = v;
        } else {
            __stcg(xb + (size_t)par * nbmax + j, v);
        }
    };

    // Applies alpha of step kp (its den partials and num are in this CTA); returns alpha.
    auto apply = [&](int64_t kp) -> double {
        const int pp = (int)(kp & 1);
        const int64_t bp0 = (kp % nblocks) * batch;
        const int nbp = (int)((n - bp0 < batch) ? n - bp0 : batch);
        double den = 0.0;
        for (int r = 0; r < C; r++)
            den += s_den[pp][r];
        const double num = s_num[pp];
        const bool unit = !line_search || nbp == 1;
        const double alpha = unit ? 1.0 : (den > 0.0 ? num / den : 0.0);
        if (rank == 0 && t == 0) {
            ee_run -= 2.0 * alpha * num - alpha * alpha * den;
            if (ee_hist && kp % nblocks == nblocks - 1)
                ee_hist[kp / nblocks] = ee_run;
        }
        const double *dap = dab + (size_t)pp * nbmax;
#pragma unroll
        for (int k = 0; k < KT; k++) {
            if (own[k]) {
                gr[k] = fma(-alpha, wv[k], gr[k]);
                if (ik[k] >= bp0 && ik[k] < bp0 + nbp)
                    ar[k] = fma(alpha, dap[ik[k] - bp0], ar[k]);
            }
        }
        return alpha;
    };

    // Prefetch of step kp's elements of G (the first P of this thread's columns) into buffer kp & 1,
    // as one cp.async group; each thread later reads only what it copied itself, so its own
    // cp.async.wait_group orders them (no barrier). Issued a step ahead, off the critical path.
    auto prefetch = [&](int64_t kp) {
        if (P > 0 && kp < K && wq) {
            const int64_t pb0 = (kp % nblocks) * batch;
            const int pnb = (int)((n - pb0 < batch) ? n - pb0 : batch);
            double *dst = pfb + (size_t)(kp & 1) * P * KT * NT + t;
            const double *Gb = G + pb0 * n;
            for (int m = 0, j = q; m < P && j < pnb; m++, j += NJ) {
                const double *row = Gb + (int64_t)j * n;
#pragma unroll
                for (int kk = 0; kk < KT; kk++)
                    if (okw[kk])
                        cp_async8(dst + (size_t)(m * KT + kk) * NT, row + ik[kk]);
            }
        }
        cp_async_commit();  // possibly empty: one group per step keeps the count uniform
    };

    prefetch(0);
    cl.sync();  // every CTA of the cluster runs before any distributed shared memory access
    {
        const int nb = nbmax;  // block 0
#pragma unroll
        for (int k = 0; k < KT; k++)
            if (own[k] && ik[k] < nb)
                push_x(0, ik[k], gr[k], 0.0);
        if (SM)
            for (int j = t; j < nb; j += NT)
                diagb[j] = __ldg(diag + j);
    }
    cl.sync();

    for (int64_t k = 0; k < K; k++) {
        const int par = (int)(k & 1);
        const int64_t b0 = (k % nblocks) * batch;
        const int nb = (int)((n - b0 < batch) ? n - b0 : batch);
        const bool last = k == K - 1;
        const int64_t b0n = ((k + 1) % nblocks) * batch;
        const int nbn = last ? 0 : (int)((n - b0n < batch) ? n - b0n : batch);
        double dpre = 0.0;
        if (SM && t < nbn)
            dpre = __ldg(diag + b0n + t);  // staged into shared memory for the next step, below

        prefetch(k + 1);
        const double alpha_p = (k > 0) ? apply(k - 1) : 0.0;

        double *da = dab + (size_t)par * nbmax;
        for (int j = t; j < nb; j += NT) {
            const double2 x = SM ? xb[(size_t)par * nbmax + j] : __ldcg(xb + (size_t)par * nbmax + j);
            const double gp = fma(-alpha_p, x.y, x.x);
            const double dj = SM ? diagb[(size_t)par * nbmax + j] : __ldg(diag + b0 + j);
            const double d = dj > 0.0 ? gp / dj : 0.0;
            da[j] = d;
            numpb[j] = d * gp;
        }
        __syncthreads();

        if (warp == NT / 32 - 1) {
            double s = 0.0;
            for (int j = lane; j < nb; j += 32)
                s += numpb[j];
            s = warp_sum(s);
            if (lane == 0)
                s_num[par] = s;
        }

        double part[KT];
#pragma unroll
        for (int kk = 0; kk < KT; kk++)
            part[kk] = 0.0;
        if (wq) {
            cp_async_wait1();  // this step's group has landed (the next step's may be in flight)
            const double *pf = pfb + (size_t)par * P * KT * NT + t;
            int j = q;
            for (int m = 0; m < P && j < nb; m++, j += NJ) {
                const double d = da[j];
#pragma unroll
                for (int kk = 0; kk < KT; kk++)
                    part[kk] = fma(pf[(size_t)(m * KT + kk) * NT], d, part[kk]);
            }
            const double *Gb = G + b0 * n;
#pragma unroll 8
            for (; j < nb; j += NJ) {
                const double d = da[j];
                const double *row = Gb + (int64_t)j * n;
#pragma unroll
                for (int kk = 0; kk < KT; kk++)
                    part[kk] = fma(__ldg(row + ikc[kk]), d, part[kk]);
            }
        }
        if (NJ > 1) {  // then KT is 1
            if (wq && q > 0)
                s_part[(q - 1) * TI + ii] = part[0];
            __syncthreads();
            if (q == 0)
                for (int qq = 1; qq < NJ; qq++)
                    part[0] += s_part[(qq - 1) * TI + ii];
        }

        double den_t = 0.0;
#pragma unroll
        for (int kk = 0; kk < KT; kk++) {
            if (own[kk]) {
                wv[kk] = part[kk];
                if (ik[kk] >= b0 && ik[kk] < b0 + nb)
                    den_t = fma(da[ik[kk] - b0], wv[kk], den_t);
                if (ik[kk] >= b0n && ik[kk] < b0n + nbn)
                    push_x(par ^ 1, ik[kk] - b0n, gr[kk], wv[kk]);
            }
        }
        if (SM) {
            double *dn = diagb + (size_t)(par ^ 1) * nbmax;
            if (t < nbn)
                dn[t] = dpre;
            for (int j = t + NT; j < nbn; j += NT)
                dn[j] = __ldg(diag + b0n + j);
        }

        double den_c = 0.0;
        if (r0 < b0 + nb && b0 < r1) {  // uniform over the CTA
            den_t = warp_sum(den_t);
            if (lane == 0)
                s_red[warp] = den_t;
            __syncthreads();
            if (t < C)
                for (int w = 0; w < TI / 32; w++)
                    den_c += s_red[w];
        }
        if (t < C)
            cl.map_shared_rank(&s_den[par][0], t)[rank] = den_c;
        cl.sync();
    }

    if (K > 0)
        apply(K - 1);
#pragma unroll
    for (int k = 0; k < KT; k++) {
        if (own[k]) {
            g[ik[k]] = gr[k];
            a[ik[k]] = ar[k];
        }
    }
    if (rank == 0 && t == 0)
        *ee = ee_run;
#endif
}

using ClKernel = void (*)(const double *, const double *, double *, double *, double *, double *, int64_t,
                          int, int, int, int64_t, int, int, int, double2 *, double *);

ClKernel cluster_kernel(int nt, int kt, bool sm)
{
#define DS_CLK(KT_) return sm ? sweeps_cluster<kClThreads, KT_, true> : sweeps_cluster<kClThreads, KT_, false>
    if (nt != kClThreads)
        return nullptr;
    switch (kt) {
    case 1: DS_CLK(1);
    case 2: DS_CLK(2);
    case 4: DS_CLK(4);
    default: return nullptr;
    }
#undef DS_CLK
}

// How sweeps_cluster splits the rows over C CTAs of kClThreads threads.
struct ClPlan {
    int C, KT, NJ, TI;
    int64_t R;
};

bool cluster_plan(int64_t n, int C, int NT, ClPlan *p)
{
    int64_t R = ceil_div(n, C);
    R = (R >= 32) ? ceil_div(R, 32) * 32 : ceil_div(R, 4) * 4;
    p->C = C;
    p->R = R;
    if (R <= NT) {
        p->KT = 1;
        p->TI = (int)ceil_div(R, 32) * 32;
        int nj = NT / p->TI;
        p->NJ = nj > 16 ? 16 : nj;
    } else {
        const int64_t kt = ceil_div(R, NT);
        if (kt > 4)
            return false;
        p->KT = kt <= 1 ? 1 : kt <= 2 ? 2 : 4;
        p->TI = NT;
        p->NJ = 1;
    }
    return true;
}

// Shared memory (bytes) the SM variant needs beside its static arrays: 9 doubles per column of a block.
size_t cluster_dyn_bytes(int64_t nbmax)
{
    return (size_t)nbmax * 9 * sizeof(double);
}

// Launches sweeps_cluster with the largest cluster the device runs (16, 8, 4, 2 CTAs).
// Returns cudaErrorNotSupported where it cannot run (no clusters, too many rows): the caller falls back.
cudaError_t launch_cluster(const double *G, const double *diag, double *g, double *a, double *ee,
                           double *ee_hist, int64_t n, int batch, int line_search, int sweeps, double *scratch,
                           cudaStream_t stream, int force_c = 0, int force_global = 0, int NT = kClThreads,
                           int force_pf = -1)
{
    int dev = 0, major = 0, cl_ok = 0, optin = 0;
    cudaError_t rc = cudaGetDevice(&dev);
    if (rc == cudaSuccess)
        rc = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (rc == cudaSuccess)
        rc = cudaDeviceGetAttribute(&cl_ok, cudaDevAttrClusterLaunch, dev);
    if (rc == cudaSuccess)
        rc = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (rc != cudaSuccess)
        return rc;
    if (major < 9 || !cl_ok || n < 2 || n > 0x7fffffffLL)
        return cudaErrorNotSupported;
    const int64_t nbmax = batch < n ? batch : n;
    const size_t static_bytes = sizeof(double) * (2 * kClMax + NT + NT / 32 + 2);
    const bool sm = !force_global && static_bytes + cluster_dyn_bytes(nbmax) + 1024 <= (size_t)optin;
    size_t dyn = sm ? cluster_dyn_bytes(nbmax) : 0;
    double2 *gx = (double2 *)scratch;        // global variant: x [2][nbmax] (double2), then
    double *gc = scratch + 4 * nbmax;        // da [2][nbmax] and nump [nbmax] per CTA
    for (int C = kClMax; C >= 2; C /= 2) {
        if (force_c && C != force_c)
            continue;
        ClPlan p;
        if (!cluster_plan(n, C, NT, &p))
            continue;
        ClKernel kern = cluster_kernel(NT, p.KT, sm);
        if (!kern)
            continue;
        // Columns of G per thread and step prefetched into shared memory: as many as fit (double-buffered).
        const int64_t cmax = ceil_div(nbmax, p.NJ);
        const size_t per_col = 2 * (size_t)p.KT * NT * sizeof(double);
        const size_t used = static_bytes + dyn + 1024;
        int64_t P = used < (size_t)optin ? (int64_t)(((size_t)optin - used) / per_col) : 0;
        if (P > cmax)
            P = cmax;
        if (force_pf >= 0 && P > force_pf)
            P = force_pf;
        const size_t dyn_all = dyn + (size_t)P * per_col;
        if (C > 8 && cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        rc = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn_all);
        if (rc != cudaSuccess)
            return rc;
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = (unsigned)C;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned)C);
        cfg.blockDim = dim3((unsigned)NT);
        cfg.dynamicSmemBytes = dyn_all;
        cfg.stream = stream;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        int nclusters = 0;
        if (cudaOccupancyMaxActiveClusters(&nclusters, kern, &cfg) != cudaSuccess || nclusters < 1) {
            (void)cudaGetLastError();
            continue;
        }
        rc = cudaLaunchKernelEx(&cfg, kern, G, diag, g, a, ee, ee_hist, n, batch, line_search, sweeps, p.R,
                                p.NJ, p.TI, (int)P, gx, gc);
        if (rc != cudaSuccess)
            return rc;
        return cudaGetLastError();
    }
    return cudaErrorNotSupported;
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
                                        int sweeps, double *scratch, cudaStream_t stream)
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
            launch_cluster(G, diag, g, a, ee, ee_hist, n, batch, line_search, sweeps, scratch, stream);
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
