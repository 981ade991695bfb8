// ann_rows.h: what ann.c uses of ann_rows.c: drawing the neurons' subsets and fetching their rows from
// the ranks that own them.
// provides: ann_dev, ann_subsets_draw, ann_fetch_rows, ann_upload_new
#ifndef DS_ANN_ROWS_H
#define DS_ANN_ROWS_H

#include "ann.h"

typedef struct ann_dev {  // the backend buffers of a training run
    const ds_mat *X;
    const double *z;  // [rows]: hidden targets (regression) or labels
    int64_t row0, m;
} ann_dev;

// Subsets of neurons k0 .. k0+nb−1 into out (nb × S): S distinct rows of [0, m) each, sorted, a pure
// function of (seed, k, m, S), drawn over the rank's share of the node's cores.
int ann_subsets_draw(ds_ctx *ctx, uint64_t seed, int64_t m, int64_t S, int64_t k0, int64_t nb, int64_t *out);

// The rows L[0 .. count−1] (global indices) as fit rows (x, 1, z) into A (count × (n+2), backend memory),
// in the order of L: counts by MPI_Alltoall, indices by MPI_Alltoallv, rows by the backend's alltoallv.
// Collective; every rank calls it once a round, with count 0 when it has no neurons left.
int ann_fetch_rows(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, const int64_t *L, int64_t count, double *A);

// A new backend buffer holding bytes from host.
int ann_upload_new(ds_ctx *ctx, void **dev, const void *host, size_t bytes);

#endif
