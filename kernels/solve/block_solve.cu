// block_solve.cu: SolveBak's block solve on the GPU (solve_ops.h states the contracts): the blocks'
// pseudo-inverses (one CTA per block), the block sums (A·P), the coarse step and the residual route's
// block-solve step. The Gram route's block-solve sweeps are in gram_sweeps_bs.cu. Every sum runs in a
// fixed order (no floating-point atomics), so results are bit-identical run to run on the same device.
// provides: ds_k_block_pinv_plan, ds_k_block_pinv, ds_k_block_sums, ds_k_coarse_step, ds_k_block_solve_step
#include "solve/solve_kernels.h"
#include "common/reduce.cuh"

namespace {

// ---------------------------------------------------------------------------------------------------
// block_pinv: one CTA per block, in three phases over H = S·A_b·S (lower triangle), each step between
// barriers and every sum in a fixed order:
//  1. the right-looking Cholesky factor L in H's lower triangle, one column j per step: the pivot d (read
//     by every thread: the same bits, the same decision), column j scaled by piv_j = 1/√d, or zeroed
//     when skipped (piv_j = 0), then the trailing update (a warp per row, lanes along it);
//  2. V = L⁻¹ into H's upper triangle, one row i per step: V_ic = −piv_i·Σ_{q=c}^{i−1} L_iq·V_qc with
//     V_cc = piv_c, thread per c, stored at H[c][i] (L stays intact below the diagonal);
//  3. out_ic = s_i·(VᵀV)_ic·s_c = s_i·s_c·Σ_{q ≥ max(i,c)} V_qi·V_qc, a warp per row i.
// A skipped column's piv is 0, so its column of L, its row and column of V, and its row and column of
// out are 0. H lives in shared memory when it fits, else in the CTA's slab of scratch (global memory:
// slower, for large blocks and large coarse matrices; the same code).

constexpr int kPiThreads = 512;

__global__ void __launch_bounds__(kPiThreads)
    block_pinv_kernel(const double *__restrict__ A, int64_t n, int batch, int64_t astride, int64_t lda, double tol1,
                      double *__restrict__ out, double *hscratch, int h_smem)
{
    extern __shared__ double s_dyn[];  // s[batch], piv[batch], then H when h_smem
    const int64_t b = blockIdx.x, b0 = b * batch;
    const int nb = (int)(n - b0 < batch ? n - b0 : batch);
    const double *Ab = A + b * astride;
    double *ob = out + b * (int64_t)batch * batch;
    double *s = s_dyn, *piv = s_dyn + batch;
    double *H = h_smem ? piv + batch : hscratch + b * (int64_t)batch * batch;
    const int t = threadIdx.x, nt = blockDim.x, lane = t % 32, warp = t / 32, nwarps = nt / 32;
    const double tol = tol1 * nb;

    for (int j = t; j < nb; j += nt) {
        const double d = Ab[(int64_t)j * lda + j];
        s[j] = d > 0.0 ? 1.0 / sqrt(d) : 0.0;
    }
    __syncthreads();
    for (int64_t idx = t; idx < (int64_t)nb * nb; idx += nt) {
        const int i = (int)(idx / nb), j = (int)(idx % nb);
        if (j <= i)
            H[idx] = Ab[(int64_t)i * lda + j] * s[i] * s[j];
    }
    __syncthreads();

    for (int j = 0; j < nb; j++) {
        const double d = H[(int64_t)j * nb + j];
        const bool keep = s[j] > 0.0 && d > tol;
        const double p = keep ? 1.0 / sqrt(d) : 0.0;
        for (int i = j + 1 + t; i < nb; i += nt)
            H[(int64_t)i * nb + j] = keep ? H[(int64_t)i * nb + j] * p : 0.0;
        if (t == 0)
            piv[j] = p;
        __syncthreads();
        if (keep)
            for (int i = j + 1 + warp; i < nb; i += nwarps) {
                const double lij = H[(int64_t)i * nb + j];
                for (int l = j + 1 + lane; l <= i; l += 32)
                    H[(int64_t)i * nb + l] -= lij * H[(int64_t)l * nb + j];
            }
        __syncthreads();
    }

    for (int i = 1; i < nb; i++) {
        const double *Li = H + (int64_t)i * nb;
        for (int c = t; c < i; c += nt) {
            const double *Vc = H + (int64_t)c * nb;  // V_qc = Vc[q] for q > c
            double acc = Li[c] * piv[c];
            for (int q = c + 1; q < i; q++)
                acc = fma(Li[q], Vc[q], acc);
            H[(int64_t)c * nb + i] = -piv[i] * acc;
        }
        __syncthreads();
    }

    for (int i = warp; i < nb; i += nwarps) {
        const double *Vi = H + (int64_t)i * nb;
        for (int c = lane; c <= i; c += 32) {
            const double *Vc = H + (int64_t)c * nb;
            double m = piv[i] * (c == i ? piv[i] : Vc[i]);
            for (int q = i + 1; q < nb; q++)
                m = fma(Vi[q], Vc[q], m);
            const double v = m * s[i] * s[c];
            ob[(int64_t)i * batch + c] = v;
            ob[(int64_t)c * batch + i] = v;
        }
    }
}

// Whether H fits in shared memory beside s and piv, and the dynamic shared memory the kernel then takes.
cudaError_t pinv_plan(int64_t n, int batch, int *h_smem, size_t *dyn)
{
    int dev = 0, optin = 0;
    cudaError_t rc = cudaGetDevice(&dev);
    if (rc == cudaSuccess)
        rc = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (rc != cudaSuccess)
        return rc;
    const int64_t nbmax = batch < n ? batch : n;
    const size_t base = (size_t)2 * batch * sizeof(double), with_h = base + (size_t)(nbmax * nbmax) * sizeof(double);
    *h_smem = with_h <= (size_t)optin;
    *dyn = *h_smem ? with_h : base;
    return base <= (size_t)optin ? cudaSuccess : cudaErrorInvalidValue;
}

// ---------------------------------------------------------------------------------------------------
// block_sums: a warp per (row, block), lanes along the block's columns, then a warp sum.

constexpr int kSumThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kSumThreads)
    block_sums_kernel(const T *__restrict__ A, int64_t rows, int64_t cols, int batch, double *__restrict__ out,
                      int64_t ld_row, int64_t ld_col)
{
    const int lane = threadIdx.x % 32;
    const int64_t k = (cols + batch - 1) / batch, total = rows * k;
    const int64_t step = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t p = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; p < total; p += step) {
        const int64_t i = p / k, c = p - i * k, c0 = c * batch, nb = cols - c0 < batch ? cols - c0 : batch;
        const T *row = A + i * cols + c0;
        double v = 0.0;
        for (int64_t j = lane; j < nb; j += 32)
            v += ldx(row + j);
        v = warp_sum(v);
        if (lane == 0)
            out[i * ld_row + c * ld_col] = v;
    }
}

