// sort_plan.c: a sort plan's memory: the key, position and value buffers in backend memory (grown,
// never shrunk, so that timed repeats allocate nothing), the library scratch and the host scratch of
// the splitter and exchange steps (sort_host.h). The sort itself is in sort.c.
// provides: sort_plan_init, sort_plan_free, sort_plan_grow, sort_tmp_reserve
#include "sort/sort.h"

#include <stdlib.h>
#include <string.h>

#include "sort/sort_host.h"

// Samples per rank: the splitters land within about n/s keys of their targets (s = all samples).
static int64_t sample_count(int nranks) { return nranks * 64 < 256 ? 256 : nranks * 64 > 16384 ? 16384 : nranks * 64; }

// ---------------------------------------------------------------------------------------------------
// Host scratch, allocated with the plan so that a run allocates nothing on the host.

static void host_free(sort_host *h)
{
    if (!h)
        return;
    void *all[] = {h->mine, h->all, h->smp, h->n_all, h->used, h->pos_bnd, h->cnt, h->dsp, h->sc, h->sd, h->rc,
                   h->rd, h->scb, h->sdb, h->rcb, h->rdb, h->skey, h->stag, h->lo, h->hi, h->roff, h->rlen,
                   h->s2, h->r2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(h);
}

static sort_host *host_alloc(int64_t p, int64_t s)
{
    sort_host *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->mine = malloc(s * 8);
    h->all = malloc(p * s * 8);
    h->smp = malloc(p * s * sizeof(sample));
    int64_t **i64[] = {&h->n_all, &h->used, &h->sc, &h->sd, &h->rc, &h->rd, &h->scb, &h->sdb, &h->rcb, &h->rdb,
                       &h->stag, &h->lo, &h->hi, &h->roff, &h->rlen};
    int ok = h->mine && h->all && h->smp;
    for (size_t i = 0; i < sizeof i64 / sizeof i64[0]; i++)
        ok &= (*i64[i] = malloc(p * 8)) != NULL;
    ok &= (h->pos_bnd = malloc((p + 1) * 8)) != NULL;
    ok &= (h->s2 = malloc(2 * p * 8)) != NULL && (h->r2 = malloc(2 * p * 8)) != NULL;
    ok &= (h->skey = malloc(p * 8)) != NULL;
    ok &= (h->cnt = malloc(p * sizeof(int))) != NULL && (h->dsp = malloc(p * sizeof(int))) != NULL;
    if (!ok) {
        host_free(h);
        return NULL;
    }
    return h;
}

static int plan_host(ds_ctx *ctx, sort_plan *p)
{
    p->h = host_alloc(ctx->nranks, p->samples);
    return p->h ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
}

static void plan_host_free(sort_plan *p)
{
    host_free(p->h);
    p->h = NULL;
}

// ---------------------------------------------------------------------------------------------------
// Buffers in backend memory

static void plan_release(ds_ctx *ctx, sort_plan *p)
{
    for (int i = 0; i < 2; i++) {
        ctx->be->free(ctx, p->k[i]);
        ctx->be->free(ctx, p->v[i]);
        p->k[i] = p->v[i] = NULL;
    }
    for (int i = 0; i < 3; i++) {
        ctx->be->free(ctx, p->g[i]);
        p->g[i] = NULL;
    }
}

// Buffers of capacity cap; the first keep elements of each old buffer are carried over.
int sort_plan_grow(ds_ctx *ctx, sort_plan *p, int64_t cap, int64_t keep)
{
    const int w = sort_dtype_size(p->o.dtype), pay = p->o.argsort || p->o.val_size;
    void *k[2] = {NULL, NULL}, *v[2] = {NULL, NULL}, *g[3] = {NULL, NULL, NULL};
    int rc = DS_OK;
    for (int i = 0; i < 2 && rc == DS_OK; i++) {
        rc = ctx->be->alloc(ctx, &k[i], (size_t)cap * w);
        if (rc == DS_OK && p->o.val_size)
            rc = ctx->be->alloc(ctx, &v[i], (size_t)cap * p->o.val_size);
    }
    for (int i = 0; i < 3 && rc == DS_OK && pay; i++)
        rc = ctx->be->alloc(ctx, &g[i], (size_t)cap * 8);
    for (int i = 0; i < 2 && rc == DS_OK && keep > 0 && p->k[i]; i++) {
        rc = ctx->be->copy(ctx, k[i], p->k[i], (size_t)keep * w);
        if (rc == DS_OK && v[i])
            rc = ctx->be->copy(ctx, v[i], p->v[i], (size_t)keep * p->o.val_size);
    }
    for (int i = 0; i < 3 && rc == DS_OK && keep > 0 && g[i] && p->g[i]; i++)
        rc = ctx->be->copy(ctx, g[i], p->g[i], (size_t)keep * 8);
    plan_release(ctx, p);
    memcpy(p->k, k, sizeof k);
    memcpy(p->v, v, sizeof v);
    memcpy(p->g, g, sizeof g);
    p->cap = rc == DS_OK ? cap : 0;
    return rc;
}

int sort_plan_init(ds_ctx *ctx, sort_plan *p, const sort_opts *o, const void *keys, const void *vals, int64_t n_local)
{
    memset(p, 0, sizeof *p);
    p->o = *o;
    p->keys_in = keys;
    p->vals_in = vals;
    p->n_local = n_local;
    p->threads = sort_threads(ctx);
    MPI_Exscan(&n_local, &p->offset, 1, MPI_INT64_T, MPI_SUM, ctx->comm);
    if (ctx->rank == 0)
        p->offset = 0;
    MPI_Allreduce(&n_local, &p->n_global, 1, MPI_INT64_T, MPI_SUM, ctx->comm);
    p->samples = sample_count(ctx->nranks);
    p->small_bytes = (p->samples + 3 * (int64_t)ctx->nranks + 8) * 8;
    int rc = plan_host(ctx, p);
    if (rc == DS_OK)
        rc = ctx->be->alloc(ctx, &p->small, (size_t)p->small_bytes);
    // Room for the received share of a balanced exchange; a larger one grows the buffers once.
    int64_t cap = ctx->nranks == 1 ? n_local : n_local + n_local / 8 + 1024;
    if (rc == DS_OK)
        rc = sort_plan_grow(ctx, p, cap > 0 ? cap : 1, 0);
    return rc;
}

void sort_plan_free(ds_ctx *ctx, sort_plan *p)
{
    plan_release(ctx, p);
    ctx->be->free(ctx, p->tmp);
    ctx->be->free(ctx, p->small);
    p->tmp = p->small = NULL;
    plan_host_free(p);
}

int sort_tmp_reserve(ds_ctx *ctx, sort_plan *p, size_t bytes)
{
    if (bytes <= p->tmp_bytes && p->tmp)
        return DS_OK;
    ctx->be->free(ctx, p->tmp);
    p->tmp = NULL;
    p->tmp_bytes = 0;
    size_t want = bytes + bytes / 8 + 256;
    DS_CHECK(ctx->be->alloc(ctx, &p->tmp, want));
    p->tmp_bytes = want;
    return DS_OK;
}
