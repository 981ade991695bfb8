// ann_rows.c: the hidden neurons' rows: the subsets (Floyd's algorithm on the counter-based generator,
// so any rank count draws the same ones) and their exchange between the ranks that own the rows and
// the ranks that own the neurons (see ann_rows.h).
#include "ann/ann_rows.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

#define ANN_STREAM ((uint64_t)0x414E4E0000000000ull)  // rng stream of neuron k's subset: ANN_STREAM + k
#define RADIX_BITS 13  // digits of the subsets' sort: 26-bit row numbers (m < 67 M) take two passes

// ---------------------------------------------------------------------------------------------------
// Subsets: S distinct rows of [0, m) for neuron k, by Floyd's algorithm on the counter-based
// generator, sorted by an LSD radix sort. They depend on (seed, k, m, S) only, so any rank count draws
// the same ones.

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
    int threads = ctx_cores(ctx) < MAX_THREADS ? ctx_cores(ctx) : MAX_THREADS;
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
// Row exchange. Neuron k's subset L_k is sorted and the owners hold contiguous blocks of rows, so its
// rows of owner r are the run L_k[lo[r] .. lo[r+1]) (lo by binary search of the block starts). The
// requests go to each owner in the order [owner][neuron][row] and the rows come back in that order;
// neuron k's runs, taken in owner order, are L_k in its order: A's rows are in the order of L.

int ann_upload_new(ds_ctx *ctx, void **dev, const void *host, size_t bytes)
{
    *dev = NULL;
    DS_CHECK(ctx->be->alloc(ctx, dev, bytes ? bytes : 8));
    return ctx->be->upload(ctx, *dev, host, bytes);
}

static int64_t tab_len(int p, int64_t nb)
{
    return nb * (2 * p + 1) + p + 1;
}

// served_d and send_d hold at least rows rows (grown only when a round needs more than any before).
static int rows_reserve(ds_ctx *ctx, ann_rows *rw, int64_t row_bytes, int64_t rows)
{
    if (rows <= rw->cap && rw->send_d)
        return DS_OK;
    if (rw->send_d)
        rw->grown++;
    rows = rows > 1 ? rows : 1;
    ctx->be->free(ctx, rw->served_d), ctx->be->free(ctx, rw->send_d);
    rw->served_d = rw->send_d = NULL, rw->cap = 0;
    DS_CHECK(ctx->be->alloc(ctx, &rw->served_d, (size_t)rows * sizeof(int64_t)));
    DS_CHECK(ctx->be->alloc(ctx, &rw->send_d, (size_t)(rows * row_bytes)));
    rw->cap = rows;
    return DS_OK;
}

int ann_rows_open(ds_ctx *ctx, const ann_dev *dv, int64_t S, int64_t nb_max, int64_t nb_cap, ann_rows *rw)
{
    const ds_backend *be = ctx->be;
    const int p = ctx->nranks;
    const int64_t nbm = nb_max > 0 ? nb_max : 1, row_bytes = (dv->X->cols + 2) * (int64_t)sizeof(double);
    memset(rw, 0, sizeof *rw);
    rw->p = p, rw->S = S;
    rw->start = malloc((size_t)(p + 1) * sizeof(int64_t));
    rw->tab = malloc((size_t)tab_len(p, nbm) * sizeof(int64_t));
    rw->counts = malloc((size_t)(8 * p) * sizeof(int64_t));
    if (!rw->start || !rw->tab || !rw->counts)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory routing rows");
    for (int r = 0; r < p; r++) {
        int64_t rn;
        data_split(dv->block_rows, dv->m, p, r, &rw->start[r], &rn);
    }
    rw->start[p] = dv->m;
    DS_ASSERT(rw->start[ctx->rank] == dv->row0);  // the rows are split as data_split splits them
    DS_CHECK(be->alloc(ctx, &rw->L_d, (size_t)(nbm * S) * sizeof(int64_t)));
    if (p == 1)
        return DS_OK;
    DS_CHECK(be->alloc(ctx, &rw->tab_d, (size_t)tab_len(p, nbm) * sizeof(int64_t)));
    DS_CHECK(be->alloc(ctx, &rw->req_d, (size_t)(nbm * S) * sizeof(int64_t)));
    DS_CHECK(be->alloc(ctx, &rw->recv_d, (size_t)(nbm * S * row_bytes)));
    // Uniform subsets ask each owner for about nb_cap·S rows a round; a margin makes growing rare.
    return rows_reserve(ctx, rw, row_bytes, nb_cap * S + nb_cap * S / 16 + S);
}

void ann_rows_close(ds_ctx *ctx, ann_rows *rw)
{
    void *dev[] = {rw->L_d, rw->tab_d, rw->req_d, rw->served_d, rw->send_d, rw->recv_d};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            ctx->be->free(ctx, dev[i]);
    free(rw->start), free(rw->tab), free(rw->counts);
    memset(rw, 0, sizeof *rw);
}

// The first i with v ≤ x[i] (n when none).
static int64_t lower_bound(const int64_t *x, int64_t n, int64_t v)
{
    int64_t a = 0, b = n;
    while (a < b) {
        int64_t c = a + (b - a) / 2;
        if (x[c] < v)
            a = c + 1;
        else
            b = c;
    }
    return a;
}

