// ann_hidden.c: the hidden layer of the network (see ann.h): the rank's neurons in rounds that bound
// the fetched rows by the memory budget, every buffer allocated once for the largest round, and each
// round's subsets drawn on the host while the device fits the round before. Every rank takes part in
// every round's exchange, with no neurons of its own in the last ones if need be.
#include "ann/ann_hidden.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data.h"

enum { MARK_ROUTE = 13, MARK_FIT = 14, MARK_DONE = 15 };  // backend marks of the trace

typedef struct hidden_plan {
    int64_t S, n, k0, kn;       // the rank's neurons k0 .. k0+kn−1
    int64_t per_round, rounds;  // neurons a round, on every rank; rounds, the same on every rank
    int64_t nb_max, nb_cap;     // the most neurons of one round on this rank, on any rank
} hidden_plan;

typedef struct hidden_bufs {
    int64_t *L;                         // host, nb_max × S: the round's subsets
    int *failed;                        // host, nb_max
    void *A, *Wd, *failed_d, *scratch;  // backend memory
    ann_rows rows;
} hidden_bufs;

typedef struct hidden_trace {
    int on;
    double draw, route, wait;  // host seconds: drawing, routing (tables, counts, uploads), waiting at the end of rounds
    double exchange, fits;     // backend marks: rows exchanged and placed, fits
} hidden_trace;

static hidden_plan plan_of(const ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, const ann_opts *o, int64_t S,
                           int64_t budget)
{
    const int64_t n = dv->X->cols, K = o->neurons;
    const int64_t G = ann_fit_group(S, n);  // the rank's neurons: whole groups of G, the first ranks one more
    hidden_plan pl = {.S = S, .n = n};
    data_partition_blocks(K, G, ctx->nranks, ctx->rank, &pl.k0, &pl.kn);
    // Per neuron: A and, with an exchange, the rows sent and received (S rows of n + 2 each), its subset
    // and, with an exchange, the requests made and served (S indices each), its share of the fits' scratch.
    const int64_t parts = ctx->nranks > 1 ? 3 : 1;
    const int64_t neuron_bytes = (parts * S * (n + 3) + ops->fit_scratch(1, S, n)) * (int64_t)sizeof(double);
    int64_t per_round = budget / neuron_bytes;
    per_round = per_round < 1 ? 1 : per_round > INT_MAX / S ? INT_MAX / S : per_round;  // MPI and BLAS int counts
    pl.per_round = per_round >= G ? per_round / G * G : per_round;
    int64_t q0 = 0, kmax = 0;  // rank 0 holds the most groups
    data_partition_blocks(K, G, ctx->nranks, 0, &q0, &kmax);
    pl.rounds = (kmax + pl.per_round - 1) / pl.per_round;
    pl.nb_max = pl.kn < pl.per_round ? pl.kn : pl.per_round;
    pl.nb_cap = kmax < pl.per_round ? kmax : pl.per_round;
    return pl;
}

// Round r's neurons: k0 + *a .. k0 + *a + nb − 1 (nb may be 0).
static int64_t round_range(const hidden_plan *pl, int64_t r, int64_t *a)
{
    *a = r * pl->per_round < pl->kn ? r * pl->per_round : pl->kn;
    return pl->kn - *a < pl->per_round ? pl->kn - *a : pl->per_round;
}

static int bufs_open(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, const hidden_plan *pl, hidden_bufs *b)
{
    const ds_backend *be = ctx->be;
    const int64_t nbm = pl->nb_max > 0 ? pl->nb_max : 1, S = pl->S, n = pl->n;
    memset(b, 0, sizeof *b);
    b->L = malloc((size_t)(nbm * S) * sizeof(int64_t));
    b->failed = malloc((size_t)nbm * sizeof(int));
    if (!b->L || !b->failed)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for the hidden fits");
    DS_CHECK(be->alloc(ctx, &b->A, (size_t)(nbm * S * (n + 2)) * sizeof(double)));
    DS_CHECK(be->alloc(ctx, &b->Wd, (size_t)(nbm * (n + 1)) * sizeof(double)));
    DS_CHECK(be->alloc(ctx, &b->failed_d, (size_t)nbm * sizeof(int)));
    DS_CHECK(be->alloc(ctx, &b->scratch, (size_t)ops->fit_scratch(nbm, S, n) * sizeof(double)));
    return ann_rows_open(ctx, dv, S, pl->nb_max, pl->nb_cap, &b->rows);
}

static void bufs_close(ds_ctx *ctx, hidden_bufs *b)
{
    void *dev[] = {b->A, b->Wd, b->failed_d, b->scratch};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            ctx->be->free(ctx, dev[i]);
    ann_rows_close(ctx, &b->rows);
    free(b->L), free(b->failed);
}

static int draw_round(ds_ctx *ctx, const ann_dev *dv, const ann_opts *o, const hidden_plan *pl, int64_t r,
                      hidden_bufs *b, hidden_trace *tr)
{
    const double t0 = MPI_Wtime();
    int64_t a, nb = round_range(pl, r, &a);
    int rc = ann_subsets_draw(ctx, o->seed, dv->m, pl->S, pl->k0 + a, nb, b->L);
    tr->draw += MPI_Wtime() - t0;
    return rc;
}

