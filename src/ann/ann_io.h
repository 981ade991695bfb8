// ann_io.h: the network's files: the model (HDF5, readable with h5py), the predictions, and the
// predicted-against-actual scatter plot.
// provides: ann_model_write, ann_model_read, ann_predictions_write, ann_predictions_begin, ann_predictions_rows,
//           ann_predictions_end, ann_scatter_plot
#ifndef DS_ANN_IO_H
#define DS_ANN_IO_H

#include "ann/ann_types.h"
#include "core/data.h"

// Rank 0 writes /W (K × (n+1)) and /V ((K+1) × outputs) with the model's attributes on /V (source and
// options as text) to a temporary file and renames it when complete. Collective.
int ann_model_write(ds_ctx *ctx, const ann_model *m, const char *path, const char *source, const char *options);

// Every rank reads and checks the model file (DS_ERR_INPUT for a missing or inconsistent field).
// Collective.
int ann_model_read(ds_ctx *ctx, const char *path, ann_model *m);

// /yhat (rows, or rows × outputs for classes) and, for classes, /class (int64: the largest output),
// written by the ranks in turns to a temporary file that is renamed when every rank has written.
// P: the rank's rows.
int ann_predictions_write(ds_ctx *ctx, const ann_model *m, const ds_data *d, const double *P, const char *path);

// The same file written as the predictions are made (a streamed prediction): begin creates the temporary
// file tmp (len bytes) for rows_global rows (collective; end follows it, whatever it returns); rows writes rows row0 ..
// row0+rows−1 of it from P (cls: rows int64 of scratch, with classes), by one rank at a time; end (rc: how
// the writing went, agreed) renames it to path when rc is DS_OK, else removes it. Collective.
int ann_predictions_begin(ds_ctx *ctx, const ann_model *m, int64_t rows_global, const char *path, char *tmp,
                          size_t len);
int ann_predictions_rows(const ann_model *m, const char *tmp, int64_t row0, int64_t rows, const double *P,
                         int64_t *cls, ds_msg *msg);
int ann_predictions_end(ds_ctx *ctx, int rc, const char *tmp, const char *path);

// Rank 0 draws predicted against actual (regression) for at most about 4 000 rows sampled evenly over
// all ranks. y: the rank's rows of y (host). Collective.
int ann_scatter_plot(ds_ctx *ctx, const ds_data *d, const double *P, const double *y, const char *path,
                     const char *title);

#endif
