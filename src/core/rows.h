// rows.h: a rank's rows [row0, row0+rows) of (X, y) delivered as a sequence of chunks of at most
// chunk_rows rows in backend memory, for inputs larger than the memory a rank may use. A reader thread
// runs a producer (an HDF5 file's hyperslabs, rows_open_h5, or any rows_producer) into two host buffers,
// so that the next chunk is read while the caller computes on this one; on a device backend each chunk
// is then staged to one of two device buffers through the backend's pinned memory and copy queue
// (ds_backend.stage), so that the copy overlaps the compute on the chunk before. A pass reads every row
// once, in order; a source serves any number of passes. Also: the memory caps a rank works under, and
// the chunk size they leave room for. A pass may take a column window: its chunks hold only some columns,
// and only those are staged to the device and computed on (from host memory, by strided copies; a
// producer's, a file's, rows are read whole and packed).
// provides: rows_producer, ROWS_WINDOW_MAX, rows_window, rows_window_col, ds_rows, rows_open, rows_open_h5, rows_open_memory, rows_begin, rows_next, rows_end, rows_close,
//           rows_caps, rows_caps_default, rows_chunk_for, ROWS_MIN_CHUNK, ROWS_CHUNK_MAX_BYTES,
//           rows_stamp, rows_stamp_take, rows_stamp_same
#ifndef DS_ROWS_H
#define DS_ROWS_H

#include <pthread.h>
#include <stdint.h>

#include "core/ctx.h"

// Fills host rows [row0, row0+nrows) of X (float when f32, else double; row-major) and y (double), as
// data.c's producers do. Runs on the reader thread: it must not touch MPI, the backend or ctx.
typedef int (*rows_producer)(void *arg, int64_t row0, int64_t nrows, void *X, double *y, ds_msg *msg);

#define ROWS_WINDOW_MAX 2

typedef struct ds_rows {
    rows_producer produce;
    void *arg;  // the producer's; rows_open_h5's own is freed by rows_close
    int64_t row0, rows, cols, chunk_rows;
    int f32;
    const char *phase;  // a static name for the watchdog and the progress lines: "solve: streaming X"
    // Set between passes: NULL, or the chunks hold X's column j divided by 2^x_exps[j] (cols of them,
    // malloc's, freed by rows_close); y divided by 2^y_exp. 0: as read.
    int *x_exps;
    int y_exp;
    double *big;        // cols + 1: the largest magnitudes read in each column of X, then in y, in the last
                        // pass (before the division); a producer source's, else NULL
    int raw;            // 1: chunks as produced, neither divided nor scanned (x_exps, y_exp, big unused)
    double *produced_big;  // cols + 1 where the producer raises the largest magnitudes of X's columns and y
                           // it read (the reader zeroes them before each chunk), or NULL: the reader scans
                           // each chunk for them

    // The next pass only (rows_begin takes them, rows_end forgets them): NULL, every row; else the local
    // row ranges [spans[2i], spans[2i+1]), ascending, read as one sequence of rows cut into chunks (a
    // restart reading the rows a checkpoint had not summed yet). pass_rows: the rows of the pass.
    const int64_t *spans;
    int nspans;
    int64_t pass_rows;
    // The next pass only, as spans (rows_window sets it): 0, every column; else the chunks hold the
    // columns [win[2i], win[2i+1]) for i < nwin, packed in that order (X->cols their total).
    int64_t win[2 * ROWS_WINDOW_MAX];
    int nwin;

    // rows_open_memory: the rank's rows already in host memory (no reader; chunks are staged straight
    // from there, or through host[] when pageable, or given in place on a host backend), else NULL.
    const void *mem_x;
    const double *mem_y;

    void *host[2], *dev[2];  // chunk buffers [X rows | y rows]; dev == host on a host backend; a memory
                             // source's host[] only over pageable rows on a device backend, else NULL
    size_t x_bytes;          // offset of y in a buffer
    int owns_arg;

    pthread_t thread;
    int running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t ready[2];  // the chunk a slot holds for the caller, −1 for none
    int free_slot[2];  // 1 when the reader may fill the slot
    int stop, rc;      // rc, msg: the reader's failure
    ds_msg msg;
    int64_t next;      // the next chunk the caller takes
    int cur;           // the slot the caller holds, −1 for none

    double bytes, seconds;  // read so far over all passes (whole rows from a producer, a window's columns
                            // from memory), and the passes' wall time
    int passes;
    double t0, last_log;
} ds_rows;

