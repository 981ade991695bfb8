// cmd_sort_stream.c: `dsolve sort` of keys beyond the memory caps (--device-memory, --host-memory): the
// decision to stream, its usage errors, and the streamed run (sort/sort_stream.h) with its keys from
// --gen or --input and its output written segment by segment to a temporary file renamed when complete.
// provides: sort_stream_decide, sort_streamed
#define _POSIX_C_SOURCE 200809L
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cmd_sort.h"
#include "cli/memcaps.h"
#include "core/cleanup.h"
#include "core/data.h"
#include "core/rows.h"
#include "h5io.h"

static int stream_refusal(ds_ctx *ctx, const sort_cmd *c, double need, double cap, const char *cap_name)
{
    const char *what = c->o.argsort || c->values ? "--argsort and --values do not stream yet"
                       : opts_int(&c->a, "repeat") > 1 ? "--repeat does not stream (the runs overwrite the input)"
                       : opts_flag(&c->a, "cub-only") ? "--cub-only does not stream"
                                                      : NULL;
    if (!what)
        return DS_OK;
    return ds_fail(&ctx->msg, DS_ERR_USAGE, "sort: the keys need %.4g MB per rank in memory, above %s (%.4g MB); %s",
                   need / 1e6, cap_name, cap / 1e6, what);
}

int sort_stream_decide(ds_ctx *ctx, sort_cmd *c)
{
    rows_caps caps;
    const char *cap_name = cli_memory_caps(ctx, &c->a, &caps);
    const int w = sort_dtype_size(c->o.dtype);
    int64_t i0 = 0, n = 0;
    data_partition(c->n_global, ctx->nranks, ctx->rank, &i0, &n);
    // In memory: the input, two key buffers and the library's scratch (and the payload's buffers).
    const double pay = c->o.argsort || c->values ? 4.0 * n * (8 + c->o.val_size) : 0.0;
    const double need = sort_stream_backend_bytes(n, w) + pay;
    int stream = need > caps.backend;
    if (MPI_Allreduce(MPI_IN_PLACE, &stream, 1, MPI_INT, MPI_MAX, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Allreduce of the streaming decision failed");
    c->streamed = stream;
    if (!stream)
        return DS_OK;
    DS_CHECK(stream_refusal(ctx, c, need, caps.backend, cap_name));
    double min[2];
    c->ss.chunk = sort_stream_plan(ctx, n, w, caps.backend, caps.host, min);
    if (c->ss.chunk > 0)
        return DS_OK;
    const char *host_name =
        opts_given(&c->a, "host-memory") ? "--host-memory" : "the rank's share of MemAvailable (--host-memory)";
    if (min[1] > caps.host)
        return ds_fail(&ctx->msg, DS_ERR_USAGE,
                       "%s %.4g MB is below the working minimum of %.4g MB for streaming %lld %s keys (they are kept "
                       "in pinned host memory)",
                       host_name, caps.host / 1e6, min[1] / 1e6, (long long)n, sort_dtype_name(c->o.dtype));
    return ds_fail(&ctx->msg, DS_ERR_USAGE, "%s %.4g MB is below the working minimum of %.4g MB for streaming %s keys",
                   cap_name, caps.backend / 1e6, min[0] / 1e6, sort_dtype_name(c->o.dtype));
}

typedef struct stream_io {
    sort_cmd *c;
    const char *tmp;  // the output's temporary name
    int threads;
    double delay;     // DSOLVE_TEST_SORT_DELAY: seconds of pause before each chunk (the fault tests)
    rows_stamp st;    // --input as the run opened it: a change while it is read is bad input
} stream_io;

static int produce_keys(void *arg, int64_t i0, int64_t n, void *out, ds_msg *msg)
{
    stream_io *io = arg;
    sort_cmd *c = io->c;
    if (io->delay > 0) {
        struct timespec ts = {(time_t)io->delay, (long)((io->delay - (double)(time_t)io->delay) * 1e9)};
        nanosleep(&ts, NULL);
    }
    if (!c->input) {
        sort_gen_keys(c->o.dtype, c->dist, (uint64_t)opts_int(&c->a, "seed"), c->n_global, c->i0 + i0, n, out,
                      io->threads);
        return DS_OK;
    }
    const long long k0 = (long long)(c->i0 + i0), k1 = (long long)(c->i0 + i0 + n - 1);
    if (!rows_stamp_same(c->input, &io->st))
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: the file changed while it was read (keys %lld..%lld next)",
                       c->input, c->dataset, k0, k1);
    int rc = h5io_read_keys(c->input, c->dataset, c->o.dtype, c->i0 + i0, n, out, msg);
    if (rc == DS_OK && !rows_stamp_same(c->input, &io->st))
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: the file changed while keys %lld..%lld were read", c->input,
                       c->dataset, k0, k1);
    if (rc != DS_OK && !strstr(msg->text, c->dataset)) {  // a file that changed under the run
        char was[sizeof msg->text];
        snprintf(was, sizeof was, "%s", msg->text);
        msg->text[0] = '\0';
        rc = ds_fail(msg, rc, "%s (dataset %s, keys %lld..%lld, read while streaming)", was, c->dataset, k0, k1);
    }
    return rc;
}

