// rows_h5.c: the row source over an HDF5 file's rows (rows.h: rows_open_h5), and the stamps that tell
// a file changed while it streams.
#include "core/rows.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "h5io.h"

typedef struct rows_h5 {
    char path[4096], xname[256], yname[256];
    int has_y;
    int64_t cols;
    int f32;
    rows_stamp st;  // the file when the source opened it
    double big[];   // cols + 1: the largest magnitudes of X's columns and y read since the reader zeroed
                    // them (produced_big)
} rows_h5;

int rows_stamp_take(const char *path, rows_stamp *s)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    *s = (rows_stamp){(int64_t)st.st_dev, (int64_t)st.st_ino, (int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
                      (int64_t)st.st_mtim.tv_nsec};
    return 0;
}

int rows_stamp_same(const char *path, const rows_stamp *s)
{
    rows_stamp now;
    return rows_stamp_take(path, &now) == 0 && memcmp(&now, s, sizeof now) == 0;
}

// A chunk's rows, read from a file that must not change while it streams: a file truncated, rewritten or
// replaced during the run is exit 3 naming the dataset and the rows, never rows of another file.
static int rows_read_h5(void *arg, int64_t row0, int64_t nrows, void *X, double *y, ds_msg *msg)
{
    rows_h5 *h = arg;
    const long long r0 = (long long)row0, r1 = (long long)(row0 + nrows - 1);
    if (!rows_stamp_same(h->path, &h->st))
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: the file changed while it was read (rows %lld..%lld next)",
                       h->path, h->xname, r0, r1);
    if (!h->has_y)
        memset(y, 0, (size_t)nrows * sizeof(double));
    int rc = h5io_read_lsq_rows(h->path, h->xname, h->has_y ? h->yname : NULL, row0, nrows, h->cols, h->f32, X, y,
                                h->big, msg);
    if (rc == DS_OK && !rows_stamp_same(h->path, &h->st))
        rc = ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: the file changed while rows %lld..%lld were read", h->path,
                     h->xname, r0, r1);
    if (rc != DS_OK && !strstr(msg->text, " rows ")) {
        char why[sizeof msg->text];
        snprintf(why, sizeof why, "%s", msg->text);
        ds_fail(msg, rc, "%s (dataset %s, rows %lld..%lld)", why, h->xname, r0, r1);
    }
    return rc;
}

int rows_open_h5(ds_ctx *ctx, ds_rows *s, const char *path, const char *xname, const char *yname, int64_t row0,
                 int64_t rows, int64_t cols, int f32, int64_t chunk_rows, const char *phase)
{
    rows_h5 *h = calloc(1, sizeof *h + ((size_t)cols + 1) * sizeof(double));
    if (!h)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    snprintf(h->path, sizeof h->path, "%s", path);
    snprintf(h->xname, sizeof h->xname, "%s", xname);
    snprintf(h->yname, sizeof h->yname, "%s", yname ? yname : "");
    h->has_y = yname != NULL, h->cols = cols, h->f32 = f32;
    if (rows_stamp_take(path, &h->st) != 0) {
        free(h);
        return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: cannot open (it was there when the run began)", path);
    }
    int rc = rows_open(ctx, s, rows_read_h5, h, row0, rows, cols, f32, chunk_rows, phase);
    s->owns_arg = 1;  // rows_close frees h, also after a failed open
    s->produced_big = h->big;
    return rc;
}
