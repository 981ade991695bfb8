// logreg_data.c: loading a labelled set for logistic regression, from an MNIST-layout IDX directory or
// an HDF5 file, a rank's rows of the first `limit` items (whole blocks, logreg_partition), with the
// bias column appended and every label checked against the class count.
// provides: logreg_probe, logreg_stream_shares, logreg_load
#include "logreg/logreg_data.h"

#include <stdlib.h>
#include <string.h>

#include "h5io.h"
#include "idx.h"

enum { STAGE_BYTES = 256 << 20 };  // few chunks: each IDX chunk decompresses the file from its start

// The set's size and the file(s) behind it, and a description for the report.
static int lr_probe(const lr_source *src, int64_t *count, int64_t *cols, char *images, size_t len, ds_msg *msg)
{
    if (src->h5) {
        h5io_lsq_info info;
        DS_CHECK(h5io_probe_labelled(src->h5, src->xname, src->lname, &info, msg));
        *count = info.rows;
        *cols = info.cols;
        snprintf(images, len, "%s", src->h5);
        return DS_OK;
    }
    idx_set set;
    DS_CHECK(idx_open_set(src->dir, src->split, &set, msg));
    *count = set.count;
    *cols = set.row_len;
    snprintf(images, len, "%s", set.images);
    return DS_OK;
}

static int lr_read_rows(const lr_source *src, int64_t row0, int64_t n, int64_t cols, int f32, void *X, int32_t *y,
                        ds_msg *msg)
{
    if (src->h5)
        return h5io_read_labelled_rows(src->h5, src->xname, src->lname, row0, n, cols, f32, X, y, msg);
    idx_set set;
    DS_CHECK(idx_open_set(src->dir, src->split, &set, msg));
    DS_CHECK(idx_read_images(set.images, row0, n, f32, X, msg));
    return idx_read_labels(set.labels, row0, n, y, msg);
}

static int lr_check_labels(const lr_source *src, const int32_t *y, int64_t row0, int64_t n, int classes, ds_msg *msg)
{
    for (int64_t i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= classes) {
            char where[4300];
            if (src->h5)
                snprintf(where, sizeof where, "%s: dataset %s", src->h5, src->lname);
            else
                snprintf(where, sizeof where, "%s/%s-labels", src->dir, src->split);
            return ds_fail(msg, DS_ERR_INPUT, "%s: label %d of item %lld is outside 0 .. %d (--classes %d)", where,
                           (int)y[i], (long long)(row0 + i), classes - 1, classes);
        }
    return DS_OK;
}

// Copies n rows of cols values into rows of cols + 1 ending in a 1 (the bias column).
static void lr_append_bias(const void *in, void *out, int64_t n, int64_t cols, int f32)
{
    for (int64_t i = 0; i < n; i++) {
        if (f32) {
            memcpy((float *)out + i * (cols + 1), (const float *)in + i * cols, (size_t)cols * sizeof(float));
            ((float *)out)[i * (cols + 1) + cols] = 1.0f;
        } else {
            memcpy((double *)out + i * (cols + 1), (const double *)in + i * cols, (size_t)cols * sizeof(double));
            ((double *)out)[i * (cols + 1) + cols] = 1.0;
        }
    }
}

// Reads the rank's rows chunk by chunk through host staging into backend memory.
static int lr_fill(ds_ctx *ctx, const lr_source *src, int64_t cols, int classes, lr_set *s)
{
    const size_t sz = s->f32 ? 4 : 8;
    int64_t chunk = STAGE_BYTES / (int64_t)((size_t)(cols + 1) * sz);
    chunk = chunk < 1 ? 1 : chunk > s->rows ? s->rows : chunk;
    void *raw = malloc((size_t)chunk * (size_t)cols * sz), *wide = malloc((size_t)chunk * (size_t)(cols + 1) * sz);
    int32_t *y = malloc((size_t)chunk * sizeof(int32_t));
    int rc = raw && wide && y ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for staging");
    for (int64_t r = 0; rc == DS_OK && r < s->rows; r += chunk) {
        const int64_t n = s->rows - r < chunk ? s->rows - r : chunk;
        rc = lr_read_rows(src, s->row0 + r, n, cols, s->f32, raw, y, &ctx->msg);
        if (rc == DS_OK)
            rc = lr_check_labels(src, y, s->row0 + r, n, classes, &ctx->msg);
        if (rc != DS_OK)
            break;
        lr_append_bias(raw, wide, n, cols, s->f32);
        rc = ctx->be->upload(ctx, (char *)s->X + (size_t)r * (size_t)(cols + 1) * sz, wide,
                             (size_t)n * (size_t)(cols + 1) * sz);
        if (rc == DS_OK)
            rc = ctx->be->upload(ctx, s->labels + r, y, (size_t)n * sizeof(int32_t));
    }
    free(raw);
    free(wide);
    free(y);
    return rc;
}

