// ann_rows.c: the hidden neurons' rows: the subsets (Floyd's algorithm on the counter-based generator,
// so any rank count draws the same ones) and their exchange between the ranks that own the rows and
// the ranks that own the neurons (see ann_rows.h).
#include "ann_rows.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rng.h"

#define ANN_STREAM ((uint64_t)0x414E4E0000000000ull)  // rng stream of neuron k's subset: ANN_STREAM + k
#define ANN_MAX_INDEX_COUNT ((int64_t)INT_MAX)
#define RADIX_BITS 13  // digits of the subsets' sort: 26-bit row numbers (m < 67 M) take two passes

// ---------------------------------------------------------------------------------------------------
// Subsets: S distinct rows of [0, m) for neuron k, by Floyd's algorithm on the counter-based
// generator, sorted by an LSD radix sort. They depend on (seed, k, m, S) only, so any rank count draws the same ones.

typedef struct subset_job {
    uint64_t seed;
    int64_t m, S, k0, nb;
    int64_t *out;  // nb × S
    int threads, id;
} subset_job;

static int64_t set_slot(const int64_t *table, int64_t mask, int64_t v)
{
    int64_t h = (int64_t)((uint64_t)v * 0x9E3779B97F4A7C15ull >> 17) & mask;
    while (table[h] != -1 && table[h] != v)
        h = (h + 1) & mask;
    return h;
}

// The scratch of one drawing thread: Floyd's hash set, the radix sort's second buffer and its counts.
typedef struct subset_scratch {
    int64_t *table, mask;  // open addressing, −1 empty
    int64_t *tmp;          // [S]
    int64_t *count;        // [1 << RADIX_BITS]
    int passes, width;     // radix passes of width bits cover the bits of m − 1
} subset_scratch;

// LSD radix sort of n keys in a (ascending), through b; returns the buffer that holds the result (a
// after an even number of passes, b after an odd one).
static int64_t *radix_sort(const subset_scratch *s, int64_t *a, int64_t *b, int64_t n)
{
    const int64_t mask = ((int64_t)1 << s->width) - 1;
    for (int p = 0; p < s->passes; p++) {
        const int shift = p * s->width;
        memset(s->count, 0, (size_t)(mask + 1) * sizeof *s->count);
        for (int64_t i = 0; i < n; i++)
            s->count[(a[i] >> shift) & mask]++;
        for (int64_t d = 0, at = 0; d <= mask; d++) {
            int64_t c = s->count[d];
            s->count[d] = at, at += c;
        }
        for (int64_t i = 0; i < n; i++)
            b[s->count[(a[i] >> shift) & mask]++] = a[i];
        int64_t *t = a;
        a = b, b = t;
    }
    return a;
}

static void subset_draw(uint64_t seed, int64_t k, int64_t m, int64_t S, const subset_scratch *s, int64_t *out)
{
    int64_t *table = s->table, mask = s->mask;
    int64_t *draw = s->passes % 2 ? s->tmp : out;  // so that the sorted keys end in out
    for (int64_t i = 0; i <= mask; i++)
        table[i] = -1;
    const uint64_t key = rng_stream_key(seed, ANN_STREAM + (uint64_t)k);
    for (int64_t j = m - S, c = 0; j < m; j++, c++) {
        int64_t t = (int64_t)(rng_bits_keyed(key, (uint64_t)c) % (uint64_t)(j + 1));
        int64_t h = set_slot(table, mask, t);
        if (table[h] == t)  // t was drawn before: take j, which cannot have been (all earlier draws are < j)
            h = set_slot(table, mask, t = j);
        table[h] = t;
        draw[c] = t;
    }
    int64_t *sorted = radix_sort(s, draw, draw == out ? s->tmp : out, S);
    DS_ASSERT(sorted == out);
}

static void *subset_run(void *arg)
{
    subset_job *j = arg;
    int64_t size = 16;
    while (size < 2 * j->S)
        size *= 2;
    int bits = 0;
    while (bits < 63 && ((int64_t)1 << bits) < j->m)  // keys are < m ≤ 2^bits
        bits++;
    subset_scratch s = {.mask = size - 1, .passes = (bits + RADIX_BITS - 1) / RADIX_BITS};
    s.width = s.passes ? (bits + s.passes - 1) / s.passes : 0;
    s.table = malloc((size_t)size * sizeof *s.table);
    s.tmp = malloc((size_t)j->S * sizeof *s.tmp);
    s.count = malloc(((size_t)1 << RADIX_BITS) * sizeof *s.count);
    void *ret = s.table && s.tmp && s.count ? NULL : arg;  // non-NULL: failed
    for (int64_t i = j->id; !ret && i < j->nb; i += j->threads)
        subset_draw(j->seed, j->k0 + i, j->m, j->S, &s, j->out + i * j->S);
    free(s.table), free(s.tmp), free(s.count);
    return ret;
}