// ---------------------------------------------------------------------------------------------------
// coarse_step (ds_coarse_args), one CTA: t into shared memory; δ = cinv·t and then cmat·δ a warp per row
// (lanes along it); δ·t and δᵀ·cmat·δ summed over the warps in order; g and a a thread per entry (a only
// where diag > 0).

constexpr int kCsThreads = 256;

__global__ void __launch_bounds__(kCsThreads)
    coarse_step_kernel(const double *__restrict__ cinv, const double *__restrict__ cmat,
                       const double *__restrict__ wt, int64_t ldw, const double *t_in,
                       const double *__restrict__ diag, double *g, int64_t gn, double *a, int64_t n, int batch,
                       double *ee, double *__restrict__ delta, int k)
{
    extern __shared__ double s_dyn[];  // t[k], δ[k]
    __shared__ double s_red[kCsThreads / 32];
    double *ts = s_dyn, *ds = s_dyn + k;
    const int t = threadIdx.x, nt = blockDim.x, lane = t % 32, warp = t / 32, nwarps = nt / 32;
    for (int c = t; c < k; c += nt)
        ts[c] = t_in[c];
    __syncthreads();
    for (int c = warp; c < k; c += nwarps) {
        double r = 0.0;
        for (int q = lane; q < k; q += 32)
            r = fma(cinv[(int64_t)c * k + q], ts[q], r);
        r = warp_sum(r);
        if (lane == 0) {
            ds[c] = r;
            delta[c] = r;
        }
    }
    __syncthreads();
    double dt = 0.0, den = 0.0;  // this warp's rows, the same on every lane
    for (int c = warp; c < k; c += nwarps) {
        double r = 0.0;
        for (int q = lane; q < k; q += 32)
            r = fma(cmat[(int64_t)c * k + q], ds[q], r);
        den = fma(ds[c], warp_sum(r), den);
        dt = fma(ds[c], ts[c], dt);
    }
    dt = block_sum(lane == 0 ? dt : 0.0, s_red);
    den = block_sum(lane == 0 ? den : 0.0, s_red);
    for (int64_t i = t; i < gn; i += nt) {
        double u = 0.0;
        for (int c = 0; c < k; c++)
            u = fma(wt[(int64_t)c * ldw + i], ds[c], u);
        g[i] -= u;
    }
    for (int64_t i = t; i < n; i += nt)
        if (diag[i] > 0.0)
            a[i] += ds[i / batch];
    if (t == 0)
        *ee -= 2.0 * dt - den;
}

// ---------------------------------------------------------------------------------------------------
// The residual route's block-solve step, one CTA: coef = binv·g (a warp per row), a += coef.

constexpr int kBssThreads = 256;

