// logreg.cu: logistic regression's kernels: the pass over the rows (softmax or sigmoids minus the
// one-hot target, loss and correct counts per unit of rows), the blocks' losses from the units', the
// exact (fixed-point, core/exactsum.h) sums of the gradient's partials, the column maxima the fixed
// point is scaled by, and the optimisers' updates. The updates of the cols·classes parameters run in one
// CTA each, so that the dot products they need (restart test, two-loop recursion, curvature pair) never
// leave the device; every thread of the CTA touches only its own elements between reductions.
#include "logreg/logreg_kernels.h"
#include "common/reduce.cuh"
#include "core/exactsum.h"

namespace {

constexpr int kRowThreads = 256, kMaxRowBlocks = 1024, kOneBlock = 1024, kMaxClasses = 64, kMaxPairs = 32;

template <typename T>
__global__ void k_to_f32(float *dst, const T *src, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = (float)src[i];
}

// One row: loss, P − Y written back over the logits, and whether the argmax is the label.
template <typename T>
__device__ double row_pass(T *z, int K, int label, int model, int *correct)
{
    double v[kMaxClasses];
    int best = 0;
    for (int k = 0; k < K; k++) {
        v[k] = (double)z[k];
        best = v[k] > v[best] ? k : best;
    }
    *correct = best == label;
    double loss = 0;
    if (model == 0) {
        const double mx = v[best];
        double sum = 0;
        for (int k = 0; k < K; k++)
            sum += exp(v[k] - mx);
        loss = mx + log(sum) - v[label];
        for (int k = 0; k < K; k++)
            z[k] = (T)(exp(v[k] - mx) / sum - (k == label));
    } else {
        for (int k = 0; k < K; k++) {
            const double y = k == label;
            loss += fmax(v[k], 0.0) + log1p(exp(-fabs(v[k]))) - y * v[k];
            z[k] = (T)(1.0 / (1.0 + exp(-v[k])) - y);
        }
    }
    return loss;
}

// CTA u: the rows [u·unit, min(n, (u + 1)·unit)), a thread each; partials[2u], [2u + 1] their Σ loss and
// Σ correct, in a fixed order (the unit's bits do not depend on which launch or rank computes it).
template <typename T>
__global__ void k_rows(T *Z, const int32_t *labels, int64_t n, int K, int model, int64_t unit, double *partials)
{
    __shared__ double s_red[32];
    double loss = 0, correct = 0;
    const int64_t i = blockIdx.x * unit + threadIdx.x;
    if (threadIdx.x < unit && i < n) {
        int ok = 0;
        loss = row_pass(Z + i * K, K, labels[i], model, &ok);
        correct = ok;
    }
    loss = block_sum(loss, s_red);
    correct = block_sum(correct, s_red);
    if (threadIdx.x == 0) {
        partials[2 * blockIdx.x] = loss;
        partials[2 * blockIdx.x + 1] = correct;
    }
}

// slots[b] (b < blocks) = Σ loss of the units of global block b in unit order when the rank holds it
// (local blocks b0 .. b0 + nb − 1, units_per each, the last maybe fewer: units in all), else 0;
// slots[blocks] = Σ correct (integers: exact). One CTA.
__global__ void k_losses(const double *partials, int64_t units, int64_t units_per, int64_t b0, int64_t nb,
                         int64_t blocks, double *slots)
{
    __shared__ double s_red[32];
    for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) {
        double sum = 0;
        if (b >= b0 && b < b0 + nb)
            for (int64_t u = (b - b0) * units_per; u < (b - b0 + 1) * units_per && u < units; u++)
                sum += partials[2 * u];
        slots[b] = sum;
    }
    double correct = 0;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x)
        correct += partials[2 * u + 1];
    correct = block_sum(correct, s_red);
    if (threadIdx.x == 0)
        slots[blocks] = correct;
}

// gbuf[i], gbuf[dk + i] += the digits of Σ_p G[p·dk + i] (p < parts), i < dk = cols·K: exact.
template <typename T>
__global__ void k_fix_add(const T *G, int parts, int64_t dk, int K, const double *fix, double lo, double *gbuf)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < dk; i += (int64_t)gridDim.x * blockDim.x) {
        const double s = fix[i / K];
        double d0 = 0, d1 = 0;
        for (int p = 0; p < parts; p++)
            exactsum_split((double)G[(int64_t)p * dk + i], s, lo, &d0, &d1);
        gbuf[i] += d0;
        gbuf[dk + i] += d1;
    }
}

