// ann_stream.c: the network's passes over a streamed X (ann_stream.h): the row sources and their
// producer, the targets' statistics, the hidden rounds' gathers, the Gram of [H 1 T] and prediction by
// chunks. Each pass's per-chunk work is queued on the backend: no host allocation or wait but the row
// source's own (and, in prediction, the chunk's outputs brought back for the metrics).
#include "ann/ann_stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ann/ann_io.h"
#include "h5io.h"

// ---------------------------------------------------------------------------------------------------
// Sources

// A read that failed without naming the dataset (a file truncated or rewritten while it streams fails
// at its open): the dataset and rows added, so that the one line says what was being read.
static int feed_failed(int rc, const char *name, int64_t row0, int64_t nrows, ds_msg *msg)
{
    const char *bare = name[0] == '/' ? name + 1 : name;
    if (strstr(msg->text, bare))
        return rc;
    char text[sizeof msg->text];
    snprintf(text, sizeof text, "%.400s, reading dataset /%.40s rows %lld to %lld", msg->text, bare, (long long)row0,
             (long long)(row0 + nrows - 1));
    snprintf(msg->text, sizeof msg->text, "%s", text);
    return rc;
}

// Rows of X and y (or labels) as h5io reads them, y then turned into the pass's target.
static int feed_rows(const ann_feed *f, int64_t row0, int64_t nrows, void *X, double *y, ds_msg *msg)
{
    int rc;
    if (f->classes) {
        rc = h5io_read_labelled_rows(f->path, f->xname, f->yname, row0, nrows, f->cols, 0, X, f->labels, msg);
        if (rc != DS_OK)
            return feed_failed(rc, f->xname, row0, nrows, msg);
        for (int64_t i = 0; i < nrows; i++)
            y[i] = f->labels[i];  // the labels are their own targets
        return DS_OK;
    }
    if (!f->yname[0])
        memset(y, 0, (size_t)nrows * sizeof(double));
    rc = h5io_read_lsq_rows(f->path, f->xname, f->yname[0] ? f->yname : NULL, row0, nrows, f->cols, 0, X, y, NULL, msg);
    if (rc != DS_OK)
        return feed_failed(rc, f->xname, row0, nrows, msg);
    if (f->mode == ANN_FEED_Z)
        for (int64_t i = 0; i < nrows; i++)
            y[i] = ann_z_of(&f->map, y[i]);
    else if (f->mode == ANN_FEED_TC)
        for (int64_t i = 0; i < nrows; i++)
            y[i] = ann_tc_of(&f->map, y[i]);
    return DS_OK;
}

// The producer of a file source (on the reader thread): the rows (feed_rows) of a file that must not
// change while it streams (rows_stamp): checked before the read and after it.
static int feed_read(void *arg, int64_t row0, int64_t nrows, void *X, double *y, ds_msg *msg)
{
    const ann_feed *f = arg;
    if (rows_stamp_same(f->path, &f->st)) {
        const int rc = feed_rows(f, row0, nrows, X, y, msg);
        if (rc != DS_OK || rows_stamp_same(f->path, &f->st))
            return rc;  // the rows of the file as opened, or the read's own failure
    }
    return ds_fail(msg, DS_ERR_INPUT, "%s: dataset %s: the file changed while it was read (rows %lld..%lld)", f->path,
                   f->xname, (long long)row0, (long long)(row0 + nrows - 1));
}

int ann_source_open_file(ds_ctx *ctx, ann_source *src, const char *path, const char *xname, const char *yname,
                         int classes, int64_t row0, int64_t rows, int64_t cols, int64_t chunk, const char *phase)
{
    memset(src, 0, sizeof *src);
    ann_feed *f = calloc(1, sizeof *f);
    if (!f)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->xname, sizeof f->xname, "%s", xname);
    snprintf(f->yname, sizeof f->yname, "%s", yname ? yname : "");
    f->cols = cols, f->classes = classes && yname;
    src->feed = f;
    src->open = 1;
    if (rows_stamp_take(path, &f->st) != 0)
        return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: cannot open (it was there when the run began)", path);
    if (f->classes && !(f->labels = malloc((size_t)chunk * sizeof(int32_t))))
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    const int rc = rows_open(ctx, &src->rows, feed_read, f, row0, rows, cols, 0, chunk, phase);
    src->rows.raw = 1;  // X as read: ann neither divides it nor reads the columns' largest magnitudes
    return rc;
}

