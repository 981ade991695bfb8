// rows.c: a rank's rows as a stream of chunks (rows.h): the reader thread (the chunks' largest magnitudes
// and their division by powers of two), the double buffers and their staging to backend memory, and column
// windows. The HDF5 producer is in rows_h5.c, the memory caps in rows_caps.c.
#include "core/rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/data.h"

static size_t rows_row_bytes(int64_t cols, int f32)
{
    return (size_t)cols * (f32 ? 4 : 8);
}

// The columns of this pass's chunks (its window's, else all), and the bytes of one of their rows.
static int64_t rows_pass_cols(const ds_rows *s)
{
    int64_t w = 0;
    for (int i = 0; i < s->nwin; i++)
        w += s->win[2 * i + 1] - s->win[2 * i];
    return s->nwin ? w : s->cols;
}

static size_t rows_pass_row_bytes(const ds_rows *s)
{
    return rows_row_bytes(rows_pass_cols(s), s->f32);
}

void rows_window(ds_rows *s, const int64_t *cols, int n)
{
    int64_t r[2 * 2 * ROWS_WINDOW_MAX];
    int k = 0;
    for (int i = 0; i < n; i++) {
        DS_ASSERT(cols[2 * i] >= 0 && cols[2 * i] <= cols[2 * i + 1] && cols[2 * i + 1] <= s->cols);
        if (cols[2 * i] == cols[2 * i + 1])
            continue;
        DS_ASSERT(k < 2 * ROWS_WINDOW_MAX);
        int j = k++;  // insertion by first column
        for (; j > 0 && r[2 * (j - 1)] > cols[2 * i]; j--)
            r[2 * j] = r[2 * (j - 1)], r[2 * j + 1] = r[2 * (j - 1) + 1];
        r[2 * j] = cols[2 * i], r[2 * j + 1] = cols[2 * i + 1];
    }
    s->nwin = 0;
    for (int i = 0; i < k; i++) {  // ranges that touch or overlap become one
        if (s->nwin > 0 && r[2 * i] <= s->win[2 * s->nwin - 1]) {
            if (r[2 * i + 1] > s->win[2 * s->nwin - 1])
                s->win[2 * s->nwin - 1] = r[2 * i + 1];
            continue;
        }
        DS_ASSERT(s->nwin < ROWS_WINDOW_MAX);
        s->win[2 * s->nwin] = r[2 * i], s->win[2 * s->nwin + 1] = r[2 * i + 1];
        s->nwin++;
    }
}

int64_t rows_window_col(const ds_rows *s, int64_t col)
{
    int64_t off = 0;
    for (int i = 0; i < s->nwin; off += s->win[2 * i + 1] - s->win[2 * i], i++)
        if (col >= s->win[2 * i] && col < s->win[2 * i + 1])
            return off + col - s->win[2 * i];
    DS_ASSERT(s->nwin == 0);
    return col;
}

// A chunk of nr rows as this pass holds them: when scan, big (cols + 1, zeroed here) gets the largest
// magnitudes of its columns (by the source's column) and of y; then the columns and y are divided by the
// pass's powers of two.
static void rows_chunk_scale(const ds_rows *s, void *X, double *y, int64_t nr, int scan, double *big)
{
    const int64_t w = rows_pass_cols(s);
    for (int64_t j = 0; scan && j <= s->cols; j++)
        big[j] = 0;
    // Each of the pass's column ranges (its window's, else all): source columns c0.., at `at` in a row.
    for (int64_t i = 0, at = 0, n = 0; i < (s->nwin ? s->nwin : 1); i++, at += n) {
        const int64_t c0 = s->nwin ? s->win[2 * i] : 0;
        n = (s->nwin ? s->win[2 * i + 1] : s->cols) - c0;
        double *bg = big + c0;
        const int *e = s->x_exps ? s->x_exps + c0 : NULL;
        for (int64_t r = 0; scan && r < nr; r++) {
            if (s->f32) {
                const float *x = (const float *)X + r * w + at;
                for (int64_t j = 0; j < n; j++)
                    bg[j] = fabs((double)x[j]) > bg[j] ? fabs((double)x[j]) : bg[j];
            } else {
                const double *x = (const double *)X + r * w + at;
                for (int64_t j = 0; j < n; j++)
                    bg[j] = fabs(x[j]) > bg[j] ? fabs(x[j]) : bg[j];
            }
        }
        data_scale_cols((char *)X + (size_t)at * (s->f32 ? 4 : 8), s->f32, nr, n, w, e);
    }
    if (scan)
        big[s->cols] = data_rescale(y, 0, nr, s->y_exp);
    else
        data_scale(y, 0, nr, s->y_exp);
}

