// repeat.c: timed repeats (see repeat.h).
#include "core/repeat.h"

#include <stdlib.h>

#include "core/stats.h"

int repeat_ctx_agree(void *unused, ds_ctx *ctx, int status)
{
    return ctx_agree(ctx, status);
}

static int plan_agree(const repeat_plan *p, ds_ctx *ctx, int status)
{
    return p->agree ? p->agree(p->agree_arg, ctx, status) : status;
}

// The calls themselves; times holds nt × repeat values.
static int repeat_calls(ds_ctx *ctx, const repeat_plan *p, repeat_fn fn, void *arg, double *times)
{
    const int calls = p->repeat > 0 ? p->repeat : 1;
    int rc = DS_OK;
    for (int i = p->repeat > 0 ? -p->warmup : 0; rc == DS_OK && i < calls; i++) {
        double t[REPEAT_MAX_TIMES], most[REPEAT_MAX_TIMES];
        rc = plan_agree(p, ctx, fn(ctx, arg, i, t));
        if (rc != DS_OK || i < 0 || p->repeat == 0)
            continue;
        if (p->slowest)
            MPI_Allreduce(t, most, p->nt, MPI_DOUBLE, MPI_MAX, ctx->comm);
        for (int k = 0; k < p->nt; k++)
            times[k * p->repeat + i] = p->slowest ? most[k] : t[k];
    }
    return rc;
}

int repeat_timed(ds_ctx *ctx, const repeat_plan *p, repeat_fn fn, void *arg, double *times, double *median)
{
    DS_ASSERT(p->nt >= 1 && p->nt <= REPEAT_MAX_TIMES && p->repeat >= 0 && p->warmup >= 0);
    double *scratch = NULL;
    if (!times) {
        scratch = calloc((size_t)p->nt * (size_t)(p->repeat > 0 ? p->repeat : 1), sizeof(double));
        int rc = scratch ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
        rc = p->agree ? p->agree(p->agree_arg, ctx, rc) : ctx_agree(ctx, rc);
        if (rc != DS_OK) {
            free(scratch);
            return rc;
        }
        times = scratch;
    }
    int rc = repeat_calls(ctx, p, fn, arg, times);
    for (int k = 0; rc == DS_OK && p->repeat > 0 && k < p->nt; k++)
        median[k] = ds_median(times + k * p->repeat, p->repeat);
    free(scratch);
    return rc;
}
