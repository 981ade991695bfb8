// sort_stream_seg.c: phase 2 of the streamed sort (sort_stream_int.h). Rank d's output is the global
// positions [off_d, off_d + n_d) (its share of the input), cut into segments of a chunk; in round k
// every rank makes its segment k. A segment's bounds are cut exactly in every rank's sorted runs: a
// bisection on the key value of all the cuts at once (one allreduce a step), the keys equal to the
// value found taken rank by rank and run by run, so the pieces add up to the segment. A rank stages its
// own pieces straight from its store; the others' arrive by MPI point-to-point on host memory (never a
// device pointer). The next round's pieces are cut and staged while this round's segment sorts and is
// copied back; the segment is then checked and written (ranks in turns).
// provides: stream_segments
#include "sort/sort_stream_int.h"

#include <stdio.h>
#include <string.h>

enum { STREAM_TAG = 0x5347, STREAM_MSG = 1 << 30 };  // tag and largest message (bytes) of the pieces

static uint64_t key_at(const stream_state *st, int64_t i)
{
    return st->w == 4 ? ((const uint32_t *)st->store)[i] : ((const uint64_t *)st->store)[i];
}

// Keys of this rank's run r below v (le = 0) or at most v (le = 1).
static int64_t count_run(const stream_state *st, int64_t r, uint64_t v, int le)
{
    int64_t lo = 0, hi = stream_run_len(st, r);
    const int64_t b = r * st->chunk;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        const uint64_t k = key_at(st, b + mid);
        if (k < v || (le && k == v))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int64_t count_all(const stream_state *st, uint64_t v, int le)
{
    int64_t sum = 0;
    for (int64_t r = 0; r < st->s->runs; r++)
        sum += count_run(st, r, v, le);
    return sum;
}

// The global output position where rank d's segment k starts (its end for k + 1).
static int64_t seg_pos(const stream_state *st, int d, int64_t k)
{
    const int64_t a = k * st->chunk;
    return st->off[d] + (a < st->n_all[d] ? a : st->n_all[d]);
}

static int mpi_failed(ds_ctx *ctx, const char *what)
{
    return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: %s failed in the streamed sort (rank %d)", what, ctx->rank);
}

// lo[d]: the value of the key at global position seg_pos(d, k) − 1 (the smallest v with at least that
// many keys ≤ v over all ranks), by bisection of all ranks' cuts at once. Collective.
static int bisect(ds_ctx *ctx, stream_state *st, int64_t k)
{
    const int np = st->np;
    for (int d = 0; d < np; d++) {
        st->lo[d] = 0;
        st->hi[d] = st->w == 4 ? UINT32_MAX : UINT64_MAX;
    }
    for (;;) {
        int open = 0;
        for (int d = 0; d < np; d++) {
            const uint64_t mid = st->lo[d] + (st->hi[d] - st->lo[d]) / 2;
            st->cnt[d] = st->lo[d] < st->hi[d] ? count_all(st, mid, 1) : 0;
            open |= st->lo[d] < st->hi[d];
        }
        if (!open)  // the same on every rank: lo and hi move by the same sums
            return DS_OK;
        if (np > 1 && MPI_Allreduce(MPI_IN_PLACE, st->cnt, np, MPI_INT64_T, MPI_SUM, ctx->comm) != MPI_SUCCESS)
            return mpi_failed(ctx, "MPI_Allreduce of the cut counts");
        for (int d = 0; d < np; d++) {
            const uint64_t mid = st->lo[d] + (st->hi[d] - st->lo[d]) / 2;
            if (st->lo[d] < st->hi[d] && st->cnt[d] >= seg_pos(st, d, k))
                st->hi[d] = mid;
            else if (st->lo[d] < st->hi[d])
                st->lo[d] = mid + 1;
        }
    }
}

// cut[d·runs_max + r]: the keys of this rank's run r that come before rank d's segment k, for every d.
// Keys below the bisected value all do; of the keys equal to it, the lower ranks' come first, and
// within a rank the earlier runs'. Collective.
static int cuts_at(ds_ctx *ctx, stream_state *st, int64_t k, int64_t *cut)
{
    const int np = st->np;
    const int64_t R = st->runs_max;
    DS_CHECK(bisect(ctx, st, k));
    for (int d = 0; d < np; d++) {
        st->less[d] = count_all(st, st->lo[d], 0);
        st->eq[d] = count_all(st, st->lo[d], 1) - st->less[d];
    }
    memcpy(st->cnt, st->less, (size_t)np * sizeof(int64_t));
    memset(st->before, 0, (size_t)np * sizeof(int64_t));
    if (np > 1 && (MPI_Allreduce(MPI_IN_PLACE, st->cnt, np, MPI_INT64_T, MPI_SUM, ctx->comm) != MPI_SUCCESS ||
                   MPI_Exscan(st->eq, st->before, np, MPI_INT64_T, MPI_SUM, ctx->comm) != MPI_SUCCESS))
        return mpi_failed(ctx, "the reductions of the cuts");
    if (st->me == 0)
        memset(st->before, 0, (size_t)np * sizeof(int64_t));
    for (int d = 0; d < np; d++) {
        int64_t rest = seg_pos(st, d, k) - st->cnt[d] - st->before[d];
        rest = rest < 0 ? 0 : rest > st->eq[d] ? st->eq[d] : rest;
        for (int64_t r = 0; r < R; r++) {
            int64_t c = 0;
            if (r < st->s->runs) {
                c = count_run(st, r, st->lo[d], 0);
                const int64_t e = count_run(st, r, st->lo[d], 1) - c, take = e < rest ? e : rest;
                c += take;
                rest -= take;
            }
            cut[d * R + r] = c;
        }
    }
    return DS_OK;
}

// Posts the messages of one piece (at most STREAM_MSG bytes each).
static int post(ds_ctx *ctx, stream_state *st, int *nq, int send, char *buf, int64_t bytes, int peer)
{
    MPI_Request *req = st->req;
    for (int64_t a = 0; a < bytes; a += STREAM_MSG) {
        const int len = (int)(bytes - a < STREAM_MSG ? bytes - a : STREAM_MSG);
        DS_ASSERT(*nq < st->nreq);
        MPI_Request *q = &req[(*nq)++];
        int rc = send ? MPI_Isend(buf + a, len, MPI_BYTE, peer, STREAM_TAG, ctx->comm, q)
                      : MPI_Irecv(buf + a, len, MPI_BYTE, peer, STREAM_TAG, ctx->comm, q);
        if (rc != MPI_SUCCESS)
            return mpi_failed(ctx, send ? "MPI_Isend of a piece" : "MPI_Irecv of a piece");
    }
    return DS_OK;
}

// The other ranks' pieces of this rank's segment, into rbuf; *got keys. The piece lengths go first.
static int receive_pieces(ds_ctx *ctx, stream_state *st, char *rbuf, int64_t *got)
{
    const int64_t R = st->runs_max;
    const int w = st->w;
    for (int d = 0; d < st->np; d++)
        for (int64_t r = 0; r < R; r++)
            st->slen[d * R + r] = st->cut[1][d * R + r] - st->cut[0][d * R + r];
    if (MPI_Alltoall(st->slen, (int)R, MPI_INT64_T, st->rlen, (int)R, MPI_INT64_T, ctx->comm) != MPI_SUCCESS)
        return mpi_failed(ctx, "MPI_Alltoall of the piece lengths");
    int nq = 0, rc = DS_OK;
    *got = 0;
    for (int p = 0; p < st->np && rc == DS_OK; p++)
        for (int64_t r = 0; r < R && p != st->me && rc == DS_OK; r++) {
            rc = post(ctx, st, &nq, 0, rbuf + *got * w, st->rlen[p * R + r] * w, p);
            *got += st->rlen[p * R + r];
        }
    for (int p = 0; p < st->np && rc == DS_OK; p++)
        for (int64_t r = 0; r < st->s->runs && p != st->me && rc == DS_OK; r++)
            rc = post(ctx, st, &nq, 1, st->store + (r * st->chunk + st->cut[0][p * R + r]) * w,
                      st->slen[p * R + r] * w, p);
    if (MPI_Waitall(nq, st->req, MPI_STATUSES_IGNORE) != MPI_SUCCESS && rc == DS_OK)
        rc = mpi_failed(ctx, "MPI_Waitall of the pieces");
    return rc;
}

// This rank's segment between cut[0] and cut[1] staged: its own pieces straight from the store, the
// others' through the receive buffer (on a host backend, straight into the stage buffer); *n keys.
static int gather_segment(ds_ctx *ctx, stream_state *st, int64_t *n)
{
    const ds_backend *be = ctx->be;
    const int64_t R = st->runs_max, *c0 = st->cut[0] + st->me * R, *c1 = st->cut[1] + st->me * R;
    const int w = st->w;
    DS_CHECK(be->stage_wait(ctx, 0));  // the receive buffer's last copy is done
    int64_t own = 0;
    for (int64_t r = 0; r < st->s->runs; r++) {
        const int64_t len = c1[r] - c0[r];
        if (len > 0)
            DS_CHECK(be->stage(ctx, 0, (char *)st->stage + own * w, st->store + (r * st->chunk + c0[r]) * w,
                               (size_t)len * w));
        own += len;
    }
    *n = own;
    if (st->np == 1)
        return DS_OK;
    int64_t got = 0;
    char *rbuf = be->host_memory ? (char *)st->stage + own * w : st->recv;
    DS_CHECK(receive_pieces(ctx, st, rbuf, &got));
    if (!be->host_memory && got > 0)
        DS_CHECK(be->stage(ctx, 0, (char *)st->stage + own * w, st->recv, (size_t)got * w));
    *n = own + got;
    DS_ASSERT(*n <= st->chunk);
    return DS_OK;
}

// Cuts of round k's segment ends (the starts are the last round's ends), then the segment gathered.
static int next_segment(ds_ctx *ctx, stream_state *st, int64_t k, int64_t *n)
{
    int64_t *t = st->cut[0];
    st->cut[0] = st->cut[1];
    st->cut[1] = t;
    DS_CHECK(ctx_agree(ctx, cuts_at(ctx, st, k + 1, st->cut[1])));
    return ctx_agree(ctx, gather_segment(ctx, st, n));
}

// The staged segment (n keys) sorted and mapped back, in *keys (backend memory). Queued.
static int sort_segment(ds_ctx *ctx, stream_state *st, int64_t n, void **keys)
{
    int sel = 0;
    *keys = st->p.k[0];
    if (n == 0)  // a rank whose segments are done while others' go on
        return DS_OK;
    DS_CHECK(stream_take_staged(ctx, st, n, 0));
    DS_CHECK(st->ops->radix(ctx, &st->p, n, st->w, -1, 0, &sel, NULL));
    *keys = st->p.k[sel];
    return st->ops->map(ctx, *keys, *keys, n, st->s->o.dtype, st->s->o.descending, 1);
}

// Verification of a segment of native keys: its order, its boundary with the one before, its checksum.
static int check_segment(ds_ctx *ctx, stream_state *st, const void *keys, int64_t n, int64_t at)
{
    uint64_t c[4];
    DS_CHECK(st->ops->check(ctx, &st->p, keys, n, st->s->o.dtype, st->s->o.descending, c));
    st->sums[0] += c[0];
    st->sums[1] += c[1];
    if (at == 0)
        st->first = c[2];
    else if (st->last > c[2])
        st->sums[3]++;
    st->last = c[3];
    return DS_OK;
}

// The segment's copy back to host memory (device backend: always, the output's crossing of the bus),
// queued before the next segment's copies so that both directions run at once.
static int fetch_segment(ds_ctx *ctx, stream_state *st, const void *keys, int64_t n)
{
    if (ctx->be->host_memory || n == 0)
        return DS_OK;
    return st->ops->fetch(ctx, st->out, keys, (size_t)n * st->w);
}

// The segment checked, and in host memory (*h) once the queue is synced. Local.
static int finish_segment(ds_ctx *ctx, stream_state *st, const void *keys, int64_t n, int64_t at, const void **h)
{
    *h = ctx->be->host_memory ? keys : st->out;
    if (n > 0 && st->s->verify)
        DS_CHECK(check_segment(ctx, st, keys, n, at));
    return ctx->be->sync(ctx);
}

// The segment handed to the sink, ranks in turns (one HDF5 file, serial).
static int sink_turns(ds_ctx *ctx, stream_state *st, int64_t at, int64_t n, const void *h, int rc)
{
    for (int turn = 0; turn < st->np; turn++) {
        if (rc == DS_OK && turn == st->me && n > 0) {
            const double t0 = MPI_Wtime();
            rc = st->s->sink(st->s->sink_arg, at, n, h, &ctx->msg);
            st->t_io += MPI_Wtime() - t0;
        }
        DS_CHECK(ctx_agree(ctx, rc));
    }
    return DS_OK;
}

int stream_segments(ds_ctx *ctx, stream_state *st)
{
    sort_stream *s = st->s;
    int64_t n = 0, next = 0, at = 0;
    s->segments = s->runs;
    DS_CHECK(ctx_agree(ctx, cuts_at(ctx, st, 0, st->cut[1])));
    DS_CHECK(next_segment(ctx, st, 0, &n));
    for (int64_t k = 0; k < st->rounds; k++) {
        ctx_beat(ctx, "sort: streamed segments");
        void *keys = NULL;
        const void *h = NULL;
        DS_CHECK(ctx_agree(ctx, sort_segment(ctx, st, n, &keys)));
        DS_CHECK(ctx_agree(ctx, fetch_segment(ctx, st, keys, n)));
        if (k + 1 < st->rounds)
            DS_CHECK(next_segment(ctx, st, k + 1, &next));
        int rc = finish_segment(ctx, st, keys, n, at, &h);
        if (s->sink)
            DS_CHECK(sink_turns(ctx, st, at, n, h, rc));
        else
            DS_CHECK(ctx_agree(ctx, rc));
        stream_progress(ctx, st, "rounds of segments done", k + 1, st->rounds);
        at += n;
        n = next;
        next = 0;
    }
    DS_ASSERT(at == s->n);
    return DS_OK;
}
