// h5io.h: the only interface to HDF5. Every function opens, works and closes: no hid_t escapes, so a
// failure never leaves a handle open. Messages name the file, the dataset and the problem.
// Serial HDF5 suffices: ranks read their own hyperslabs; writers take turns on a temporary file that
// the caller renames (h5io_commit) only once every rank has succeeded.
// provides: h5io_lsq_info, h5io_probe_lsq, h5io_read_lsq_rows, h5io_read_vector, h5io_create_lsq,
//           h5io_write_rows, h5io_write_vector, h5io_attr, h5io_write_attrs, h5io_commit, h5io_discard,
//           h5io_has_dataset, h5io_output_dir_ok, h5io_version, h5io_probe_labelled, h5io_read_labelled_rows
#ifndef DS_H5IO_H
#define DS_H5IO_H

#include <stddef.h>
#include <stdint.h>

#include "../src/err.h"

typedef struct h5io_lsq_info {
    int64_t rows, cols;
    int x_f32, y_f32;  // 1 when stored as float32, 0 for float64
} h5io_lsq_info;

// Validates a least-squares input without reading its data: the file exists and is HDF5; xname and
// yname exist and are datasets reached through no external link; both are floating point of size 4
// or 8; X is 2-D and y 1-D; their row counts match; neither is empty. DS_ERR_INPUT otherwise.
int h5io_probe_lsq(const char *path, const char *xname, const char *yname, h5io_lsq_info *info,
                   ds_msg *msg);

// Reads rows row0 .. row0+nrows−1 of X (cols wide) into X, row-major, converted to float (x_f32) or
// double, and the same rows of y into y as double. Fails with DS_ERR_INPUT on a NaN or Inf, naming
// the dataset and the first bad row (a global row index) and column.
int h5io_read_lsq_rows(const char *path, const char *xname, const char *yname, int64_t row0,
                       int64_t nrows, int64_t cols, int x_f32, void *X, double *y, ds_msg *msg);

// 1 when path is an HDF5 file holding a dataset name, else 0. Never fails loudly.
int h5io_has_dataset(const char *path, const char *name);

// Reads a whole 1-D floating-point dataset of exactly n elements as double.
int h5io_read_vector(const char *path, const char *name, int64_t n, double *out, ds_msg *msg);

// Creates (truncates) path with datasets xname (rows × cols) and yname (rows), float32 or float64,
// chunked by rows (chunk_rows rows a chunk, at most rows).
int h5io_create_lsq(const char *path, const char *xname, const char *yname, int64_t rows,
                    int64_t cols, int f32, int64_t chunk_rows, ds_msg *msg);

// Opens path for writing and writes rows row0 .. row0+nrows−1 of the existing dataset name (a 2-D
// dataset cols wide, or 1-D when cols == 0) from data, which holds float (src_f32) or double values;
// HDF5 converts to the stored type.
int h5io_write_rows(const char *path, const char *name, int64_t row0, int64_t nrows, int64_t cols,
                    int src_f32, const void *data, ds_msg *msg);

// Creates path when create is 1 (else opens it for writing) and writes a 1-D float64 dataset name.
int h5io_write_vector(const char *path, int create, const char *name, const double *v, int64_t n,
                      ds_msg *msg);

// Attributes attached to a dataset by h5io_write_attrs.
enum h5io_attr_kind { H5IO_INT, H5IO_DOUBLE, H5IO_STRING, H5IO_DOUBLES };
typedef struct h5io_attr {
    const char *name;
    int kind;
    int64_t i;
    double d;
    const char *s;
    const double *v;  // H5IO_DOUBLES: len values
    int64_t len;
} h5io_attr;

int h5io_write_attrs(const char *path, const char *dataset, const h5io_attr *attrs, int nattrs,
                     ds_msg *msg);

// DS_ERR_USAGE when the directory that would hold the output path is not writable (checked before
// a long run rather than after it).
int h5io_output_dir_ok(const char *path, ds_msg *msg);

// Renames a complete temporary file to its final name; removes a temporary file.
int h5io_commit(const char *tmp_path, const char *final_path, ds_msg *msg);
void h5io_discard(const char *tmp_path);

// "HDF5 1.10.8" into buf.
void h5io_version(char *buf, size_t len);

// A labelled set (h5io_labels.c): X (rows × cols, float32 or float64) and labels (rows, any integer
// type). probe checks as h5io_probe_lsq does, with an integer 1-D labels dataset (info->y_f32 is 0).
int h5io_probe_labelled(const char *path, const char *xname, const char *lname, h5io_lsq_info *info, ds_msg *msg);

// Reads rows row0 .. row0+nrows−1 of X (float when x_f32, else double; NaN or Inf refused as in
// h5io_read_lsq_rows) and of labels as int32 (values beyond int32 fail). Label ranges are the caller's.
int h5io_read_labelled_rows(const char *path, const char *xname, const char *lname, int64_t row0, int64_t nrows,
                            int64_t cols, int x_f32, void *X, int32_t *labels, ds_msg *msg);

#endif
