// gram_sweeps_cluster.cu: the Gram route's sweeps for batches on sm_90: one thread-block cluster runs
// every sweep, each CTA keeping its rows of g and a in registers and exchanging through distributed
// shared memory. Every sum runs in a fixed order (no floating-point atomics), so results are
// bit-identical run to run on the same device. The single-CTA kernels and the entry point are in
// gram_sweeps.cu.
// provides: gram_sweeps_launch_cluster
#include "solve/gram_sweeps.cuh"
#include "common/async_copy.cuh"
#include "common/reduce.cuh"

#include <cooperative_groups.h>

namespace {

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
//  4. den partial = Σ_{i in block} da_i·w_i over the CTA's rows (taken over the NJ groups' shares of w_i,
//     warps in order, so that one CTA barrier serves it and w's combination), pushed to every CTA; the
//     owners of the next block's rows push (g_i, w_i) to every CTA (distributed shared memory; or global
//     scratch when nb is too large for shared memory); then the cluster barrier's arrive (release at
//     cluster scope), whose wait (acquire) comes after the next step has issued its prefetch.
// Per step: two CTA barriers and one cluster barrier. Every sum has a fixed order, so results are
// bit-identical run to run.
// TX (dsolve's default where the exchange is in shared memory): no cluster barrier in the steps. The pushes are
// st.async stores that complete bytes on the receiving CTA's mbarrier of that step's parity, which each
// CTA arms with the bytes a step brings (the block's (g, w) pairs and the C den partials) and waits on.
// Its reuse of a buffer two steps on is safe because a CTA pushes its den partial of step k − 1, which
// every CTA waits for before pushing in step k, after the second CTA barrier of that step, which follows
// its reads of those buffers; that barrier becomes unconditional (it also orders s_num and numpb, as the
// cluster barrier did).

namespace cg = cooperative_groups;

// Long: one kernel runs every block step of every sweep so that each CTA's rows of g and a stay in
// registers and the exchange stays in distributed shared memory; splitting the steps across launches
// would cost a grid-wide synchronisation and a reload of that state per step.
template <int NT, int KT, bool SM, bool TX>
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
    __shared__ uint64_t s_full[2];  // TX: the pushes of a step's parity land on s_full[parity]

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

    // Blocks are counted, not divided out of k: a 64-bit division is a subroutine of dozens of
    // instructions that every warp would run each step (n < 2^31, so a block index fits an int).
    const int nblocks = (int)((n + batch - 1) / batch);
    const int64_t K = (int64_t)nblocks * sweeps;
    const int q = t / TI, ii = t - q * TI;
    const bool wq = q < NJ;
    const int nwr = (NJ * TI + 31) / 32;  // warps holding rows (TI is a multiple of 32 when NJ > 1)
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
    int64_t nhist = 0;  // sweeps recorded in ee_hist (thread 0 of rank 0)

    auto block_len = [&](int64_t b) -> int { return (int)((n - b < batch) ? n - b : batch); };

    auto push_x = [&](int par, int64_t j, double gv, double wvv) {
        const double2 v = make_double2(gv, wvv);
        if constexpr (TX) {
            const unsigned dst = smem_addr(xb + (size_t)par * nbmax + j), bar = smem_addr(&s_full[par]);
            for (int r = 0; r < C; r++)
                st_async(cluster_addr(dst, r), v, cluster_addr(bar, r));
        } else if (SM) {
            for (int r = 0; r < C; r++)
                cl.map_shared_rank(xb, r)[(size_t)par * nbmax + j] = v;
        } else {
            __stcg(xb + (size_t)par * nbmax + j, v);
        }
    };