// xmax[j] = max(xmax[j], max |X[i][j]| over the rows this thread visits): the bits of non-negative
// doubles order as the numbers do, so an integer atomicMax is the max.
template <typename T>
__global__ void k_colmax(const T *X, int64_t n, int64_t D, double *xmax)
{
    const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (j >= D)
        return;
    double m = 0;
    for (int64_t i = blockIdx.y; i < n; i += gridDim.y)
        m = fmax(m, fabs(ldx(X + i * D + j)));
    atomicMax((unsigned long long *)(xmax + j), (unsigned long long)__double_as_longlong(m));
}

// g = digits·inv_n + l2·W; the loss is the slots' sum over the CTA in a fixed order.
__global__ void k_finish(const double *gbuf, const double *W, double *g, int64_t dk, int64_t reg, int K,
                         const double *fix, double lo, int64_t blocks, double inv_n, double l2, double *out,
                         double *hist)
{
    __shared__ double s_red[32];
    double ww = 0, loss = 0;
    for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) {
        const double w = i < reg ? W[i] : 0.0;
        g[i] = exactsum_join(gbuf[i], gbuf[dk + i], fix[i / K], lo) * inv_n + l2 * w;
        ww += w * w;
    }
    for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x)
        loss += gbuf[2 * dk + b];
    ww = block_sum(ww, s_red);
    loss = block_sum(loss, s_red);
    if (threadIdx.x == 0) {
        out[0] = loss * inv_n + 0.5 * l2 * ww;
        out[1] = gbuf[2 * dk + blocks] * inv_n;
        if (hist)
            *hist = out[0];
    }
}

__global__ void k_gd(double *W, const double *g, int64_t n, double lr)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        W[i] -= lr * g[i];
}

__global__ void k_axpy(double *out, const double *W, double alpha, const double *d, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = W[i] + alpha * d[i];
}

__global__ void k_nesterov(double *x, double *y, const double *g, int64_t n, double lr, double *t)
{
    __shared__ double s_red[32];
    const double t_old = *t;
    double restart = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const double xn = y[i] - lr * g[i];
        restart += (y[i] - xn) * (xn - x[i]);
    }
    restart = block_sum(restart, s_red);
    const double t0 = restart > 0 ? 1.0 : t_old, t1 = 0.5 * (1.0 + sqrt(1.0 + 4.0 * t0 * t0)), beta = (t0 - 1.0) / t1;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const double xn = y[i] - lr * g[i];
        y[i] = xn + beta * (xn - x[i]);
        x[i] = xn;
    }
    if (threadIdx.x == 0)
        *t = t1;
}

__device__ double dot_own(const double *a, const double *b, int64_t n, double *s_red)
{
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        s += a[i] * b[i];
    return block_sum(s, s_red);
}

__global__ void k_lbfgs_dir(const double *g, const double *S, const double *Y, const double *rho, int64_t n, int m,
                            int count, int newest, double *d, double *gtd)
{
    __shared__ double s_red[32];
    double a[kMaxPairs], gamma = 0;
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x)
        d[e] = g[e];
    for (int j = 0; j < count; j++) {  // newest to oldest
        const int i = (newest - j + m) % m;
        a[j] = 0;
        if (rho[i] == 0)
            continue;
        a[j] = rho[i] * dot_own(S + i * n, d, n, s_red);
        for (int64_t e = threadIdx.x; e < n; e += blockDim.x)
            d[e] -= a[j] * Y[i * n + e];
        if (gamma == 0)
            gamma = 1.0 / (rho[i] * dot_own(Y + i * n, Y + i * n, n, s_red));
    }
    if (gamma == 0) {
        const double gn = sqrt(dot_own(g, g, n, s_red));
        gamma = gn > 0 ? 1.0 / gn : 1.0;
    }
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x)
        d[e] *= gamma;
    for (int j = count - 1; j >= 0; j--) {  // oldest to newest
        const int i = (newest - j + m) % m;
        if (rho[i] == 0)
            continue;
        const double b = rho[i] * dot_own(Y + i * n, d, n, s_red);
        for (int64_t e = threadIdx.x; e < n; e += blockDim.x)
            d[e] += (a[j] - b) * S[i * n + e];
    }
    double gd = -dot_own(g, d, n, s_red);
    const int steepest = !(gd < 0);
    if (steepest)
        gd = -dot_own(g, g, n, s_red);
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x)
        d[e] = steepest ? -g[e] : -d[e];
    if (threadIdx.x == 0)
        *gtd = gd;
}

__global__ void k_lbfgs_accept(double *W, double *g, const double *Wt, const double *gt, double *s, double *y,
                               double *rho, int64_t n)
{
    __shared__ double s_red[32];
    double ys = 0, yy = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const double si = Wt[i] - W[i], yi = gt[i] - g[i];
        s[i] = si;
        y[i] = yi;
        ys += yi * si;
        yy += yi * yi;
        W[i] = Wt[i];
        g[i] = gt[i];
    }
    ys = block_sum(ys, s_red);
    yy = block_sum(yy, s_red);
    if (threadIdx.x == 0)
        *rho = ys > 1e-10 * yy ? 1.0 / ys : 0.0;
}

