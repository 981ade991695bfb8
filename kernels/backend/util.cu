// util.cu: small element-wise kernels of the CUDA backend: fill, strided gather, f32 → f64 widening and
// f64 → f32 narrowing, and mirroring a triangle so that a SYRK result becomes a full symmetric matrix.
// provides: ds_k_fill, ds_k_gather, ds_k_f32_to_f64, ds_k_f64_to_f32, ds_k_mirror_upper
#include "backend/backend_kernels.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;  // grid-stride loops: enough blocks to fill any current GPU

int64_t blocks_for(int64_t count)
{
    int64_t b = (count + kThreads - 1) / kThreads;
    return b < kMaxBlocks ? b : kMaxBlocks;
}

__global__ void fill_kernel(double *x, int64_t n, double value)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = value;
}

__global__ void gather_kernel(double *dst, const double *src, int64_t n, int64_t stride)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = src[i * stride];
}

__global__ void widen_kernel(double *dst, const float *src, int64_t count)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = (double)src[i];
}

__global__ void narrow_kernel(float *dst, const double *src, int64_t count)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = (float)src[i];
}

// One 32 × 32 tile of the lower triangle per CTA (32 × 8 threads). The source tile (the transposed
// position, in the upper triangle) is read row by row into shared memory so that both the read and
// the write are coalesced; the +1 column avoids bank conflicts on the transposed read.
constexpr int kTile = 32, kTileRows = 8;

__global__ void mirror_upper_kernel(double *C, int64_t n)
{
    __shared__ double tile[kTile][kTile + 1];
    const int64_t tr = blockIdx.y, tc = blockIdx.x;  // target tile: rows tr·32.., columns tc·32..
    if (tc > tr)
        return;  // above the diagonal: nothing to write
    // Source tile: rows tc·32 .., columns tr·32 ..
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
        int64_t r = tc * kTile + k, c = tr * kTile + threadIdx.x;
        if (r < n && c < n)
            tile[k][threadIdx.x] = C[r * n + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
        int64_t r = tr * kTile + k, c = tc * kTile + threadIdx.x;
        if (r < n && c < n && r > c)
            C[r * n + c] = tile[threadIdx.x][k];  // = C[c·n + r]
    }
}

}  // namespace

extern "C" cudaError_t ds_k_fill(double *x, int64_t n, double value, cudaStream_t stream)
{
    if (n <= 0)
        return cudaSuccess;
    fill_kernel<<<(unsigned)blocks_for(n), kThreads, 0, stream>>>(x, n, value);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_gather(double *dst, const double *src, int64_t n, int64_t stride,
                                   cudaStream_t stream)
{
    if (n <= 0)
        return cudaSuccess;
    gather_kernel<<<(unsigned)blocks_for(n), kThreads, 0, stream>>>(dst, src, n, stride);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_f32_to_f64(double *dst, const float *src, int64_t count, cudaStream_t stream)
{
    if (count <= 0)
        return cudaSuccess;
    widen_kernel<<<(unsigned)blocks_for(count), kThreads, 0, stream>>>(dst, src, count);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_f64_to_f32(float *dst, const double *src, int64_t count, cudaStream_t stream)
{
    if (count <= 0)
        return cudaSuccess;
    narrow_kernel<<<(unsigned)blocks_for(count), kThreads, 0, stream>>>(dst, src, count);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_mirror_upper(double *C, int64_t n, cudaStream_t stream)
{
    if (n <= 1)
        return cudaSuccess;
    int64_t tiles = (n + kTile - 1) / kTile;
    if (tiles > 65535)  // gridDim.y limit: n > 2 097 120 would be a 35 TB matrix
        return cudaErrorInvalidValue;
    dim3 grid((unsigned)tiles, (unsigned)tiles), block(kTile, kTileRows);
    mirror_upper_kernel<<<grid, block, 0, stream>>>(C, n);
    return cudaGetLastError();
}
