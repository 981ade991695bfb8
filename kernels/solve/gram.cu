// gram.cu: the reduction that finishes the tiled, split-K Gram product of the CUDA backend: the
// partial products P_0 .. P_{ks−1} (each n × n, column-major, valid on and above the tile diagonal)
// are summed and written as the full symmetric G, row-major, with G[i][j] = G[j][i] taken from the
// entry with row ≤ column. The TF32 Gram (gram_cuda.c's gram_xtx_tf32) has its float partials of
// [X y] summed the same way, in double, and its input rows rounded to TF32 here.
// provides: ds_k_gram_reduce, ds_k_gram_reduce_shifted, ds_k_gram_reduce_aug_f32, ds_k_tf32_rows
#include "solve/solve_kernels.h"

namespace {

constexpr int kTile = 32;

// One 32 × 32 block of G per CTA (32 × 8 threads). The source block (lower block index first) is
// read coalesced along its rows and transposed through shared memory when needed. kShift: the partials
// are ldp × ldp and G's rows and columns from split on are stored sh further on (the uniform tiles).
// kAug: the partials (float, part apart) are the Gram of [X y], n = n_X + 1 here: G's last row and
// column go to c after the n_X × n_X G (the layout of solve_ops' gram).
template <typename T, bool kShift, bool kAug>
__global__ void gram_reduce_kernel(const T *__restrict__ P, int ks, int64_t n, int64_t ldp, int64_t part,
                                   int64_t split, int64_t sh, double *__restrict__ G)
{
    __shared__ double S[kTile][kTile + 1];
    const int64_t bi = blockIdx.y, bj = blockIdx.x;
    const int64_t lo = bi < bj ? bi : bj, hi = bi < bj ? bj : bi;
    // S[c][r] = Σ_p P_p(row lo·32 + r, column hi·32 + c)
    for (int c = threadIdx.y; c < kTile; c += blockDim.y) {
        int64_t row = lo * kTile + threadIdx.x, col = hi * kTile + c;
        double s = 0.0;
        if (row < n && col < n) {
            if (kShift) {
                row += row >= split ? sh : 0;
                col += col >= split ? sh : 0;
            }
            for (int p = 0; p < ks; p++)
                s += (double)P[p * part + col * ldp + row];
        }
        S[c][threadIdx.x] = s;
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
        const int64_t i = bi * kTile + r, j = bj * kTile + threadIdx.x;
        if (i >= n || j >= n)
            continue;
        const int ri = r, rj = threadIdx.x;  // offsets of i and j within their blocks
        double v;
        if (bi < bj || (bi == bj && ri <= rj))
            v = S[rj][ri];  // (row i, column j) of the source
        else
            v = S[ri][rj];  // (row j, column i)
        if (!kAug)
            G[i * n + j] = v;
        else if (i < n - 1 && j < n - 1)
            G[i * (n - 1) + j] = v;
        else if (j == n - 1 && i < n - 1)
            G[(n - 1) * (n - 1) + i] = v;
    }
}

// One CTA per 32 × 32 block of G; unshifted (ldp = n) unless the partials are padded.
template <typename T, bool kShift, bool kAug>
cudaError_t gram_reduce_launch(const T *P, int ks, int64_t n, int64_t ldp, int64_t part, int64_t split, double *G,
                               cudaStream_t stream)
{
    if (n <= 0)
        return cudaSuccess;
    const int64_t blocks = (n + kTile - 1) / kTile;
    dim3 grid((unsigned)blocks, (unsigned)blocks), threads(kTile, 8);
    gram_reduce_kernel<T, kShift, kAug><<<grid, threads, 0, stream>>>(P, ks, n, ldp, part, split, ldp - n, G);
    return cudaGetLastError();
}

// x rounded to the nearest TF32 (10 bits of mantissa, ties away from zero), the value the tensor cores
// then multiply exactly.
__device__ __forceinline__ float to_tf32(float x)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return __uint_as_float(u);
#else
    return x;
#endif
}

// A[r·ld + j] = TF32 of X[(r0 + r)·n + j] (j < n), of y[r0 + r] (j = n), 0 beyond; rows nr .. rows − 1 zero. A
// CTA a row at a time, its threads along the row (coalesced reads of X and writes of A).
template <typename TX>
__global__ void tf32_rows_kernel(const TX *__restrict__ X, const double *__restrict__ y, int64_t n, int64_t r0,
                                 int64_t nr, int64_t rows, int64_t ld, float *__restrict__ A)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float *dst = A + r * ld;
        const TX *src = X + (r0 + r) * n;
        for (int64_t j = threadIdx.x; j < ld; j += blockDim.x) {
            const double v = r >= nr || j > n ? 0.0 : j < n ? (double)src[j] : y[r0 + r];
            dst[j] = to_tf32((float)v);
        }
    }
}

}  // namespace

extern "C" cudaError_t ds_k_gram_reduce(const double *P, int ks, int64_t n, double *G, cudaStream_t stream)
{
    return gram_reduce_launch<double, false, false>(P, ks, n, n, n * n, n, G, stream);
}

extern "C" cudaError_t ds_k_gram_reduce_shifted(const double *P, int ks, int64_t n, int64_t ldp, int64_t split,
                                                double *G, cudaStream_t stream)
{
    return gram_reduce_launch<double, true, false>(P, ks, n, ldp, ldp * ldp, split, G, stream);
}

extern "C" cudaError_t ds_k_gram_reduce_aug_f32(const float *P, int ks, int64_t n, int64_t ld, int64_t part,
                                                double *out, cudaStream_t stream)
{
    return gram_reduce_launch<float, false, true>(P, ks, n + 1, ld, part, n + 1, out, stream);
}

extern "C" cudaError_t ds_k_tf32_rows(const void *X, int f32, const double *y, int64_t n, int64_t r0, int64_t nr,
                                      int64_t rows, int64_t ld, float *A, cudaStream_t stream)
{
    if (rows <= 0)
        return cudaSuccess;
    const unsigned grid = (unsigned)(rows < 65536 ? rows : 65536);
    if (f32)
        tf32_rows_kernel<float><<<grid, 256, 0, stream>>>((const float *)X, y, n, r0, nr, rows, ld, A);
    else
        tf32_rows_kernel<double><<<grid, 256, 0, stream>>>((const double *)X, y, n, r0, nr, rows, ld, A);
    return cudaGetLastError();
}
