// data.c: loading and generating a rank's row block (see data.h).
#include "core/data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5io.h"
#include "idx.h"

enum { STAGE_BYTES = 256 << 20 };  // host staging per chunk when the backend memory is a device's
#define DATA_MAX_COLS ((int64_t)100000000)  // keeps every column count and index within BLAS's int

void data_partition(int64_t m, int nranks, int rank, int64_t *row0, int64_t *rows)
{
    int64_t base = m / nranks, extra = m % nranks;
    *rows = base + (rank < extra);
    *row0 = rank * base + (rank < extra ? rank : extra);
}

int64_t data_block_rows(int64_t m, int64_t least, int64_t most)
{
    int64_t b = least;
    while (b < most && b * 64 < m)
        b *= 2;
    return b;
}

void data_partition_blocks(int64_t m, int64_t block, int nranks, int rank, int64_t *row0, int64_t *rows)
{
    const int64_t blocks = (m + block - 1) / block;
    int64_t b0 = 0, nb = 0;
    data_partition(blocks, nranks, rank, &b0, &nb);
    *row0 = b0 * block;
    *rows = (b0 + nb) * block < m ? nb * block : m - b0 * block;
    if (*rows < 0)
        *rows = 0;
}

void data_split(int64_t (*block_rows)(int64_t), int64_t m, int nranks, int rank, int64_t *row0, int64_t *rows)
{
    if (block_rows)
        data_partition_blocks(m, block_rows(m), nranks, rank, row0, rows);
    else
        data_partition(m, nranks, rank, row0, rows);
}

void data_place(const ds_ctx *ctx, ds_data *d, int64_t m)
{
    d->rows_global = m;
    data_split(d->block_rows, m, ctx->nranks, ctx->rank, &d->row0, &d->X.rows);
}

// memset(d, 0) but for what the caller set before loading (host, block_rows).
static void data_clear(ds_data *d)
{
    const int host = d->host;
    int64_t (*block_rows)(int64_t) = d->block_rows;
    memset(d, 0, sizeof *d);
    d->host = host;
    d->block_rows = block_rows;
}

static void data_free_host(ds_ctx *ctx, ds_data *d);

static int data_alloc(ds_ctx *ctx, ds_data *d, int64_t cols, int f32)
{
    d->X.cols = cols;
    d->X.f32 = f32;
    size_t xbytes = 0;
    if (__builtin_mul_overflow((size_t)d->X.rows, (size_t)cols * (f32 ? 4 : 8), &xbytes))
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "%lld rows of %lld columns on rank %d do not fit in memory",
                       (long long)d->X.rows, (long long)cols, ctx->rank);
    const size_t ybytes = (size_t)(d->X.rows ? d->X.rows : 1) * sizeof(double);
    if (!d->host || ctx->be->host_memory) {
        int rc = ctx->be->alloc(ctx, (void **)&d->X.data, xbytes ? xbytes : 8);
        return rc == DS_OK ? ctx->be->alloc(ctx, (void **)&d->y, ybytes) : rc;
    }
    int rc = ctx->be->host_alloc(ctx, (void **)&d->X.data, xbytes ? xbytes : 8);
    if (rc == DS_OK)
        rc = ctx->be->host_alloc(ctx, (void **)&d->y, ybytes);
    if (rc == DS_OK)
        return DS_OK;
    // Pinned memory short (the host's limit on locked pages): pageable memory, copied at a fraction of
    // the bus's rate, rather than no run.
    ctx_log(ctx, "dsolve: rank %d: %s; X kept in pageable host memory instead (slower copies)", ctx->rank, ctx->msg.text);
    ctx->msg.text[0] = '\0';
    data_free_host(ctx, d);
    d->host = 2;
    d->X.data = malloc(xbytes ? xbytes : 8);
    d->y = malloc(ybytes);
    return d->X.data && d->y ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for X (%.3g GB) on rank %d",
                                               (double)xbytes / 1e9, ctx->rank);
}

// A producer fills host rows [row0, row0+nrows) of X and y; data_fill runs it straight into backend
// memory when that is host memory, else chunk by chunk through a staging buffer.
typedef int (*data_producer)(void *arg, int64_t row0, int64_t nrows, void *X, double *y, ds_msg *msg);