int logreg_probe(const lr_source *src, int64_t *count, int64_t *features, ds_msg *msg)
{
    char images[4300];
    return lr_probe(src, count, features, images, sizeof images, msg);
}

int logreg_load(ds_ctx *ctx, const lr_source *src, int64_t limit, int64_t want_cols, int f32, int classes,
                const lr_mem *mem, lr_set *s, char *desc, size_t desc_len)
{
    int64_t count = 0, cols = 0;
    memset(s, 0, sizeof *s);
    int rc = lr_probe(src, &count, &cols, desc, desc_len, &ctx->msg);
    if (rc == DS_OK && want_cols && cols + 1 != want_cols)
        rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: %lld features per item, the training set has %lld", desc,
                     (long long)cols, (long long)(want_cols - 1));
    if (rc == DS_OK && limit > count)
        rc = ds_fail(&ctx->msg, DS_ERR_USAGE, "%s: %lld samples asked for, it holds %lld", desc, (long long)limit,
                     (long long)count);
    const int64_t n = limit > 0 ? limit : count;
    if (rc == DS_OK && n < ctx->nranks)
        rc = ds_fail(&ctx->msg, DS_ERR_USAGE, "%lld samples for %d ranks: every rank needs at least one", (long long)n,
                     ctx->nranks);
    DS_CHECK(ctx_agree(ctx, rc));
    int64_t row0 = 0, rows = 0;
    logreg_partition(n, ctx->nranks, ctx->rank, &row0, &rows);
    lr_hold hold = {0};
    if (mem)
        DS_CHECK(logreg_stream_plan(ctx, mem, src, n, cols + 1, f32, rows, &hold));
    // Streamed: the first hold.resident rows (whole blocks) in backend memory, the rest by the source.
    const int64_t kept = hold.chunk_rows > 0 ? hold.resident : rows;
    rc = logreg_set_alloc(ctx, s, kept, cols + 1, f32);
    s->rows_global = n;
    s->row0 = row0;
    if (rc == DS_OK && kept > 0)
        rc = lr_fill(ctx, src, cols, classes, s);
    if (hold.chunk_rows == 0 || rc != DS_OK)
        return ctx_agree(ctx, rc);
    s->rows = rows;
    s->resident = kept;
    return logreg_stream_open(ctx, src, &hold, cols, f32, classes, s);
}

void logreg_stream_shares(ds_ctx *ctx, const lr_source *train, int64_t limit, const lr_source *test, int f32,
                          lr_mem *mem_train, lr_mem *mem_test)
{
    mem_train->share = mem_test->share = 1.0;
    const lr_source *set[2] = {train, test};
    double need = 0;
    for (int i = 0; i < 2 && test; i++) {
        int64_t count = 0, features = 0, row0 = 0, rows = 0;
        ds_msg m = {{0}};
        if (logreg_probe(set[i], &count, &features, &m) != DS_OK)
            continue;  // the load says what is wrong
        const int64_t n = i == 0 && limit > 0 && limit < count ? limit : count;
        logreg_partition(n, ctx->nranks, ctx->rank, &row0, &rows);
        need += logreg_memory_bytes(ctx, mem_train, n, rows, features + 1, f32);
    }
    int split = need > mem_train->caps.backend;
    MPI_Allreduce(MPI_IN_PLACE, &split, 1, MPI_INT, MPI_MAX, ctx->comm);
    if (split)
        mem_train->share = mem_test->share = 0.5;
}