// Queues round r: the exchange of its rows and its fits (L may be drawn again on return).
static int submit_round(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, const ann_opts *o, const hidden_plan *pl,
                        int64_t r, hidden_bufs *b, hidden_trace *tr)
{
    const double t0 = MPI_Wtime();
    int64_t a, nb = round_range(pl, r, &a);
    int rc = ann_rows_fetch(ctx, ops, dv, &b->rows, b->L, nb, b->A, tr->on ? MARK_ROUTE : -1);
    tr->route += MPI_Wtime() - t0;
    if (rc == DS_OK && tr->on)
        rc = ctx->be->mark(ctx, MARK_FIT);
    if (rc == DS_OK && nb > 0)
        rc = ops->fit(ctx, b->A, nb, pl->S, pl->n, o->classes, pl->k0 + a, b->Wd, b->failed_d, b->scratch);
    if (rc == DS_OK && tr->on)
        rc = ctx->be->mark(ctx, MARK_DONE);
    return rc;
}

// Waits for round r: its weights into W_mine (the rank's kn × (n+1)), its failures into *nfailed.
static int finish_round(ds_ctx *ctx, const hidden_plan *pl, int64_t r, hidden_bufs *b, hidden_trace *tr,
                        double *W_mine, int64_t *nfailed)
{
    const ds_backend *be = ctx->be;
    const double t0 = MPI_Wtime();
    const int64_t n1 = pl->n + 1;
    int64_t a, nb = round_range(pl, r, &a);
    int rc = be->sync(ctx);
    if (rc == DS_OK && nb > 0)
        rc = be->download(ctx, W_mine + a * n1, b->Wd, (size_t)(nb * n1) * sizeof(double));
    if (rc == DS_OK && nb > 0)
        rc = be->download(ctx, b->failed, b->failed_d, (size_t)nb * sizeof(int));
    tr->wait += MPI_Wtime() - t0;
    for (int64_t i = 0; rc == DS_OK && i < nb; i++)
        *nfailed += b->failed[i];
    double x = 0, y = 0;
    if (rc == DS_OK && tr->on)
        rc = be->elapsed(ctx, MARK_ROUTE, MARK_FIT, &x);
    if (rc == DS_OK && tr->on)
        rc = be->elapsed(ctx, MARK_FIT, MARK_DONE, &y);
    tr->exchange += x, tr->fits += y;
    return rc;
}

// Every rank's weights into m->W, the failures summed into m->failed.
static int gather_weights(ds_ctx *ctx, const ann_opts *o, const hidden_plan *pl, const double *W_mine,
                          int64_t nfailed, ann_model *m)
{
    const int64_t K = o->neurons, n1 = pl->n + 1;
    int *cnt = malloc((size_t)ctx->nranks * 2 * sizeof(int));
    int rc = cnt && K * n1 <= INT_MAX ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "hidden weights too large to gather");
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK) {
        for (int q = 0; q < ctx->nranks; q++) {
            int64_t q0, qn;
            data_partition_blocks(K, ann_fit_group(pl->S, pl->n), ctx->nranks, q, &q0, &qn);
            cnt[q] = (int)(qn * n1), cnt[ctx->nranks + q] = (int)(q0 * n1);
        }
        MPI_Allgatherv(W_mine, (int)(pl->kn * n1), MPI_DOUBLE, m->W, cnt, cnt + ctx->nranks, MPI_DOUBLE, ctx->comm);
        MPI_Allreduce(&nfailed, &m->failed, 1, MPI_INT64_T, MPI_SUM, ctx->comm);
    }
    free(cnt);
    return rc;
}

static int trace_on(void)
{
    const char *s = getenv("DSOLVE_TRACE");
    return s && *s && strcmp(s, "0") != 0;
}

static void trace_print(const ds_ctx *ctx, const hidden_plan *pl, const hidden_bufs *b, const hidden_trace *tr,
                        double total)
{
    fprintf(stderr,
            "trace: ann hidden rank %d/%d (%s): %lld neurons in %lld rounds of <= %lld; draw %.4f s, route %.4f s "
            "(host: tables, counts, uploads), exchange %.4f s, fits %.4f s (backend marks), wait %.4f s, total "
            "%.4f s; send buffer grown %lld times\n",
            ctx->rank, ctx->nranks, ctx->be->name, (long long)pl->kn, (long long)pl->rounds, (long long)pl->per_round,
            tr->draw, tr->route, tr->exchange, tr->fits, tr->wait, total, (long long)b->rows.grown);
}

int ann_fit_hidden(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, const ann_opts *o, int64_t S, int64_t budget,
                   ann_model *m)
{
    const double t0 = MPI_Wtime();
    const hidden_plan pl = plan_of(ctx, ops, dv, o, S, budget);
    hidden_trace tr = {.on = trace_on()};
    hidden_bufs b;
    double *W_mine = malloc((size_t)(pl.kn ? pl.kn : 1) * (size_t)(pl.n + 1) * sizeof(double));
    int rc = bufs_open(ctx, ops, dv, &pl, &b);
    if (rc == DS_OK && !W_mine)
        rc = ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for the hidden fits");
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = ctx_agree(ctx, draw_round(ctx, dv, o, &pl, 0, &b, &tr));
    int64_t nfailed = 0;
    for (int64_t r = 0; rc == DS_OK && r < pl.rounds; r++) {
        rc = ctx_agree(ctx, submit_round(ctx, ops, dv, o, &pl, r, &b, &tr));
        int next = DS_OK;  // the next round's subsets, drawn while the device works on this one
        if (rc == DS_OK && r + 1 < pl.rounds)
            next = draw_round(ctx, dv, o, &pl, r + 1, &b, &tr);
        if (rc == DS_OK)
            rc = finish_round(ctx, &pl, r, &b, &tr, W_mine, &nfailed);
        rc = ctx_agree(ctx, rc != DS_OK ? rc : next);
    }
    if (rc == DS_OK)
        rc = gather_weights(ctx, o, &pl, W_mine, nfailed, m);
    if (tr.on)
        trace_print(ctx, &pl, &b, &tr, MPI_Wtime() - t0);
    bufs_close(ctx, &b);
    free(W_mine);
    return rc;
}
