// kernels/sort.cu: the device side of `dsolve sort`: key maps (sort_keys.h), CUB's DeviceRadixSort
// (64-bit item counts) and DeviceMerge, sample and bound kernels (these three compare native or mapped
// keys by their mapped values), and the checks of --verify.
// provides: ds_ks_map, ds_ks_special, ds_ks_radix, ds_ks_iota, ds_ks_gather, ds_ks_sample, ds_ks_bounds,
//           ds_ks_merge, ds_ks_check
#include <cub/device/device_merge.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/tuple.h>

#include "sort/sort_keys.h"
#include "sort/sort_kernels.h"

static const int THREADS = 256;

static unsigned grid_for(int64_t n)
{
    int64_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

static bool is_w4(int dtype) { return dtype == SORT_I32 || dtype == SORT_U32 || dtype == SORT_F32; }

template <typename U>
__device__ __forceinline__ U map_key(U x, int dtype, int desc);
template <>
__device__ __forceinline__ uint32_t map_key<uint32_t>(uint32_t x, int dtype, int desc) { return sk_map32(x, dtype, desc); }
template <>
__device__ __forceinline__ uint64_t map_key<uint64_t>(uint64_t x, int dtype, int desc) { return sk_map64(x, dtype, desc); }

template <typename U>
__global__ void k_map(U *dst, const U *src, int64_t n, int dtype, int desc, int inverse)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        U x = src[i];
        if (sizeof(U) == 4)
            dst[i] = inverse ? (U)sk_unmap32((uint32_t)x, dtype, desc) : (U)sk_map32((uint32_t)x, dtype, desc);
        else
            dst[i] = inverse ? (U)sk_unmap64((uint64_t)x, dtype, desc) : (U)sk_map64((uint64_t)x, dtype, desc);
    }
}

extern "C" cudaError_t ds_ks_map(void *dst, const void *src, int64_t n, int dtype, int desc, int inverse, cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    // Unsigned ascending keys map to themselves.
    if ((dtype == SORT_U32 || dtype == SORT_U64) && !desc && dst == src)
        return cudaSuccess;
    if (is_w4(dtype))
        k_map<uint32_t><<<grid_for(n), THREADS, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, n, dtype, desc, inverse);
    else
        k_map<uint64_t><<<grid_for(n), THREADS, 0, s>>>((uint64_t *)dst, (const uint64_t *)src, n, dtype, desc, inverse);
    return cudaGetLastError();
}

template <typename U>
__global__ void k_special(const U *keys, int64_t n, unsigned long long *count)
{
    const U top = (U)1 << (8 * sizeof(U) - 1);
    const U inf = sizeof(U) == 4 ? (U)0x7f800000u : (U)0x7ff0000000000000ull;
    unsigned long long c = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        U x = keys[i];
        c += x == top || ((x & top) && (x & ~top) > inf);
    }
    c = __reduce_add_sync(0xffffffffu, (unsigned)c);
    if ((threadIdx.x & 31) == 0 && c)
        atomicAdd(count, c);
}

extern "C" cudaError_t ds_ks_special(const void *keys, int64_t n, int dtype, unsigned long long *count, cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    unsigned g = grid_for(n) < 4096 ? grid_for(n) : 4096;
    if (dtype == SORT_F32)
        k_special<uint32_t><<<g, THREADS, 0, s>>>((const uint32_t *)keys, n, count);
    else
        k_special<uint64_t><<<g, THREADS, 0, s>>>((const uint64_t *)keys, n, count);
    return cudaGetLastError();
}

template <typename K>
static cudaError_t radix_t(void *tmp, size_t *bytes, void *k0, void *k1, int64_t *v0, int64_t *v1, int64_t n, int desc,
                           int *sel, cudaStream_t s)
{
    cub::DoubleBuffer<K> keys((K *)(*sel ? k1 : k0), (K *)(*sel ? k0 : k1));
    cudaError_t rc;
    if (v0) {
        cub::DoubleBuffer<int64_t> vals(*sel ? v1 : v0, *sel ? v0 : v1);
        rc = desc ? cub::DeviceRadixSort::SortPairsDescending(tmp, *bytes, keys, vals, n, 0, 8 * (int)sizeof(K), s)
                  : cub::DeviceRadixSort::SortPairs(tmp, *bytes, keys, vals, n, 0, 8 * (int)sizeof(K), s);
    } else {
        rc = desc ? cub::DeviceRadixSort::SortKeysDescending(tmp, *bytes, keys, n, 0, 8 * (int)sizeof(K), s)
                  : cub::DeviceRadixSort::SortKeys(tmp, *bytes, keys, n, 0, 8 * (int)sizeof(K), s);
    }
    if (tmp && rc == cudaSuccess)
        *sel = keys.Current() == (K *)k1;
    return rc;
}

