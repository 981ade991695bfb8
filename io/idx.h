// idx.h: reading MNIST-format IDX files (unsigned-byte images and labels), gzip-compressed or plain,
// a row block at a time so that each rank reads only its own rows.
// provides: idx_info, idx_set, idx_probe, idx_read_images, idx_read_labels, idx_open_set
#ifndef DS_IDX_H
#define DS_IDX_H

#include <stdint.h>

#include "core/err.h"

// What an IDX header says: count items, each dims[1] × dims[2] bytes (images, ndims 3) or one byte
// (labels, ndims 1). row_len = dims[1]·dims[2] for images and 1 for labels.
typedef struct idx_info {
    int ndims;
    int64_t count, rows, cols, row_len;
} idx_info;

// A labelled set in the MNIST directory layout: <dir>/<split>-images-idx3-ubyte[.gz] and
// <dir>/<split>-labels-idx1-ubyte[.gz], both probed and of the same count.
typedef struct idx_set {
    char images[4200], labels[4200];
    int64_t count, row_len;
} idx_set;

// Reads and validates path's header: the file opens (gzip or plain: zlib tells them apart), the
// magic is 0x0000 with type code 0x08 (unsigned byte) and want_ndims (1 or 3) dimensions, no
// dimension is 0, and the sizes do not overflow. A plain file must also hold exactly the bytes the
// header announces; a gzip file no more than deflate's best ratio (1032:1) can inflate it to, so that
// no caller sizes a buffer by a header its file cannot back (its exact length is checked by the reader
// that reaches its end).
// DS_ERR_INPUT with a one-line message naming the file otherwise.
int idx_probe(const char *path, int want_ndims, idx_info *info, ds_msg *msg);

// Reads images row0 .. row0+nrows−1 of an idx3 file as values scaled to [0, 1] (byte / 255),
// row-major nrows × row_len, float (f32) or double. The reader whose block ends at the last image
// also checks that the data ends there (no trailing bytes) and the gzip checksum.
int idx_read_images(const char *path, int64_t row0, int64_t nrows, int f32, void *out, ds_msg *msg);

// Reads labels row0 .. row0+nrows−1 of an idx1 file; same end checks as idx_read_images.
int idx_read_labels(const char *path, int64_t row0, int64_t nrows, int32_t *out, ds_msg *msg);

// Resolves and probes the split ("train" or "t10k") of dir: the .gz name first, then the plain one.
// DS_ERR_INPUT when either file is missing or malformed, or the two counts differ.
int idx_open_set(const char *dir, const char *split, idx_set *set, ds_msg *msg);

#endif
