// logreg_stream.c: logistic regression on sets larger than the memory a rank may use. A set that does
// not fit the caps (logreg_stream_plan) comes through a row source (core/rows.h) in chunks of whole
// row blocks: from an HDF5 file read on the reader thread, or from the rank's rows kept in (pinned) host
// memory on a device backend. Every evaluation is one pass: the ops' pass on each chunk, whose sums are
// those of its blocks in memory, added exactly (logreg_pass), so a streamed run gives the in-memory bits.
// A chunk's labels travel in its y buffer as packed int32 (the first 4·rows bytes), so the ops read them
// in place; the bias column is appended by the producer as the in-memory loader does.
// provides: logreg_pass, logreg_colmax, logreg_memory_bytes, logreg_stream_plan, logreg_stream_open
#include "logreg/logreg_stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "h5io.h"
#include "idx.h"

// Chunk k of a pass (or the resident rows) as a set of whole blocks from the rank's row s->row0 + off.
static lr_set lr_chunk(const lr_set *s, const ds_mat *C, const double *y, int64_t off)
{
    return (lr_set){.X = (void *)C->data, .labels = (int32_t *)y, .rows = C->rows, .cols = s->cols,
                    .rows_global = s->rows_global, .row0 = s->row0 + off, .f32 = s->f32};
}

// What a walk over a streamed set does with each part: the resident rows or one chunk; first on the first.
typedef int (*lr_part_fn)(ds_ctx *ctx, const lr_set *part, int first, void *arg);

// Calls fn on the resident rows (when there are any, or when the source has none either: a pass over no
// rows gives the rank's share of zeros), then on each chunk of the source, in row order.
static int lr_walk(ds_ctx *ctx, const lr_set *s, lr_part_fn fn, void *arg)
{
    int rc = DS_OK, first = 1;
    if (s->resident > 0 || s->src->rows == 0) {
        const ds_mat R = {.data = s->X, .rows = s->resident, .cols = s->cols, .f32 = s->f32};
        const lr_set resident = lr_chunk(s, &R, (const double *)s->labels, 0);
        rc = fn(ctx, &resident, 1, arg);
        first = 0;
    }
    int64_t off = s->resident;
    if (rc == DS_OK)
        rc = rows_begin(ctx, s->src);
    while (rc == DS_OK) {
        ds_mat C;
        const double *y = NULL;
        rc = rows_next(ctx, s->src, &C, &y);
        if (rc != DS_OK || C.rows == 0)
            break;
        const lr_set chunk = lr_chunk(s, &C, y, off);
        rc = fn(ctx, &chunk, first, arg);
        first = 0;
        off += C.rows;
    }
    const int end = rows_end(ctx, s->src);
    return rc != DS_OK ? rc : end;
}

// A pass's sums: the first part's into gbuf, each later one's into acc and added to gbuf (exactly: digits).
typedef struct lr_pass_arg {
    lr_work *w;
    const double *W;
    int grad;
    double *gbuf, *acc;
} lr_pass_arg;

static int lr_pass_part(ds_ctx *ctx, const lr_set *part, int first, void *arg)
{
    const lr_pass_arg *a = arg;
    const int64_t dk = a->w->cols * a->w->classes, len = logreg_gbuf_len(a->w), from = a->grad ? 0 : 2 * dk;
    DS_CHECK(ctx->be->logreg->pass(ctx, a->w, part, a->W, a->grad, first ? a->gbuf : a->acc));
    return first ? DS_OK : ctx->be->axpy(ctx, a->gbuf + from, a->acc + from, len - from, 1.0);
}

int logreg_pass(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W, int grad, double *gbuf, double *acc)
{
    if (!s->src)
        return ctx->be->logreg->pass(ctx, w, s, W, grad, gbuf);
    lr_pass_arg a = {.w = w, .W = W, .grad = grad, .gbuf = gbuf, .acc = acc};
    return lr_walk(ctx, s, lr_pass_part, &a);
}

// Column maxima: the first part's into xmax, each later one's into part and folded in.
typedef struct lr_colmax_arg {
    lr_work *w;
    double *xmax, *part;
} lr_colmax_arg;

static int lr_colmax_part(ds_ctx *ctx, const lr_set *part, int first, void *arg)
{
    const lr_colmax_arg *a = arg;
    DS_CHECK(ctx->be->logreg->colmax(ctx, a->w, part, first ? a->xmax : a->part));
    for (int64_t j = 0; !first && j < part->cols; j++)
        a->xmax[j] = fmax(a->xmax[j], a->part[j]);
    return DS_OK;
}

