// kernels/sort.h: the device side of `dsolve sort` (kernels/sort.cu): key maps, CUB's radix sort and
// merge, samples, splitter bounds and checks. Launched by src/sort_cuda.c; all queued on stream.
// provides: ds_ks_map, ds_ks_special, ds_ks_radix, ds_ks_iota, ds_ks_gather, ds_ks_sample, ds_ks_bounds,
//           ds_ks_merge, ds_ks_check
#ifndef DS_KERNELS_SORT_H
#define DS_KERNELS_SORT_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t ds_ks_map(void *dst, const void *src, int64_t n, int dtype, int desc, int inverse, cudaStream_t s);
// count[0] += float keys that are -0.0 or a NaN with the sign bit set (count in device memory)
cudaError_t ds_ks_special(const void *keys, int64_t n, int dtype, unsigned long long *count, cudaStream_t s);
// CUB DeviceRadixSort on a double buffer (k0/k1, values v0/v1 or NULL); *sel in: the input buffer,
// out: the buffer with the result. tmp NULL: *tmp_bytes gets the scratch size. native_dtype < 0:
// unsigned mapped keys, ascending.
cudaError_t ds_ks_radix(void *tmp, size_t *tmp_bytes, void *k0, void *k1, int64_t *v0, int64_t *v1, int64_t n,
                        int w, int native_dtype, int desc, int *sel, cudaStream_t s);
cudaError_t ds_ks_iota(int64_t *x, int64_t n, int64_t start, cudaStream_t s);
cudaError_t ds_ks_gather(void *dst, const void *src, const int64_t *idx, int64_t base, int64_t n, int size,
                         cudaStream_t s);
// Sample, bounds and merge read keys of type dtype and compare them as sk_map(key, dtype, desc) (the
// key width follows from dtype); keys that are mapped already pass SORT_U32 or SORT_U64 and desc 0.
// out[k] = mapped key at ⌊k·n/ns⌋ as uint64, k < ns
cudaError_t ds_ks_sample(const void *keys, int dtype, int desc, int64_t n, int64_t ns, uint64_t *out, cudaStream_t s);
// lo[i] / hi[i]: first position whose mapped key is ≥ / > split[i]
cudaError_t ds_ks_bounds(const void *keys, int dtype, int desc, int64_t n, const uint64_t *split, int ns, int64_t *lo,
                         int64_t *hi, cudaStream_t s);
// CUB DeviceMerge by mapped key; with tags, (mapped key, tag) pairs in lexicographic order. tmp NULL:
// size query.
cudaError_t ds_ks_merge(void *tmp, size_t *tmp_bytes, const void *a, int64_t na, const void *b, int64_t nb, void *out,
                        int dtype, int desc, const int64_t *pa, const int64_t *pb, int64_t *pout, cudaStream_t s);
// out[0] += adjacent pairs out of order, out[1] += Σ sk_hash(mapped key); out[2], out[3] = first, last
// mapped key (n > 0). out in device memory, zeroed by the caller.
cudaError_t ds_ks_check(const void *keys, int64_t n, int dtype, int desc, unsigned long long *out, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
