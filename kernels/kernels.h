// kernels.h: the extern "C" launchers of dsolve's CUDA kernels (kernels/*.cu). Each queues its work on
// the given stream and returns cudaGetLastError() after the launch; none synchronizes. Only
// src/backend_cuda.c and the .cu files include this header. All pointers are device memory.
// provides: ds_k_fill, ds_k_gather, ds_k_f32_to_f64, ds_k_mirror_upper, ds_k_grad_update,
//           ds_k_grad_update_scratch, ds_k_block_step, ds_k_gram_sweeps, ds_k_gram_sweeps_scratch,
//           ds_k_gram_reduce
#ifndef DS_KERNELS_H
#define DS_KERNELS_H

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

// C: n × n row-major whose upper triangle (column > row) holds the values; copies it onto the lower
// triangle so that C is full symmetric. (cuBLAS's column-major FILL_MODE_LOWER is this upper triangle.)
cudaError_t ds_k_mirror_upper(double *C, int64_t n, cudaStream_t stream);

// residual.cu and gram_sweeps.cu ---------------------------------------------------------------

// Doubles of scratch that ds_k_grad_update needs for these sizes on a device with nsm multiprocessors.
size_t ds_k_grad_update_scratch(int64_t rows, int64_t up_n, int64_t gr_n, int nsm);

// The residual route's fused pass over X (rows × cols, row-major; float when f32, else double):
//   e −= X[:, up0 .. up0+up_n) · coef;  gout[0 .. gr_n) = X[:, gr0 .. gr0+gr_n)ᵀ e;  gout[gr_n] = eᵀe.
// scratch holds ds_k_grad_update_scratch(...) doubles. Deterministic: the same inputs give the same
// bits on the same device.
cudaError_t ds_k_grad_update(const void *X, int f32, int64_t rows, int64_t cols, double *e,
                             int64_t up0, int64_t up_n, const double *coef, int64_t gr0, int64_t gr_n,
                             double *gout, double *scratch, int nsm, cudaStream_t stream);

// One block step of batched SolveBak (backend.h, ds_step_args), in one CTA.
cudaError_t ds_k_block_step(const double *gbuf, const double *diag, const double *gbb, int nb, int ld,
                            int line_search, double *a, double *coef, double *ee_slot,
                            cudaStream_t stream);

// Doubles of scratch that ds_k_gram_sweeps needs.
size_t ds_k_gram_sweeps_scratch(int64_t n, int batch);

// Sweeps of SolveBak on the Gram system (backend.h, ds_gram_args), all in one kernel launch.
// scratch holds ds_k_gram_sweeps_scratch(n, batch) doubles.
cudaError_t ds_k_gram_sweeps(const double *G, const double *diag, double *g, double *a, double *ee,
                             double *ee_hist, int64_t n, int batch, int line_search, int sweeps,
                             double *scratch, cudaStream_t stream);

// gram.cu ----------------------------------------------------------------------------------------

// G (n × n, row-major, full symmetric) = Σ_p P_p over ks partial products, each n × n column-major
// (ld n, consecutive partials n² apart) and valid wherever row ≤ column.
cudaError_t ds_k_gram_reduce(const double *P, int ks, int64_t n, double *G, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
