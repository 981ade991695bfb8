// backend_cpu.h: what the CPU backend shares with the workloads' CPU operations (solve_cpu.c, ...).
// provides: cpu_scratch
#ifndef DS_BACKEND_CPU_H
#define DS_BACKEND_CPU_H

#include <stddef.h>

#include "core/ctx.h"

// A host scratch of at least len doubles owned by ctx's CPU backend, kept between calls so that hot
// loops do not allocate; NULL when host memory is short. Valid until the next call.
double *cpu_scratch(ds_ctx *ctx, size_t len);

#endif
