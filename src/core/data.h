// data.h: a rank's row block of a least-squares problem (X, y) in backend memory, read from HDF5 or
// generated, staged through bounded host chunks when the backend's memory is not host memory.
// provides: ds_data, data_partition, data_block_rows, data_partition_blocks, data_split, data_place, data_probe_lsq, data_read_a_true, data_rescale, data_scale, data_scale_cols, data_range_exp, data_range_exps, data_load_lsq, data_load_labelled, data_load_idx, data_gen_lsq, data_free
#ifndef DS_DATA_H
#define DS_DATA_H

#include <stdint.h>

#include "core/ctx.h"
#include "core/gen.h"

typedef struct ds_data {
    ds_mat X;     // rows × cols of this rank, backend memory
    double *y;    // rows, backend memory
    int64_t rows_global, row0;
    double *a_true;  // [cols], host memory, or NULL when the source has none
    char a_true_note[512];  // why a source's /a_true could not be read (the caller says so once it has
                            // an answer, so that a run that fails ends with its one error line), or empty
    char source[300];
    int *x_exps;  // data_load_lsq_ranged: NULL, or X's column j holds the file's values times 2^−x_exps[j]
    int y_exp;    // and y the file's times 2^−y_exp
    int host;  // set by the caller before loading: X and y in host memory (the backend's host_alloc:
               // pinned on a device backend) for a row source over them (rows_open_memory); 2 when
               // pinned memory was short and they are in pageable memory
    // Set by the caller before loading, and kept, as host is: the ranks' rows are whole blocks of
    // block_rows(rows_global) rows (data_partition_blocks), for sums cut at fixed blocks; NULL:
    // data_partition.
    int64_t (*block_rows)(int64_t rows_global);
} ds_data;

// Contiguous near-equal split: ranks r < m mod p get one row more.
void data_partition(int64_t m, int nranks, int rank, int64_t *row0, int64_t *rows);
// Rows a block of m rows cut into blocks: a power of two from least to most (least a power of two),
// near m/64 (blocks many enough for the ranks to share evenly).
int64_t data_block_rows(int64_t m, int64_t least, int64_t most);
// Contiguous ranges of whole blocks of block rows (the last block of the m may be short), the blocks
// shared as evenly as whole blocks allow; a rank may get none.
void data_partition_blocks(int64_t m, int64_t block, int nranks, int rank, int64_t *row0, int64_t *rows);
// A rank's rows of m: data_partition_blocks with block_rows(m) when block_rows is set, else data_partition.
void data_split(int64_t (*block_rows)(int64_t), int64_t m, int nranks, int rank, int64_t *row0, int64_t *rows);
// d's rank's rows of m (rows_global, row0, X.rows) as d->block_rows says (data_split).
void data_place(const ds_ctx *ctx, ds_data *d, int64_t m);

// Validates path (every rank), refuses more ranks than rows, reads this rank's hyperslab (X as float
// when f32) and /a_true when present; with yname NULL, X alone (y zero). Collective; all ranks return
// the same status.
int data_load_lsq(ds_ctx *ctx, const char *path, const char *xname, const char *yname, int f32, ds_data *d);

// data_load_lsq, then, when the largest magnitude of a column of X (or of y) is beyond 2^±DATA_RANGE_EXP,
// where squares and their sums leave double's range, read again with each such column (y) divided by the
// power of two nearest its largest magnitude: exact (but for values 2^1022 below their column's largest,
// which may round), so a solve of the scaled problem is the solve of the file's, coefficient j times
// 2^(y_exp − x_exps[j]) (LAPACK's dgels scales X and y as a whole the same way; by column, the columns 1e300
// apart of its scaled test matrices keep their squares in range). For least squares, not for the network.
#define DATA_RANGE_EXP 500
int data_load_lsq_ranged(ds_ctx *ctx, const char *path, const char *xname, const char *yname, int f32, ds_data *d);

// data_load_lsq's checks without the read: every rank has validated path and sees the same shape;
// d holds the rank's place (rows_global, row0, X.rows, X.cols, X.f32 = f32) and source, no data (for
// a streamed input, core/rows.h). Collective.
int data_probe_lsq(ds_ctx *ctx, const char *path, const char *xname, const char *yname, int f32, ds_data *d);
// d->a_true from path's /a_true when it has one (X.cols long); one that cannot be read is left NULL, with
// the reason in d->a_true_note.
void data_read_a_true(ds_ctx *ctx, const char *path, ds_data *d);
// Divides v (n float or double values) by 2^e (e = 0: leaves it) and returns the largest magnitude before.
double data_rescale(void *v, int f32, int64_t n, int e);
// Divides v by 2^e only (e = 0: leaves it), for values whose largest magnitude their reader gave.
void data_scale(void *v, int f32, int64_t n, int e);
// Divides column j of X (nrows × cols, row-major, rows ld apart) by 2^e[j]; e NULL: leaves X.
void data_scale_cols(void *X, int f32, int64_t nrows, int64_t cols, int64_t ld, const int *e);
// The power of two nearest a largest magnitude beyond 2^±DATA_RANGE_EXP, else 0.
int data_range_exp(double big);
// data_range_exp of each of n largest magnitudes into e; returns how many are not 0.
int64_t data_range_exps(const double *big, int64_t n, int *e);

// A labelled set: X (float64) and integer labels, kept as doubles in y: from HDF5 (xname float, lname
// integer), or from the MNIST-layout directory dir (split "train" or "t10k"; pixels scaled to [0, 1]).
// Label ranges are the caller's to check. Collective.
int data_load_labelled(ds_ctx *ctx, const char *path, const char *xname, const char *lname, ds_data *d);
int data_load_idx(ds_ctx *ctx, const char *dir, const char *split, ds_data *d);

// Generates this rank's rows of the problem p. Collective.
int data_gen_lsq(ds_ctx *ctx, const gen_lsq *p, int f32, ds_data *d);

void data_free(ds_ctx *ctx, ds_data *d);

#endif
