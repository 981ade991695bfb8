// logreg_kernels.h: the extern "C" launchers of logistic regression's kernels (kernels/logreg.cu). Each queues
// its work on the given stream and returns cudaGetLastError() after the launch; none synchronizes.
// All pointers are device memory; the contracts are those of lr_ops in src/logreg.h. Only
// src/logreg_cuda.c and kernels/logreg.cu include this header (named apart from src/logreg.h).
// provides: lrk_row_blocks, lrk_to_f32, lrk_rows, lrk_reduce, lrk_finish, lrk_gd, lrk_nesterov,
//           lrk_lbfgs_dir, lrk_axpy, lrk_lbfgs_accept, lrk_fused_plan, lrk_fused_pass, lrk_fused_reduce
#ifndef DS_KERNELS_LOGREG_H
#define DS_KERNELS_LOGREG_H

#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

// Blocks lrk_rows launches for n rows (the length / 2 of its partials).
int lrk_row_blocks(int64_t n);

// dst[i] = (float)src[i], i < n.
cudaError_t lrk_to_f32(float *dst, const double *src, int64_t n, cudaStream_t stream);

// Z (n × K row-major, float when f32 else double): logits in, P − Y out (softmax, or sigmoids for
// model 1); partials[2b], partials[2b+1] = block b's Σ loss and count of rows whose argmax is the label.
cudaError_t lrk_rows(void *Z, int f32, const int32_t *labels, int64_t n, int K, int model, double *partials,
                     cudaStream_t stream);

// gbuf[dk], gbuf[dk+1] = the sums of nblocks partials (fixed order); when Gf: gbuf[0 .. dk) = Gf.
cudaError_t lrk_reduce(const double *partials, int nblocks, const float *Gf, int64_t dk, double *gbuf,
                       cudaStream_t stream);

// g = gbuf·inv_n + l2·W (i < reg); out[0] = gbuf[dk]·inv_n + l2/2·Σ_{i<reg} W²; out[1] = gbuf[dk+1]·inv_n;
// hist (or NULL) = out[0].
cudaError_t lrk_finish(const double *gbuf, const double *W, double *g, int64_t dk, int64_t reg, double inv_n,
                       double l2, double *out, double *hist, cudaStream_t stream);

cudaError_t lrk_gd(double *W, const double *g, int64_t n, double lr, cudaStream_t stream);
cudaError_t lrk_nesterov(double *x, double *y, const double *g, int64_t n, double lr, double *t, cudaStream_t stream);
cudaError_t lrk_lbfgs_dir(const double *g, const double *S, const double *Y, const double *rho, int64_t n, int m,
                          int count, int newest, double *d, double *gtd, cudaStream_t stream);
cudaError_t lrk_axpy(double *out, const double *W, double alpha, const double *d, int64_t n, cudaStream_t stream);
cudaError_t lrk_lbfgs_accept(double *W, double *g, const double *Wt, const double *gt, double *s, double *y,
                             double *rho, int64_t n, cudaStream_t stream);

// The fused pass over f32 X (kernels/logreg_fused.cu), for D ≤ 1024 columns and K ≤ 16 classes.
// lrk_fused_plan: the most CTAs lrk_fused_pass launches on the current device (0: not available for
// this shape); partG needs that many · D·K floats and partials twice that many doubles.
int lrk_fused_plan(int64_t D, int K);

// The partial sums of lr_ops.pass, per CTA: partG[b·D·K + j·K + k] = Σ X[i][j]·(P − Y)[i][k] over the
// CTA's rows (grad only), partials[2b], [2b+1] = Σ loss, Σ correct; *blocks = the CTAs launched
// (≤ max_blocks). W: D × K doubles (j·K + k), rounded to float. Call lrk_fused_plan for the same D and K
// first (it allows the kernel its shared memory; the pass itself sets nothing on the host).
cudaError_t lrk_fused_pass(const float *X, int64_t n, int64_t D, const double *W, const int32_t *labels, int K,
                           int model, int grad, int max_blocks, float *partG, double *partials, int *blocks,
                           cudaStream_t stream);

// gbuf[0 .. dk) = Σ_b partG (grad only), gbuf[dk], gbuf[dk+1] = Σ loss, Σ correct; b in order.
cudaError_t lrk_fused_reduce(const float *partG, const double *partials, int blocks, int64_t dk, int grad,
                             double *gbuf, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