extern "C" cudaError_t ds_ks_radix(void *tmp, size_t *tmp_bytes, void *k0, void *k1, int64_t *v0, int64_t *v1, int64_t n,
                                   int w, int native_dtype, int desc, int *sel, cudaStream_t s)
{
    switch (native_dtype) {
    case SORT_I32: return radix_t<int32_t>(tmp, tmp_bytes, k0, k1, v0, v1, n, desc, sel, s);
    case SORT_I64: return radix_t<int64_t>(tmp, tmp_bytes, k0, k1, v0, v1, n, desc, sel, s);
    case SORT_F32: return radix_t<float>(tmp, tmp_bytes, k0, k1, v0, v1, n, desc, sel, s);
    case SORT_F64: return radix_t<double>(tmp, tmp_bytes, k0, k1, v0, v1, n, desc, sel, s);
    case SORT_U64: return radix_t<uint64_t>(tmp, tmp_bytes, k0, k1, v0, v1, n, desc, sel, s);
    case SORT_U32: return radix_t<uint32_t>(tmp, tmp_bytes, k0, k1, v0, v1, n, desc, sel, s);
    default:
        return w == 4 ? radix_t<uint32_t>(tmp, tmp_bytes, k0, k1, v0, v1, n, 0, sel, s)
                      : radix_t<uint64_t>(tmp, tmp_bytes, k0, k1, v0, v1, n, 0, sel, s);
    }
}

__global__ void k_iota(int64_t *x, int64_t n, int64_t start)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = start + i;
}

extern "C" cudaError_t ds_ks_iota(int64_t *x, int64_t n, int64_t start, cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    k_iota<<<grid_for(n), THREADS, 0, s>>>(x, n, start);
    return cudaGetLastError();
}

template <typename T>
__global__ void k_gather(T *dst, const T *src, const int64_t *idx, int64_t base, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = src[idx[i] - base];
}

extern "C" cudaError_t ds_ks_gather(void *dst, const void *src, const int64_t *idx, int64_t base, int64_t n, int size,
                                    cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    if (size == 4)
        k_gather<uint32_t><<<grid_for(n), THREADS, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, idx, base, n);
    else
        k_gather<uint64_t><<<grid_for(n), THREADS, 0, s>>>((uint64_t *)dst, (const uint64_t *)src, idx, base, n);
    return cudaGetLastError();
}

// Compares keys of one width by their mapped values (dtype and desc uniform over a launch).
template <typename U>
struct mapped_less {
    int dtype, desc;
    __host__ __device__ U map(U x) const
    {
        if (sizeof(U) == 4)
            return (U)sk_map32((uint32_t)x, dtype, desc);
        return (U)sk_map64((uint64_t)x, dtype, desc);
    }
    __host__ __device__ bool operator()(const U &x, const U &y) const { return map(x) < map(y); }
};

template <typename U>
__global__ void k_sample(const U *keys, int64_t n, int64_t ns, mapped_less<U> m, uint64_t *out)
{
    int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (k < ns)
        out[k] = (uint64_t)m.map(keys[k * n / ns]);
}

extern "C" cudaError_t ds_ks_sample(const void *keys, int dtype, int desc, int64_t n, int64_t ns, uint64_t *out,
                                    cudaStream_t s)
{
    if (ns <= 0)
        return cudaSuccess;
    unsigned g = (unsigned)((ns + THREADS - 1) / THREADS);
    if (is_w4(dtype))
        k_sample<uint32_t><<<g, THREADS, 0, s>>>((const uint32_t *)keys, n, ns, mapped_less<uint32_t>{dtype, desc}, out);
    else
        k_sample<uint64_t><<<g, THREADS, 0, s>>>((const uint64_t *)keys, n, ns, mapped_less<uint64_t>{dtype, desc}, out);
    return cudaGetLastError();
}

template <typename U>
__global__ void k_bounds(const U *keys, int64_t n, mapped_less<U> m, const uint64_t *split, int ns, int64_t *lo,
                         int64_t *hi)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 2 * ns)
        return;
    const int upper = i >= ns;
    const uint64_t x = split[upper ? i - ns : i];
    int64_t a = 0, b = n;
    while (a < b) {
        int64_t mid = a + (b - a) / 2;
        uint64_t k = (uint64_t)m.map(keys[mid]);
        if (k < x || (upper && k == x))
            a = mid + 1;
        else
            b = mid;
    }
    (upper ? hi : lo)[upper ? i - ns : i] = a;
}

