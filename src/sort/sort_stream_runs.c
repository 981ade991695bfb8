// sort_stream_runs.c: the streamed sort (sort_stream.h): its memory, phase 1 and the verdict. Phase 1 (runs):
// each chunk of a rank's keys is produced into the host store, staged to the backend on the copy queue
// (the next chunk's copy overlaps this chunk's sort), mapped to unsigned keys, radix-sorted and copied
// back over itself. Phase 2 (segments) is sort_stream_seg.c. The store is pinned host memory on a device
// backend and, on a host backend, a temporary file mapped into memory (unlinked at once, so nothing is
// left behind).
// provides: sort_stream_backend_bytes, sort_stream_plan, sort_stream_run, stream_run_len, stream_progress,
//           stream_take_staged
#define _GNU_SOURCE
#include "sort/sort_stream_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { STREAM_FIXED = 4 << 20 };  // the library's fixed scratch and the plan's small buffers, bytes

double sort_stream_backend_bytes(int64_t c, int w) { return 3.5 * (double)c * w + STREAM_FIXED; }

int64_t sort_stream_plan(const ds_ctx *ctx, int64_t n, int w, double backend_cap, double host_cap, double min[2])
{
    const int64_t least = n < SORT_STREAM_MIN_CHUNK ? (n > 0 ? n : 1) : SORT_STREAM_MIN_CHUNK;
    double c = floor((backend_cap - STREAM_FIXED) / (3.5 * w));
    min[0] = sort_stream_backend_bytes(least, w);
    min[1] = 0;
    if (!ctx->be->host_memory) {  // the keys and a segment's buffers (output; received pieces), pinned
        const int bufs = ctx->nranks > 1 ? 2 : 1;
        min[1] = ((double)n + bufs * (double)least) * w;
        c = fmin(c, floor((floor(host_cap / w) - (double)n) / bufs));
    }
    c = fmin(c, (double)(n > least ? n : least));
    return c < (double)least ? 0 : (int64_t)c;
}

// The run file: beside the output, unlinked once open, its space reserved (no SIGBUS on a full disk).
static int store_file(ds_ctx *ctx, stream_state *st, size_t bytes)
{
    const char *dir = st->s->tmp_dir ? st->s->tmp_dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char path[4200];
    snprintf(path, sizeof path, "%s/.dsolve-sort-runs-XXXXXX", dir);
    st->fd = mkstemp(path);
    if (st->fd < 0)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "sort: cannot create a run file in %s: %s", dir, strerror(errno));
    unlink(path);
    int e = posix_fallocate(st->fd, 0, (off_t)bytes);
    if (e)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "sort: cannot reserve %.3g GB for the runs in %s: %s",
                       (double)bytes / 1e9, dir, strerror(e));
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, st->fd, 0);
    if (m == MAP_FAILED)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "sort: cannot map the run file (%.3g GB): %s", (double)bytes / 1e9,
                       strerror(errno));
    st->store = m;
    return DS_OK;
}

// Host scratch of the cuts and the exchange (sized once: nothing is allocated inside the loops).
static int state_host(ds_ctx *ctx, stream_state *st)
{
    const size_t np = (size_t)st->np, nr = np * (size_t)st->runs_max;
    int64_t **i64[] = {&st->n_all, &st->off, &st->cnt, &st->less, &st->eq, &st->before};
    int ok = 1;
    for (size_t i = 0; i < sizeof i64 / sizeof i64[0]; i++)
        ok &= (*i64[i] = calloc(np, sizeof(int64_t))) != NULL;
    int64_t **big[] = {&st->cut[0], &st->cut[1], &st->slen, &st->rlen};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        ok &= (*big[i] = calloc(nr, sizeof(int64_t))) != NULL;
    ok &= (st->lo = calloc(np, 8)) != NULL && (st->hi = calloc(np, 8)) != NULL;
    // Requests of a round: a piece per rank and run each way, and the 1 GiB messages a piece is cut into.
    st->nreq = 2 * ((int64_t)nr + (int64_t)np + (st->chunk * st->w >> 30) + 2);
    ok &= (st->req = calloc((size_t)st->nreq, sizeof(MPI_Request))) != NULL;
    return ok ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
}

