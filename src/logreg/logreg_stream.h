// logreg_stream.h: labelled sets held as row sources when they do not fit the memory caps
// (logreg_stream.c): the plan (stream or not, by what chunks, from the file or from host memory) and
// the opening of a set's source. logreg_pass and logreg_colmax, which read either kind of set, are in
// logreg.h.
// provides: lr_source, lr_mem, lr_hold, logreg_memory_bytes, logreg_stream_plan, logreg_stream_open
#ifndef DS_LOGREG_STREAM_H
#define DS_LOGREG_STREAM_H

#include "logreg/logreg.h"

// Either an HDF5 file (h5 with datasets xname and lname) or an MNIST-layout directory and its split
// ("train" or "t10k").
typedef struct lr_source {
    const char *h5, *xname, *lname;
    const char *dir, *split;
} lr_source;

// The memory caps a set is loaded under (NULL: all of it in backend memory): its share of the caps
// (the training and test sets split them when they do not fit together), the classes and iterations
// that size the working state.
typedef struct lr_mem {
    rows_caps caps;
    const char *cap_name;  // what the backend cap stands for, for messages (cli_memory_caps)
    double share;
    int classes, iters;
} lr_mem;

// How a set is held: chunk_rows 0, in backend memory; else streamed by chunks of chunk_rows rows
// (whole blocks, the same on every rank), from host memory (host 1: pinned, a device backend only) or
// from the HDF5 file.
typedef struct lr_hold {
    int64_t chunk_rows;
    int host;
    int64_t resident;  // streamed: the rank's first rows kept in backend memory (whole blocks)
} lr_hold;

// Bytes a rank's rows of a set of rows_global rows take in backend memory, with the working state.
double logreg_memory_bytes(const ds_ctx *ctx, const lr_mem *mem, int64_t rows_global, int64_t rows, int64_t cols,
                           int f32);

// The hold of a set of rows_global rows of cols values (with the bias) of which the rank has rows,
// under mem's caps times mem->share. DS_ERR_USAGE naming the working minimum when a cap is below it,
// or for an IDX set that would have to stream from its files. Collective (the ranks agree).
int logreg_stream_plan(ds_ctx *ctx, const lr_mem *mem, const lr_source *src, int64_t rows_global, int64_t cols,
                       int f32, int64_t rows, lr_hold *hold);

// The source of s (its rows, row0, cols, rows_global and resident set, its resident rows loaded) over
// the rows after the resident ones, as hold says, of the set src of `features` values a row. Collective.
int logreg_stream_open(ds_ctx *ctx, const lr_source *src, const lr_hold *hold, int64_t features, int f32, int classes,
                       lr_set *s);

#endif