int ann_source_open_memory(ds_ctx *ctx, ann_source *src, const ds_data *d, int64_t chunk, const char *phase)
{
    memset(src, 0, sizeof *src);
    const size_t bytes = (size_t)(d->X.rows ? d->X.rows : 1) * sizeof(double);
    src->y = d->y;
    src->open = 1;
    DS_CHECK(ctx->be->host_alloc(ctx, (void **)&src->z, bytes));
    DS_CHECK(ctx->be->host_alloc(ctx, (void **)&src->tc, bytes));
    return rows_open_memory(ctx, &src->rows, d->X.data, d->y, d->row0, d->X.rows, d->X.cols, 0, chunk,
                            d->host == 2, phase);
}

void ann_source_close(ds_ctx *ctx, ann_source *src)
{
    if (!src->open)
        return;
    rows_close(ctx, &src->rows);
    if (src->feed)
        free(src->feed->labels);
    free(src->feed);
    if (src->z)
        ctx->be->host_free(ctx, src->z);
    if (src->tc)
        ctx->be->host_free(ctx, src->tc);
    memset(src, 0, sizeof *src);
}

void ann_stream_close(ds_ctx *ctx, ann_stream *st)
{
    ann_source_close(ctx, &st->train);
    ann_source_close(ctx, &st->test);
    free(st->idx_h), free(st->sidx_h), free(st->spos_h), free(st->bounds);
    if (st->sidx_d)
        ctx->be->free(ctx, st->sidx_d);
    if (st->spos_d)
        ctx->be->free(ctx, st->spos_d);
}

// What the next pass's chunks hold in y: y itself, z or tc (a memory source's y pointer moves to the
// array; the reader of a file source is stopped between passes, so its mode may change).
static void source_feed(ann_source *src, int mode)
{
    if (src->feed)
        src->feed->mode = mode;
    else
        src->rows.mem_y = mode == ANN_FEED_Z ? src->z : mode == ANN_FEED_TC ? src->tc : src->y;
}

// ---------------------------------------------------------------------------------------------------
// Targets: y's least and largest (ann_y_stats'), read alone from the file in blocks of a chunk's rows.

static int targets_stats_file(ds_ctx *ctx, ann_source *src, const ds_data *d, int classes, double st[2])
{
    const ann_feed *f = src->feed;
    const int64_t ch = src->rows.chunk_rows, rows = d->X.rows;
    double *buf = malloc((size_t)ch * sizeof(double));
    int rc = buf ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t r = 0; rc == DS_OK && r < rows; r += ch) {
        const int64_t nr = rows - r < ch ? rows - r : ch;
        ctx_beat(ctx, src->rows.phase);
        rc = h5io_read_keys(f->path, f->yname, H5IO_KEY_F64, d->row0 + r, nr, buf, &ctx->msg);
        if (rc != DS_OK)
            rc = feed_failed(rc, f->yname, d->row0 + r, nr, &ctx->msg);
        if (rc == DS_OK)
            rc = ann_targets_bad(ctx, d->source, d->row0 + r, buf, nr, classes);
        for (int64_t i = 0; rc == DS_OK && i < nr; i++)
            lo = buf[i] < lo ? buf[i] : lo, hi = buf[i] > hi ? buf[i] : hi;
    }
    st[0] = lo, st[1] = hi;
    free(buf);
    return rc;
}

