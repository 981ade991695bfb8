// qr.cu: the kernels around cuSOLVER and cuBLAS for --method qr (qr_cuda.c): the transposing copy of
// [X | y], taking R out of a factorization with qr_ops.h's sign convention, stacking two factors, the
// column norms of R, the randomized sketch of the preconditioned Cholesky QR (two CountSketches and ±1
// signs), the LU split, the diagonal clamp, the leaves of the blocked triangular solve, and small steps.
// Every sum runs in a fixed order: the same inputs give the same bits.
// provides: the launchers of qr_kernels.h
#include <cfloat>

#include "solve/qr_kernels.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;  // grid-stride loops

unsigned blocks_for(int64_t count)
{
    int64_t b = (count + kThreads - 1) / kThreads;
    return (unsigned)(b < 1 ? 1 : b < kMaxBlocks ? b : kMaxBlocks);
}

// splitmix64's finalizer over a combination of the inputs: the sketch's draws.
__device__ uint64_t mix(uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t z = seed ^ (a * 0x9E3779B97F4A7C15ull) ^ ((b + 0x632BE59BD9B4E019ull) * 0xD1B54A32D192ED03ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

template <typename T>
__global__ void cols_kernel(const T *X, const double *y, int64_t m, int64_t n, double *A, int64_t lda)
{
    __shared__ double tile[32][33];
    const int64_t r0 = blockIdx.x * 32ll, c0 = blockIdx.y * 32ll;
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {  // read along rows of X
        const int64_t r = r0 + k, c = c0 + threadIdx.x;
        tile[k][threadIdx.x] = r >= m ? 0.0 : c < n ? (double)X[r * n + c] : c == n ? y[r] : 0.0;
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {  // write along columns of A
        const int64_t c = c0 + k, r = r0 + threadIdx.x;
        if (r < m && c <= n)
            A[c * lda + r] = tile[threadIdx.x][k];
    }
}

__global__ void take_r_kernel(const double *A, int64_t lda, int64_t rows, int64_t n1, double *R)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n1 * n1; k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = k % n1, j = k / n1;
        const bool keep = i <= j && i < rows;
        R[k] = keep ? (A[i + i * lda] < 0 ? -A[i + j * lda] : A[i + j * lda]) : 0.0;
    }
}

__global__ void stack_kernel(const double *R0, const double *R1, int64_t n1, double *S)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < 2 * n1 * n1;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = k % (2 * n1), j = k / (2 * n1);
        S[k] = i < n1 ? R0[i + j * n1] : R1[i - n1 + j * n1];
    }
}

// One warp per column: lane-strided partial sums, then a fixed butterfly.
__global__ void col_norms_kernel(const double *R, int64_t n1, double *out)
{
    const int64_t j = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (j >= n1)
        return;
    double s = 0.0;
    for (int64_t i = lane; i <= j; i += 32)
        s += R[i + j * n1] * R[i + j * n1];
    for (int off = 16; off > 0; off /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0)
        out[j] = s;
}

// One CTA per row of B1: row c·b + t sums, over the blocks k of b rows, the row of block k that the
// rotation of (c, k) puts at t, times that row's sign in sketch c. The rows and signs are drawn once per
// CTA, kThreads blocks at a time, into shared memory; each thread sums one column, k in order.
template <typename T>
__global__ void fold_kernel(const T *X, const double *y, int64_t m, int64_t n, int64_t b, int64_t ld, uint64_t seed,
                            double *B1)
{
    __shared__ int64_t rows[kThreads];
    __shared__ double signs[kThreads];
    const int64_t c = blockIdx.x / b, t = blockIdx.x % b, blocks = (m + b - 1) / b;
    for (int64_t j0 = 0; j0 <= n; j0 += kThreads) {
        const int64_t j = j0 + threadIdx.x;
        double acc = 0.0;
        for (int64_t k0 = 0; k0 < blocks; k0 += kThreads) {
            __syncthreads();
            const int64_t k = k0 + threadIdx.x;
            if (k < blocks) {
                const int64_t i = k * b + (t + b - (int64_t)(mix(seed, 2 * c, k) % (uint64_t)b)) % b;
                rows[threadIdx.x] = i < m ? i : -1;
                signs[threadIdx.x] = i < m && (mix(seed, 2 * c + 1, i) & 1) ? 1.0 : -1.0;
            }
            __syncthreads();
            const int64_t kn = blocks - k0 < kThreads ? blocks - k0 : kThreads;
            for (int64_t q = 0; j <= n && q < kn; q++) {
                const int64_t i = rows[q];
                if (i >= 0)
                    acc += signs[q] * (j < n ? (double)X[i * n + j] : y[i]);
            }
        }
        if (j <= n)
            B1[blockIdx.x * ld + j] = acc;
    }
}