static int sink_keys(void *arg, int64_t at, int64_t n, const void *keys, ds_msg *msg)
{
    stream_io *io = arg;
    return h5io_write_keys(io->tmp, io->c->dataset, io->c->o.dtype, io->c->i0 + at, n, keys, msg);
}

static double test_delay(void)
{
    const char *v = getenv("DSOLVE_TEST_SORT_DELAY");
    char *end = NULL;
    double d = v ? strtod(v, &end) : 0.0;
    return v && end != v && *end == '\0' && d > 0 && d < 60 ? d : 0.0;
}

int sort_streamed(ds_ctx *ctx, sort_cmd *c)
{
    const char *out = opts_str(&c->a, "output");
    char tmp[4200] = "", dir[4200];
    stream_io io = {.c = c, .tmp = tmp, .threads = sort_threads(ctx), .delay = test_delay()};
    sort_stream *s = &c->ss;
    data_partition(c->n_global, ctx->nranks, ctx->rank, &c->i0, &c->n_local);
    s->o = c->o;
    s->n = c->n_local;
    s->produce = produce_keys;
    s->produce_arg = &io;
    s->verify = opts_flag(&c->a, "verify") || c->default_run;
    int rc = c->input && rows_stamp_take(c->input, &io.st) != 0
                 ? ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: cannot open (it was there when the run began)", c->input)
                 : DS_OK;
    if (out) {
        snprintf(dir, sizeof dir, "%s", out);
        s->tmp_dir = dirname(dir);
        h5io_part_name(out, ctx->job_tag, tmp, sizeof tmp);
        cleanup_add(tmp);
        if (rc == DS_OK && ctx->rank == 0)
            rc = h5io_create_keys(tmp, 1, c->dataset, c->o.dtype, c->n_global, &ctx->msg);
        s->sink = sink_keys;
        s->sink_arg = &io;
    }
    ctx_log(ctx, "sort: %lld keys beyond the memory caps: streamed in chunks of %lld keys", (long long)s->n,
            (long long)s->chunk);
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = sort_stream_run(ctx, s);
    if (rc == DS_OK && out && s->verified != 0 && ctx->rank == 0)
        rc = h5io_commit(tmp, out, &ctx->msg);
    rc = ctx_agree(ctx, rc);
    if (out && ctx->rank == 0 && (rc != DS_OK || s->verified == 0))
        h5io_discard(tmp);
    if (out)
        cleanup_remove(tmp);
    // The slowest rank's seconds; the bytes and runs of all ranks.
    double t[2] = {s->seconds, s->io_seconds}, b[2] = {s->bytes_moved, (double)s->runs};
    MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, ctx->comm);
    MPI_Allreduce(MPI_IN_PLACE, b, 2, MPI_DOUBLE, MPI_SUM, ctx->comm);
    s->seconds = t[0], s->io_seconds = t[1], s->bytes_moved = b[0], s->runs = (int64_t)b[1];
    c->verified = s->verified;
    snprintf(c->why, sizeof c->why, "%s", s->why);
    c->seconds = s->seconds;
    c->res.n = c->n_local;
    c->imbalance = 1.0;
    return rc;
}
