// ckpt.c: the checkpoint file and the collective decisions around it.
#include "core/ckpt.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/cleanup.h"
#include "h5io.h"

// The fingerprint as three exact doubles: a format number (the command's, ds_ckpt.format, else 1) and the
// hash's two 32-bit halves.
static double ckpt_format(const ds_ckpt *c)
{
    return c->format > 0 ? c->format : 1.0;
}

uint64_t ckpt_hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    if (h == 0)
        h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

void ckpt_start(ds_ctx *ctx, ds_ckpt *c)
{
    (void)ctx;
    c->last = MPI_Wtime();
    if (c->path)
        cleanup_defer();
}

// For the tests: DSOLVE_CKPT_STOP=K stops the run at its K-th safe point (from 1) as a signal would, so
// that a restart from every phase of a run can be checked without racing a signal.
static int ckpt_stop_here(void)
{
    static long calls;
    const char *v = getenv("DSOLVE_CKPT_STOP");
    return v && atol(v) > 0 && ++calls == atol(v);
}

int ckpt_due(ds_ctx *ctx, const ds_ckpt *c)
{
    if (!c || !c->path)
        return 0;
    int v[2] = {cleanup_pending() != 0 || ckpt_stop_here(), ctx->rank == 0 && MPI_Wtime() - c->last >= c->every};
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MAX, ctx->comm);
    return v[0] ? 2 : v[1];
}

int ckpt_write(ds_ctx *ctx, ds_ckpt *c, const double *state, int64_t n, const double *counters, int ncounters)
{
    int rc = DS_OK;
    if (ctx->rank == 0) {
        char tmp[4200];
        h5io_part_name(c->path, ctx->job_tag, tmp, sizeof tmp);
        cleanup_add(tmp);
        const double fp[3] = {ckpt_format(c), (double)(c->fingerprint >> 32), (double)(c->fingerprint & 0xffffffffu)};
        rc = h5io_write_vector(tmp, 1, "state", state, n, &ctx->msg);
        if (rc == DS_OK)
            rc = h5io_write_vector(tmp, 0, "counters", counters, ncounters, &ctx->msg);
        if (rc == DS_OK)
            rc = h5io_write_vector(tmp, 0, "fingerprint", fp, 3, &ctx->msg);
        if (rc == DS_OK)
            rc = h5io_commit(tmp, c->path, &ctx->msg);
        if (rc != DS_OK)
            h5io_discard(tmp);
        cleanup_remove(tmp);
    }
    c->last = MPI_Wtime();
    return ctx_agree(ctx, rc);
}

int ckpt_read_head(ds_ctx *ctx, const ds_ckpt *c, double *counters, int ncounters)
{
    double fp[3] = {0};
    int rc = h5io_read_vector(c->restart, "fingerprint", 3, fp, &ctx->msg);
    const int same_run = fp[1] == (double)(c->fingerprint >> 32) && fp[2] == (double)(c->fingerprint & 0xffffffffu);
    if (rc == DS_OK && !same_run)
        rc = ds_fail(&ctx->msg, DS_ERR_INPUT,
                     "%s: /fingerprint: a checkpoint of another run (other data or settings than this %s)", c->restart,
                     c->what);
    else if (rc == DS_OK && fp[0] != ckpt_format(c))
        rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /fingerprint: a checkpoint in format %g, which this %s does not "
                     "read (it writes format %g): run it again from the start", c->restart, fp[0], c->what,
                     ckpt_format(c));
    if (rc == DS_OK)
        rc = h5io_read_vector(c->restart, "counters", ncounters, counters, &ctx->msg);
    for (int i = 0; rc == DS_OK && i < ncounters; i++)
        if (!isfinite(counters[i]))
            rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /counters: not finite", c->restart);
    return ctx_agree(ctx, rc);
}

int ckpt_read_state(ds_ctx *ctx, const ds_ckpt *c, double *state, int64_t n)
{
    return ctx_agree(ctx, h5io_read_vector(c->restart, "state", n, state, &ctx->msg));
}

int ckpt_read(ds_ctx *ctx, const ds_ckpt *c, double *state, int64_t n, double *counters, int ncounters)
{
    DS_CHECK(ckpt_read_head(ctx, c, counters, ncounters));
    return ckpt_read_state(ctx, c, state, n);
}