__global__ void signs_kernel(double *S, int64_t count, uint64_t seed)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < count; k += (int64_t)gridDim.x * blockDim.x)
        S[k] = (mix(seed, 7, k) & 1) ? 1.0 : -1.0;
}

__global__ void split_lu_kernel(double *B, int64_t ldb, int64_t n1, double *U, int64_t ldu)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n1 * n1; k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = k % n1, j = k / n1;
        double *b = B + i + j * ldb;
        U[i + j * ldu] = i <= j ? *b : 0.0;
        if (i <= j)
            *b = i == j ? 1.0 : 0.0;
    }
}

// One warp per column: its largest magnitude, then its norm scaled by it, each by a fixed butterfly.
__global__ void clamp_kernel(double *R, int64_t ldr, int64_t n1)
{
    const int64_t j = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (j >= n1)
        return;
    double big = 0.0, s = 0.0;
    for (int64_t i = lane; i <= j; i += 32)
        big = fmax(big, fabs(R[i + j * ldr]));
    for (int off = 16; off > 0; off /= 2)
        big = fmax(big, __shfl_xor_sync(0xffffffffu, big, off));
    for (int64_t i = lane; big > 0 && i <= j; i += 32)
        s += (R[i + j * ldr] / big) * (R[i + j * ldr] / big);
    for (int off = 16; off > 0; off /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, off);
    const double floor = DBL_EPSILON * big * sqrt(s), d = R[j + j * ldr];
    if (lane != 0)
        return;
    if (!(big > 0))
        R[j + j * ldr] = 1.0;
    else if (fabs(d) < floor)
        R[j + j * ldr] = d < 0 ? -floor : floor;
}

// A CTA solves kLeafCols columns: they are staged through shared memory so that the reads and writes of
// B's columns (w contiguous doubles each, ldb apart) are coalesced, and each thread substitutes one in
// registers (the loops unrolled for the widest leaf), with R's block in shared memory (the same entry for
// every thread at a time: a broadcast). Measured on an H200 for 10⁵ columns: 46 µs for a leaf of 32, 155
// for 64 (its unrolled code no longer runs from the instruction cache), 16 for 16.
constexpr int kLeafCols = 128;

__global__ void __launch_bounds__(kLeafCols) trsm_leaf_kernel(const double *R, int64_t ldr, int w, double *B,
                                                              int64_t ldb, int64_t m)
{
    __shared__ double r[QR_TRSM_LEAF][QR_TRSM_LEAF];  // r[j][i] = R_ij
    __shared__ double tile[kLeafCols][QR_TRSM_LEAF + 1];
    for (int k = threadIdx.x; k < QR_TRSM_LEAF * QR_TRSM_LEAF; k += kLeafCols) {
        const int i = k % QR_TRSM_LEAF, j = k / QR_TRSM_LEAF;
        r[j][i] = i < w && j < w && i <= j ? R[i + j * ldr] : i == j ? 1.0 : 0.0;
    }
    const int64_t col0 = blockIdx.x * (int64_t)kLeafCols;
    for (int k = threadIdx.x; k < kLeafCols * QR_TRSM_LEAF; k += kLeafCols) {
        const int c = k / QR_TRSM_LEAF, i = k % QR_TRSM_LEAF;
        const int64_t col = col0 + c;
        tile[c][i] = i < w && col < m ? B[i + col * ldb] : 0.0;
    }
    __syncthreads();
    double x[QR_TRSM_LEAF];
#pragma unroll
    for (int i = 0; i < QR_TRSM_LEAF; i++)
        x[i] = tile[threadIdx.x][i];
#pragma unroll
    for (int j = 0; j < QR_TRSM_LEAF; j++) {
        double s = x[j];
#pragma unroll
        for (int i = 0; i < j; i++)
            s -= r[j][i] * x[i];
        x[j] = s / r[j][j];
    }
#pragma unroll
    for (int i = 0; i < QR_TRSM_LEAF; i++)
        tile[threadIdx.x][i] = x[i];
    __syncthreads();
    for (int k = threadIdx.x; k < kLeafCols * QR_TRSM_LEAF; k += kLeafCols) {
        const int c = k / QR_TRSM_LEAF, i = k % QR_TRSM_LEAF;
        const int64_t col = col0 + c;
        if (i < w && col < m)
            B[i + col * ldb] = tile[c][i];
    }
}

