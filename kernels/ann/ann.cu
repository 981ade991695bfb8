// ann.cu: the network's element-wise kernels: row gathers and routing for the hidden fits, their
// targets and checks, the activation of H, the output Gram's digits (core/exactsum.h) and the small
// reshapes around the output solve (see kernels/ann.h).
#include <math.h>

#include "ann/ann_kernels.h"
#include "core/exactsum.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 16384;

int64_t blocks_for(int64_t count)
{
    int64_t b = (count + kThreads - 1) / kThreads;
    return b < 1 ? 1 : b < kMaxBlocks ? b : kMaxBlocks;
}

#define GRID_STRIDE(i, count) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (count); i += (int64_t)gridDim.x * blockDim.x)

__global__ void gather_fit_kernel(const double *X, int64_t n, const double *z, const int64_t *idx, int64_t count,
                                  double *dst)
{
    const int64_t w = n + 2;
    GRID_STRIDE(e, count * w)
    {
        int64_t i = e / w, j = e - i * w, r = idx[i];
        dst[e] = j < n ? X[r * n + j] : j == n ? 1.0 : z[r];
    }
}

__global__ void gather_chunk_kernel(const double *X, int64_t n, const double *z, int64_t c0, const int64_t *idx,
                                    const int64_t *pos, int64_t count, double *dst)
{
    const int64_t w = n + 2;
    GRID_STRIDE(e, count * w)
    {
        int64_t i = e / w, j = e - i * w, r = idx[i] - c0;
        dst[pos[i] * w + j] = j < n ? X[r * n + j] : j == n ? 1.0 : z[r];
    }
}

// Where row e = k·S + j of the round's subsets sits in the exchange layout (kernels/ann.h, route), and
// its owner r: a binary search of j in the neuron's owner offsets lo[0] = 0 ≤ … ≤ lo[p] = S.
__device__ int64_t route_place(const int64_t *tab, int64_t nb, int64_t S, int p, int64_t e, int *owner)
{
    const int64_t k = e / S, j = e - k * S;
    const int64_t *lo = tab + k * (p + 1);
    int a = 0, b = p;  // lo[a] ≤ j < lo[b]
    while (b - a > 1) {
        int c = (a + b) / 2;
        if (lo[c] <= j)
            a = c;
        else
            b = c;
    }
    *owner = a;
    return tab[nb * (p + 1) + k * p + a] + j - lo[a];
}

__global__ void route_requests_kernel(const int64_t *L, int64_t nb, int64_t S, int p, const int64_t *tab, int64_t *req)
{
    const int64_t *start = tab + nb * (2 * p + 1);
    GRID_STRIDE(e, nb * S)
    {
        int r;
        int64_t at = route_place(tab, nb, S, p, e, &r);
        req[at] = L[e] - start[r];
    }
}

__global__ void route_place_kernel(const double *recv, int64_t width, int64_t nb, int64_t S, int p, const int64_t *tab,
                                   double *A)
{
    GRID_STRIDE(x, nb * S * width)
    {
        int r;
        int64_t e = x / width, c = x - e * width;
        A[x] = recv[route_place(tab, nb, S, p, e, &r) * width + c];
    }
}

__global__ void targets_kernel(const double *A, int64_t nb, int64_t S, int64_t n, int classes, int64_t k0,
                               double target, double *t)
{
    GRID_STRIDE(e, nb * S)
    {
        double z = A[e * (n + 2) + n + 1];
        int64_t i = e / S;
        t[e] = classes ? (z == (double)((k0 + i) % classes) ? target : -target) : z;
    }
}

__global__ void ptrs_kernel(double **p, double *base, int64_t stride, int64_t count)
{
    GRID_STRIDE(i, count)
    p[i] = base + i * stride;
}

__global__ void check_fits_kernel(const int *info, double *W, int64_t nb, int64_t n1, int *failed)
{
    GRID_STRIDE(i, nb)
    {
        int bad = info[i] != 0;
        for (int64_t j = 0; j < n1 && !bad; j++)
            bad = !isfinite(W[i * n1 + j]);
        failed[i] = bad;
        if (bad)
            for (int64_t j = 0; j < n1; j++)
                W[i * n1 + j] = 0.0;
    }
}