__global__ void __launch_bounds__(kBssThreads)
    block_solve_step_kernel(const double *__restrict__ gbuf, const double *__restrict__ binv, int nb, int ld,
                            double *__restrict__ a, double *__restrict__ coef, double *ee_slot)
{
    extern __shared__ double s_g[];
    const int t = threadIdx.x, nt = blockDim.x, lane = t % 32, warp = t / 32, nwarps = nt / 32;
    for (int j = t; j < nb; j += nt)
        s_g[j] = gbuf[j];
    __syncthreads();
    for (int j = warp; j < nb; j += nwarps) {
        double r = 0.0;
        for (int q = lane; q < nb; q += 32)
            r = fma(binv[(int64_t)j * ld + q], s_g[q], r);
        r = warp_sum(r);
        if (lane == 0) {
            coef[j] = r;
            a[j] += r;
        }
    }
    if (t == 0 && ee_slot)
        *ee_slot = gbuf[nb];
}

cudaError_t set_dyn_smem(const void *kernel, size_t dyn)
{
    if (dyn <= 48 * 1024)
        return cudaSuccess;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn);
}

}  // namespace

extern "C" cudaError_t ds_k_block_pinv_plan(int64_t n, int batch, size_t *scratch_doubles)
{
    int h_smem = 0;
    size_t dyn = 0;
    *scratch_doubles = 0;
    if (batch < 1 || n <= 0)
        return cudaSuccess;
    cudaError_t rc = pinv_plan(n, batch, &h_smem, &dyn);
    if (rc == cudaSuccess && !h_smem)
        *scratch_doubles = (size_t)ceil_div(n, batch) * (size_t)batch * (size_t)batch;
    return rc;
}

extern "C" cudaError_t ds_k_block_pinv(const double *A, int64_t n, int batch, int64_t astride, int64_t lda, double tol1,
                                       double *out, double *scratch, cudaStream_t stream)
{
    if (batch < 1 || n < 0 || lda < (batch < n ? batch : n))
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    int h_smem = 0;
    size_t dyn = 0;
    cudaError_t rc = pinv_plan(n, batch, &h_smem, &dyn);
    if (rc == cudaSuccess)
        rc = set_dyn_smem((const void *)block_pinv_kernel, dyn);
    if (rc != cudaSuccess)
        return rc;
    if (!h_smem && !scratch)
        return cudaErrorInvalidValue;
    block_pinv_kernel<<<(unsigned)ceil_div(n, batch), kPiThreads, dyn, stream>>>(A, n, batch, astride, lda, tol1, out,
                                                                                scratch, h_smem);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_block_sums(const void *A, int f32, int64_t rows, int64_t cols, int batch, double *out,
                                       int64_t ld_row, int64_t ld_col, int nsm, cudaStream_t stream)
{
    if (batch < 1 || rows < 0 || cols < 0)
        return cudaErrorInvalidValue;
    const int64_t warps = rows * ceil_div(cols, batch), per = kSumThreads / 32;
    if (warps == 0)
        return cudaSuccess;
    int64_t grid = ceil_div(warps, per), cap = (int64_t)(nsm > 0 ? nsm : 1) * 16;
    grid = grid < cap ? grid : cap;
    if (f32)
        block_sums_kernel<float><<<(unsigned)grid, kSumThreads, 0, stream>>>((const float *)A, rows, cols, batch, out,
                                                                            ld_row, ld_col);
    else
        block_sums_kernel<double><<<(unsigned)grid, kSumThreads, 0, stream>>>((const double *)A, rows, cols, batch,
                                                                             out, ld_row, ld_col);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_coarse_step(const double *cinv, const double *cmat, const double *wt, int64_t ldw,
                                        const double *t, const double *diag, double *g, int64_t gn, double *a,
                                        int64_t n, int batch, double *ee, double *delta, int64_t k,
                                        cudaStream_t stream)
{
    if (k < 1 || batch < 1 || gn > ldw)
        return cudaErrorInvalidValue;
    const size_t dyn = (size_t)(2 * k) * sizeof(double);
    cudaError_t rc = set_dyn_smem((const void *)coarse_step_kernel, dyn);
    if (rc != cudaSuccess)
        return rc;
    coarse_step_kernel<<<1, kCsThreads, dyn, stream>>>(cinv, cmat, wt, ldw, t, diag, g, gn, a, n, batch, ee, delta,
                                                       (int)k);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_block_solve_step(const double *gbuf, const double *binv, int nb, int ld, double *a,
                                             double *coef, double *ee_slot, cudaStream_t stream)
{
    if (nb < 0 || ld < nb)
        return cudaErrorInvalidValue;
    const size_t dyn = (size_t)(nb > 0 ? nb : 1) * sizeof(double);
    cudaError_t rc = set_dyn_smem((const void *)block_solve_step_kernel, dyn);
    if (rc != cudaSuccess)
        return rc;
    block_solve_step_kernel<<<1, kBssThreads, dyn, stream>>>(gbuf, binv, nb, ld, a, coef, ee_slot);
    return cudaGetLastError();
}
