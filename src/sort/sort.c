// sort.c: the backend-neutral sample sort. Phases (each timed on the backend's queue): local sort
// (radix, on mapped keys or, where the backend's library orders native keys as we do, on native keys),
// splitters (regular sampling on (mapped key, global position)), exchange (counts by MPI_Alltoall, then
// the backend's alltoallv), merge (pairwise, stable) and mapping back (mapped keys only). With one rank
// the sort is the local radix sort alone. The plan's memory is in sort_plan.c, verification in sort_check.c.
// provides: sort_run, sort_dtype_size, sort_dtype_name, sort_dtype_parse, sort_dist_parse, sort_threads
#include "sort/sort.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sort/sort_host.h"

static const char *dtype_names[SORT_NTYPES] = {"int32", "int64", "uint32", "uint64", "float32", "float64"};

int sort_dtype_size(int dtype) { return dtype == SORT_I32 || dtype == SORT_U32 || dtype == SORT_F32 ? 4 : 8; }
const char *sort_dtype_name(int dtype) { return dtype >= 0 && dtype < SORT_NTYPES ? dtype_names[dtype] : "?"; }

int sort_dtype_parse(const char *name)
{
    for (int t = 0; t < SORT_NTYPES; t++)
        if (strcmp(name, dtype_names[t]) == 0)
            return t;
    return -1;
}

int sort_dist_parse(const char *name)
{
    static const char *names[] = {"uniform", "sorted", "reverse", "equal", "few-unique", "zipf", "gaussian", "staggered"};
    for (int d = 0; d < 8; d++)
        if (strcmp(name, names[d]) == 0)
            return d;
    return -1;
}

int sort_threads(const ds_ctx *ctx)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long t = cores / (ctx->local_size > 0 ? ctx->local_size : 1);
    return t < 1 ? 1 : t > 256 ? 256 : (int)t;
}

// ---------------------------------------------------------------------------------------------------
// Splitters

static int cmp_sample(const void *a, const void *b)
{
    const sample *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->tag < y->tag ? -1 : x->tag > y->tag;
}

// Sorted position of sample k of a rank with n keys and s samples.
static int64_t sample_pos(int64_t k, int64_t n, int64_t s) { return k < s ? k * n / s : n; }