// The round's table (ann_ops.route_requests states its layout) and need/need_at: the rows the rank
// takes from each owner and their offset in the exchange layout.
static void route_table(ann_rows *rw, const int64_t *L, int64_t nb)
{
    const int p = rw->p;
    const int64_t S = rw->S;
    int64_t *need = rw->counts, *need_at = need + p, *at = rw->tab + nb * (p + 1);
    memset(need, 0, (size_t)p * sizeof(int64_t));
    for (int64_t k = 0; k < nb; k++) {
        int64_t *lo = rw->tab + k * (p + 1);
        lo[0] = 0, lo[p] = S;
        for (int r = 1; r < p; r++)
            lo[r] = lower_bound(L + k * S, S, rw->start[r]);
        for (int r = 0; r < p; r++)
            at[k * p + r] = need[r], need[r] += lo[r + 1] - lo[r];
    }
    need_at[0] = 0;
    for (int r = 1; r < p; r++)
        need_at[r] = need_at[r - 1] + need[r - 1];
    for (int64_t k = 0; k < nb; k++)
        for (int r = 0; r < p; r++)
            at[k * p + r] += need_at[r];
    memcpy(at + nb * p, rw->start, (size_t)(p + 1) * sizeof(int64_t));
}

// out[r] = in[r]·unit for the p owners.
static const int64_t *scaled(int64_t *out, const int64_t *in, int p, int64_t unit)
{
    for (int r = 0; r < p; r++)
        out[r] = in[r] * unit;
    return out;
}

// The fit rows of the rank's local rows idx into dst: from X in backend memory, or by a streamed pass.
static int gather_rows(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, const int64_t *idx, int64_t count,
                       double *dst)
{
    if (dv->gather)
        return dv->gather(ctx, dv->gather_arg, idx, count, dst);
    return ops->gather_fit_rows(ctx, dv->X->data, dv->X->cols, dv->z, idx, count, dst);
}

// The two exchanges: requests to the owners, rows back (see ann_rows.h).
static int exchange(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, ann_rows *rw, int64_t nb, double *A,
                    int mark)
{
    const ds_backend *be = ctx->be;
    const int p = rw->p;
    const int64_t w = dv->X->cols + 2, wb = w * (int64_t)sizeof(double);
    int64_t *need = rw->counts, *need_at = need + p, *give = need + 2 * p, *give_at = need + 3 * p;
    int64_t *b = need + 4 * p;  // four arrays of byte counts
    MPI_Alltoall(need, 1, MPI_INT64_T, give, 1, MPI_INT64_T, ctx->comm);
    give_at[0] = 0;
    for (int r = 1; r < p; r++)
        give_at[r] = give_at[r - 1] + give[r - 1];
    const int64_t n_served = give_at[p - 1] + give[p - 1];
    int rc = rows_reserve(ctx, rw, wb, n_served);
    if (rc == DS_OK)
        rc = be->upload(ctx, rw->tab_d, rw->tab, (size_t)tab_len(p, nb) * sizeof(int64_t));
    if (rc == DS_OK && mark >= 0)
        rc = be->mark(ctx, mark);
    if (rc == DS_OK)
        rc = ops->route_requests(ctx, rw->L_d, nb, rw->S, p, rw->tab_d, rw->req_d);
    rc = ctx_agree(ctx, rc);
    const int64_t ib = (int64_t)sizeof(int64_t);
    if (rc == DS_OK)
        rc = be->alltoallv(ctx, rw->req_d, scaled(b, need, p, ib), scaled(b + p, need_at, p, ib), rw->served_d,
                           scaled(b + 2 * p, give, p, ib), scaled(b + 3 * p, give_at, p, ib));
    if (rc == DS_OK)
        rc = gather_rows(ctx, ops, dv, rw->served_d, n_served, rw->send_d);
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = be->alltoallv(ctx, rw->send_d, scaled(b, give, p, wb), scaled(b + p, give_at, p, wb), rw->recv_d,
                           scaled(b + 2 * p, need, p, wb), scaled(b + 3 * p, need_at, p, wb));
    if (rc == DS_OK)
        rc = ops->route_place(ctx, rw->recv_d, w, nb, rw->S, p, rw->tab_d, A);
    return ctx_agree(ctx, rc);
}

int ann_rows_fetch(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, ann_rows *rw, const int64_t *L, int64_t nb,
                   double *A, int mark)
{
    const int64_t count = nb * rw->S;
    int rc = ctx->be->upload(ctx, rw->L_d, L, (size_t)count * sizeof(int64_t));
    if (rw->p == 1) {  // every row is local: no exchange
        if (rc == DS_OK && mark >= 0)
            rc = ctx->be->mark(ctx, mark);
        if (rc == DS_OK)
            rc = gather_rows(ctx, ops, dv, rw->L_d, count, A);
        return ctx_agree(ctx, rc);
    }
    route_table(rw, L, nb);
    rc = ctx_agree(ctx, rc);
    return rc == DS_OK ? exchange(ctx, ops, dv, rw, nb, A, mark) : rc;
}
