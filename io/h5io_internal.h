// h5io_internal.h: what h5io.c (validation, reading) and h5io_write.c share: limits and the helpers
// that close handles, normalise names, walk links and move row blocks. Only io/ files include it.
// provides: NAME_MAX_LEN, CHUNK_BYTES, XFER_BYTES, LINKS_*, h5i_quiet, h5i_close_obj, h5i_close_space, h5i_close_type, h5i_close_plist,
//           h5i_write_why, h5i_close_file, h5i_norm_name, h5i_walk_links, h5i_xfer_rows, h5i_check_range,
//           h5i_open_ro, h5i_open_ro_bulk, h5i_open_dataset, h5i_keep, h5i_open_float_dataset, h5i_check_shape, h5i_read_float_rows,
//           h5i_create_dataset, h5i_chunk_shape, h5i_check_storage,
//           h5i_standard_type, h5i_filters_read_rows, h5i_xfer_why, h5i_xfer_status, h5i_check_filters, h5i_guard,
//           GUARD_*
#ifndef DS_H5IO_INTERNAL_H
#define DS_H5IO_INTERNAL_H

#include <hdf5.h>
#include <stdint.h>

#include "core/err.h"

enum {
    NAME_MAX_LEN = 256,                // longest dataset path, leading '/' included
    CHUNK_BYTES = 4 << 20,             // largest chunk create_lsq makes (HDF5's limit is 4 GiB)
};
static const int64_t XFER_BYTES = (int64_t)1 << 30;  // largest block one H5Dread/H5Dwrite moves

// Link walk outcomes (see h5i_walk_links).
enum { LINKS_HARD, LINKS_MISSING, LINKS_SOFT, LINKS_EXTERNAL, LINKS_OTHER };

void h5i_quiet(void);
void h5i_close_obj(hid_t id);
void h5i_close_space(hid_t id);
void h5i_close_type(hid_t id);
void h5i_close_plist(hid_t id);
// Why the last write failed: strerror(errno) when the file driver set it (EFBIG, ENOSPC, EIO), else a
// generic phrase. Callers clear errno before the HDF5 call.
const char *h5i_write_why(void);
int h5i_close_file(hid_t file, const char *path, int rc, ds_msg *msg);
int h5i_norm_name(const char *path, const char *name, char *out, ds_msg *msg);
int h5i_walk_links(hid_t file, const char *name, char *bad);
herr_t h5i_xfer_rows(hid_t dset, int write, int64_t row0, int64_t nrows, int64_t cols,
                        hid_t mtype, void *buf);
int h5i_check_range(const char *path, const char *name, const int64_t dims[2], int64_t row0,
                       int64_t nrows, int64_t cols, ds_msg *msg);

// The checks of h5io.c for other io/ files: open read-only after checking existence and format; a
// dataset reached through hard links only (opened; the caller closes it, or h5i_keep closes it when a
// later check failed: rc passes through); a float dataset of rank dimensions (opened; the caller
// closes it); rank dimensions, none 0; rows of a float dataset (2-D, cols wide, or 1-D with cols 0)
// read as float or double and checked finite.
int h5i_open_ro(const char *path, hid_t *file, ds_msg *msg);
// The same for a bulk read of rows: without libhdf5's chunk cache (see h5io.c).
int h5i_open_ro_bulk(const char *path, hid_t *file, ds_msg *msg);
int h5i_open_dataset(hid_t file, const char *path, const char *name, hid_t *dset, ds_msg *msg);
int h5i_keep(int rc, hid_t *dset);
int h5i_open_float_dataset(hid_t file, const char *path, const char *name, int rank, hid_t *dset, int64_t dims[2],
                           int *f32, ds_msg *msg);
int h5i_check_shape(hid_t dset, const char *path, const char *name, int rank, int64_t dims[2], ds_msg *msg);
int h5i_read_float_rows(hid_t file, const char *path, const char *name, int64_t row0, int64_t nrows, int64_t cols,
                        int f32, void *buf, ds_msg *msg);
// DS_ERR_INPUT unless dset's n_elements values (and one chunk) fit what path's file can hold: its size,
// or 1032 times it (deflate's best ratio) when filtered; unless the chunks its index declares add up to
// no more than the file's size; and unless its data lies in the file (no external storage, no virtual dataset). Called before anything is sized by the header (h5io_storage.c).
int h5i_check_storage(hid_t dset, const char *path, const char *name, uint64_t n_elements, ds_msg *msg);
// 1 when t is a standard number type: IEEE float32/64 or an 8- to 64-bit integer, either byte order
// (not one with odd precision, offset or padding bits). h5io_storage.c.
int h5i_standard_type(hid_t t);
// h5io_filters.c: reads rows row0 .. row0+n−1 (cols wide; 1-D when 0) of a chunked dataset into buf as
// mtype, each stored chunk fetched raw and decoded once there: 1 when read, 0 when refused (h5i_xfer_why
// and h5i_xfer_status say why), −1 when dset is contiguous or compact (H5Dread reads it); and the probe's refusal
// (DS_ERR_INPUT) of filters other than deflate, shuffle and fletcher32, of one listed twice, of shuffle
// after deflate, or of shuffle or gzip without their parameter (element size, level 0-9).
int h5i_filters_read_rows(hid_t dset, hsize_t row0, hsize_t n, hsize_t cols, hid_t mtype, void *buf);
// After a failed h5i_xfer_rows: " (why)" when the decoding refused it, else "" (for the reader's message);
// and the failure's status: DS_ERR_RUNTIME when the decoding ran out of memory, else DS_ERR_INPUT.
const char *h5i_xfer_why(void);
int h5i_xfer_status(void);
int h5i_check_filters(hid_t dcpl, const char *path, const char *name, ds_msg *msg);
// The readers that h5io_guard.c repeats in a worker process first.
enum { GUARD_PROBE_LSQ, GUARD_PROBE_LABELLED, GUARD_PROBE_KEYS, GUARD_HAS_DATASET, GUARD_READ_ATTRS, GUARD_READ_MATRIX,
       GUARD_READ_VECTOR };
// Runs reader op on path (with names a, b, or NULL; length n for GUARD_READ_VECTOR) in a worker process
// when this process has a probe helper: DS_OK to go on and run it here, else the worker's failure, or
// DS_ERR_INPUT "PATH: not a readable HDF5 file (the HDF5 library failed on it: SIGSEGV)" when it crashed.
int h5i_guard(int op, const char *path, const char *a, const char *b, int64_t n, ds_msg *msg);
// Creates dataset name of type ftype (chunked when chunk is non-NULL), with intermediate groups.
int h5i_create_dataset(hid_t file, const char *path, const char *name, int rank, const hsize_t *dims,
                       const hsize_t *chunk, hid_t ftype, hid_t *dset, ds_msg *msg);
// A chunk of chunk_rows rows (at most rows), fewer when it would pass CHUNK_BYTES.
void h5i_chunk_shape(int64_t rows, int64_t cols, size_t elsize, int64_t chunk_rows, hsize_t chunk[2]);

#endif