// A CTA per row (grid-stride over rows), its threads across the first K + 1 + (y ? outputs : 0) columns.
__global__ void activate_kernel(double *H, int64_t rows, int64_t ld, const double *W, int64_t n, int64_t K,
                                const double *y, int64_t outputs)
{
    const int64_t w = K + 1 + (y ? outputs : 0);
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
        double *h = H + i * ld;
        for (int64_t k = threadIdx.x; k < w; k += blockDim.x) {
            if (k < K)
                h[k] = tanh(h[k] + W[k * (n + 1) + n]);
            else if (k == K)
                h[k] = 1.0;
            else if (outputs == 1)
                h[k] = y[i];
            else
                h[k] = (double)(k - K - 1) == y[i] ? 1.0 : 0.0;
        }
    }
}

// Where row i of the packed upper triangle of an ld × ld matrix starts, less i: entry (i, j ≥ i) is at
// tri_row(i, ld) + j.
__device__ int64_t tri_row(int64_t i, int64_t ld)
{
    return i * ld - i * (i - 1) / 2 - i;
}

// A CTA per row i of the triangle (grid-stride), its threads across the columns j ≥ i: P's row and the
// digits' packed row are read and written in order.
__global__ void split_kernel(const double *P, int64_t ld, const double *col, double s0, double lo, double *dig)
{
    const int64_t tri = ld * (ld + 1) / 2;
    for (int64_t i = blockIdx.x; i < ld; i += gridDim.x) {
        const double *p = P + i * ld, si = s0 * col[i];
        double *hi = dig + tri_row(i, ld), *low = hi + tri;
        for (int64_t j = i + threadIdx.x; j < ld; j += blockDim.x)
            exactsum_split(p[j], si * col[j], lo, &hi[j], &low[j]);
    }
}

// A CTA per row i of S, its threads across the row; entry (i, j) from the triangle's (min, max).
__global__ void join_kernel(const double *dig, int64_t ld, const double *col, double s0, double lo, double *S)
{
    const int64_t tri = ld * (ld + 1) / 2;
    for (int64_t i = blockIdx.x; i < ld; i += gridDim.x)
        for (int64_t j = threadIdx.x; j < ld; j += blockDim.x) {
            const int64_t a = i < j ? i : j, b = i < j ? j : i, at = tri_row(a, ld) + b;
            S[i * ld + j] = exactsum_join(dig[at], dig[tri + at], s0 * col[a] * col[b], lo);
        }
}

__global__ void solve_in_kernel(const double *S, int64_t ld, int64_t K1, int64_t C, double lambda, double *A, double *B)
{
    GRID_STRIDE(e, K1 * (K1 + C))
    {
        int64_t i = e / (K1 + C), j = e - i * (K1 + C);
        double v = S[i * ld + j];
        if (j < K1)
            A[i * K1 + j] = v + (i == j ? lambda : 0.0);
        else
            B[i + (j - K1) * K1] = v;
    }
}

__global__ void scale_eigen_kernel(double *Q, const double *e, int64_t K1, int64_t C, double rel)
{
    const double cut = e[K1 - 1] * (double)K1 * rel;
    GRID_STRIDE(x, K1 * C)
    {
        int64_t i = x % K1;
        Q[x] = e[i] > cut ? Q[x] / e[i] : 0.0;
    }
}

__global__ void transpose_kernel(const double *B, int64_t K1, int64_t C, double *V)
{
    GRID_STRIDE(x, K1 * C)
    {
        int64_t i = x / C, c = x - i * C;
        V[x] = B[i + c * K1];
    }
}

}  // namespace

#define LAUNCH(count, kernel, ...)                                                         \
    do {                                                                                   \
        if ((count) > 0)                                                                   \
            kernel<<<(unsigned)blocks_for(count), kThreads, 0, stream>>>(__VA_ARGS__);     \
        return cudaGetLastError();                                                         \
    } while (0)

