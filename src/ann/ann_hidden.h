// ann_hidden.h: the network's hidden layer (ann_hidden.c), as ann.c calls it.
// provides: ann_fit_hidden
#ifndef DS_ANN_HIDDEN_H
#define DS_ANN_HIDDEN_H

#include "ann/ann_rows.h"

// W (K × (n+1), host, every rank) and the count of failed neurons into m, the rank's neurons fitted on
// subsets of S rows in rounds whose backend memory stays within about budget bytes. Collective. With
// the environment variable DSOLVE_TRACE set (not "0"), each rank prints where the time went to stderr.
int ann_fit_hidden(ds_ctx *ctx, const ann_ops *ops, const ann_dev *dv, const ann_opts *o, int64_t S, int64_t budget,
                   ann_model *m);

#endif
