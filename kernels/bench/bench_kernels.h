// bench_kernels.h: the launcher of `dsolve bench`'s add kernel. Queues on stream, returns
// cudaGetLastError() after the launch, never synchronizes. Included by src/bench_cuda.c and bench.cu.
// provides: ds_kb_add
#ifndef DS_BENCH_KERNELS_H
#define DS_BENCH_KERNELS_H

#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

// c[i] = a[i] + b[i] for i < n (float when f32, else double); device pointers, c may alias neither.
cudaError_t ds_kb_add(int f32, int64_t n, const void *a, const void *b, void *c, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
