// h5io.h: the only interface to HDF5. Every function opens, works and closes: no hid_t escapes, so a
// failure never leaves a handle open. Messages name the file, the dataset and the problem.
// Serial HDF5 suffices: ranks read their own hyperslabs; writers take turns on a temporary file that
// the caller renames (h5io_commit) only once every rank has succeeded.
// provides: h5io_lsq_info, h5io_probe_lsq, h5io_read_lsq_rows, h5io_read_vector, h5io_create_lsq,
//           h5io_write_rows, h5io_write_vector, h5io_attr, h5io_write_attrs, h5io_commit, h5io_discard,
//           h5io_has_dataset, h5io_output_dir_ok, h5io_version, h5io_probe_labelled, h5io_read_labelled_rows,
//           h5io_create_dataset, h5io_write_matrix, h5io_read_matrix, h5io_read_attr_num, h5io_read_attrs_num,
//           h5io_probe_keys, h5io_read_keys, h5io_create_keys, h5io_write_keys, h5io_guard_check,
//           h5io_guard_forget
#ifndef DS_H5IO_H
#define DS_H5IO_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct h5io_lsq_info {
    int64_t rows, cols;
    int x_f32, y_f32;  // 1 when stored as float32, 0 for float64
} h5io_lsq_info;

// Validates a least-squares input without reading its data: the file exists and is HDF5; xname and
// yname exist and are datasets reached through no external link; both are floating point of size 4
// or 8; X is 2-D and y 1-D; their row counts match; neither is empty. DS_ERR_INPUT otherwise.
// With yname NULL, X alone.
int h5io_probe_lsq(const char *path, const char *xname, const char *yname, h5io_lsq_info *info,
                   ds_msg *msg);

// Reads rows row0 .. row0+nrows−1 of X (cols wide) into X, row-major, converted to float (x_f32) or
// double, and the same rows of y into y as double (not when yname is NULL). Fails with DS_ERR_INPUT
// on a NaN or Inf, naming the dataset and the first bad row (a global row index) and column. colmax
// (NULL: not wanted; else cols + 1 of them) is raised to the largest magnitude read in each column of X,
// then in y (left as it is when yname is NULL): the caller zeroes it, once or per read.
int h5io_read_lsq_rows(const char *path, const char *xname, const char *yname, int64_t row0,
                       int64_t nrows, int64_t cols, int x_f32, void *X, double *y, double *colmax, ds_msg *msg);

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
// The temporary name of an output: FINAL.part.TAG (tag: the job's, ctx_process_tag), so that two runs
// writing the same output at once never share a temporary file: each renames a whole file, the last wins.
void h5io_part_name(const char *final_path, unsigned long long tag, char *buf, size_t len);
void h5io_discard(const char *tmp_path);

// h5io_model.c ---------------------------------------------------------------------------------------

// Creates (create 1: the file too, truncating it) an empty float64 dataset rows × cols (1-D when
// cols == 0), chunked, for h5io_write_rows to fill.
int h5io_create_dataset(const char *path, int create, const char *name, int64_t rows, int64_t cols, ds_msg *msg);

// Creates dataset name and writes the whole rows × cols float64 matrix v (row-major).
int h5io_write_matrix(const char *path, int create, const char *name, const double *v, int64_t rows, int64_t cols,
                      ds_msg *msg);

// Reads a whole 2-D floating-point dataset as double into *out (malloc'ed; the caller frees it).
int h5io_read_matrix(const char *path, const char *name, int64_t *rows, int64_t *cols, double **out, ds_msg *msg);

// Reads the scalar numeric attribute attr of the 2-D dataset `dataset` (DS_ERR_INPUT when missing).
int h5io_read_attr_num(const char *path, const char *dataset, const char *attr, double *value, ds_msg *msg);
// Reads the scalar numeric attributes attrs[0 .. n) (n ≤ H5IO_ATTRS_MAX) of the 2-D dataset `dataset` after
// one guarded check of them all: status[i] = DS_OK and values[i] set, or DS_ERR_INPUT
// with why[i] (when why is not NULL) saying that it is missing or not a number, values[i] untouched.
// Returns the status of opening the file and the dataset: DS_OK when they open.
enum { H5IO_ATTRS_MAX = 16 };
int h5io_read_attrs_num(const char *path, const char *dataset, int n, const char *const *attrs, double *values,
                        int *status, ds_msg *why, ds_msg *msg);

// ---------------------------------------------------------------------------------------------------
// 1-D key datasets (io/h5io_keys.c), for `dsolve sort`. Types in the numbering of sort_dtype.
enum h5io_key_type { H5IO_KEY_I32, H5IO_KEY_I64, H5IO_KEY_U32, H5IO_KEY_U64, H5IO_KEY_F32, H5IO_KEY_F64 };

// Validates a 1-D dataset of keys or values: found through hard links only, a dataset, 1-D, not
// empty, integer or float of 4 or 8 bytes. *type and *n describe it. DS_ERR_INPUT otherwise.
int h5io_probe_keys(const char *path, const char *name, int *type, int64_t *n, ds_msg *msg);
// Reads elements row0 .. row0+n−1 as type (HDF5 converts when the stored type differs).
int h5io_read_keys(const char *path, const char *name, int type, int64_t row0, int64_t n, void *out, ds_msg *msg);
// Creates path (create 1; else opens it) with a 1-D dataset name of type and n elements (n ≥ 1).
int h5io_create_keys(const char *path, int create, const char *name, int type, int64_t n, ds_msg *msg);
// Writes elements row0 .. row0+n−1 of the existing 1-D dataset name from data of type.
int h5io_write_keys(const char *path, const char *name, int type, int64_t row0, int64_t n, const void *data,
                    ds_msg *msg);

// The check that the probe helper (core/probe.h) runs in a worker: one reader call, as h5io_guard.c asks
// for it. Pass it to probe_start before MPI_Init; the probes, h5io_has_dataset, h5io_read_vector,
// h5io_read_matrix and h5io_read_attrs_num then run once in a worker before they run in-process.
int h5io_guard_check(const void *req, size_t len, ds_msg *msg);
// Forgets the file whose check ended the worker (h5io_guard.c keeps it, so that a file that crashes or
// holds libhdf5 in a loop costs one check, not one a read): for a caller that rewrites a file in place
// within the same clock tick (the fuzzing harnesses).
void h5io_guard_forget(void);

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
