// gram_cuda.h: G = XᵀX and c = Xᵀy for f64 X on the CUDA backend (gram_cuda.c says how).
// provides: gram_xtx_f64
#ifndef DS_GRAM_CUDA_H
#define DS_GRAM_CUDA_H

#include <stdint.h>

#include "core/ctx.h"

// out = [G (n × n, symmetric) | c = Xᵀy (n)] for X (m × n row-major, device) and y (m, device), queued on
// the context's stream; m ≥ 1, n ≥ 1. ‖y‖² (out[n·n + n]) is left to the caller.
int gram_xtx_f64(ds_ctx *ctx, const double *X, int64_t m, int64_t n, const double *y, double *out);

#endif
