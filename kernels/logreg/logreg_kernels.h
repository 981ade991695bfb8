// logreg_kernels.h: the extern "C" launchers of logistic regression's kernels (kernels/logreg.cu). Each queues
// its work on the given stream and returns cudaGetLastError() after the launch; none synchronizes.
// All pointers are device memory; the contracts are those of lr_ops in src/logreg.h. Only
// src/logreg_cuda.c and kernels/logreg.cu include this header (named apart from src/logreg.h).
// provides: lrk_unit_rows, lrk_to_f32, lrk_rows, lrk_losses, lrk_fix_add, lrk_colmax, lrk_finish, lrk_gd,
//           lrk_nesterov, lrk_lbfgs_dir, lrk_axpy, lrk_lbfgs_accept, lrk_fused_plan, lrk_fused_pass
#ifndef DS_KERNELS_LOGREG_H
#define DS_KERNELS_LOGREG_H

#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

// The rows of a unit, the GPU's part of a row block (lr_work.block_rows, a power of two ≥ 16): at most
// 256, and a divisor of the block. Units are where the pass's partial sums are cut, so that each one's
// bits are the same whichever rank holds its block.
int64_t lrk_unit_rows(int64_t block_rows);

// dst[i] = (float)src[i], i < n.
cudaError_t lrk_to_f32(float *dst, const double *src, int64_t n, cudaStream_t stream);

// Z (n × K row-major, float when f32 else double): logits in, P − Y out (softmax, or sigmoids for
// model 1); partials[2u], partials[2u+1] = unit u's Σ loss and count of rows whose argmax is the label
// (units of `unit` rows, ≤ 256).
cudaError_t lrk_rows(void *Z, int f32, const int32_t *labels, int64_t n, int K, int model, int64_t unit,
                     double *partials, cudaStream_t stream);

// slots[0 .. blocks) = the loss of each global block (Σ of its units' partials in unit order) for the
// rank's nb blocks from b0 (units_per units each, units in all), 0 for the others; slots[blocks] = Σ of
// the units' counts.
cudaError_t lrk_losses(const double *partials, int64_t units, int64_t units_per, int64_t b0, int64_t nb,
                       int64_t blocks, double *slots, cudaStream_t stream);

// gbuf[i] and gbuf[dk + i] (dk = cols·K) += the fixed-point digits (core/exactsum.h, scale fix[i / K],
// lo) of the parts partial sums G[p·dk + i] (float when f32): exact, so in any order.
cudaError_t lrk_fix_add(const void *G, int f32, int parts, int64_t cols, int K, const double *fix, double lo,
                        double *gbuf, cudaStream_t stream);

// xmax[j] = max_i |X[i][j]| over n rows of D columns (float when f32), 0 without rows.
cudaError_t lrk_colmax(const void *X, int f32, int64_t n, int64_t D, double *xmax, cudaStream_t stream);

// g = join(gbuf[i], gbuf[dk + i])·inv_n + l2·W (i < reg); out[0] = Σ_b gbuf[2dk + b]·inv_n +
// l2/2·Σ_{i<reg} W²; out[1] = gbuf[2dk + blocks]·inv_n; hist (or NULL) = out[0] (lr_ops.finish).
cudaError_t lrk_finish(const double *gbuf, const double *W, double *g, int64_t dk, int64_t reg, int K,
                       const double *fix, double lo, int64_t blocks, double inv_n, double l2, double *out,
                       double *hist, cudaStream_t stream);

cudaError_t lrk_gd(double *W, const double *g, int64_t n, double lr, cudaStream_t stream);
cudaError_t lrk_nesterov(double *x, double *y, const double *g, int64_t n, double lr, double *t, cudaStream_t stream);
cudaError_t lrk_lbfgs_dir(const double *g, const double *S, const double *Y, const double *rho, int64_t n, int m,
                          int count, int newest, double *d, double *gtd, cudaStream_t stream);
cudaError_t lrk_axpy(double *out, const double *W, double alpha, const double *d, int64_t n, cudaStream_t stream);
cudaError_t lrk_lbfgs_accept(double *W, double *g, const double *Wt, const double *gt, double *s, double *y,
                             double *rho, int64_t n, cudaStream_t stream);

// The fused pass over f32 X (kernels/logreg_fused.cu), for D ≤ 1024 columns and K ≤ 16 classes.
// lrk_fused_plan: the most CTAs of lrk_fused_pass resident at once on the current device (0: not
// available for this shape); the units of one launch (partG: that many · D·K floats).
int lrk_fused_plan(int64_t D, int K);

// The fused pass's partial sums for the units u0 .. u0 + units − 1 (a CTA each, `unit` rows, a
// multiple of 16): partG[b·D·K + j·K + k] = Σ X[i][j]·(P − Y)[i][k] over unit u0 + b's rows (grad only),
// partials[2u], [2u+1] = unit u's Σ loss, Σ correct. W: D × K doubles (j·K + k), rounded to float. Call
// lrk_fused_plan for the same D and K first (it allows the kernel its shared memory; the pass itself
// sets nothing on the host), and launch at most as many units as it gives (partG's size).
cudaError_t lrk_fused_pass(const float *X, int64_t n, int64_t D, const double *W, const int32_t *labels, int K,
                           int model, int grad, int64_t u0, int units, int64_t unit, float *partG, double *partials,
                           cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