int ann_stream_targets(ds_ctx *ctx, ann_stream *st, const ds_data *d, int classes, ann_model *m, ann_ymap *t)
{
    ann_source *src = &st->train;
    double s[2];
    int rc = DS_OK;
    if (src->feed) {
        rc = targets_stats_file(ctx, src, d, classes, s);
    } else {
        rc = ann_targets_bad(ctx, d->source, d->row0, src->y, d->X.rows, classes);
        ann_y_stats(src->y, d->X.rows, s);
    }
    DS_CHECK(ctx_agree(ctx, rc));
    DS_CHECK(ctx_agree(ctx, ann_ymap_agree(ctx, d->source, s, classes, t, m)));
    if (src->feed) {
        src->feed->map = *t;
        return DS_OK;
    }
    for (int64_t i = 0; i < d->X.rows; i++) {
        src->z[i] = ann_z_of(t, src->y[i]);
        src->tc[i] = ann_tc_of(t, src->y[i]);
    }
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// The hidden rounds' rows: the local rows a round asks of this rank (its own neurons' with one rank, the
// requesters' with several) are bucketed by chunk on the host, once a round; the pass then gathers each
// chunk's bucket into its places as the chunk goes by. One pass a round; the rounds are ann_hidden.c's.

static int gather_reserve(ds_ctx *ctx, ann_stream *st, int64_t count, int64_t nch)
{
    if (count <= st->cap && st->idx_h)
        return DS_OK;
    free(st->idx_h), free(st->sidx_h), free(st->spos_h), free(st->bounds);
    if (st->sidx_d)
        ctx->be->free(ctx, st->sidx_d);
    if (st->spos_d)
        ctx->be->free(ctx, st->spos_d);
    st->sidx_d = st->spos_d = NULL;
    st->cap = (count > 1 ? count : 1) + count / 16;
    const size_t b = (size_t)st->cap * sizeof(int64_t);
    st->idx_h = malloc(b), st->sidx_h = malloc(b), st->spos_h = malloc(b);
    st->bounds = malloc((size_t)(2 * (nch + 1)) * sizeof(int64_t));
    if (!st->idx_h || !st->sidx_h || !st->spos_h || !st->bounds) {
        st->cap = 0;
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for the hidden rows' gather");
    }
    DS_CHECK(ctx->be->alloc(ctx, &st->sidx_d, b));
    return ctx->be->alloc(ctx, &st->spos_d, b);
}

// Buckets idx_h by chunk of ch rows: sidx_h, spos_h (row, place) with chunk k's in bounds[k] .. bounds[k+1].
static void gather_buckets(ann_stream *st, int64_t count, int64_t ch, int64_t nch, int64_t rows)
{
    int64_t *b = st->bounds, *at = st->bounds + nch + 1;
    memset(b, 0, (size_t)(nch + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < count; i++) {
        DS_ASSERT(st->idx_h[i] >= 0 && st->idx_h[i] < rows);
        b[st->idx_h[i] / ch + 1]++;
    }
    for (int64_t k = 0; k < nch; k++)
        b[k + 1] += b[k];
    memcpy(at, b, (size_t)nch * sizeof(int64_t));
    for (int64_t i = 0; i < count; i++) {
        const int64_t j = at[st->idx_h[i] / ch]++;
        st->sidx_h[j] = st->idx_h[i];
        st->spos_h[j] = i;
    }
}

static int stream_gather(ds_ctx *ctx, void *arg, const int64_t *idx, int64_t count, double *dst)
{
    ann_stream *st = arg;
    const ds_backend *be = ctx->be;
    ds_rows *s = &st->train.rows;
    const int64_t ch = s->chunk_rows, nch = (s->rows + ch - 1) / ch;
    DS_CHECK(gather_reserve(ctx, st, count, nch));
    DS_CHECK(be->download(ctx, st->idx_h, idx, (size_t)count * sizeof(int64_t)));
    gather_buckets(st, count, ch, nch, s->rows);
    DS_CHECK(be->upload(ctx, st->sidx_d, st->sidx_h, (size_t)count * sizeof(int64_t)));
    DS_CHECK(be->upload(ctx, st->spos_d, st->spos_h, (size_t)count * sizeof(int64_t)));
    source_feed(&st->train, ANN_FEED_Z);
    int rc = rows_begin(ctx, s);
    for (int64_t k = 0; rc == DS_OK; k++) {
        ds_mat C;
        const double *zc = NULL;
        rc = rows_next(ctx, s, &C, &zc);
        if (rc != DS_OK || C.rows == 0)
            break;
        const int64_t a = st->bounds[k], cnt = st->bounds[k + 1] - a;
        if (cnt > 0)
            rc = be->ann->gather_chunk_rows(ctx, C.data, s->cols, zc, k * ch, (const int64_t *)st->sidx_d + a,
                                            (const int64_t *)st->spos_d + a, cnt, dst);
    }
    const int end = rows_end(ctx, s);
    return rc != DS_OK ? rc : end;
}

void ann_stream_dev(ann_stream *st, const ds_data *d, ann_dev *dv)
{
    *dv = (ann_dev){.X = &d->X, .z = NULL, .row0 = d->row0, .m = d->rows_global, .block_rows = d->block_rows,
                    .gather = stream_gather, .gather_arg = st};
}

// ---------------------------------------------------------------------------------------------------
// The Gram of [H 1 T]: each chunk's digits (whole blocks: the same bits as in memory, ann_gram.h).

int ann_stream_gram(ds_ctx *ctx, ann_stream *st, const ann_model *m, const double *Wd, int64_t ld, const ann_fix *fx,
                    double *scratch, double *dig)
{
    const ds_backend *be = ctx->be;
    ds_rows *s = &st->train.rows;
    DS_ASSERT(s->chunk_rows % fx->block == 0);
    int rc = be->fill(ctx, dig, 2 * ld * (ld + 1) / 2, 0.0);
    source_feed(&st->train, ANN_FEED_TC);
    if (rc == DS_OK)
        rc = rows_begin(ctx, s);
    while (rc == DS_OK) {
        ds_mat X;
        const double *tc = NULL;
        rc = rows_next(ctx, s, &X, &tc);
        if (rc != DS_OK || X.rows == 0)
            break;
        rc = be->ann->gram_digits(ctx, X.data, X.rows, s->cols, Wd, m->neurons, tc, m->outputs, ld, fx, scratch, dig);
    }
    const int end = rows_end(ctx, s);
    return rc != DS_OK ? rc : end;
}

// ---------------------------------------------------------------------------------------------------
// Prediction: the outputs of each chunk brought back to the host for the metrics' sums, which run row
// by row in order as ann.c's do in memory (pass 0: means and accuracy; pass 1: the centred sums).

typedef struct predict_bufs {
    void *Wd, *Vd, *H, *Pd;  // backend memory
    double *P, *y;           // host: a chunk's outputs and y
    int64_t *cls;            // host: a chunk's classes, when written
    const char *tmp;         // the predictions' temporary file, or NULL
} predict_bufs;

static int predict_open(ds_ctx *ctx, const ann_model *m, int64_t ch, const char *tmp, predict_bufs *b)
{
    const ds_backend *be = ctx->be;
    const int64_t K1 = m->neurons + 1, C = m->outputs;
    memset(b, 0, sizeof *b);
    b->tmp = tmp;
    b->P = malloc((size_t)(ch * C) * sizeof(double));
    b->y = malloc((size_t)ch * sizeof(double));
    b->cls = malloc((size_t)ch * sizeof(int64_t));
    if (!b->P || !b->y || !b->cls)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    DS_CHECK(ann_upload_new(ctx, &b->Wd, m->W, (size_t)(m->neurons * (m->n + 1)) * sizeof(double)));
    DS_CHECK(ann_upload_new(ctx, &b->Vd, m->V, (size_t)(K1 * C) * sizeof(double)));
    DS_CHECK(be->alloc(ctx, &b->H, (size_t)(ch * K1) * sizeof(double)));
    return be->alloc(ctx, &b->Pd, (size_t)(ch * C) * sizeof(double));
}

static void predict_close(ds_ctx *ctx, predict_bufs *b)
{
    void *dev[] = {b->Wd, b->Vd, b->H, b->Pd};
    for (int i = 0; i < 4; i++)
        if (dev[i])
            ctx->be->free(ctx, dev[i]);
    free(b->P), free(b->y), free(b->cls);
}

typedef struct predict_sums {
    double s[3], mean[2], c[4];
    int64_t correct;
} predict_sums;

static int predict_pass(ds_ctx *ctx, const ann_model *m, ann_source *src, const char *source, int pass,
                        predict_bufs *b, predict_sums *ps)
{
    const ds_backend *be = ctx->be;
    ds_rows *s = &src->rows;
    const int64_t n = m->n, K = m->neurons, K1 = K + 1, C = m->outputs;
    int rc = rows_begin(ctx, s);
    for (int64_t at = 0; rc == DS_OK;) {
        ds_mat X;
        const double *yc = NULL;
        rc = rows_next(ctx, s, &X, &yc);
        if (rc != DS_OK || X.rows == 0)
            break;
        const int64_t nr = X.rows;
        rc = be->ann->forward(ctx, X.data, nr, n, b->Wd, K, NULL, C, b->H, K1);
        if (rc == DS_OK)
            rc = be->ann->output(ctx, b->H, nr, K1, K, b->Vd, C, b->Pd);
        if (rc == DS_OK)
            rc = be->download(ctx, b->P, b->Pd, (size_t)(nr * C) * sizeof(double));
        const double *y = be->host_memory ? yc : b->y;
        if (rc == DS_OK && !be->host_memory && ps)
            rc = be->download(ctx, b->y, yc, (size_t)nr * sizeof(double));
        if (rc == DS_OK && pass == 0 && b->tmp)
            rc = ann_predictions_rows(m, b->tmp, s->row0 + at, nr, b->P, b->cls, &ctx->msg);
        if (rc == DS_OK && pass == 0 && ps)
            rc = ann_targets_bad(ctx, source, s->row0 + at, y, nr, m->classes);
        if (rc == DS_OK && pass == 0 && ps)
            ann_metrics_sum1(m, b->P, y, nr, ps->s, &ps->correct);
        else if (rc == DS_OK && ps)
            ann_metrics_sum2(b->P, y, nr, ps->mean, ps->c);
        at += nr;
    }
    const int end = rows_end(ctx, s);
    return rc != DS_OK ? rc : end;
}

int ann_stream_predict(ds_ctx *ctx, const ann_model *m, ann_source *src, const char *source, int has_y,
                       const char *tmp, ann_metrics *met)
{
    if (src->rows.cols != m->n)
        return ctx_agree(ctx, ds_fail(&ctx->msg, DS_ERR_INPUT, "%s has %lld columns; the model takes %lld", source,
                                      (long long)src->rows.cols, (long long)m->n));
    predict_bufs b;
    predict_sums ps;
    memset(&ps, 0, sizeof ps);
    predict_sums *sums = has_y ? &ps : NULL;
    int rc = ctx_agree(ctx, predict_open(ctx, m, src->rows.chunk_rows, tmp, &b));
    source_feed(src, ANN_FEED_Y);
    // Pass 0: the outputs, written as they are made (the ranks in turns: one file), and the first sums.
    for (int turn = 0; rc == DS_OK && turn < (tmp ? ctx->nranks : 1); turn++)
        rc = ctx_agree(ctx, !tmp || turn == ctx->rank ? predict_pass(ctx, m, src, source, 0, &b, sums) : DS_OK);
    if (rc == DS_OK && has_y && ann_metrics_means(ctx, m, ps.s, ps.correct, met, ps.mean)) {
        b.tmp = NULL;
        rc = ctx_agree(ctx, predict_pass(ctx, m, src, source, 1, &b, sums));
        if (rc == DS_OK)
            ann_metrics_finish(ctx, ps.c, met);
    }
    predict_close(ctx, &b);
    return rc;
}
