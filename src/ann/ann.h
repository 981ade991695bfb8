// ann.h: the network trained by least squares (Bakas et al., SERRA 2023): one tanh hidden layer,
// y ≈ Σ_k v_k·tanh([x 1]·w_k) + v_0. Each hidden neuron k is a least-squares fit [X_s 1]·w_k = t_s on
// its own random subset s of the rows (t = arctanh of y mapped into (−1, 1); with classes, the
// one-vs-rest target ±0.98 of class k mod C); then the output layer solves (HᵀH + λI)·V = HᵀT.
// Distribution: rows are blocked across ranks; neurons are sharded across ranks, each rank fetching
// the rows its neurons need from their owners in one exchange; HᵀH and HᵀT are summed exactly over fixed
// row blocks, in one allreduce (ann_gram.h): the model does not depend on the rank count.
// provides: ann_times, ann_train, ann_predict, ann_model_free (and, through ann_types.h and
//           ann_ops.h, ann_opts, ann_model, ann_metrics, ann_ops, ANN_*)
#ifndef DS_ANN_H
#define DS_ANN_H

#include <stdint.h>

#include "ann/ann_ops.h"
#include "ann/ann_types.h"
#include "core/ctx.h"
#include "core/data.h"

typedef struct ann_times {
    double fit;     // subsets, row exchange, hidden fits, all-gather of W
    double hidden;  // H = tanh([X 1]·Wᵀ) and its Gram, with the allreduce
    double solve;   // the output layer
    double total;
} ann_times;

// Trains on d (labels as doubles in d->y when o->classes > 0). Collective; m is filled on every rank
// and holds allocations (ann_model_free) even when training fails.
// DS_ERR_INPUT for a constant y or labels out of range, DS_ERR_USAGE for neurons > rows, a subset
// larger than the rows, or ranks' rows that are not whole blocks (d loaded without ds_data.block_rows =
// ann_block_rows). With o->ckpt (ann_ckpt.h): checkpoints after the hidden fits and between the
// Gram's row chunks, DS_STOPPED after one taken on SIGTERM or SIGUSR1, and --restart's resumption.
int ann_train(ds_ctx *ctx, const ds_data *d, const ann_opts *o, ann_model *m, ann_times *t);

// Outputs for the rank's rows of d into P (host, d->X.rows × m->outputs, row-major); P may be NULL.
// With has_y, met receives the metrics over all ranks' rows. Collective.
int ann_predict(ds_ctx *ctx, const ann_model *m, const ds_data *d, int has_y, double *P, ann_metrics *met);

void ann_model_free(ann_model *m);

#endif
