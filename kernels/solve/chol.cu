// chol.cu: the element-wise steps around cuSOLVER's Cholesky for --method cholesky: the column scales
// s_j = 1/√G_jj and the equilibrated G ← S·G·S (a zero column becomes e_j), and x (+)= S·b.
// provides: ds_k_chol_scale, ds_k_scale_vec, ds_k_step_size
#include "solve/solve_kernels.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;  // grid-stride loops

int64_t blocks_for(int64_t count)
{
    int64_t b = (count + kThreads - 1) / kThreads;
    return b < 1 ? 1 : b < kMaxBlocks ? b : kMaxBlocks;
}

__global__ void scales_kernel(const double *G, int64_t n, double *s)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x) {
        const double d = G[j * n + j];
        s[j] = d > 0 ? 1.0 / sqrt(d) : 0.0;
    }
}

__global__ void equilibrate_kernel(double *G, int64_t n, const double *s)
{
    const int64_t total = n * n;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = k / n, j = k % n;
        G[k] = i == j && s[i] == 0.0 ? 1.0 : G[k] * s[i] * s[j];
    }
}

__global__ void scale_vec_kernel(const double *s, const double *b, double *x, int64_t n, int add)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x)
        x[j] = add ? x[j] + s[j] * b[j] : s[j] * b[j];
}

// One CTA: out = [max |a − b|, max |a|] (fmax: a NaN entry is passed over, as on the host).
__global__ void step_size_kernel(const double *a, const double *b, int64_t n, double *out)
{
    __shared__ double s[2][kThreads];
    double step = 0, big = 0;
    for (int64_t j = threadIdx.x; j < n; j += kThreads) {
        step = fmax(step, fabs(a[j] - b[j]));
        big = fmax(big, fabs(a[j]));
    }
    s[0][threadIdx.x] = step;
    s[1][threadIdx.x] = big;
    __syncthreads();
    for (int h = kThreads / 2; h > 0; h /= 2) {
        if (threadIdx.x < h) {
            s[0][threadIdx.x] = fmax(s[0][threadIdx.x], s[0][threadIdx.x + h]);
            s[1][threadIdx.x] = fmax(s[1][threadIdx.x], s[1][threadIdx.x + h]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = s[0][0];
        out[1] = s[1][0];
    }
}

}  // namespace

extern "C" cudaError_t ds_k_step_size(const double *a, const double *b, int64_t n, double *out, cudaStream_t stream)
{
    step_size_kernel<<<1, kThreads, 0, stream>>>(a, b, n, out);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_chol_scale(double *G, int64_t n, double *s, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    scales_kernel<<<(unsigned)blocks_for(n), kThreads, 0, stream>>>(G, n, s);
    equilibrate_kernel<<<(unsigned)blocks_for(n * n), kThreads, 0, stream>>>(G, n, s);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_scale_vec(const double *s, const double *b, double *x, int64_t n, int add,
                                      cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    scale_vec_kernel<<<(unsigned)blocks_for(n), kThreads, 0, stream>>>(s, b, x, n, add);
    return cudaGetLastError();
}