extern "C" cudaError_t ds_k_ann_gather_fit(const double *X, int64_t n, const double *z, const int64_t *idx,
                                           int64_t count, double *dst, cudaStream_t stream)
{
    LAUNCH(count * (n + 2), gather_fit_kernel, X, n, z, idx, count, dst);
}

extern "C" cudaError_t ds_k_ann_gather_chunk(const double *X, int64_t n, const double *z, int64_t c0,
                                             const int64_t *idx, const int64_t *pos, int64_t count, double *dst,
                                             cudaStream_t stream)
{
    LAUNCH(count * (n + 2), gather_chunk_kernel, X, n, z, c0, idx, pos, count, dst);
}

extern "C" cudaError_t ds_k_ann_route_requests(const int64_t *L, int64_t nb, int64_t S, int p, const int64_t *tab,
                                               int64_t *req, cudaStream_t stream)
{
    LAUNCH(nb * S, route_requests_kernel, L, nb, S, p, tab, req);
}

extern "C" cudaError_t ds_k_ann_route_place(const double *recv, int64_t width, int64_t nb, int64_t S, int p,
                                            const int64_t *tab, double *A, cudaStream_t stream)
{
    LAUNCH(nb * S * width, route_place_kernel, recv, width, nb, S, p, tab, A);
}

extern "C" cudaError_t ds_k_ann_targets(const double *A, int64_t nb, int64_t S, int64_t n, int classes, int64_t k0,
                                        double target, double *t, cudaStream_t stream)
{
    LAUNCH(nb * S, targets_kernel, A, nb, S, n, classes, k0, target, t);
}

extern "C" cudaError_t ds_k_ann_ptrs(double **p, double *base, int64_t stride, int64_t count, cudaStream_t stream)
{
    LAUNCH(count, ptrs_kernel, p, base, stride, count);
}

extern "C" cudaError_t ds_k_ann_check_fits(const int *info, double *W, int64_t nb, int64_t n1, int *failed,
                                           cudaStream_t stream)
{
    LAUNCH(nb, check_fits_kernel, info, W, nb, n1, failed);
}

extern "C" cudaError_t ds_k_ann_activate(double *H, int64_t rows, int64_t ld, const double *W, int64_t n, int64_t K,
                                         const double *y, int64_t outputs, cudaStream_t stream)
{
    if (rows > 0)
        activate_kernel<<<(unsigned)(rows < kMaxBlocks ? rows : kMaxBlocks), kThreads, 0, stream>>>(H, rows, ld, W, n, K, y,
                                                                                                  outputs);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_ann_split(const double *P, int64_t ld, const double *col, double s0, double lo,
                                       double *dig, cudaStream_t stream)
{
    if (ld > 0)
        split_kernel<<<(unsigned)(ld < kMaxBlocks ? ld : kMaxBlocks), kThreads, 0, stream>>>(P, ld, col, s0, lo, dig);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_ann_join(const double *dig, int64_t ld, const double *col, double s0, double lo, double *S,
                                      cudaStream_t stream)
{
    if (ld > 0)
        join_kernel<<<(unsigned)(ld < kMaxBlocks ? ld : kMaxBlocks), kThreads, 0, stream>>>(dig, ld, col, s0, lo, S);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_ann_solve_in(const double *S, int64_t ld, int64_t K1, int64_t C, double lambda, double *A,
                                         double *B, cudaStream_t stream)
{
    LAUNCH(K1 * (K1 + C), solve_in_kernel, S, ld, K1, C, lambda, A, B);
}

extern "C" cudaError_t ds_k_ann_scale_eigen(double *Q, const double *e, int64_t K1, int64_t C, double rel,
                                            cudaStream_t stream)
{
    LAUNCH(K1 * C, scale_eigen_kernel, Q, e, K1, C, rel);
}

extern "C" cudaError_t ds_k_ann_transpose(const double *B, int64_t K1, int64_t C, double *V, cudaStream_t stream)
{
    LAUNCH(K1 * C, transpose_kernel, B, K1, C, V);
}
