// gram.cu: the reduction that finishes the tiled, split-K Gram product of the CUDA backend: the
// partial products P_0 .. P_{ks−1} (each n × n, column-major, valid on and above the tile diagonal)
// are summed and written as the full symmetric G, row-major, with G[i][j] = G[j][i] taken from the
// entry with row ≤ column. The FP16 Gram (gram_cuda.c's gram_xtx_half) has its float partials of
// [X y] summed the same way, in double and scaled back, and its input rows scaled and rounded here.
// provides: ds_k_gram_reduce, ds_k_gram_reduce_shifted, ds_k_gram_reduce_aug_half, ds_k_half_scales,
//           ds_k_half_rows
#include <cuda_fp16.h>

#include "solve/solve_kernels.h"

namespace {

constexpr int kTile = 32;
constexpr int64_t kHalfSamples = 1024;  // rows of the sample that sets the FP16 Gram's column scales

// One 32 × 32 block of G per CTA (32 × 8 threads). The source block (lower block index first) is
// read coalesced along its rows and transposed through shared memory when needed. kShift: the partials
// are ldp × ldp and G's rows and columns from split on are stored sh further on (the uniform tiles).
// kAug: the partials (float, part apart) are the Gram of [X y], n = n_X + 1 here: G's last row and
// column go to c after the n_X × n_X G (the layout of solve_ops' gram), each entry times 2^(E_row + E_col).
template <typename T, bool kShift, bool kAug>
__global__ void gram_reduce_kernel(const T *__restrict__ P, int ks, int64_t n, int64_t ldp, int64_t part,
                                   int64_t split, int64_t sh, const int *__restrict__ E, double *__restrict__ G)
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
            if (kAug)
                s = ldexp(s, E[row] + E[col]);
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
cudaError_t gram_reduce_launch(const T *P, int ks, int64_t n, int64_t ldp, int64_t part, int64_t split,
                               const int *E, double *G, cudaStream_t stream)
{
    if (n <= 0)
        return cudaSuccess;
    const int64_t blocks = (n + kTile - 1) / kTile;
    dim3 grid((unsigned)blocks, (unsigned)blocks), threads(kTile, 8);
    gram_reduce_kernel<T, kShift, kAug><<<grid, threads, 0, stream>>>(P, ks, n, ldp, part, split, ldp - n, E, G);
    return cudaGetLastError();
}

// The FP16 Gram's column scales, from a sample of rows (rows s·stride, s < samples, blockIdx.y of them
// at a time): M[j] = max |[X y]_rj| as the bits of a non-negative double (atomicMax keeps their order; a
// NaN's bits pass an infinity's), M zeroed before.
template <typename TX>
__global__ void col_max_kernel(const TX *__restrict__ X, const double *__restrict__ y, int64_t n, int64_t stride,
                               int64_t samples, unsigned long long *M)
{
    const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (j > n)
        return;
    double big = 0;
    for (int64_t s = blockIdx.y; s < samples; s += gridDim.y) {
        const int64_t r = s * stride;
        const double v = fabs(j < n ? (double)X[r * n + j] : y[r]);
        big = v > big || v != v ? v : big;
    }
    atomicMax(M + j, (unsigned long long)__double_as_longlong(big));
}

// E[j] and S[j] = 2^−E[j]: the sample's largest |value| of column j times S[j] lies in [2^−6, 2^−5), 21
// binades under FP16's largest (a value that far above the sample's largest becomes infinite, which the
// range check after the product sees), 9 above its smallest normal (an FP16 subnormal's error, 2^−25 of
// the scale, is far below the rounding of the column's typical values). E = 0 for a column the sample
// saw as zero or not finite; |E| ≤ 1 000.
__global__ void half_scales_kernel(const unsigned long long *__restrict__ M, int64_t n1, int64_t ld, int *E, double *S)
{
    const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (j >= ld)
        return;
    const double big = j < n1 ? __longlong_as_double((long long)M[j]) : 0.0;
    int e = 0;
    if (big > 0 && isfinite(big)) {
        frexp(big, &e);  // big = f·2^e, f in [0.5, 1)
        e += 5;
        e = e < -1000 ? -1000 : e > 1000 ? 1000 : e;
    }
    E[j] = e;
    S[j] = ldexp(1.0, -e);
}

// A[r·ld + j] = FP16 of S[j]·X[(r0 + r)·n + j] (j < n), of S[n]·y[r0 + r] (j = n), 0 beyond; rows nr .. rows − 1
// zero. A CTA a row at a time, its threads two columns each along it (coalesced reads and half2 writes).
template <typename TX>
__global__ void half_rows_kernel(const TX *__restrict__ X, const double *__restrict__ y, int64_t n, int64_t r0,
                                 int64_t nr, int64_t rows, int64_t ld, const double *__restrict__ S,
                                 __half2 *__restrict__ A)
{
    const int64_t ld2 = ld / 2;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        __half2 *dst = A + r * ld2;
        const TX *src = X + (r0 + r) * n;
        for (int64_t j2 = threadIdx.x; j2 < ld2; j2 += blockDim.x) {
            float v[2];
            for (int q = 0; q < 2; q++) {
                const int64_t j = 2 * j2 + q;
                const double x = r >= nr || j > n ? 0.0 : j < n ? (double)src[j] : y[r0 + r];
                v[q] = (float)(x * S[j]);
            }
            dst[j2] = __floats2half2_rn(v[0], v[1]);
        }
    }
}

}  // namespace