static int data_fill(ds_ctx *ctx, ds_data *d, data_producer produce, void *arg)
{
    const size_t sz = d->X.f32 ? 4 : 8, row_bytes = (size_t)d->X.cols * sz;
    ctx_beat(ctx, "loading the input");
    if (d->X.rows == 0)  // a block partition (ds_data.block_rows) may leave a rank none: nothing to read
        return DS_OK;
    if (ctx->be->host_memory || d->host)
        return produce(arg, d->row0, d->X.rows, (void *)d->X.data, d->y, &ctx->msg);
    int64_t chunk = STAGE_BYTES / (int64_t)(row_bytes + 8);
    if (chunk < 1)
        chunk = 1;
    if (chunk > d->X.rows)
        chunk = d->X.rows > 0 ? d->X.rows : 1;
    char *hx = malloc((size_t)chunk * row_bytes);
    double *hy = malloc((size_t)chunk * sizeof(double));
    int rc = hx && hy ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for staging");
    double t0 = MPI_Wtime(), last = t0;
    for (int64_t r = 0; rc == DS_OK && r < d->X.rows; r += chunk) {
        double now = MPI_Wtime();
        if (now - last > 5.0) {  // rank 0's share stands for all: ranks load at the same pace
            ctx_log(ctx, "loading: %.0f%% of %.1f GB a rank, %.0f s", 100.0 * r / d->X.rows,
                    (double)d->X.rows * row_bytes / 1e9, now - t0);
            last = now;
        }
        int64_t nr = d->X.rows - r < chunk ? d->X.rows - r : chunk;
        ctx_beat(ctx, "loading the input");
        rc = produce(arg, d->row0 + r, nr, hx, hy, &ctx->msg);
        if (rc == DS_OK)
            rc = ctx->be->upload(ctx, (char *)d->X.data + (size_t)r * row_bytes, hx, (size_t)nr * row_bytes);
        if (rc == DS_OK)
            rc = ctx->be->upload(ctx, d->y + r, hy, (size_t)nr * sizeof(double));
    }
    free(hx);
    free(hy);
    return rc;
}

typedef struct file_src {
    const char *path, *xname, *yname;
    int64_t cols;
    int f32;
    const int *xe;       // NULL, or divide column j by 2^xe[j] as read
    int ye;              // and y by 2^ye
    double *big;         // cols + 1: the largest magnitudes read in each column of X, then in y (before the division)
} file_src;

// The largest magnitude of n finite doubles: eight independent maxima, so that the loop is not one
// chain of dependent comparisons (4 ns an element as one chain, a third of a streamed pass's time).
static double data_absmax(const double *x, int64_t n)
{
    double b[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            b[k] = fabs(x[i + k]) > b[k] ? fabs(x[i + k]) : b[k];
    for (; i < n; i++)
        b[0] = fabs(x[i]) > b[0] ? fabs(x[i]) : b[0];
    for (int k = 1; k < 8; k++)
        b[0] = b[k] > b[0] ? b[k] : b[0];
    return b[0];
}

void data_scale(void *v, int f32, int64_t n, int e)
{
    for (int64_t i = 0; e != 0 && i < n; i++) {
        if (f32)
            ((float *)v)[i] = (float)ldexp(((float *)v)[i], -e);
        else
            ((double *)v)[i] = ldexp(((double *)v)[i], -e);
    }
}

void data_scale_cols(void *X, int f32, int64_t nrows, int64_t cols, int64_t ld, const int *e)
{
    for (int64_t i = 0; e && i < nrows; i++)
        for (int64_t j = 0; j < cols; j++) {
            if (!e[j])
                continue;
            if (f32)
                ((float *)X)[i * ld + j] = (float)ldexp(((float *)X)[i * ld + j], -e[j]);
            else
                ((double *)X)[i * ld + j] = ldexp(((double *)X)[i * ld + j], -e[j]);
        }
}

double data_rescale(void *v, int f32, int64_t n, int e)
{
    double big = 0;  // the values are finite: the readers refuse NaN and Inf
    if (f32) {
        const float *x = v;
        for (int64_t i = 0; i < n; i++)
            big = fabs((double)x[i]) > big ? fabs((double)x[i]) : big;
    } else {
        big = data_absmax(v, n);
    }
    data_scale(v, f32, n, e);
    return big;
}

static int data_read_file(void *arg, int64_t row0, int64_t nrows, void *X, double *y, ds_msg *msg)
{
    file_src *s = arg;
    if (!s->yname)
        memset(y, 0, (size_t)nrows * sizeof(double));
    DS_CHECK(h5io_read_lsq_rows(s->path, s->xname, s->yname, row0, nrows, s->cols, s->f32, X, y, s->big, msg));
    data_scale_cols(X, s->f32, nrows, s->cols, s->cols, s->xe);
    data_scale(y, 0, nrows, s->ye);
    return DS_OK;
}

static int data_load_file(ds_ctx *ctx, const char *path, const char *xname, const char *yname, int f32, ds_data *d,
                          int ranged);

int data_load_lsq(ds_ctx *ctx, const char *path, const char *xname, const char *yname, int f32, ds_data *d)
{
    return data_load_file(ctx, path, xname, yname, f32, d, 0);
}

int data_load_lsq_ranged(ds_ctx *ctx, const char *path, const char *xname, const char *yname, int f32, ds_data *d)
{
    return data_load_file(ctx, path, xname, yname, f32, d, 1);
}

int data_range_exp(double big)
{
    return big > 0 && (big > ldexp(1, DATA_RANGE_EXP) || big < ldexp(1, -DATA_RANGE_EXP)) ? ilogb(big) : 0;
}

int64_t data_range_exps(const double *big, int64_t n, int *e)
{
    int64_t k = 0;
    for (int64_t j = 0; j < n; j++)
        k += (e[j] = data_range_exp(big[j])) != 0;
    return k;
}

int data_probe_lsq(ds_ctx *ctx, const char *path, const char *xname, const char *yname, int f32, ds_data *d)
{
    data_clear(d);
    h5io_lsq_info info = {0};
    int rc = h5io_probe_lsq(path, xname, yname, &info, &ctx->msg);
    if (rc == DS_OK && info.cols > DATA_MAX_COLS)
        rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: dataset /%s has %lld columns, more than dsolve's %lld", path,
                     xname[0] == '/' ? xname + 1 : xname, (long long)info.cols, (long long)DATA_MAX_COLS);
    if (rc == DS_OK && info.rows < ctx->nranks)
        rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: dataset /%s has %lld rows, fewer than the %d ranks", path,
                     xname[0] == '/' ? xname + 1 : xname, (long long)info.rows, ctx->nranks);
    DS_CHECK(ctx_agree(ctx, rc));
    // Every rank must have opened the same data (a node-local path can differ between nodes).
    int64_t shape[3] = {info.rows, info.cols, info.x_f32}, lo[3], hi[3];
    MPI_Allreduce(shape, lo, 3, MPI_INT64_T, MPI_MIN, ctx->comm);
    MPI_Allreduce(shape, hi, 3, MPI_INT64_T, MPI_MAX, ctx->comm);
    if (memcmp(lo, hi, sizeof lo) != 0)
        return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: the ranks do not see the same file (rows %lld to %lld, columns "
                       "%lld to %lld); give every node the same path", path, (long long)lo[0], (long long)hi[0],
                       (long long)lo[1], (long long)hi[1]);
    d->X.cols = info.cols;
    d->X.f32 = f32;
    data_place(ctx, d, info.rows);
    snprintf(d->source, sizeof d->source, "%s", path);
    return DS_OK;
}

