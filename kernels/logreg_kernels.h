// logreg_kernels.h: the extern "C" launchers of logistic regression's kernels (kernels/logreg.cu). Each queues
// its work on the given stream and returns cudaGetLastError() after the launch; none synchronizes.
// All pointers are device memory; the contracts are those of lr_ops in src/logreg.h. Only
// src/logreg_cuda.c and kernels/logreg.cu include this header (named apart from src/logreg.h).
// provides: lrk_row_blocks, lrk_to_f32, lrk_rows, lrk_reduce, lrk_finish, lrk_gd, lrk_nesterov,
//           lrk_lbfgs_dir, lrk_axpy, lrk_lbfgs_accept
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

#ifdef __cplusplus
}
#endif

#endif
