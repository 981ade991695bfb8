// ann_rows.h: what ann.c uses of ann_rows.c: drawing the neurons' subsets and fetching their rows from
// the ranks that own them.
// provides: ann_dev, ann_subsets_draw, ann_rows, ann_rows_open, ann_rows_fetch, ann_rows_close, ann_upload_new
#ifndef DS_ANN_ROWS_H
#define DS_ANN_ROWS_H

#include "ann/ann_ops.h"
#include "ann/ann_types.h"
#include "core/data.h"

typedef struct ann_dev {  // the backend buffers of a training run
    const ds_mat *X;  // streamed: its shape only
    const double *z;  // [rows]: hidden targets (regression) or labels; streamed: NULL
    int64_t row0, m;
    int64_t (*block_rows)(int64_t m);  // how the rows are split over the ranks (ds_data.block_rows)
    // Streamed X (ann_stream.c), else NULL: gathers rows (x, 1, z) of local rows idx (backend memory,
    // count) into dst as ann_ops.gather_fit_rows does, by a pass over the row source.
    int (*gather)(ds_ctx *ctx, void *arg, const int64_t *idx, int64_t count, double *dst);
    void *gather_arg;
} ann_dev;

// Subsets of neurons k0 .. k0+nb−1 into out (nb × S): S distinct rows of [0, m) each, sorted, a pure
// function of (seed, k, m, S), drawn over the rank's share of the node's cores.
int ann_subsets_draw(ds_ctx *ctx, uint64_t seed, int64_t m, int64_t S, int64_t k0, int64_t nb, int64_t *out);

// The buffers of a training run's row fetches, allocated once for its largest round (ann_rows_open);
// only served_d and send_d grow, when an owner is asked for more rows than any round before.
typedef struct ann_rows {
    int p;
    int64_t S;
    int64_t *start;   // [p + 1], host: each owner's first global row, then m
    int64_t *tab;     // host: the round's routing table (ann_ops.route_requests states its layout)
    int64_t *counts;  // [8p], host: need, need_at, give, give_at (rows), then byte counts
    void *L_d, *tab_d, *req_d, *served_d, *send_d, *recv_d;  // backend memory (p == 1: L_d only)
    int64_t cap;      // rows that served_d and send_d hold
    int64_t grown;    // how often they grew
} ann_rows;

// Buffers for rounds of at most nb_max neurons on this rank and nb_cap on any rank. Every rank calls
// it; on failure the caller agrees and still calls ann_rows_close.
int ann_rows_open(ds_ctx *ctx, const ann_dev *dv, int64_t S, int64_t nb_max, int64_t nb_cap, ann_rows *rw);
void ann_rows_close(ds_ctx *ctx, ann_rows *rw);

// The rows of the nb subsets L (host, nb × S global row numbers, each sorted) as fit rows (x, 1, z)
// into A (nb·S rows of width n + 2, backend memory), in the order of L: the counts by MPI_Alltoall,
// the requests and the rows by the backend's alltoallv. Collective (every rank calls it once a round,
// with nb 0 when it has no neurons left). L may be reused on return; the work on A is queued. With
// mark ≥ 0, the backend mark of that slot is set when the host part is done and the device part starts.
int ann_rows_fetch(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, ann_rows *rw, const int64_t *L, int64_t nb,
                   double *A, int mark);

// A new backend buffer holding bytes from host.
int ann_upload_new(ds_ctx *ctx, void **dev, const void *host, size_t bytes);

#endif