    // Applies alpha of the previous step (block bp0 of nbp columns, buffers pp; its den partials and num
    // are in this CTA; sweep_end: it closed a sweep); returns alpha.
    auto apply = [&](int pp, int64_t bp0, int nbp, bool sweep_end) -> double {
        double den = 0.0;
#pragma unroll 4
        for (int r = 0; r < C; r++)
            den += s_den[pp][r];
        const double num = s_num[pp];
        const bool unit = !line_search || nbp == 1;
        const double alpha = unit ? 1.0 : (den > 0.0 ? num / den : 0.0);
        if (rank == 0 && t == 0) {
            ee_run -= 2.0 * alpha * num - alpha * alpha * den;
            if (ee_hist && sweep_end)
                ee_hist[nhist++] = ee_run;
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

    // Prefetch of a step's elements of G (block pb0 of pnb columns; the first P of this thread's columns)
    // into buffer buf, as one cp.async group; each thread later reads only what it copied itself, so its
    // own cp.async.wait_group orders them (no barrier). Issued a step ahead, off the critical path.
    auto prefetch = [&](int64_t pb0, int pnb, int buf) {
        if (P > 0 && pnb > 0 && wq) {
            double *dst = pfb + (size_t)buf * P * KT * NT + t;
            const double *row = G + (pb0 + q) * n;
            const int64_t step = (int64_t)NJ * n;
            for (int m = 0, j = q; m < P && j < pnb; m++, j += NJ, row += step) {
#pragma unroll
                for (int kk = 0; kk < KT; kk++)
                    if (okw[kk])
                        cp_async8(dst + (size_t)(m * KT + kk) * NT, row + ik[kk]);
            }
        }
        cp_async_commit();  // possibly empty: one group per step keeps the count uniform
    };

    // TX: the bytes step k's pushes bring to each CTA, and the wait for them (parity k & 1, its
    // (k >> 1)-th use); thread 0 arms the barrier, possibly after some of them have landed.
    auto tx_wait = [&](int64_t k, int nbk) {
        const int par = (int)(k & 1);
        if (t == 0)
            mbar_expect(&s_full[par], (unsigned)(nbk * sizeof(double2) + (k > 0 ? C * sizeof(double) : 0)));
        mbar_wait(&s_full[par], (unsigned)((k >> 1) & 1));
    };

    if constexpr (TX) {
        if (t == 0) {
            mbar_init(&s_full[0]);
            mbar_init(&s_full[1]);
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        }
    }
    prefetch(0, nbmax, 0);
    cl.sync();  // every CTA of the cluster runs before any distributed shared memory access
#pragma unroll
    for (int k = 0; k < KT; k++)
        if (own[k] && ik[k] < nbmax)
            push_x(0, ik[k], gr[k], 0.0);  // block 0
    if (SM)
        for (int j = t; j < nbmax; j += NT)
            diagb[j] = __ldg(diag + j);
    if constexpr (!TX)
        __cluster_barrier_arrive();

    // The cluster barrier is split: a step arrives once its pushes are out and waits at the start of
    // the next after issuing what does not depend on them (the next block's prefetch and diagonal).
    int64_t b0 = 0, bp0 = 0;
    int nb = nbmax, nbp = 0, blk = 0;
    bool endp = false;
    for (int64_t k = 0; k < K; k++) {
        const int par = (int)(k & 1);
        const bool last = k == K - 1;
        const int blkn = blk + 1 == nblocks ? 0 : blk + 1;
        const int64_t b0n = (int64_t)blkn * batch;
        const int nbn = last ? 0 : block_len(b0n);
        double dpre = 0.0;
        if (SM && t < nbn)
            dpre = __ldg(diag + b0n + t);  // staged into shared memory for the next step, below
        prefetch(b0n, nbn, par ^ 1);
        if constexpr (TX)
            tx_wait(k, nb);
        else
            __cluster_barrier_wait();  // step k−1's pushes and den partials (block 0's pushes) have landed

        const double alpha_p = (k > 0) ? apply(par ^ 1, bp0, nbp, endp) : 0.0;

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
            // This thread's columns j = q + m·NJ, m < cnt: the first mp from its prefetch, the rest from
            // G. Counted loops, so that the unrolled copies issue their loads before the chain of fmas
            // (a loop that tests j < nb between elements waits out each load's latency in turn).
            const int cnt = q < nb ? (nb - 1 - q) / NJ + 1 : 0;
            const int mp = cnt < P ? cnt : P;
            const double *dq = da + q;
            cp_async_wait1();  // this step's group has landed (the next step's may be in flight)
            const double *pf = pfb + (size_t)par * P * KT * NT + t;
            constexpr int kUnrollS = KT >= 4 ? 1 : 4, kUnrollG = KT >= 4 ? 2 : 8;  // KT = 4 would spill
#pragma unroll kUnrollS
            for (int m = 0; m < mp; m++) {
                const double d = dq[m * NJ];
#pragma unroll
                for (int kk = 0; kk < KT; kk++)
                    part[kk] = fma(pf[(size_t)(m * KT + kk) * NT], d, part[kk]);
            }
            const int64_t step = (int64_t)NJ * n;
            const double *row = G + (b0 + q) * n + mp * step;
#pragma unroll kUnrollG
            for (int m = mp; m < cnt; m++, row += step) {
                const double d = dq[m * NJ];
#pragma unroll
                for (int kk = 0; kk < KT; kk++)
                    part[kk] = fma(__ldg(row + ikc[kk]), d, part[kk]);
            }
        }

        // den = Σ over the block's rows of da_i·w_i, taken over every thread's share of w_i (warps in
        // order), so that one barrier serves it and the sum of w's shares over the NJ thread groups.
        const bool inblk = r0 < b0 + nb && b0 < r1;  // uniform over the CTA
        if (inblk) {
            double den_t = 0.0;
#pragma unroll
            for (int kk = 0; kk < KT; kk++)
                if (okw[kk] && ik[kk] >= b0 && ik[kk] < b0 + nb)
                    den_t = fma(da[ik[kk] - b0], part[kk], den_t);
            den_t = warp_sum(den_t);
            if (lane == 0)
                s_red[warp] = den_t;
        }
        if (NJ > 1 && wq && q > 0)  // then KT is 1
            s_part[(q - 1) * TI + ii] = part[0];
        if (TX || NJ > 1 || inblk)
            __syncthreads();
        if (NJ > 1 && q == 0)
#pragma unroll 4
            for (int qq = 1; qq < NJ; qq++)
                part[0] += s_part[(qq - 1) * TI + ii];

#pragma unroll
        for (int kk = 0; kk < KT; kk++) {
            if (own[kk]) {
                wv[kk] = part[kk];
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
        if (t < C) {
            double den_c = 0.0;
            if (inblk)
#pragma unroll 4
                for (int w = 0; w < nwr; w++)
                    den_c += s_red[w];
            if constexpr (TX)
                st_async(cluster_addr(smem_addr(&s_den[par][rank]), t), den_c,
                         cluster_addr(smem_addr(&s_full[par ^ 1]), t));
            else
                cl.map_shared_rank(&s_den[par][0], t)[rank] = den_c;
        }
        if constexpr (!TX)
            __cluster_barrier_arrive();
        bp0 = b0;
        nbp = nb;
        endp = blk == nblocks - 1;
        blk = blkn;
        b0 = b0n;
        nb = nbn;
    }
    if constexpr (TX) {
        if (K > 0)
            tx_wait(K, 0);  // the last step's den partials
    } else {
        __cluster_barrier_wait();
    }

    if (K > 0)
        apply((int)((K - 1) & 1), bp0, nbp, endp);
#pragma unroll
    for (int k = 0; k < KT; k++) {
        if (own[k]) {
            g[ik[k]] = gr[k];
            a[ik[k]] = ar[k];
        }
    }
    if (rank == 0 && t == 0)
        *ee = ee_run;
    if constexpr (TX)
        cl.sync();  // no CTA leaves while a push to it may be in flight
#endif
}

using ClKernel = void (*)(const double *, const double *, double *, double *, double *, double *, int64_t,
                          int, int, int, int64_t, int, int, int, double2 *, double *);

ClKernel cluster_kernel(int nt, int kt, bool sm, bool tx)
{
#define DS_CLK(KT_)                                                                                 \
    return sm ? (tx ? sweeps_cluster<kClThreads, KT_, true, true> : sweeps_cluster<kClThreads, KT_, true, false>) \
              : sweeps_cluster<kClThreads, KT_, false, false>
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

}  // namespace

// Launches sweeps_cluster with the largest cluster the device runs (16, 8, 4, 2 CTAs).
// Returns cudaErrorNotSupported where it cannot run (no clusters, too many rows): the caller falls back.
cudaError_t gram_sweeps_launch_cluster(const double *G, const double *diag, double *g, double *a, double *ee,
                                       double *ee_hist, int64_t n, int batch, int line_search, int sweeps,
                                       double *scratch, cudaStream_t stream, int force_c, int force_global, int NT,
                                       int force_pf, int tx)
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
    if (sweeps <= 0)  // nothing to sweep (and TX's first pushes would have no step to wait for them)
        return cudaSuccess;
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
        ClKernel kern = cluster_kernel(NT, p.KT, sm, tx && sm);
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
