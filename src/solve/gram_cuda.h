// gram_cuda.h: G = XᵀX and c = Xᵀy on the CUDA backend, in double from f64 X or on the tensor cores in FP16
// (gram_cuda.c says how).
// provides: gram_xtx_f64, gram_xtx_half
#ifndef DS_GRAM_CUDA_H
#define DS_GRAM_CUDA_H

#include <stdint.h>

#include "core/ctx.h"

// out = [G (n × n, symmetric) | c = Xᵀy (n)] for X (m × n row-major, device) and y (m, device), queued on
// the context's stream; m ≥ 1, n ≥ 1. ‖y‖² (out[n·n + n]) is left to the caller.
int gram_xtx_f64(ds_ctx *ctx, const double *X, int64_t m, int64_t n, const double *y, double *out);

// The same [G | c] from [X y], its columns scaled by powers of two, rounded to FP16 on the tensor cores
// (float sums of chunks, added in double and scaled back): X float with f32, else double; m ≥ 1, n ≥ 1.
// Queued; uses the scratch. A value out of FP16's range after its column's scale makes G infinite there.
int gram_xtx_half(ds_ctx *ctx, const void *X, int f32, int64_t m, int64_t n, const double *y, double *out);

#endif
