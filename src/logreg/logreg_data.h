// logreg_data.h: labelled sets for `dsolve logreg` from an IDX directory or an HDF5 file.
// provides: lr_source, logreg_load
#ifndef DS_LOGREG_DATA_H
#define DS_LOGREG_DATA_H

#include <stddef.h>

#include "logreg/logreg.h"

// Either an HDF5 file (h5 with datasets xname and lname) or an MNIST-layout directory and its split
// ("train" or "t10k").
typedef struct lr_source {
    const char *h5, *xname, *lname;
    const char *dir, *split;
} lr_source;

// Loads the rank's rows (logreg_partition: whole blocks, maybe none) of the first limit items (0: all)
// with the bias column appended (cols = features + 1; want_cols, when not 0, is the width the set must
// have). DS_ERR_INPUT for a bad file or a label outside 0 .. classes−1; DS_ERR_USAGE for more samples
// than the set holds or fewer than ranks. desc gets the images' file name. Collective; every rank returns the same status.
int logreg_load(ds_ctx *ctx, const lr_source *src, int64_t limit, int64_t want_cols, int f32, int classes, lr_set *s,
                char *desc, size_t desc_len);

#endif