int logreg_colmax(ds_ctx *ctx, lr_work *w, const lr_set *s, double *xmax)
{
    if (!s->src)
        return ctx->be->logreg->colmax(ctx, w, s, xmax);
    lr_colmax_arg a = {.w = w, .xmax = xmax, .part = malloc((size_t)s->cols * sizeof(double))};
    if (!a.part)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    const int rc = lr_walk(ctx, s, lr_colmax_part, &a);
    free(a.part);
    return rc;
}

// ---------------------------------------------------------------------------------------------------
// The producer: rows of an HDF5 labelled set or an IDX split, with the bias column, labels packed.

typedef struct lr_producer {
    char h5[4096], xname[256], lname[256], dir[4096], split[16];
    int64_t features;
    int f32, classes;
    rows_stamp st;  // the HDF5 file as it was opened: a change while it streams is bad input
} lr_producer;

// The file is still the one opened (rows_stamp_same).
static int lr_same_file(const lr_producer *p, int64_t row0, int64_t n, ds_msg *msg)
{
    if (rows_stamp_same(p->h5, &p->st))
        return DS_OK;
    return ds_fail(msg, DS_ERR_INPUT, "%s: the file was changed or removed while it streamed (dataset %s, rows %lld..%lld)",
                   p->h5, p->xname, (long long)row0, (long long)(row0 + n - 1));
}

// Rows of `features` values at the start of X widened in place to features + 1 ending in a 1, from
// the last row back (a row's new place never precedes its old one).
static void lr_widen(void *X, int64_t n, int64_t features, int f32)
{
    const size_t sz = f32 ? sizeof(float) : sizeof(double);
    for (int64_t i = n - 1; i >= 0; i--) {
        char *row = (char *)X + (size_t)i * (size_t)(features + 1) * sz;
        memmove(row, (char *)X + (size_t)i * (size_t)features * sz, (size_t)features * sz);
        if (f32)
            ((float *)row)[features] = 1.0f;
        else
            ((double *)row)[features] = 1.0;
    }
}

