// logreg_data.h: labelled sets for `dsolve logreg` from an IDX directory or an HDF5 file.
// provides: logreg_probe, logreg_stream_shares, logreg_load
#ifndef DS_LOGREG_DATA_H
#define DS_LOGREG_DATA_H

#include <stddef.h>

#include "logreg/logreg_stream.h"

// The set's items and features (without the bias). DS_ERR_INPUT for a bad file. Not collective.
int logreg_probe(const lr_source *src, int64_t *count, int64_t *features, ds_msg *msg);

// Each set's share of the caps: 1 when the training set (its first limit items, 0: all) and the test
// set (NULL: none) fit them together in memory, else 1/2 each. Collective.
void logreg_stream_shares(ds_ctx *ctx, const lr_source *train, int64_t limit, const lr_source *test, int f32,
                          lr_mem *mem_train, lr_mem *mem_test);

// Loads the rank's rows (logreg_partition: whole blocks, maybe none) of the first limit items (0: all)
// with the bias column appended (cols = features + 1; want_cols, when not 0, is the width the set must
// have). DS_ERR_INPUT for a bad file or a label outside 0 .. classes−1; DS_ERR_USAGE for more samples
// than the set holds or fewer than ranks. With mem, a set that does not fit its share of the caps is
// streamed instead (lr_set.src; logreg_stream.h). desc gets the images' file name. Collective; every
// rank returns the same status.
int logreg_load(ds_ctx *ctx, const lr_source *src, int64_t limit, int64_t want_cols, int f32, int classes,
                const lr_mem *mem, lr_set *s, char *desc, size_t desc_len);

#endif
