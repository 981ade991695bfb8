// backend_kernels.h: the extern "C" launchers of the CUDA backend's small kernels (kernels/backend/util.cu)
// that the backend and the workloads' CUDA files share. Each queues its work on the given stream and
// returns cudaGetLastError() after the launch; none synchronizes. All pointers are device memory.
// provides: ds_k_fill, ds_k_gather, ds_k_f32_to_f64, ds_k_f64_to_f32, ds_k_mirror_upper
#ifndef DS_BACKEND_KERNELS_H
#define DS_BACKEND_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

// util.cu ----------------------------------------------------------------------------------------

// x[0 .. n−1] = value.
cudaError_t ds_k_fill(double *x, int64_t n, double value, cudaStream_t stream);

// dst[i] = src[i·stride] for i < n (e.g. the diagonal of an n × n matrix with stride n + 1).
cudaError_t ds_k_gather(double *dst, const double *src, int64_t n, int64_t stride, cudaStream_t stream);

// dst[0 .. count−1] = (double)src[..]: f32 rows widened so that cuBLAS works in double.
cudaError_t ds_k_f32_to_f64(double *dst, const float *src, int64_t count, cudaStream_t stream);

// dst[0 .. count−1] = src[..] rounded to float (a matrix for cuSOLVER's single-precision routines).
cudaError_t ds_k_f64_to_f32(float *dst, const double *src, int64_t count, cudaStream_t stream);

// C: n × n row-major whose upper triangle (column > row) holds the values; copies it onto the lower
// triangle so that C is full symmetric. (cuBLAS's column-major FILL_MODE_LOWER is this upper triangle.)
cudaError_t ds_k_mirror_upper(double *C, int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