// Rows [row0, row0 + n) into X (n × (features + 1)) and their labels as int32 at the start of y.
static int lr_produce(void *arg, int64_t row0, int64_t n, void *X, double *y, ds_msg *msg)
{
    const lr_producer *p = arg;
    int32_t *lab = (int32_t *)y;
    int rc;
    char where[4400];
    if (p->h5[0]) {
        DS_CHECK(lr_same_file(p, row0, n, msg));
        rc = h5io_read_labelled_rows(p->h5, p->xname, p->lname, row0, n, p->features, p->f32, X, lab, msg);
        snprintf(where, sizeof where, "%s: dataset %s", p->h5, p->lname);
        if (rc == DS_OK)  // rewritten during the read
            rc = lr_same_file(p, row0, n, msg);
        if (rc != DS_OK && !strstr(msg->text, "dataset ")) {
            ds_msg m = *msg;  // a failure at the file's open (truncated, rewritten): name what was read
            return ds_fail(msg, rc, "%s (streaming dataset %s, rows %lld..%lld)", m.text, p->xname, (long long)row0,
                           (long long)(row0 + n - 1));
        }
    } else {
        idx_set set;
        rc = idx_open_set(p->dir, p->split, &set, msg);
        if (rc == DS_OK)
            rc = idx_read_images(set.images, row0, n, p->f32, X, msg);
        if (rc == DS_OK)
            rc = idx_read_labels(set.labels, row0, n, lab, msg);
        snprintf(where, sizeof where, "%s/%s-labels", p->dir, p->split);
    }
    DS_CHECK(rc);
    for (int64_t i = 0; i < n; i++)
        if (lab[i] < 0 || lab[i] >= p->classes)
            return ds_fail(msg, DS_ERR_INPUT, "%s: label %d of item %lld is outside 0 .. %d (--classes %d)", where,
                           (int)lab[i], (long long)(row0 + i), p->classes - 1, p->classes);
    lr_widen(X, n, p->features, p->f32);
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// The plan and the sources.

#define LR_CHUNK_BYTES (32.0 * (1 << 20))

// Working bytes of a training besides the rows (an estimate): the state and scratch of logreg.c, the
// ops' own (on a device with f32 X, the fused pass's partial gradients of up to 512 CTAs).
static double lr_fixed_bytes(const ds_ctx *ctx, int64_t cols, int classes, int64_t rows_global, int iters, int f32)
{
    const double dk = (double)cols * classes, rb = (double)logreg_block_rows(rows_global);
    const double blocks = ceil((double)rows_global / rb);
    const double doubles = (8.0 + 2.0 * LR_LBFGS_MEMORY) * dk + iters + 32.0 + 2.0 * (2.0 * dk + blocks + 1) + 2.0 * cols;
    return doubles * 8.0 + (ctx->be->host_memory ? rb * classes * 8.0 + 16.0 * dk : (f32 ? 512.0 : 0.0) * dk * 4.0 + 16.0 * dk);
}

double logreg_memory_bytes(const ds_ctx *ctx, const lr_mem *mem, int64_t rows_global, int64_t rows, int64_t cols,
                           int f32)
{
    const double sz = f32 ? 4.0 : 8.0;
    return (double)rows * ((double)cols * sz + 4.0 + (double)mem->classes * sz + 16.0) +
           lr_fixed_bytes(ctx, cols, mem->classes, rows_global, mem->iters, f32);
}

int logreg_stream_plan(ds_ctx *ctx, const lr_mem *mem, const lr_source *src, int64_t rows_global, int64_t cols,
                       int f32, int64_t rows, lr_hold *hold)
{
    *hold = (lr_hold){0};
    const rows_caps caps = {mem->caps.backend * mem->share, mem->caps.host * mem->share};
    const double sz = f32 ? 4.0 : 8.0, row = (double)cols * sz, per_row = (double)mem->classes * sz + 16.0;
    const double fixed = lr_fixed_bytes(ctx, cols, mem->classes, rows_global, mem->iters, f32);
    const int64_t rb = logreg_block_rows(rows_global);
    int64_t chunk = 0;
    int rc = DS_OK;
    if (logreg_memory_bytes(ctx, mem, rows_global, rows, cols, f32) > caps.backend) {
        double least[2];
        chunk = rows_chunk_for(ctx, &caps, (rows + rb - 1) / rb * rb, cols, f32, fixed, per_row, least);
        // Chunks of at most LR_CHUNK_BYTES: larger ones gain little per pass, and leave fewer rows resident.
        const int64_t most = (int64_t)(LR_CHUNK_BYTES / (row + 8.0)) / rb * rb;
        chunk = (chunk < most || most < rb ? chunk : most) / rb * rb;
        const double block = (double)rb * (2.0 * (row + 8.0) + per_row), host_block = (double)rb * 2.0 * (row + 8.0);
        const int host = !ctx->be->host_memory && host_block > caps.host;
        if (chunk == 0)
            rc = ds_fail(&ctx->msg, DS_ERR_USAGE,
                         "%s %.4g MB%s is below the working minimum of %.4g MB for %lld columns and %d classes (%s)",
                         host ? "--host-memory" : mem->cap_name, (host ? caps.host : caps.backend) / 1e6,
                         mem->share < 1 ? " (the share of the caps of this set)" : "",
                         (host ? host_block : fixed + block) / 1e6 + 0.0005, (long long)cols, mem->classes,
                         host ? "two pinned chunks of a row block" : "the training state and two chunks of a row block");
    }
    DS_CHECK(ctx_agree(ctx, rc));
    int64_t v[2] = {chunk > 0, chunk > 0 ? -chunk : INT64_MIN};  // MAX: any streams, the least chunk
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT64_T, MPI_MAX, ctx->comm);
    hold->chunk_rows = v[0] > 0 ? -v[1] : 0;
    if (hold->chunk_rows == 0)
        return DS_OK;
    // Whole blocks of the rank's first rows stay in backend memory beside the two chunks, so that each
    // pass streams only the others.
    const double left = caps.backend - fixed - (double)hold->chunk_rows * (2.0 * (row + 8.0) + per_row);
    const int64_t most = left > 0 ? (int64_t)(left / (row + 4.0 + per_row)) / rb * rb : 0;
    hold->resident = most < rows / rb * rb ? most : rows / rb * rb;
    // The streamed rows kept in host memory when they fit the host cap with room to spare (a device
    // backend only), so that each pass crosses the bus instead of reading the file again; an IDX set
    // cannot be read by chunks.
    const double streamed = (double)(rows - hold->resident) * (row + 8.0);
    const int keep = !ctx->be->host_memory && streamed <= 0.8 * caps.host;
    if (!keep && !src->h5)
        rc = ds_fail(&ctx->msg, DS_ERR_USAGE, "%s/%s: the IDX set (%.3g GB a rank) does not fit %s (%.3g GB for this "
                     "set) and IDX files cannot be streamed: convert it to HDF5 (X and labels) and pass it with --input",
                     src->dir, src->split, (double)rows * row / 1e9,
                     ctx->be->host_memory ? mem->cap_name : "--host-memory",
                     (ctx->be->host_memory ? caps.backend : caps.host) / 1e9);
    DS_CHECK(ctx_agree(ctx, rc));
    int all = keep;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, ctx->comm);
    hold->host = all;
    return DS_OK;
}