void data_read_a_true(ds_ctx *ctx, const char *path, ds_data *d)
{
    if (!h5io_has_dataset(path, "a_true"))
        return;
    d->a_true = malloc((size_t)d->X.cols * sizeof(double));
    ds_msg why = {{0}};
    if (!d->a_true || h5io_read_vector(path, "a_true", d->X.cols, d->a_true, &why) != DS_OK) {
        free(d->a_true);  // a reference that cannot be read is not compared against: the caller says so
        d->a_true = NULL;
        snprintf(d->a_true_note, sizeof d->a_true_note, "%s", why.text[0] ? why.text : "out of host memory");
    }
}

// The checks that every rank sees the same file come before the read (data_probe_lsq), and the rescaled
// second read (rare: only data near double's limits) after it, each agreed on before the next collective.
static int data_load_file(ds_ctx *ctx, const char *path, const char *xname, const char *yname, int f32, ds_data *d,
                          int ranged)
{
    DS_CHECK(data_probe_lsq(ctx, path, xname, yname, f32, d));
    const int64_t n = d->X.cols;
    file_src src = {path, xname, yname, n, f32, NULL, 0, calloc((size_t)n + 1, sizeof(double))};
    int *xe = ranged ? malloc((size_t)n * sizeof(int)) : NULL;
    int rc = src.big && (xe || !ranged) ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    rc = ctx_agree(ctx, rc == DS_OK ? data_alloc(ctx, d, n, f32) : rc);
    if (rc == DS_OK)
        rc = ctx_agree(ctx, data_fill(ctx, d, data_read_file, &src));
    if (rc == DS_OK && ranged) {
        MPI_Allreduce(MPI_IN_PLACE, src.big, (int)n + 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
        const int64_t scaled = data_range_exps(src.big, n, xe);
        src.ye = d->y_exp = data_range_exp(src.big[n]);
        if (scaled)
            src.xe = d->x_exps = xe, xe = NULL;
        if (scaled || src.ye)
            rc = ctx_agree(ctx, data_fill(ctx, d, data_read_file, &src));
    }
    free(xe), free(src.big);
    if (rc == DS_OK)
        data_read_a_true(ctx, path, d);
    return rc;
}

// ---------------------------------------------------------------------------------------------------
// Labelled sets: X and integer labels (kept as doubles in y), from HDF5 or an IDX directory.

typedef struct labelled_src {
    const char *path, *xname, *lname;  // HDF5; or the IDX files (path: images, lname: labels)
    int64_t cols;
    int idx;
} labelled_src;

static int data_read_labelled(void *arg, int64_t row0, int64_t nrows, void *X, double *y, ds_msg *msg)
{
    const labelled_src *s = arg;
    int32_t *lab = malloc((size_t)(nrows ? nrows : 1) * sizeof(int32_t));
    if (!lab)
        return ds_fail(msg, DS_ERR_RUNTIME, "out of host memory");
    int rc = s->idx ? idx_read_images(s->path, row0, nrows, 0, X, msg)
                    : h5io_read_labelled_rows(s->path, s->xname, s->lname, row0, nrows, s->cols, 0, X, lab, msg);
    if (rc == DS_OK && s->idx)
        rc = idx_read_labels(s->lname, row0, nrows, lab, msg);
    for (int64_t i = 0; rc == DS_OK && i < nrows; i++)
        y[i] = lab[i];
    free(lab);
    return rc;
}

static int data_load_rows(ds_ctx *ctx, int64_t rows, int64_t cols, const char *what, labelled_src *src, ds_data *d)
{
    if (rows < ctx->nranks)
        return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s has %lld rows, fewer than the %d ranks", what, (long long)rows,
                       ctx->nranks);
    data_place(ctx, d, rows);
    snprintf(d->source, sizeof d->source, "%s", what);
    int rc = ctx_agree(ctx, data_alloc(ctx, d, cols, 0));
    return rc == DS_OK ? ctx_agree(ctx, data_fill(ctx, d, data_read_labelled, src)) : rc;
}

