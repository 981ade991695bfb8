// sort_check.c: verification of a distributed sort (--verify): every rank's keys in order, the order
// across rank boundaries, the key count and an order-independent checksum of the (mapped) key bits
// against the input; with argsort, the permutation's count and index checksum.
// provides: sort_check
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sort/sort.h"

typedef struct edge {
    uint64_t has, first, last;
} edge;

// Σ sk_hash(i) over this rank's input positions: what the permutation's checksum must add up to.
static uint64_t position_checksum(int64_t i0, int64_t n)
{
    uint64_t sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += sk_hash((uint64_t)(i0 + i));
    return sum;
}

static void boundary_ok(const edge *e, int np, int *ok, char *why, size_t len)
{
    int prev = -1;
    for (int r = 0; r < np; r++) {
        if (!e[r].has)
            continue;
        if (prev >= 0 && e[prev].last > e[r].first && *ok) {
            *ok = 0;
            snprintf(why, len, "the last key of rank %d is after the first key of rank %d", prev, r);
        }
        prev = r;
    }
}

int sort_check(ds_ctx *ctx, sort_plan *p, const sort_result *r, int *ok, char *why, size_t why_len)
{
    const sort_ops *ops = ctx->be->sort;
    uint64_t out[4] = {0}, in[4] = {0}, perm[4] = {0};
    int rc = ops->check(ctx, p, r->keys, r->n, p->o.dtype, p->o.descending, out);
    if (rc == DS_OK)
        rc = ops->check(ctx, p, p->keys_in, p->n_local, p->o.dtype, p->o.descending, in);
    if (rc == DS_OK && p->o.argsort)
        rc = ops->check(ctx, p, r->perm, r->n, SORT_U64, 0, perm);
    DS_CHECK(ctx_agree(ctx, rc));
    // sums[0..1]: inversions, keys out − keys in; [2]: key checksum out − in; [3]: perm checksum − expected
    uint64_t sums[4] = {out[0], (uint64_t)r->n - (uint64_t)p->n_local, out[1] - in[1], 0};
    if (p->o.argsort)
        sums[3] = perm[1] - position_checksum(p->offset, p->n_local);
    MPI_Allreduce(MPI_IN_PLACE, sums, 4, MPI_UINT64_T, MPI_SUM, ctx->comm);
    edge mine = {r->n > 0, out[2], out[3]}, *all = malloc((size_t)ctx->nranks * sizeof(edge));
    DS_ASSERT(all);
    MPI_Allgather(&mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, ctx->comm);
    *ok = 1;
    why[0] = '\0';
    if (sums[0]) {
        *ok = 0;
        snprintf(why, why_len, "%llu adjacent pairs out of order within ranks", (unsigned long long)sums[0]);
    } else if (sums[1]) {
        *ok = 0;
        snprintf(why, why_len, "the output holds %lld keys more than the input", (long long)sums[1]);
    } else if (sums[2]) {
        *ok = 0;
        snprintf(why, why_len, "the checksum of the output keys differs from the input's");
    } else if (sums[3]) {
        *ok = 0;
        snprintf(why, why_len, "the permutation is not a permutation of the input positions");
    }
    boundary_ok(all, ctx->nranks, ok, why, why_len);
    free(all);
    return DS_OK;
}
