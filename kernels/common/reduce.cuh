// reduce.cuh: device helpers shared by the kernels: read-only loads of X widened to double, and sums
// over a warp and over a CTA in a fixed order (so results are bit-identical from run to run).
// provides: kFullMask, ldx, warp_sum, block_sum, block_sum_pairs, ceil_div
#ifndef DS_REDUCE_CUH
#define DS_REDUCE_CUH

#include <stdint.h>

namespace {

constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
__device__ __forceinline__ double ldx(const T *p)
{
    return (double)__ldg(p);  // X is read-only for the whole kernel
}

// Sum over the 32 lanes of a warp. The xor butterfly gives every lane the same bits (each level adds
// the same two values, in either order), so later branches on the sum agree across lanes.
__device__ __forceinline__ double warp_sum(double v)
{
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_xor_sync(kFullMask, v, off);
    return v;
}

// Sum over the CTA in a fixed order; every thread gets the same value. All threads must call it, and the
// CTA must be whole warps (warp_sum shuffles over all 32 lanes; every launch is a multiple of 32).
// s_red holds one double per warp. Ends with a barrier, so it also orders the memory accesses
// before it against those after it.
__device__ double block_sum(double v, double *s_red)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
    v = warp_sum(v);
    if (lane == 0)
        s_red[warp] = v;
    __syncthreads();
    double t = 0.0;
    for (int w = 0; w < nwarps; w++)
        t += s_red[w];
    __syncthreads();
    return t;
}

// The sums over b < n of pairs[2b] and pairs[2b + 1] (per-block partials), over the CTA in a fixed
// order; every thread gets them. All threads must call it (see block_sum).
__device__ void block_sum_pairs(const double *pairs, int n, double *s_red, double *first, double *second)
{
    double a = 0, b = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        a += pairs[2 * i];
        b += pairs[2 * i + 1];
    }
    *first = block_sum(a, s_red);
    *second = block_sum(b, s_red);
}

int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}


}  // namespace

#endif
