// logreg.cu: logistic regression's kernels: the fused pass over the rows (softmax or sigmoids minus the
// one-hot target, loss and correct counts per block), the fixed-order reduction of its partials, and the
// optimisers' updates. The updates of the cols·classes parameters run in one CTA each, so that the dot
// products they need (restart test, two-loop recursion, curvature pair) never leave the device; every
// thread of the CTA touches only its own elements between reductions.
#include "logreg/logreg_kernels.h"
#include "common/reduce.cuh"

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

template <typename T>
__global__ void k_rows(T *Z, const int32_t *labels, int64_t n, int K, int model, double *partials)
{
    __shared__ double s_red[32];
    double loss = 0, correct = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int ok = 0;
        loss += row_pass(Z + i * K, K, labels[i], model, &ok);
        correct += ok;
    }
    loss = block_sum(loss, s_red);
    correct = block_sum(correct, s_red);
    if (threadIdx.x == 0) {
        partials[2 * blockIdx.x] = loss;
        partials[2 * blockIdx.x + 1] = correct;
    }
}

__global__ void k_reduce(const double *partials, int nblocks, const float *Gf, int64_t dk, double *gbuf)
{
    __shared__ double s_red[32];
    double loss, correct;
    block_sum_pairs(partials, nblocks, s_red, &loss, &correct);
    if (Gf)
        for (int64_t i = threadIdx.x; i < dk; i += blockDim.x)
            gbuf[i] = Gf[i];
    if (threadIdx.x == 0) {
        gbuf[dk] = loss;
        gbuf[dk + 1] = correct;
    }
}

__global__ void k_finish(const double *gbuf, const double *W, double *g, int64_t dk, int64_t reg, double inv_n,
                         double l2, double *out, double *hist)
{
    __shared__ double s_red[32];
    double ww = 0;
    for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) {
        const double w = i < reg ? W[i] : 0.0;
        g[i] = gbuf[i] * inv_n + l2 * w;
        ww += w * w;
    }
    ww = block_sum(ww, s_red);
    if (threadIdx.x == 0) {
        out[0] = gbuf[dk] * inv_n + 0.5 * l2 * ww;
        out[1] = gbuf[dk + 1] * inv_n;
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

extern "C" int lrk_row_blocks(int64_t n)
{
    return grid_for(n, kRowThreads);
}

extern "C" cudaError_t lrk_to_f32(float *dst, const double *src, int64_t n, cudaStream_t stream)
{
    k_to_f32<<<grid_for(n, 256), 256, 0, stream>>>(dst, src, n);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_rows(void *Z, int f32, const int32_t *labels, int64_t n, int K, int model, double *partials,
                                cudaStream_t stream)
{
    if (K < 1 || K > kMaxClasses)
        return cudaErrorInvalidValue;
    const int blocks = lrk_row_blocks(n);
    if (f32)
        k_rows<float><<<blocks, kRowThreads, 0, stream>>>((float *)Z, labels, n, K, model, partials);
    else
        k_rows<double><<<blocks, kRowThreads, 0, stream>>>((double *)Z, labels, n, K, model, partials);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_reduce(const double *partials, int nblocks, const float *Gf, int64_t dk, double *gbuf,
                                  cudaStream_t stream)
{
    k_reduce<<<1, kOneBlock, 0, stream>>>(partials, nblocks, Gf, dk, gbuf);
    return cudaGetLastError();
}

extern "C" cudaError_t lrk_finish(const double *gbuf, const double *W, double *g, int64_t dk, int64_t reg, double inv_n,
                                  double l2, double *out, double *hist, cudaStream_t stream)
{
    k_finish<<<1, kOneBlock, 0, stream>>>(gbuf, W, g, dk, reg, inv_n, l2, out, hist);
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
