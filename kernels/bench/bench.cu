// bench.cu: the add kernel of `dsolve bench`: 16-byte vector loads and stores, several vectors per
// thread in flight so that the loads of a warp cover whole lines and memory stays busy.
// provides: ds_kb_add
#include <stdint.h>

#include "bench/bench_kernels.h"

namespace {

constexpr int THREADS = 256;
constexpr int UNROLL = 4;  // vectors per thread

__device__ __forceinline__ double2 vadd(double2 x, double2 y) { return make_double2(x.x + y.x, x.y + y.y); }
__device__ __forceinline__ float4 vadd(float4 x, float4 y)
{
    return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

// V: the 16-byte vector of T. nv vectors, then the n − nv·(16/sizeof T) scalars of the tail.
template <typename T, typename V>
__global__ void __launch_bounds__(THREADS) add_kernel(const V *__restrict__ a, const V *__restrict__ b,
                                                      V *__restrict__ c, int64_t nv, const T *__restrict__ ta,
                                                      const T *__restrict__ tb, T *__restrict__ tc, int tail)
{
    const int64_t base = (int64_t)blockIdx.x * (THREADS * UNROLL) + threadIdx.x;
    V x[UNROLL], y[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int64_t i = base + (int64_t)u * THREADS;
        if (i < nv) {
            x[u] = a[i];
            y[u] = b[i];
        }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int64_t i = base + (int64_t)u * THREADS;
        if (i < nv)
            c[i] = vadd(x[u], y[u]);
    }
    if (blockIdx.x == 0 && threadIdx.x < tail)
        tc[threadIdx.x] = ta[threadIdx.x] + tb[threadIdx.x];
}

template <typename T>
__global__ void add_scalar(const T *__restrict__ a, const T *__restrict__ b, T *__restrict__ c, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}

template <typename T, typename V>
cudaError_t add_launch(int64_t n, const T *a, const T *b, T *c, cudaStream_t stream)
{
    if (n <= 0)
        return cudaSuccess;
    const bool aligned = ((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % sizeof(V) == 0;
    if (!aligned) {
        add_scalar<T><<<4096, THREADS, 0, stream>>>(a, b, c, n);
        return cudaGetLastError();
    }
    const int per = (int)(sizeof(V) / sizeof(T));
    const int64_t nv = n / per;
    const int tail = (int)(n - nv * per);
    const int64_t blocks = nv > 0 ? (nv + THREADS * UNROLL - 1) / (THREADS * UNROLL) : 1;
    add_kernel<T, V><<<(unsigned int)blocks, THREADS, 0, stream>>>((const V *)a, (const V *)b, (V *)c, nv,
                                                                   a + nv * per, b + nv * per, c + nv * per, tail);
    return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t ds_kb_add(int f32, int64_t n, const void *a, const void *b, void *c, cudaStream_t stream)
{
    if (f32)
        return add_launch<float, float4>(n, (const float *)a, (const float *)b, (float *)c, stream);
    return add_launch<double, double2>(n, (const double *)a, (const double *)b, (double *)c, stream);
}