extern "C" cudaError_t ds_k_gram_reduce(const double *P, int ks, int64_t n, double *G, cudaStream_t stream)
{
    return gram_reduce_launch<double, false, false>(P, ks, n, n, n * n, n, nullptr, G, stream);
}

extern "C" cudaError_t ds_k_gram_reduce_shifted(const double *P, int ks, int64_t n, int64_t ldp, int64_t split,
                                                double *G, cudaStream_t stream)
{
    return gram_reduce_launch<double, true, false>(P, ks, n, ldp, ldp * ldp, split, nullptr, G, stream);
}

extern "C" cudaError_t ds_k_gram_reduce_aug_half(const float *P, int ks, int64_t n, int64_t ld, int64_t part,
                                                 const int *E, double *out, cudaStream_t stream)
{
    return gram_reduce_launch<float, false, true>(P, ks, n + 1, ld, part, n + 1, E, out, stream);
}

extern "C" cudaError_t ds_k_half_scales(const void *X, int f32, const double *y, int64_t m, int64_t n, int64_t ld,
                                        unsigned long long *M, int *E, double *S, cudaStream_t stream)
{
    cudaError_t err = cudaMemsetAsync(M, 0, (size_t)(n + 1) * sizeof *M, stream);
    if (err != cudaSuccess || ld <= 0)
        return err;
    const int64_t samples = m < kHalfSamples ? m : kHalfSamples, stride = samples > 0 ? m / samples : 1;
    if (samples > 0) {
        dim3 grid((unsigned)((n + 1 + 255) / 256), 16);
        if (f32)
            col_max_kernel<float><<<grid, 256, 0, stream>>>((const float *)X, y, n, stride, samples, M);
        else
            col_max_kernel<double><<<grid, 256, 0, stream>>>((const double *)X, y, n, stride, samples, M);
    }
    half_scales_kernel<<<(unsigned)((ld + 255) / 256), 256, 0, stream>>>(M, n + 1, ld, E, S);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_half_rows(const void *X, int f32, const double *y, int64_t n, int64_t r0, int64_t nr,
                                      int64_t rows, int64_t ld, const double *S, void *A, cudaStream_t stream)
{
    if (rows <= 0)
        return cudaSuccess;
    const unsigned grid = (unsigned)(rows < 65536 ? rows : 65536);
    if (f32)
        half_rows_kernel<float><<<grid, 256, 0, stream>>>((const float *)X, y, n, r0, nr, rows, ld, S, (__half2 *)A);
    else
        half_rows_kernel<double><<<grid, 256, 0, stream>>>((const double *)X, y, n, r0, nr, rows, ld, S, (__half2 *)A);
    return cudaGetLastError();
}