// Rows [0, nr) of src (whole rows of the source, row-major) into dst as this pass's chunks hold them:
// whole rows, or the window's columns packed. dst may be src (a producer's rows packed in place): row r's
// pieces move down to r·width, never past bytes not yet moved.
static void rows_pack(const ds_rows *s, void *dst, const void *src, int64_t nr)
{
    const size_t es = s->f32 ? 4 : 8;
    if (!s->nwin) {
        if (dst != src)
            memcpy(dst, src, (size_t)nr * rows_row_bytes(s->cols, s->f32));
        return;
    }
    char *d = dst;
    for (int64_t r = 0; r < nr; r++)
        for (int i = 0; i < s->nwin; i++) {
            const size_t len = (size_t)(s->win[2 * i + 1] - s->win[2 * i]) * es;
            memmove(d, (const char *)src + ((size_t)r * (size_t)s->cols + (size_t)s->win[2 * i]) * es, len);
            d += len;
        }
}

// Rows [row, row+nr) of the producer as this pass's chunks hold them: whole rows, then packed to the
// window's columns. (A file's chunks hold whole rows, and HDF5's column hyperslab of two ranges, a union,
// took 12.7 s with a 64 MB chunk cache and 27 s without where whole rows packed took 7.5 s: 200 000 × 100,
// batch 25, 10 sweeps of the residual route on the CPU.) Whole rows fit where the piece starts: its
// packed offset is at most its offset in whole rows.
static int rows_produce_piece(ds_rows *s, int64_t row, int64_t nr, void *X, double *y, ds_msg *m)
{
    DS_CHECK(s->produce(s->arg, row, nr, X, y, m));
    rows_pack(s, X, X, nr);
    return DS_OK;
}

static int64_t rows_nchunks(const ds_rows *s)
{
    return s->pass_rows > 0 ? (s->pass_rows + s->chunk_rows - 1) / s->chunk_rows : 0;
}

// Rows [r0, r0+nr) of the pass's sequence: the rank's rows from r0, or pieces of its spans.
static int rows_produce(ds_rows *s, int64_t r0, int64_t nr, void *X, double *y, ds_msg *m)
{
    if (!s->spans)
        return rows_produce_piece(s, s->row0 + r0, nr, X, y, m);
    const size_t rb = rows_pass_row_bytes(s);
    int64_t base = 0;  // the sequence's row at the start of span i
    for (int i = 0; i < s->nspans && nr > 0; i++) {
        const int64_t a = s->spans[2 * i], len = s->spans[2 * i + 1] - a;
        if (r0 < base + len) {
            const int64_t off = r0 - base, take = len - off < nr ? len - off : nr;
            DS_CHECK(rows_produce_piece(s, s->row0 + a + off, take, X, y, m));
            X = (char *)X + (size_t)take * rb;
            y += take;
            r0 += take, nr -= take;
        }
        base += len;
    }
    return DS_OK;
}


// The two chunk buffers of chunk_rows rows (with their pinned staging on a device backend).
static int rows_buffers(ds_ctx *ctx, ds_rows *s)
{
    s->x_bytes = ((size_t)s->chunk_rows * rows_row_bytes(s->cols, s->f32) + 255) / 256 * 256;
    const size_t bytes = s->x_bytes + (size_t)s->chunk_rows * sizeof(double);
    const ds_backend *be = ctx->be;
    for (int i = 0; i < 2; i++) {
        if (be->host_memory) {
            DS_CHECK(be->alloc(ctx, &s->host[i], bytes));
            s->dev[i] = s->host[i];
        } else {
            DS_CHECK(be->host_alloc(ctx, &s->host[i], bytes));
            DS_CHECK(be->alloc(ctx, &s->dev[i], bytes));
        }
    }
    return DS_OK;
}

static void rows_free_buffers(ds_ctx *ctx, ds_rows *s)
{
    for (int i = 0; i < 2; i++) {
        if (s->dev[i] && s->dev[i] != s->host[i])
            ctx->be->free(ctx, s->dev[i]);
        if (s->host[i])
            (ctx->be->host_memory ? ctx->be->free : ctx->be->host_free)(ctx, s->host[i]);
        s->host[i] = s->dev[i] = NULL;
    }
}

