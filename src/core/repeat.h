// repeat.h: the timed repeats behind every --repeat and every bench size: warm-up calls, timed calls,
// the median of each time the operation reports, optionally the slowest rank's, with the ranks
// agreeing on each call's status.
// provides: repeat_fn, repeat_plan, repeat_timed, repeat_ctx_agree
#ifndef DS_REPEAT_H
#define DS_REPEAT_H

#include "core/ctx.h"

#define REPEAT_MAX_TIMES 8

// One call of the repeated operation on ctx; call < 0 for a warm-up. On success it fills t[0 .. nt−1]
// with the times (seconds) it measured; a failure is returned as a status.
typedef int (*repeat_fn)(ds_ctx *ctx, void *arg, int call, double *t);

typedef struct repeat_plan {
    int warmup;   // untimed calls before the timed ones
    int repeat;   // timed calls; 0: one untimed call and no warm-up (a result without a time)
    int nt;       // times per call, 1 .. REPEAT_MAX_TIMES
    int slowest;  // each time of a timed call is its largest over ctx's ranks (a collective per call)
    // How the ranks agree on each call's status and on the scratch allocation (collective), e.g.
    // repeat_ctx_agree; NULL: the operation agrees itself, calls are not followed by an agreement and
    // the allocation is agreed by ctx_agree.
    int (*agree)(void *agree_arg, ds_ctx *ctx, int status);
    void *agree_arg;
} repeat_plan;

// Runs p->warmup + p->repeat calls of fn (one when p->repeat is 0), stopping at the first failure,
// whose status it returns. times: NULL (scratch allocated here), or room for nt × max(repeat, 1)
// values, time k of timed call i at times[k·repeat + i]. median (nt values, or NULL with repeat 0):
// the median of each time over the timed calls, written only when every call succeeded and repeat > 0.
// Collective over ctx when p->slowest or p->agree is set.
int repeat_timed(ds_ctx *ctx, const repeat_plan *p, repeat_fn fn, void *arg, double *times, double *median);

// ctx_agree in the shape of repeat_plan's agree.
int repeat_ctx_agree(void *unused, ds_ctx *ctx, int status);

#endif