__global__ void div_kernel(double *v, int64_t m, const double *d)
{
    const double by = *d;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x)
        v[i] /= by;
}

__global__ void square_kernel(const double *out, int64_t n, double *G1, int64_t ld)
{
    const int64_t n1 = n + 1;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n1 * n1; k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = k % n1, j = k / n1;
        G1[i + j * ld] = i < n && j < n ? out[i * n + j] : i < n ? out[n * n + i] : j < n ? out[n * n + j] : out[n * n + n];
    }
}

}  // namespace

extern "C" cudaError_t ds_k_qr_cols(const void *X, int f32, const double *y, int64_t m, int64_t n, double *A,
                                    int64_t lda, cudaStream_t stream)
{
    if (m == 0)
        return cudaSuccess;
    const dim3 block(32, 8), grid((unsigned)((m + 31) / 32), (unsigned)((n + 1 + 31) / 32));
    if (f32)
        cols_kernel<<<grid, block, 0, stream>>>((const float *)X, y, m, n, A, lda);
    else
        cols_kernel<<<grid, block, 0, stream>>>((const double *)X, y, m, n, A, lda);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_qr_take_r(const double *A, int64_t lda, int64_t rows, int64_t n1, double *R,
                                      cudaStream_t stream)
{
    take_r_kernel<<<blocks_for(n1 * n1), kThreads, 0, stream>>>(A, lda, rows, n1, R);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_qr_stack(const double *R0, const double *R1, int64_t n1, double *S, cudaStream_t stream)
{
    stack_kernel<<<blocks_for(2 * n1 * n1), kThreads, 0, stream>>>(R0, R1, n1, S);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_qr_col_norms(const double *R, int64_t n1, double *out, cudaStream_t stream)
{
    const int warps = kThreads / 32;
    col_norms_kernel<<<(unsigned)((n1 + warps - 1) / warps), kThreads, 0, stream>>>(R, n1, out);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_qr_fold(const void *X, int f32, const double *y, int64_t m, int64_t n, int64_t b,
                                    int64_t ld, uint64_t seed, double *B1, cudaStream_t stream)
{
    if (f32)
        fold_kernel<<<(unsigned)(2 * b), kThreads, 0, stream>>>((const float *)X, y, m, n, b, ld, seed, B1);
    else
        fold_kernel<<<(unsigned)(2 * b), kThreads, 0, stream>>>((const double *)X, y, m, n, b, ld, seed, B1);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_qr_signs(double *S, int64_t count, uint64_t seed, cudaStream_t stream)
{
    signs_kernel<<<blocks_for(count), kThreads, 0, stream>>>(S, count, seed);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_qr_split_lu(double *B, int64_t ldb, int64_t n1, double *U, int64_t ldu,
                                        cudaStream_t stream)
{
    split_lu_kernel<<<blocks_for(n1 * n1), kThreads, 0, stream>>>(B, ldb, n1, U, ldu);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_qr_clamp(double *R, int64_t ldr, int64_t n1, cudaStream_t stream)
{
    const int warps = kThreads / 32;
    clamp_kernel<<<(unsigned)((n1 + warps - 1) / warps), kThreads, 0, stream>>>(R, ldr, n1);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_qr_trsm_leaf(const double *R, int64_t ldr, int w, double *B, int64_t ldb, int64_t m,
                                         cudaStream_t stream)
{
    if (m == 0 || w == 0)
        return cudaSuccess;
    trsm_leaf_kernel<<<(unsigned)((m + kLeafCols - 1) / kLeafCols), kLeafCols, 0, stream>>>(R, ldr, w, B, ldb, m);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_qr_div(double *v, int64_t m, const double *d, cudaStream_t stream)
{
    if (m == 0)
        return cudaSuccess;
    div_kernel<<<blocks_for(m), kThreads, 0, stream>>>(v, m, d);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_qr_square(const double *out, int64_t n, double *G1, int64_t ld, cudaStream_t stream)
{
    square_kernel<<<blocks_for((n + 1) * (n + 1)), kThreads, 0, stream>>>(out, n, G1, ld);
    return cudaGetLastError();
}