// Subsets of neurons k0 .. k0+nb−1 into out (nb × S), over the rank's share of the node's cores.
int ann_subsets_draw(ds_ctx *ctx, uint64_t seed, int64_t m, int64_t S, int64_t k0, int64_t nb, int64_t *out)
{
    enum { MAX_THREADS = 64 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN) / (ctx->local_size > 0 ? ctx->local_size : 1);
    int threads = cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : (int)cores;
    if (threads > nb)
        threads = nb > 0 ? (int)nb : 1;
    subset_job job[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0}, failed = 0;
    for (int t = 0; t < threads; t++) {
        job[t] = (subset_job){seed, m, S, k0, nb, out, threads, t};
        started[t] = t > 0 && pthread_create(&tid[t], NULL, subset_run, &job[t]) == 0;
    }
    for (int t = 0; t < threads; t++)  // parts whose thread could not start run here
        if (!started[t])
            failed |= subset_run(&job[t]) != NULL;
    for (int t = 0; t < threads; t++) {
        void *ret = NULL;
        if (started[t])
            pthread_join(tid[t], &ret);
        failed |= ret != NULL;
    }
    return failed ? ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory drawing subsets") : DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// Row exchange: the rank fetches rows L[0 .. count−1] (global indices) from their owners, as fit rows
// (x, 1, z), into A (count × (n+2), backend memory), in the order of L.

int ann_upload_new(ds_ctx *ctx, void **dev, const void *host, size_t bytes)
{
    *dev = NULL;
    DS_CHECK(ctx->be->alloc(ctx, dev, bytes ? bytes : 8));
    return ctx->be->upload(ctx, *dev, host, bytes);
}

typedef struct exch_plan {
    int64_t *need, *give;        // [p] rows I take from r, rows r takes from me
    int64_t *need_at, *give_at;  // [p] their offsets, in rows
    int64_t *req;                // [count]: owner-local indices, grouped by owner
    int64_t *perm;               // [count]: where L[i] lands in the received rows
    int64_t *served;             // [Σ give]: owner-local indices others asked me for
    int64_t n_served;
} exch_plan;

static void plan_free(exch_plan *pl)
{
    free(pl->need), free(pl->give), free(pl->need_at), free(pl->give_at);
    free(pl->req), free(pl->perm), free(pl->served);
    memset(pl, 0, sizeof *pl);
}

// Routes the requests: counts through MPI_Alltoall, indices through MPI_Alltoallv (host memory).
static int plan_make(ds_ctx *ctx, const ann_dev *dv, const int64_t *L, int64_t count, exch_plan *pl)
{
    const int p = ctx->nranks;
    pl->need = calloc((size_t)p, 8), pl->give = calloc((size_t)p, 8);
    pl->need_at = calloc((size_t)p, 8), pl->give_at = calloc((size_t)p, 8);
    pl->req = malloc((size_t)(count ? count : 1) * 8), pl->perm = malloc((size_t)(count ? count : 1) * 8);
    int *ic = malloc((size_t)p * 4 * sizeof(int)), rc = DS_OK;
    if (!pl->need || !pl->give || !pl->need_at || !pl->give_at || !pl->req || !pl->perm || !ic)
        rc = ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory routing rows");
    int64_t *start = rc == DS_OK ? malloc((size_t)(p + 1) * 8) : NULL, *fill = start ? calloc((size_t)p, 8) : NULL;
    int32_t *owner = fill ? malloc((size_t)(count ? count : 1) * sizeof(int32_t)) : NULL;
    if (rc == DS_OK && !owner)
        rc = ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory routing rows");
    if (rc == DS_OK) {
        for (int r = 0; r < p; r++) {
            int64_t rn;
            data_partition(dv->m, p, r, &start[r], &rn);
        }
        start[p] = dv->m;
        DS_ASSERT(start[ctx->rank] == dv->row0);  // the rows are blocked as data_partition blocks them
        // Each neuron's rows are sorted: the owner moves by a step or two, no division needed.
        for (int64_t i = 0, r = 0; i < count; i++) {
            while (L[i] >= start[r + 1])
                r++;
            while (L[i] < start[r])
                r--;
            owner[i] = (int32_t)r;
            pl->need[r]++;
        }
        for (int r = 1; r < p; r++)
            pl->need_at[r] = pl->need_at[r - 1] + pl->need[r - 1];
        for (int64_t i = 0; i < count; i++) {
            int r = owner[i];
            int64_t at = pl->need_at[r] + fill[r]++;
            pl->req[at] = L[i] - start[r];
            pl->perm[i] = at;
        }
    }
    free(start), free(fill), free(owner);
    if (ctx_agree(ctx, rc) != DS_OK) {
        free(ic);
        return ctx->agreed_failure;
    }
    MPI_Alltoall(pl->need, 1, MPI_INT64_T, pl->give, 1, MPI_INT64_T, ctx->comm);
    for (int r = 1; r < p; r++)
        pl->give_at[r] = pl->give_at[r - 1] + pl->give[r - 1];
    pl->n_served = pl->give_at[p - 1] + pl->give[p - 1];
    pl->served = malloc((size_t)(pl->n_served ? pl->n_served : 1) * 8);
    rc = pl->served ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory routing rows");
    if (rc == DS_OK && (pl->n_served > ANN_MAX_INDEX_COUNT || count > ANN_MAX_INDEX_COUNT))
        rc = ds_fail(&ctx->msg, DS_ERR_RUNTIME, "row exchange of more than %d rows in one round", INT_MAX);
    if (ctx_agree(ctx, rc) != DS_OK) {
        free(ic);
        return ctx->agreed_failure;
    }
    int *sc = ic, *sd = ic + p, *rcn = ic + 2 * p, *rd = ic + 3 * p;
    for (int r = 0; r < p; r++)
        sc[r] = (int)pl->need[r], sd[r] = (int)pl->need_at[r], rcn[r] = (int)pl->give[r], rd[r] = (int)pl->give_at[r];
    MPI_Alltoallv(pl->req, sc, sd, MPI_INT64_T, pl->served, rcn, rd, MPI_INT64_T, ctx->comm);
    free(ic);
    return DS_OK;
}

static int exchange_rows(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, const exch_plan *pl, int64_t count,
                         double *A)
{
    const ds_backend *be = ctx->be;
    const int p = ctx->nranks;
    const int64_t w = dv->X->cols + 2, wb = w * (int64_t)sizeof(double);
    void *served_d = NULL, *perm_d = NULL, *send = NULL, *recv = NULL;
    int64_t *sc = malloc((size_t)p * 4 * 8);
    int rc = sc ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK)
        rc = ann_upload_new(ctx, &served_d, pl->served, (size_t)pl->n_served * 8);
    if (rc == DS_OK)
        rc = ann_upload_new(ctx, &perm_d, pl->perm, (size_t)count * 8);
    if (rc == DS_OK)
        rc = be->alloc(ctx, &send, (size_t)(pl->n_served ? pl->n_served : 1) * (size_t)wb);
    if (rc == DS_OK)
        rc = be->alloc(ctx, &recv, (size_t)(count ? count : 1) * (size_t)wb);
    if (rc == DS_OK)
        rc = ops->gather_fit_rows(ctx, dv->X->data, dv->X->cols, dv->z, served_d, pl->n_served, send);
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK) {
        int64_t *sd = sc + p, *rcn = sc + 2 * p, *rd = sc + 3 * p;
        for (int r = 0; r < p; r++)
            sc[r] = pl->give[r] * wb, sd[r] = pl->give_at[r] * wb, rcn[r] = pl->need[r] * wb, rd[r] = pl->need_at[r] * wb;
        rc = be->alltoallv(ctx, send, sc, sd, recv, rcn, rd);
    }
    if (rc == DS_OK)
        rc = ops->gather_rows(ctx, recv, w, perm_d, count, A);
    if (rc == DS_OK)
        rc = be->sync(ctx);  // the buffers are freed next
    if (served_d)
        be->free(ctx, served_d);
    if (perm_d)
        be->free(ctx, perm_d);
    if (send)
        be->free(ctx, send);
    if (recv)
        be->free(ctx, recv);
    free(sc);
    return rc;
}

int ann_fetch_rows(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, const int64_t *L, int64_t count, double *A)
{
    if (ctx->nranks == 1) {  // every row is local: no exchange
        void *idx = NULL;
        int rc = ann_upload_new(ctx, &idx, L, (size_t)count * 8);
        if (rc == DS_OK)
            rc = ops->gather_fit_rows(ctx, dv->X->data, dv->X->cols, dv->z, idx, count, A);
        if (rc == DS_OK)
            rc = ctx->be->sync(ctx);
        if (idx)
            ctx->be->free(ctx, idx);
        return ctx_agree(ctx, rc);
    }
    exch_plan pl = {0};
    int rc = plan_make(ctx, dv, L, count, &pl);
    if (rc == DS_OK)
        rc = exchange_rows(ctx, ops, dv, &pl, count, A);
    plan_free(&pl);
    return ctx_agree(ctx, rc);
}