// Every rank's count and offset, the common chunk, the rounds; then the memory.
static int state_open(ds_ctx *ctx, stream_state *st)
{
    sort_stream *s = st->s;
    const ds_backend *be = ctx->be;
    int64_t mine[2] = {s->chunk, (s->n + s->chunk - 1) / s->chunk}, most[2];
    st->fd = -1;
    mine[0] = -mine[0];
    if (MPI_Allreduce(mine, most, 2, MPI_INT64_T, MPI_MAX, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Allreduce of the chunk sizes failed");
    st->chunk = -most[0];
    s->runs = (s->n + st->chunk - 1) / st->chunk;
    if (MPI_Allreduce(&s->runs, &st->runs_max, 1, MPI_INT64_T, MPI_MAX, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Allreduce of the run counts failed");
    st->rounds = st->runs_max;
    DS_CHECK(state_host(ctx, st));
    if (MPI_Allgather(&s->n, 1, MPI_INT64_T, st->n_all, 1, MPI_INT64_T, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Allgather of the key counts failed");
    for (int r = 1; r < st->np; r++)
        st->off[r] = st->off[r - 1] + st->n_all[r - 1];
    const size_t bytes = (size_t)(s->n > 0 ? s->n : 1) * st->w, cb = (size_t)st->chunk * st->w;
    if (be->host_memory) {
        DS_CHECK(store_file(ctx, st, bytes));
    } else {
        void *h = NULL;
        DS_CHECK(be->host_alloc(ctx, &h, bytes));
        st->store = h;
        DS_CHECK(be->host_alloc(ctx, &st->out, cb));
        if (st->np > 1)
            DS_CHECK(be->host_alloc(ctx, &st->recv, cb));
    }
    DS_CHECK(sort_plan_init(ctx, &st->p, &s->o, NULL, NULL, st->chunk));
    return be->alloc(ctx, &st->stage, cb);
}

static void state_close(ds_ctx *ctx, stream_state *st)
{
    const ds_backend *be = ctx->be;
    if (st->p.h)
        sort_plan_free(ctx, &st->p);
    be->free(ctx, st->stage);
    if (st->fd >= 0) {
        if (st->store)
            munmap(st->store, (size_t)(st->s->n > 0 ? st->s->n : 1) * st->w);
        close(st->fd);
    } else {
        be->host_free(ctx, st->store);
        be->host_free(ctx, st->out);
        be->host_free(ctx, st->recv);
    }
    void *all[] = {st->n_all, st->off, st->cnt, st->less, st->eq, st->before, st->cut[0], st->cut[1], st->slen,
                   st->rlen, st->lo, st->hi, st->req};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

int64_t stream_run_len(const stream_state *st, int64_t r)
{
    const int64_t c = st->chunk, left = st->s->n - r * c;
    return left < 0 ? 0 : left < c ? left : c;
}

// A progress line at most every two seconds, and at the end of each phase.
void stream_progress(ds_ctx *ctx, stream_state *st, const char *what, int64_t done, int64_t all)
{
    const double now = MPI_Wtime();
    if (done < all && now - st->t_log < 2.0)
        return;
    st->t_log = now;
    ctx_log(ctx, "sort: %lld of %lld %s", (long long)done, (long long)all, what);
}

// ---------------------------------------------------------------------------------------------------
// Phase 1: sorted runs

// Phase 0: every chunk of the rank's keys produced (generated or read) into the store, so that the
// sort runs from host memory. Timed apart (io_seconds).
static int phase_load(ds_ctx *ctx, stream_state *st)
{
    sort_stream *s = st->s;
    const double t0 = MPI_Wtime();
    for (int64_t r = 0; r < s->runs; r++) {
        ctx_beat(ctx, "sort: streamed keys loaded");
        const int64_t i0 = r * st->chunk;
        DS_CHECK(s->produce(s->produce_arg, i0, stream_run_len(st, r), st->store + i0 * st->w, &ctx->msg));
        stream_progress(ctx, st, "chunks loaded", r + 1, s->runs);
    }
    st->t_io += MPI_Wtime() - t0;
    return DS_OK;
}

static int stage_run(ds_ctx *ctx, stream_state *st, int64_t r)
{
    const int64_t i0 = r * st->chunk;
    return ctx->be->stage(ctx, 0, st->stage, st->store + i0 * st->w, (size_t)stream_run_len(st, r) * st->w);
}

// The staged keys into k[0], then slot 0 is free for the next copy; the input checksum when verifying.
int stream_take_staged(ds_ctx *ctx, stream_state *st, int64_t n, int input)
{
    DS_CHECK(ctx->be->copy(ctx, st->p.k[0], st->stage, (size_t)n * st->w));
    DS_CHECK(ctx->be->stage_release(ctx, 0));
    if (!input || !st->s->verify)
        return DS_OK;
    uint64_t c[4];
    DS_CHECK(st->ops->check(ctx, &st->p, st->p.k[0], n, st->s->o.dtype, st->s->o.descending, c));
    st->sums[2] += c[1];
    return DS_OK;
}

// Phase 1: each chunk sorted into a run of mapped keys, copied back over itself. The next chunk's copy
// (copy queue) is issued after this chunk's sort and copy back are queued, so it runs beside both.
static int phase_runs(ds_ctx *ctx, stream_state *st)
{
    sort_stream *s = st->s;
    if (s->runs > 0)
        DS_CHECK(stage_run(ctx, st, 0));
    for (int64_t r = 0; r < s->runs; r++) {
        ctx_beat(ctx, "sort: streamed runs");
        const int64_t n = stream_run_len(st, r);
        DS_CHECK(stream_take_staged(ctx, st, n, 1));
        DS_CHECK(st->ops->map(ctx, st->p.k[0], st->p.k[0], n, s->o.dtype, s->o.descending, 0));
        int sel = 0;
        DS_CHECK(st->ops->radix(ctx, &st->p, n, st->w, -1, 0, &sel, NULL));
        DS_CHECK(st->ops->fetch(ctx, st->store + r * st->chunk * st->w, st->p.k[sel], (size_t)n * st->w));
        if (r + 1 < s->runs)
            DS_CHECK(stage_run(ctx, st, r + 1));
        stream_progress(ctx, st, "runs sorted", r + 1, s->runs);
    }
    return ctx->be->sync(ctx);  // the runs are in the store before phase 2 reads them
}

// Collective: the sums of every rank, and the order across rank boundaries.
static int verdict(ds_ctx *ctx, stream_state *st)
{
    sort_stream *s = st->s;
    uint64_t edge[3] = {s->n > 0, st->first, st->last};
    uint64_t *all = calloc((size_t)st->np * 3, sizeof(uint64_t));
    if (!all)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (MPI_Allreduce(MPI_IN_PLACE, st->sums, 4, MPI_UINT64_T, MPI_SUM, ctx->comm) != MPI_SUCCESS ||
        MPI_Allgather(edge, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, ctx->comm) != MPI_SUCCESS) {
        free(all);
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: the verification's reductions failed (rank %d)", ctx->rank);
    }
    int prev = -1;
    for (int r = 0; r < st->np; r++)
        if (all[3 * r]) {
            if (prev >= 0 && all[3 * prev + 2] > all[3 * r + 1])
                st->sums[3]++;
            prev = r;
        }
    free(all);
    s->verified = 1;
    if (st->sums[0])
        snprintf(s->why, sizeof s->why, "%llu adjacent pairs out of order", (unsigned long long)st->sums[0]);
    else if (st->sums[3])
        snprintf(s->why, sizeof s->why, "%llu segment or rank boundaries out of order",
                 (unsigned long long)st->sums[3]);
    else if (st->sums[1] != st->sums[2])
        snprintf(s->why, sizeof s->why, "the checksum of the output keys differs from the input's");
    else
        return DS_OK;
    s->verified = 0;
    return DS_OK;
}

int sort_stream_run(ds_ctx *ctx, sort_stream *s)
{
    DS_ASSERT(s->chunk >= 1 && !s->o.argsort && !s->o.val_size);
    stream_state st = {.s = s, .ops = ctx->be->sort, .w = sort_dtype_size(s->o.dtype), .np = ctx->nranks,
                       .me = ctx->rank};
    s->verified = -1;
    s->why[0] = '\0';
    const double t0 = MPI_Wtime();
    st.t_log = t0 - 10.0;  // the first run's line comes at once
    int rc = ctx_agree(ctx, state_open(ctx, &st));
    if (rc == DS_OK)
        rc = ctx_agree(ctx, phase_load(ctx, &st));
    const double t1 = MPI_Wtime(), t_load = st.t_io;
    if (rc == DS_OK)
        rc = ctx_agree(ctx, phase_runs(ctx, &st));
    if (rc == DS_OK)
        rc = stream_segments(ctx, &st);
    if (rc == DS_OK)
        rc = ctx_agree(ctx, ctx->be->sync(ctx));
    if (rc == DS_OK && s->verify)
        rc = verdict(ctx, &st);
    s->io_seconds = st.t_io;
    s->seconds = MPI_Wtime() - t1 - (st.t_io - t_load);
    s->bytes_moved = 4.0 * (double)s->n * st.w;
    ctx_log(ctx, "sort: streamed %lld keys in %lld runs (%.2f s setting up and loading, %.2f s sorting, %.2f s "
                 "writing)", (long long)s->n, (long long)s->runs, t1 - t0, s->seconds, st.t_io - t_load);
    state_close(ctx, &st);
    return rc;
}