// Every rank gathers all samples and picks the same p − 1 splitters: splitter i is the first sample
// whose estimated global rank (each rank's count below it, read off that rank's next sample) reaches
// i·N/p. Ties of equal keys are split by global position, so even all-equal keys split evenly.
static int choose_splitters(ds_ctx *ctx, sort_plan *p, int64_t s_me)
{
    sort_host *h = p->h;
    const int np = ctx->nranks;
    if (MPI_Allgather(&p->n_local, 1, MPI_INT64_T, h->n_all, 1, MPI_INT64_T, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Allgather of the key counts failed");
    int total = 0;
    for (int r = 0; r < np; r++) {
        int64_t s = h->n_all[r] < p->samples ? h->n_all[r] : p->samples;
        h->cnt[r] = (int)s;
        h->dsp[r] = total;
        total += (int)s;
    }
    DS_ASSERT(h->cnt[ctx->rank] == s_me);
    if (MPI_Allgatherv(h->mine, (int)s_me, MPI_UINT64_T, h->all, h->cnt, h->dsp, MPI_UINT64_T, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Allgatherv of the samples failed");
    int64_t off = 0, est = 0;
    for (int r = 0; r < np; r++) {
        for (int k = 0; k < h->cnt[r]; k++)
            h->smp[h->dsp[r] + k] = (sample){h->all[h->dsp[r] + k], off + sample_pos(k, h->n_all[r], h->cnt[r]), r};
        h->used[r] = 0;
        est += sample_pos(0, h->n_all[r], h->cnt[r]);
        off += h->n_all[r];
    }
    qsort(h->smp, (size_t)total, sizeof(sample), cmp_sample);
    int i = 1;
    for (int x = 0; x < total && i < np; x++) {
        const sample *s = &h->smp[x];
        for (; i < np && est >= (int64_t)((double)i * (double)p->n_global / np); i++) {
            h->skey[i - 1] = s->key;
            h->stag[i - 1] = s->tag;
        }
        int64_t c = h->used[s->rank]++, nr = h->n_all[s->rank], sr = h->cnt[s->rank];
        est += sample_pos(c + 1, nr, sr) - sample_pos(c, nr, sr);
    }
    for (; i < np; i++) {  // past every sample: the rest of the keys go to the last ranks
        h->skey[i - 1] = UINT64_MAX;
        h->stag[i - 1] = INT64_MAX;
    }
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// The run

typedef struct run_state {
    const sort_ops *ops;
    int w, pay;   // key bytes; 1 when global positions travel with the keys
    int native;   // 1: the buffers hold native keys in the library's order (no map passes)
    int ks, gs;   // buffers holding the current keys and positions
    int64_t n;    // keys held now
    int64_t span; // after the exchange: the received layout's length (runs, their heads and gaps)
    int64_t koff; // where the keys (and merge tags) start in their buffers: 0, or after the exchange the
                  // first run's offset
} run_state;

// Native keys where the backend can sort them in our order and no rank holds a float key whose library
// order differs from ours (-0.0, a NaN with its sign bit set); mapped keys otherwise. Collective for
// float keys (every rank takes the same path); integer keys have no such values.
static int choose_path(ds_ctx *ctx, sort_plan *p, run_state *s)
{
    const int dt = p->o.dtype;
    s->native = s->ops->native_ok;
    if (!s->native || (dt != SORT_F32 && dt != SORT_F64))
        return DS_OK;
    int special = 0;
    DS_CHECK(ctx_agree(ctx, s->ops->special(ctx, p, p->k[0], p->n_local, dt, &special)));
    if (MPI_Allreduce(MPI_IN_PLACE, &special, 1, MPI_INT, MPI_MAX, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Allreduce of the special-key flag failed (rank %d)",
                       ctx->rank);
    s->native = !special;
    return DS_OK;
}

// This rank's keys in k[0] (positions into g[0]), sorted: mapped first unless native.
static int phase_local(ds_ctx *ctx, sort_plan *p, run_state *s)
{
    int pos[2] = {0, 1};
    if (!s->native)
        DS_CHECK(s->ops->map(ctx, p->k[0], p->k[0], p->n_local, p->o.dtype, p->o.descending, 0));
    if (s->pay)
        DS_CHECK(s->ops->iota(ctx, p->g[0], p->n_local, p->offset));
    int sel = 0;
    DS_CHECK(s->ops->radix(ctx, p, p->n_local, s->w, s->native ? p->o.dtype : -1, s->native && p->o.descending, &sel,
                           s->pay ? pos : NULL));
    s->ks = s->gs = sel;
    s->n = p->n_local;
    return DS_OK;
}

// Splitters, then this rank's send boundaries pos_bnd[0 .. p].
static int phase_splitters(ds_ctx *ctx, sort_plan *p, run_state *s)
{
    sort_host *h = p->h;
    int64_t s_me = p->n_local < p->samples ? p->n_local : p->samples;
    DS_CHECK(ctx_agree(ctx, s->ops->sample(ctx, p, p->k[s->ks], p->n_local, s->w, s->native, s_me, h->mine)));
    DS_CHECK(choose_splitters(ctx, p, s_me));
    const int ns = ctx->nranks - 1;
    DS_CHECK(s->ops->bounds(ctx, p, p->k[s->ks], p->n_local, s->w, s->native, h->skey, ns, h->lo, h->hi));
    h->pos_bnd[0] = 0;
    for (int i = 0; i < ns; i++) {
        int64_t at = h->stag[i] == INT64_MAX ? p->n_local : h->stag[i] - p->offset;
        at = at < h->lo[i] ? h->lo[i] : at > h->hi[i] ? h->hi[i] : at;
        h->pos_bnd[i + 1] = at < h->pos_bnd[i] ? h->pos_bnd[i] : at;
    }
    h->pos_bnd[ctx->nranks] = p->n_local;
    return DS_OK;
}

static void scale(const int64_t *x, int64_t *out, int n, int64_t by)
{
    for (int i = 0; i < n; i++)
        out[i] = x[i] * by;
}

static int exchange_one(ds_ctx *ctx, sort_plan *p, const void *send, void *recv, int64_t size)
{
    sort_host *h = p->h;
    const int np = ctx->nranks;
    scale(h->sc, h->scb, np, size);
    scale(h->sd, h->sdb, np, size);
    scale(h->rc, h->rcb, np, size);
    scale(h->rd, h->rdb, np, size);
    return ctx->be->alltoallv(ctx, send, h->scb, h->sdb, recv, h->rcb, h->rdb);
}

// Each block travels from and to addresses that are multiples of SORT_ALIGN elements (NCCL's copies
// run at about 60 % of their rate on unaligned blocks): a rank sends its block for r from the aligned
// position at or below its start, so up to SORT_ALIGN − 1 keys of the block before it lead ("head"),
// and the receiver lands each block at an aligned offset and skips the head. The received runs are
// recorded in roff/rlen; they are separated by heads and gaps, which the pairwise merge leaves alone
// (each pair's output fits between the start of its first run and the end of its second).
enum { SORT_ALIGN = 256 };

// Counts and heads by MPI_Alltoall, then keys (and positions and values) by the backend's alltoallv into
// the other buffers.
static int phase_exchange(ds_ctx *ctx, sort_plan *p, run_state *s)
{
    sort_host *h = p->h;
    const int np = ctx->nranks;
    for (int r = 0; r < np; r++) {
        const int64_t a = h->pos_bnd[r], b = h->pos_bnd[r + 1], head = b > a ? a % SORT_ALIGN : 0;
        h->sd[r] = a - head;
        h->sc[r] = b - a + head;
        h->s2[2 * r] = h->sc[r];
        h->s2[2 * r + 1] = head;
    }
    if (MPI_Alltoall(h->s2, 2, MPI_INT64_T, h->r2, 2, MPI_INT64_T, ctx->comm) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Alltoall of the counts failed (rank %d)", ctx->rank);
    int64_t nrecv = 0, span = 0;
    for (int r = 0; r < np; r++) {
        h->rc[r] = h->r2[2 * r];
        h->rd[r] = (span + SORT_ALIGN - 1) / SORT_ALIGN * SORT_ALIGN;
        h->roff[r] = h->rd[r] + h->r2[2 * r + 1];
        h->rlen[r] = h->rc[r] - h->r2[2 * r + 1];
        span = h->rd[r] + h->rc[r];
        nrecv += h->rlen[r];
    }
    DS_CHECK(ctx_agree(ctx, span > p->cap ? sort_plan_grow(ctx, p, span + span / 16, p->n_local) : DS_OK));
    const int ko = 1 - s->ks;
    DS_CHECK(exchange_one(ctx, p, p->k[s->ks], p->k[ko], s->w));
    if (s->pay) {
        // g[gs] holds the sorted global positions; they arrive in g[1 − gs] (g[2] is the merge's).
        DS_CHECK(exchange_one(ctx, p, p->g[s->gs], p->g[1 - s->gs], 8));
        if (p->o.val_size) {
            DS_CHECK(s->ops->gather(ctx, p->v[0], p->vals_in, p->g[s->gs], p->offset, p->n_local, p->o.val_size));
            DS_CHECK(exchange_one(ctx, p, p->v[0], p->v[1], p->o.val_size));
        }
        s->gs = 1 - s->gs;
    }
    s->ks = ko;
    s->n = nrecv;
    s->span = span;
    return DS_OK;
}

// Pairwise rounds over the received runs (held in k[ks], in rank order), ping-ponging between the two
// key buffers; with positions, merge tags (receive positions, g[2] and the free g buffer) travel along
// so that the positions and values can be gathered once at the end.
static int phase_merge(ds_ctx *ctx, sort_plan *p, run_state *s, sort_result *r)
{
    sort_host *h = p->h;
    const int w = s->w;
    int nr = 0;
    for (int i = 0; i < ctx->nranks; i++)
        if (h->rlen[i] > 0) {
            h->roff[nr] = h->roff[i];
            h->rlen[nr++] = h->rlen[i];
        }
    int src = s->ks;
    int64_t *t[2] = {p->g[2], s->pay ? p->g[1 - s->gs] : NULL};
    int ts = 0;
    if (s->pay)
        DS_CHECK(s->ops->iota(ctx, t[0], s->span, 0));
    while (nr > 1) {
        char *a = p->k[src], *b = p->k[1 - src];
        int m = 0;
        for (int j = 0; j < nr; j += 2, m++) {
            int64_t o = h->roff[j], len = h->rlen[j];
            if (j + 1 < nr) {
                int64_t o2 = h->roff[j + 1], len2 = h->rlen[j + 1];
                DS_CHECK(s->ops->merge(ctx, p, a + o * w, len, a + o2 * w, len2, b + o * w, w, s->native,
                                       s->pay ? t[ts] + o : NULL, s->pay ? t[ts] + o2 : NULL,
                                       s->pay ? t[1 - ts] + o : NULL));
                len += len2;
            } else {
                DS_CHECK(ctx->be->copy(ctx, b + o * w, a + o * w, (size_t)(len * w)));
                if (s->pay)
                    DS_CHECK(ctx->be->copy(ctx, t[1 - ts] + o, t[ts] + o, (size_t)len * 8));
            }
            h->roff[m] = o;
            h->rlen[m] = len;
        }
        nr = m;
        src = 1 - src;
        ts = 1 - ts;
    }
    s->ks = src;
    s->koff = nr > 0 ? h->roff[0] : 0;  // the one run left
    if (s->pay) {
        DS_CHECK(s->ops->gather(ctx, t[1 - ts], p->g[s->gs], t[ts] + s->koff, 0, s->n, 8));
        r->perm = t[1 - ts];
        if (p->o.val_size) {
            DS_CHECK(s->ops->gather(ctx, p->v[0], p->v[1], t[ts] + s->koff, 0, s->n, p->o.val_size));
            r->vals = p->v[0];
        }
    }
    return DS_OK;
}

// One rank: the local sort alone.
static int run_single(ds_ctx *ctx, sort_plan *p, run_state *s, sort_result *r)
{
    DS_CHECK(phase_local(ctx, p, s));
    if (s->pay) {
        r->perm = p->g[s->gs];
        if (p->o.val_size) {
            DS_CHECK(s->ops->gather(ctx, p->v[0], p->vals_in, p->g[s->gs], 0, s->n, p->o.val_size));
            r->vals = p->v[0];
        }
    }
    return s->native ? DS_OK : s->ops->map(ctx, p->k[s->ks], p->k[s->ks], s->n, p->o.dtype, p->o.descending, 1);
}

static int run_phases(ds_ctx *ctx, sort_plan *p, run_state *s, sort_result *r)
{
    const ds_backend *be = ctx->be;
    DS_CHECK(be->mark(ctx, 0));
    DS_CHECK(choose_path(ctx, p, s));
    r->path_native = s->native;
    if (ctx->nranks == 1) {
        DS_CHECK(run_single(ctx, p, s, r));
        for (int m = 1; m <= 4; m++)
            DS_CHECK(be->mark(ctx, m));
        return DS_OK;
    }
    // Ranks agree after each step that can fail and before the collectives that follow it.
    ctx_beat(ctx, "sort: the local sort");
    DS_CHECK(ctx_agree(ctx, phase_local(ctx, p, s)));
    DS_CHECK(be->mark(ctx, 1));
    ctx_beat(ctx, "sort: the splitters");
    DS_CHECK(ctx_agree(ctx, phase_splitters(ctx, p, s)));
    DS_CHECK(be->mark(ctx, 2));
    ctx_beat(ctx, "sort: the exchange");
    DS_CHECK(ctx_agree(ctx, phase_exchange(ctx, p, s)));
    DS_CHECK(be->mark(ctx, 3));
    ctx_beat(ctx, "sort: the merge");
    DS_CHECK(phase_merge(ctx, p, s, r));
    if (!s->native) {
        char *k = (char *)p->k[s->ks] + s->koff * s->w;
        DS_CHECK(s->ops->map(ctx, k, k, s->n, p->o.dtype, p->o.descending, 1));
    }
    return be->mark(ctx, 4);
}

int sort_run(ds_ctx *ctx, sort_plan *p, sort_result *r)
{
    memset(r, 0, sizeof *r);
    run_state s = {.ops = ctx->be->sort, .w = sort_dtype_size(p->o.dtype), .pay = p->o.argsort || p->o.val_size};
    // The input stays untouched for repeats: the run sorts a copy (not timed).
    int rc = ctx->be->copy(ctx, p->k[0], p->keys_in, (size_t)p->n_local * s.w);
    if (rc == DS_OK)
        rc = ctx->be->sync(ctx);
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK && MPI_Barrier(ctx->comm) != MPI_SUCCESS)
        rc = ds_fail(&ctx->msg, DS_ERR_RUNTIME, "mpi: MPI_Barrier failed (rank %d)", ctx->rank);
    if (rc == DS_OK)
        rc = run_phases(ctx, p, &s, r);
    for (int m = 0; rc == DS_OK && m < 4; m++)
        rc = ctx->be->elapsed(ctx, m, m + 1, &r->phase[m]);
    if (rc == DS_OK)
        rc = ctx->be->elapsed(ctx, 0, 4, &r->seconds);
    r->keys = (char *)p->k[s.ks] + s.koff * s.w;
    r->n = s.n;
    return rc;
}