// What every source starts from: its rows, its chunks and its lock.
static void rows_init(ds_rows *s, int64_t row0, int64_t rows, int64_t cols, int f32, int64_t chunk_rows,
                      const char *phase)
{
    memset(s, 0, sizeof *s);
    DS_ASSERT(chunk_rows >= 1);
    s->row0 = row0, s->rows = rows, s->cols = cols, s->f32 = f32, s->chunk_rows = chunk_rows, s->phase = phase;
    s->cur = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

// The chunk buffers, with chunks halved while pinned memory is short (the host's limit on locked pages,
// other jobs: it can run short before the caps say), down to ROWS_MIN_CHUNK; then the failure naming the
// size, the buffers had so far left for rows_free_buffers.
static int rows_buffers_fit(ds_ctx *ctx, ds_rows *s)
{
    for (;;) {
        const int rc = rows_buffers(ctx, s);
        if (rc == DS_OK || s->chunk_rows <= ROWS_MIN_CHUNK)
            return rc;
        rows_free_buffers(ctx, s);
        s->chunk_rows = s->chunk_rows / 2 > ROWS_MIN_CHUNK ? s->chunk_rows / 2 : ROWS_MIN_CHUNK;
        ctx_log(ctx, "%s: %s; trying chunks of %lld rows", s->phase, ctx->msg.text, (long long)s->chunk_rows);
        ctx->msg.text[0] = '\0';
    }
}

int rows_open(ds_ctx *ctx, ds_rows *s, rows_producer produce, void *arg, int64_t row0, int64_t rows, int64_t cols,
              int f32, int64_t chunk_rows, const char *phase)
{
    rows_init(s, row0, rows, cols, f32, chunk_rows, phase);
    s->produce = produce, s->arg = arg;
    s->big = calloc(2 * ((size_t)cols + 1), sizeof(double));  // the pass's, then the reader's for a chunk
    if (!s->big)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    return rows_buffers_fit(ctx, s);
}

int rows_open_memory(ds_ctx *ctx, ds_rows *s, const void *X, const double *y, int64_t row0, int64_t rows,
                     int64_t cols, int f32, int64_t chunk_rows, int pageable, const char *phase)
{
    rows_init(s, row0, rows, cols, f32, chunk_rows, phase);
    s->mem_x = X, s->mem_y = y;
    if (pageable && !ctx->be->host_memory) {
        // A copy from pageable memory is staged by the driver and holds the host until done, a strided
        // one (a window) at a fraction of that rate: each chunk is packed into a pinned buffer first.
        if (rows_buffers_fit(ctx, s) == DS_OK)
            return DS_OK;
        ctx_log(ctx, "%s: %s; chunks copied straight from pageable memory instead (slower copies)", phase,
                ctx->msg.text);
        ctx->msg.text[0] = '\0';
        rows_free_buffers(ctx, s);
        s->chunk_rows = chunk_rows;
    }
    s->x_bytes = ((size_t)s->chunk_rows * rows_row_bytes(cols, f32) + 255) / 256 * 256;
    for (int i = 0; i < 2 && !ctx->be->host_memory; i++)
        DS_CHECK(ctx->be->alloc(ctx, &s->dev[i], s->x_bytes + (size_t)s->chunk_rows * sizeof(double)));
    return DS_OK;
}

// The reader: chunk k into slot k mod 2 once the caller has given the slot back; divides by the pass's
// powers of two and records the largest magnitudes, as data.c's file reader does.
static void *rows_reader(void *arg)
{
    ds_rows *s = arg;
    const int64_t n = rows_nchunks(s);
    for (int64_t k = 0; k < n; k++) {
        const int slot = (int)(k & 1);
        pthread_mutex_lock(&s->mu);
        while (!s->free_slot[slot] && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        const int stop = s->stop;
        s->free_slot[slot] = 0;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
        const int64_t r0 = k * s->chunk_rows, nr = s->pass_rows - r0 < s->chunk_rows ? s->pass_rows - r0 : s->chunk_rows;
        void *X = s->host[slot];
        double *y = (double *)((char *)X + s->x_bytes);
        ds_msg m = {{0}};
        double *pb = s->produced_big, *mine = s->big + s->cols + 1;
        for (int64_t j = 0; pb && j <= s->cols; j++)
            pb[j] = 0;
        int rc = rows_produce(s, r0, nr, X, y, &m);
        // The chunk's largest magnitudes (the producer's scan's, else the reader's), then the division.
        if (rc == DS_OK && !s->raw)
            rows_chunk_scale(s, X, y, nr, !pb, pb ? pb : mine);
        pthread_mutex_lock(&s->mu);  // big may be read during the pass (a checkpoint)
        for (int64_t j = 0; rc == DS_OK && !s->raw && j <= s->cols; j++)
            s->big[j] = fmax(s->big[j], pb ? pb[j] : mine[j]);
        if (rc != DS_OK) {
            s->rc = rc;
            s->msg = m;
        } else {
            s->ready[slot] = k;
        }
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (rc != DS_OK)
            break;
    }
    return NULL;
}

int rows_begin(ds_ctx *ctx, ds_rows *s)
{
    DS_ASSERT(!s->running);
    s->ready[0] = s->ready[1] = -1;
    s->free_slot[0] = s->free_slot[1] = 1;
    s->stop = 0, s->rc = DS_OK, s->next = 0, s->cur = -1;
    for (int64_t j = 0; s->big && j <= s->cols; j++)
        s->big[j] = 0;
    s->pass_rows = s->rows;
    if (s->spans) {
        s->pass_rows = 0;
        for (int i = 0; i < s->nspans; i++) {
            DS_ASSERT(s->spans[2 * i] <= s->spans[2 * i + 1] && s->spans[2 * i + 1] <= s->rows);
            s->pass_rows += s->spans[2 * i + 1] - s->spans[2 * i];
        }
    }
    s->t0 = s->last_log = MPI_Wtime();
    DS_ASSERT(!(s->mem_x && s->spans));
    if (s->mem_x) {  // nothing to read: rows_next stages from memory
        // A window on a host backend: chunks packed into buffers of their own, made on first use.
        for (int i = 0; i < 2 && s->nwin && !s->dev[i]; i++)
            DS_CHECK(ctx->be->alloc(ctx, &s->dev[i], s->x_bytes));
        s->running = 1;
        return DS_OK;
    }
    if (pthread_create(&s->thread, NULL, rows_reader, s) != 0)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "could not start the reader thread on rank %d", ctx->rank);
    s->running = 1;
    return DS_OK;
}

// The caller is done with its chunk: on a host backend the reader may refill its buffer; on a device
// backend the next copy into its device buffer waits for the work queued on it.
static int rows_give_back(ds_ctx *ctx, ds_rows *s)
{
    if (s->cur < 0)
        return DS_OK;
    const int slot = s->cur;
    s->cur = -1;
    if (!ctx->be->host_memory)
        return ctx->be->stage_release(ctx, slot);
    if (s->mem_x)
        return DS_OK;
    pthread_mutex_lock(&s->mu);
    s->free_slot[slot] = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return DS_OK;
}

// Seconds between progress lines: 5, or DSOLVE_PROGRESS_SECONDS (tests: 0 prints one a chunk, so that
// a test knows the pass has begun).
static double rows_progress_every(void)
{
    const char *v = getenv("DSOLVE_PROGRESS_SECONDS");
    char *end = NULL;
    const double t = v && *v ? strtod(v, &end) : 5.0;
    return end && *end == '\0' && t >= 0 ? t : 5.0;
}

// Rank 0's progress line every 5 s: its share stands for all (ranks stream at the same pace).
static void rows_progress(ds_ctx *ctx, ds_rows *s)
{
    const double now = MPI_Wtime();
    if (now - s->last_log < rows_progress_every())
        return;
    s->last_log = now;
    const double total = (double)s->pass_rows * (rows_pass_row_bytes(s) + 8);
    const double done = (double)s->next / (double)rows_nchunks(s), rate = done * total / (now - s->t0);
    ctx_log(ctx, "%s (pass %d): %.0f%% of %.2f GB a rank, %.2f GB/s, %.0f s left", s->phase, s->passes + 1,
            100.0 * done, total / 1e9, rate / 1e9, rate > 0 ? (1.0 - done) * total / rate : 0.0);
}

// Chunk k of a memory source: in place on a host backend, else staged to slot k mod 2 (the copy waits for
// the work on that slot's last chunk, and the work queued after it waits for the copy; no host wait but,
// from pageable memory, for the slot's last copy to leave its pinned buffer before the chunk is packed in).
static int rows_next_memory(ds_ctx *ctx, ds_rows *s, int64_t k, ds_mat *X, const double **y)
{
    const ds_backend *be = ctx->be;
    const int slot = (int)(k & 1);
    const int64_t r0 = k * s->chunk_rows, nr = s->pass_rows - r0 < s->chunk_rows ? s->pass_rows - r0 : s->chunk_rows;
    const size_t rb = rows_row_bytes(s->cols, s->f32), wb = rows_pass_row_bytes(s), es = s->f32 ? 4 : 8;
    const char *x = (const char *)s->mem_x + (size_t)r0 * rb;
    const double *yy = s->mem_y + r0;
    char *dev = s->dev[slot];
    if (s->host[slot]) {  // pageable X: the chunk's rows (a window's columns) packed, then one copy each
        char *h = s->host[slot];
        DS_CHECK(be->stage_wait(ctx, slot));
        rows_pack(s, h, x, nr);
        memcpy(h + s->x_bytes, yy, (size_t)nr * sizeof(double));
        x = h, yy = (const double *)(h + s->x_bytes);
    }
    X->data = x;
    *y = yy;
    if (s->nwin && !s->host[slot]) {  // each range's columns by one strided copy: only they are moved
        for (int64_t i = 0, off = 0; i < s->nwin; off += s->win[2 * i + 1] - s->win[2 * i], i++)
            DS_CHECK(be->stage_2d(ctx, slot, dev + (size_t)off * es, wb, x + (size_t)s->win[2 * i] * es, rb,
                                  (size_t)(s->win[2 * i + 1] - s->win[2 * i]) * es, (size_t)nr));
        X->data = dev;
    } else if (!be->host_memory) {
        DS_CHECK(be->stage(ctx, slot, dev, x, (size_t)nr * wb));
        X->data = dev;
    }
    if (!be->host_memory) {
        DS_CHECK(be->stage(ctx, slot, dev + s->x_bytes, yy, (size_t)nr * sizeof(double)));
        *y = (const double *)(dev + s->x_bytes);
    }
    X->rows = nr;
    X->cols = rows_pass_cols(s);
    s->cur = slot;
    s->next = k + 1;
    s->bytes += (double)nr * (double)(wb + sizeof(double));
    rows_progress(ctx, s);
    return DS_OK;
}

int rows_next(ds_ctx *ctx, ds_rows *s, ds_mat *X, const double **y)
{
    DS_ASSERT(s->running);
    DS_CHECK(rows_give_back(ctx, s));
    *X = (ds_mat){.data = NULL, .rows = 0, .cols = rows_pass_cols(s), .f32 = s->f32};
    *y = NULL;
    const int64_t k = s->next;
    if (k >= rows_nchunks(s))
        return DS_OK;
    const int slot = (int)(k & 1);
    ctx_beat(ctx, s->phase);
    if (s->mem_x)
        return rows_next_memory(ctx, s, k, X, y);
    pthread_mutex_lock(&s->mu);
    while (s->ready[slot] != k && s->rc == DS_OK)
        pthread_cond_wait(&s->cv, &s->mu);
    const int rc = s->rc;
    if (rc != DS_OK)
        ctx->msg = s->msg;
    s->ready[slot] = -1;
    pthread_mutex_unlock(&s->mu);
    DS_CHECK(rc);
    const int64_t left = s->pass_rows - k * s->chunk_rows, nr = left < s->chunk_rows ? left : s->chunk_rows;
    if (!ctx->be->host_memory) {
        const size_t used = (size_t)nr * rows_pass_row_bytes(s);
        DS_CHECK(ctx->be->stage(ctx, slot, s->dev[slot], s->host[slot], used));
        DS_CHECK(ctx->be->stage(ctx, slot, (char *)s->dev[slot] + s->x_bytes, (char *)s->host[slot] + s->x_bytes,
                                (size_t)nr * sizeof(double)));
        DS_CHECK(ctx->be->stage_wait(ctx, slot));
        pthread_mutex_lock(&s->mu);
        s->free_slot[slot] = 1;  // copied: the reader may read the chunk after next into it
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    s->cur = slot;
    s->next = k + 1;
    s->bytes += (double)nr * (double)(rows_row_bytes(s->cols, s->f32) + sizeof(double));  // read whole
    X->data = s->dev[slot];
    X->rows = nr;
    *y = (const double *)((const char *)s->dev[slot] + s->x_bytes);
    rows_progress(ctx, s);
    return DS_OK;
}

int rows_end(ds_ctx *ctx, ds_rows *s)
{
    if (!s->running) {  // a pass that did not start forgets its spans and window too
        s->spans = NULL, s->nspans = 0;
        s->nwin = 0;
        return DS_OK;
    }
    int rc = rows_give_back(ctx, s);
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (!s->mem_x)
        pthread_join(s->thread, NULL);
    else if (rc == DS_OK && !ctx->be->host_memory)
        rc = ctx->be->sync(ctx);  // the pass's copies and compute were only queued: its time ends here
    s->running = 0;
    s->spans = NULL, s->nspans = 0;
    s->nwin = 0;
    s->seconds += MPI_Wtime() - s->t0;
    s->passes++;
    return rc;
}

void rows_close(ds_ctx *ctx, ds_rows *s)
{
    if (s->running)
        (void)rows_end(ctx, s);
    rows_free_buffers(ctx, s);
    if (s->owns_arg)
        free(s->arg);
    free(s->big), free(s->x_exps);
    s->big = NULL, s->x_exps = NULL;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    s->arg = NULL;
}