int grid_for(int64_t n, int threads)
{
    int64_t b = ceil_div(n > 0 ? n : 1, threads);
    return (int)(b < kMaxRowBlocks ? b : kMaxRowBlocks);
}

}  // namespace

extern "C" int64_t lrk_unit_rows(int64_t block_rows)
{
    return block_rows < kRowThreads ? block_rows : kRowThreads;
}

extern "C" cudaError_t lrk_to_f32(float *dst, const double *src, int64_t n, cudaStream_t stream)
{
    k_to_f32<<<grid_for(n, 256), 256, 0, stream>>>(dst, src, n);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_rows(void *Z, int f32, const int32_t *labels, int64_t n, int K, int model, int64_t unit,
                                double *partials, cudaStream_t stream)
{
    if (K < 1 || K > kMaxClasses || unit < 1 || unit > kRowThreads)
        return cudaErrorInvalidValue;
    if (n < 1)
        return cudaSuccess;
    const int64_t units = ceil_div(n, unit);
    if (f32)
        k_rows<float><<<(unsigned)units, kRowThreads, 0, stream>>>((float *)Z, labels, n, K, model, unit, partials);
    else
        k_rows<double><<<(unsigned)units, kRowThreads, 0, stream>>>((double *)Z, labels, n, K, model, unit, partials);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_losses(const double *partials, int64_t units, int64_t units_per, int64_t b0, int64_t nb,
                                  int64_t blocks, double *slots, cudaStream_t stream)
{
    k_losses<<<1, kOneBlock, 0, stream>>>(partials, units, units_per, b0, nb, blocks, slots);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_fix_add(const void *G, int f32, int parts, int64_t cols, int K, const double *fix, double lo,
                                   double *gbuf, cudaStream_t stream)
{
    const int64_t dk = cols * K;
    if (f32)
        k_fix_add<float><<<grid_for(dk, 256), 256, 0, stream>>>((const float *)G, parts, dk, K, fix, lo, gbuf);
    else
        k_fix_add<double><<<grid_for(dk, 256), 256, 0, stream>>>((const double *)G, parts, dk, K, fix, lo, gbuf);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_colmax(const void *X, int f32, int64_t n, int64_t D, double *xmax, cudaStream_t stream)
{
    cudaError_t rc = cudaMemsetAsync(xmax, 0, (size_t)D * sizeof(double), stream);
    if (rc != cudaSuccess || n < 1)
        return rc;
    const dim3 grid((unsigned)ceil_div(D, 256), (unsigned)(n < 64 ? n : 64));
    if (f32)
        k_colmax<float><<<grid, 256, 0, stream>>>((const float *)X, n, D, xmax);
    else
        k_colmax<double><<<grid, 256, 0, stream>>>((const double *)X, n, D, xmax);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_finish(const double *gbuf, const double *W, double *g, int64_t dk, int64_t reg, int K,
                                  const double *fix, double lo, int64_t blocks, double inv_n, double l2, double *out,
                                  double *hist, cudaStream_t stream)
{
    k_finish<<<1, kOneBlock, 0, stream>>>(gbuf, W, g, dk, reg, K, fix, lo, blocks, inv_n, l2, out, hist);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_gd(double *W, const double *g, int64_t n, double lr, cudaStream_t stream)
{
    k_gd<<<grid_for(n, 256), 256, 0, stream>>>(W, g, n, lr);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_nesterov(double *x, double *y, const double *g, int64_t n, double lr, double *t,
                                    cudaStream_t stream)
{
    k_nesterov<<<1, kOneBlock, 0, stream>>>(x, y, g, n, lr, t);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_lbfgs_dir(const double *g, const double *S, const double *Y, const double *rho, int64_t n,
                                     int m, int count, int newest, double *d, double *gtd, cudaStream_t stream)
{
    if (m > kMaxPairs || count > m)
        return cudaErrorInvalidValue;
    k_lbfgs_dir<<<1, kOneBlock, 0, stream>>>(g, S, Y, rho, n, m, count, newest, d, gtd);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_axpy(double *out, const double *W, double alpha, const double *d, int64_t n,
                                cudaStream_t stream)
{
    k_axpy<<<grid_for(n, 256), 256, 0, stream>>>(out, W, alpha, d, n);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_lbfgs_accept(double *W, double *g, const double *Wt, const double *gt, double *s, double *y,
                                        double *rho, int64_t n, cudaStream_t stream)
{
    k_lbfgs_accept<<<1, kOneBlock, 0, stream>>>(W, g, Wt, gt, s, y, rho, n);
    return cudaGetLastError();
}