extern "C" cudaError_t ds_ks_bounds(const void *keys, int dtype, int desc, int64_t n, const uint64_t *split, int ns,
                                    int64_t *lo, int64_t *hi, cudaStream_t s)
{
    if (ns <= 0)
        return cudaSuccess;
    unsigned g = (unsigned)((2 * ns + THREADS - 1) / THREADS);
    if (is_w4(dtype))
        k_bounds<uint32_t><<<g, THREADS, 0, s>>>((const uint32_t *)keys, n, mapped_less<uint32_t>{dtype, desc}, split,
                                                 ns, lo, hi);
    else
        k_bounds<uint64_t><<<g, THREADS, 0, s>>>((const uint64_t *)keys, n, mapped_less<uint64_t>{dtype, desc}, split,
                                                 ns, lo, hi);
    return cudaGetLastError();
}

// (key, tag) pairs: by mapped key, then by tag.
template <typename U>
struct tag_less {
    mapped_less<U> m;
    template <typename T>
    __host__ __device__ bool operator()(const T &x, const T &y) const
    {
        const U kx = m.map(thrust::get<0>(x)), ky = m.map(thrust::get<0>(y));
        return kx < ky || (kx == ky && thrust::get<1>(x) < thrust::get<1>(y));
    }
};

template <typename U>
static cudaError_t merge_t(void *tmp, size_t *bytes, const U *a, int64_t na, const U *b, int64_t nb, U *out,
                           mapped_less<U> m, const int64_t *pa, const int64_t *pb, int64_t *pout, cudaStream_t s)
{
    if (!pa)
        return cub::DeviceMerge::MergeKeys(tmp, *bytes, a, na, b, nb, out, m, s);
    auto za = thrust::make_zip_iterator(thrust::make_tuple(a, pa));
    auto zb = thrust::make_zip_iterator(thrust::make_tuple(b, pb));
    auto zo = thrust::make_zip_iterator(thrust::make_tuple(out, pout));
    return cub::DeviceMerge::MergeKeys(tmp, *bytes, za, na, zb, nb, zo, tag_less<U>{m}, s);
}

extern "C" cudaError_t ds_ks_merge(void *tmp, size_t *tmp_bytes, const void *a, int64_t na, const void *b, int64_t nb,
                                   void *out, int dtype, int desc, const int64_t *pa, const int64_t *pb, int64_t *pout,
                                   cudaStream_t s)
{
    if (is_w4(dtype))
        return merge_t<uint32_t>(tmp, tmp_bytes, (const uint32_t *)a, na, (const uint32_t *)b, nb, (uint32_t *)out,
                                 mapped_less<uint32_t>{dtype, desc}, pa, pb, pout, s);
    return merge_t<uint64_t>(tmp, tmp_bytes, (const uint64_t *)a, na, (const uint64_t *)b, nb, (uint64_t *)out,
                             mapped_less<uint64_t>{dtype, desc}, pa, pb, pout, s);
}

template <typename U>
__global__ void k_check(const U *keys, int64_t n, int dtype, int desc, unsigned long long *out)
{
    unsigned long long inv = 0, sum = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        U k = map_key<U>(keys[i], dtype, desc);
        sum += sk_hash((uint64_t)k);
        if (i + 1 < n)
            inv += map_key<U>(keys[i + 1], dtype, desc) < k;
        if (i == 0)
            out[2] = (unsigned long long)k;
        if (i == n - 1)
            out[3] = (unsigned long long)k;
    }
    for (int o = 16; o > 0; o /= 2) {
        inv += __shfl_down_sync(0xffffffffu, inv, o);
        sum += __shfl_down_sync(0xffffffffu, sum, o);
    }
    if ((threadIdx.x & 31) == 0) {
        if (inv)
            atomicAdd(&out[0], inv);
        atomicAdd(&out[1], sum);
    }
}

extern "C" cudaError_t ds_ks_check(const void *keys, int64_t n, int dtype, int desc, unsigned long long *out, cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    unsigned g = grid_for(n) < 8192 ? grid_for(n) : 8192;
    if (is_w4(dtype))
        k_check<uint32_t><<<g, THREADS, 0, s>>>((const uint32_t *)keys, n, dtype, desc, out);
    else
        k_check<uint64_t><<<g, THREADS, 0, s>>>((const uint64_t *)keys, n, dtype, desc, out);
    return cudaGetLastError();
}
