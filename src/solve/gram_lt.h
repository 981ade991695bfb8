// gram_lt.h: XᵀX's panel plan on cuBLASLt (gram_lt.c says how); gram_cuda.c's default below 2 000 columns.
// provides: gram_lt_xtx, gram_lt_free
#ifndef DS_GRAM_LT_H
#define DS_GRAM_LT_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "core/ctx.h"

// Queues the products of X (m × n row-major f64, device) into *parts partials of n × n (column-major,
// the upper triangle, in *P: the scratch) for ds_k_gram_reduce: the panels on streams[0 .. ns) (streams[0]
// the context's main stream, which also takes the DSYRK of the last rows). *parts = 0 (and nothing queued)
// where the plan does not apply: DSOLVE_GRAM_LT=0, fewer than 32 rows a chunk, X not 256-byte aligned.
int gram_lt_xtx(ds_ctx *ctx, const double *X, int64_t m, int64_t n, const cudaStream_t *streams, int ns,
                double **P, int *parts);

// Frees a plan the CUDA state keeps (its free hook).
void gram_lt_free(void *plan);

#endif
