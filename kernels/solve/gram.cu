// gram.cu: the reduction that finishes the tiled, split-K Gram product of the CUDA backend: the
// partial products P_0 .. P_{ks−1} (each n × n, column-major, valid on and above the tile diagonal)
// are summed and written as the full symmetric G, row-major, with G[i][j] = G[j][i] taken from the
// entry with row ≤ column.
// provides: ds_k_gram_reduce, ds_k_gram_reduce_shifted
#include "solve/solve_kernels.h"

namespace {

constexpr int kTile = 32;

// One 32 × 32 block of G per CTA (32 × 8 threads). The source block (lower block index first) is
// read coalesced along its rows and transposed through shared memory when needed. kShift: the partials
// are ldp × ldp and G's rows and columns from split on are stored sh further on (the uniform tiles).
template <bool kShift>
__global__ void gram_reduce_kernel(const double *__restrict__ P, int ks, int64_t n, int64_t ldp, int64_t split,
                                   int64_t sh, double *__restrict__ G)
{
    __shared__ double S[kTile][kTile + 1];
    const int64_t bi = blockIdx.y, bj = blockIdx.x, part = ldp * ldp;
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
                s += P[p * part + col * ldp + row];
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
        G[i * n + j] = v;
    }
}

// One CTA per 32 × 32 block of G; unshifted (ldp = n) unless the partials are padded.
template <bool kShift>
cudaError_t gram_reduce_launch(const double *P, int ks, int64_t n, int64_t ldp, int64_t split, double *G,
                               cudaStream_t stream)
{
    if (n <= 0)
        return cudaSuccess;
    const int64_t blocks = (n + kTile - 1) / kTile;
    dim3 grid((unsigned)blocks, (unsigned)blocks), threads(kTile, 8);
    gram_reduce_kernel<kShift><<<grid, threads, 0, stream>>>(P, ks, n, ldp, split, ldp - n, G);
    return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t ds_k_gram_reduce(const double *P, int ks, int64_t n, double *G, cudaStream_t stream)
{
    return gram_reduce_launch<false>(P, ks, n, n, n, G, stream);
}

extern "C" cudaError_t ds_k_gram_reduce_shifted(const double *P, int ks, int64_t n, int64_t ldp, int64_t split,
                                                double *G, cudaStream_t stream)
{
    return gram_reduce_launch<true>(P, ks, n, ldp, split, G, stream);
}