// The rank's n rows from row0 into pinned host memory, read in one go (an IDX file is decompressed from
// its start by every read), each chunk's labels then moved to the start of its own y (packed, as a chunk
// carries them).
static int lr_fill_host(ds_ctx *ctx, lr_set *s, lr_producer *p, int64_t row0, int64_t n, int64_t chunk)
{
    const size_t sz = s->f32 ? 4 : 8, rows = (size_t)(n > 0 ? n : 1);
    DS_CHECK(ctx->be->host_alloc(ctx, &s->host_x, rows * (size_t)s->cols * sz));
    DS_CHECK(ctx->be->host_alloc(ctx, (void **)&s->host_y, rows * sizeof(double)));
    if (n == 0)
        return DS_OK;
    DS_CHECK(lr_produce(p, row0, n, s->host_x, s->host_y, &ctx->msg));
    int32_t *lab = (int32_t *)s->host_y;
    for (int64_t k = (n - 1) / chunk; k > 0; k--) {  // chunk k's labels from k·chunk to 2k·chunk int32s
        const int64_t nk = n - k * chunk < chunk ? n - k * chunk : chunk;
        memmove(lab + 2 * k * chunk, lab + k * chunk, (size_t)nk * sizeof(int32_t));
    }
    return DS_OK;
}

int logreg_stream_open(ds_ctx *ctx, const lr_source *src, const lr_hold *hold, int64_t features, int f32, int classes,
                       lr_set *s)
{
    lr_producer *p = calloc(1, sizeof *p);
    s->src = calloc(1, sizeof *s->src);
    int rc = p && s->src ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK) {
        snprintf(p->h5, sizeof p->h5, "%s", src->h5 ? src->h5 : "");
        snprintf(p->xname, sizeof p->xname, "%s", src->xname);
        snprintf(p->lname, sizeof p->lname, "%s", src->lname);
        snprintf(p->dir, sizeof p->dir, "%s", src->dir ? src->dir : "");
        snprintf(p->split, sizeof p->split, "%s", src->split ? src->split : "");
        p->features = features, p->f32 = f32, p->classes = classes;
        if (src->h5 && rows_stamp_take(src->h5, &p->st) != 0)
            rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: cannot stat the file", src->h5);
    }
    const int64_t row0 = s->row0 + s->resident, n = s->rows - s->resident;  // the streamed rows
    if (rc == DS_OK && hold->host) {
        rc = lr_fill_host(ctx, s, p, row0, n, hold->chunk_rows);
        if (rc == DS_OK)
            rc = rows_open_memory(ctx, s->src, s->host_x, s->host_y, row0, n, s->cols, f32, hold->chunk_rows, 0,
                                  "logreg: streaming X from host memory");
        free(p);
    } else if (rc == DS_OK) {
        rc = rows_open(ctx, s->src, lr_produce, p, row0, n, s->cols, f32, hold->chunk_rows, "logreg: streaming X");
        s->src->owns_arg = 1;  // rows_close frees p
        s->src->raw = 1;       // X as read (the fixed point takes its own maxima), y the packed labels
        // Short pinned memory may have halved the chunks: whole blocks again (the buffers hold more).
        const int64_t rb = logreg_block_rows(s->rows_global);
        if (rc == DS_OK)
            s->src->chunk_rows = s->src->chunk_rows / rb * rb;
        if (rc == DS_OK && s->src->chunk_rows == 0)
            rc = ds_fail(&ctx->msg, DS_ERR_RUNTIME, "pinned host memory too short for two chunks of a row block "
                         "(%lld rows)", (long long)rb);
    } else {
        free(p);
    }
    return ctx_agree(ctx, rc);
}