int data_load_labelled(ds_ctx *ctx, const char *path, const char *xname, const char *lname, ds_data *d)
{
    data_clear(d);
    h5io_lsq_info info = {0};
    DS_CHECK(ctx_agree(ctx, h5io_probe_labelled(path, xname, lname, &info, &ctx->msg)));
    labelled_src src = {path, xname, lname, info.cols, 0};
    return data_load_rows(ctx, info.rows, info.cols, path, &src, d);
}

int data_load_idx(ds_ctx *ctx, const char *dir, const char *split, ds_data *d)
{
    data_clear(d);
    idx_set set;
    DS_CHECK(ctx_agree(ctx, idx_open_set(dir, split, &set, &ctx->msg)));
    labelled_src src = {set.images, NULL, set.labels, set.row_len, 1};
    return data_load_rows(ctx, set.count, set.row_len, set.images, &src, d);
}

typedef struct gen_src {
    const gen_lsq *p;
    const double *a_true;
    int f32, threads;
} gen_src;

static int data_gen_rows(void *arg, int64_t row0, int64_t nrows, void *X, double *y, ds_msg *msg)
{
    const gen_src *s = arg;
    gen_lsq_rows_parallel(s->p, s->a_true, row0, nrows, s->f32, X, y, s->threads);
    return DS_OK;
}

int data_gen_lsq(ds_ctx *ctx, const gen_lsq *p, int f32, ds_data *d)
{
    data_clear(d);
    if (p->rows < ctx->nranks)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "--rows %lld is fewer than the %d ranks", (long long)p->rows,
                       ctx->nranks);
    data_place(ctx, d, p->rows);
    snprintf(d->source, sizeof d->source, "built-in problem (seed %llu)", (unsigned long long)p->seed);
    d->a_true = malloc((size_t)p->cols * sizeof(double));
    int rc = d->a_true ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK) {
        gen_a_true(p, d->a_true);
        rc = data_alloc(ctx, d, p->cols, f32);
    }
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        gen_src src = {p, d->a_true, f32, (int)(cores / (ctx->local_size > 0 ? ctx->local_size : 1))};
        rc = ctx_agree(ctx, data_fill(ctx, d, data_gen_rows, &src));
    }
    return rc;
}

// X and y of a host placement (d->host): pinned (1) or pageable (2, data_alloc's fallback).
static void data_free_host(ds_ctx *ctx, ds_data *d)
{
    if (d->host == 2) {
        free((void *)d->X.data);
        free(d->y);
    } else {
        if (d->X.data)
            ctx->be->host_free(ctx, (void *)d->X.data);
        if (d->y)
            ctx->be->host_free(ctx, d->y);
    }
    d->X.data = NULL, d->y = NULL;
}

void data_free(ds_ctx *ctx, ds_data *d)
{
    if (d->host && !ctx->be->host_memory)
        data_free_host(ctx, d);
    if (d->X.data)
        ctx->be->free(ctx, (void *)d->X.data);
    if (d->y)
        ctx->be->free(ctx, d->y);
    free(d->a_true);
    free(d->x_exps);
    memset(d, 0, sizeof *d);
}