// Chunks are at least this many rows (a cap that leaves less is a usage error), at most this many bytes.
#define ROWS_MIN_CHUNK 8
#define ROWS_CHUNK_MAX_BYTES ((int64_t)128 << 20)

// A source over produce. Allocates the two chunk buffers (and their staging on a device backend).
// Not collective; DS_ERR_RUNTIME naming the size when memory is short.
int rows_open(ds_ctx *ctx, ds_rows *s, rows_producer produce, void *arg, int64_t row0, int64_t rows, int64_t cols,
              int f32, int64_t chunk_rows, const char *phase);
// A source over rows of an HDF5 file's X (and y; yname NULL: y read as zeros), which the caller has
// validated (data_probe_lsq). NaN or Inf met while streaming fails as h5io_read_lsq_rows does.
int rows_open_h5(ds_ctx *ctx, ds_rows *s, const char *path, const char *xname, const char *yname, int64_t row0,
                 int64_t rows, int64_t cols, int f32, int64_t chunk_rows, const char *phase);

// A source over the rank's rows X (rows × cols, f32 or double, row-major) and y in host memory that
// stays valid until rows_close: on a device backend from the backend's host_alloc (pinned), so that the
// chunks' copies overlap the compute, or pageable (1: malloc's, where pinned memory was short), whose
// chunks are packed into two pinned buffers of the source's own and copied from there (chunks halved as
// rows_open's while those are short; without them, copied straight from X, slower, with a line on
// stderr); on a host backend the chunks are X and y themselves (a window's: copies in two buffers of the
// source's own, made by the first pass that takes one). No spans.
int rows_open_memory(ds_ctx *ctx, ds_rows *s, const void *X, const double *y, int64_t row0, int64_t rows,
                     int64_t cols, int f32, int64_t chunk_rows, int pageable, const char *phase);

// The next pass's column window: the union of n ranges [cols[2i], cols[2i+1]) within the columns, in any
// order, overlapping or not (empty ones ignored); its chunks hold those columns ascending, packed. Stored
// as at most ROWS_WINDOW_MAX disjoint ranges: a union that needs more is an assert.
void rows_window(ds_rows *s, const int64_t *cols, int n);
// The column of the window's chunks that holds column col of the rows (col inside the window).
int64_t rows_window_col(const ds_rows *s, int64_t col);

// A pass: rows_begin starts the reader; rows_next gives the next chunk (X->rows == 0 after the last),
// valid until the next rows_next or rows_end; rows_end stops the reader (also after a failure, and
// before the last chunk). A failure of the producer is returned by rows_next with its message in ctx->msg.
int rows_begin(ds_ctx *ctx, ds_rows *s);
int rows_next(ds_ctx *ctx, ds_rows *s, ds_mat *X, const double **y);
int rows_end(ds_ctx *ctx, ds_rows *s);
void rows_close(ds_ctx *ctx, ds_rows *s);

// The memory a rank may use, bytes: backend is what it may keep in backend memory (device memory on a
// device backend; on a host backend the host cap plays that role), host its host RAM.
typedef struct rows_caps {
    double backend, host;
} rows_caps;

// Defaults: host, the rank's share of MemAvailable among the ranks of its node; backend, on a device
// backend the device's free memory less max(512 MiB, 5 %), else host.
void rows_caps_default(ds_ctx *ctx, rows_caps *c);

// The chunk rows that leave room, under the caps, for fixed bytes of working memory and extra bytes
// per chunk row (a chunk's residual), with two chunk buffers of rows cols wide (f32 or double, and y):
// at most ROWS_CHUNK_MAX_BYTES a buffer and the rank's rows. 0 when fewer than ROWS_MIN_CHUNK rows fit;
// min_bytes: what ROWS_MIN_CHUNK rows need of the backend cap [0] and, on a device backend, of the
// host cap [1] (the pinned staging; 0 on a host backend).
int64_t rows_chunk_for(const ds_ctx *ctx, const rows_caps *c, int64_t rows, int64_t cols, int f32, double fixed,
                       double extra, double min_bytes[2]);

// A file as a source opened it (device, inode, size, modification time), so that a producer can refuse rows
// of a file truncated, rewritten, touched or replaced while it streams. rows_stamp_take: 0, or −1 when
// the file cannot be seen; rows_stamp_same: 1 when the file at path is still the one stamped.
typedef struct rows_stamp {
    int64_t dev, ino, size, sec, nsec;
} rows_stamp;
int rows_stamp_take(const char *path, rows_stamp *s);
int rows_stamp_same(const char *path, const rows_stamp *s);

#endif
