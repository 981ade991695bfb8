// test_rows.c: core/rows (the streamed row source) on the CPU backend, or on the device backend with
// "gpu" (exit 77 without one): every chunk size from 1 row to all of them delivers the rows in order
// and bit for bit, over several passes, from a producer and from memory (rows_open_memory: pinned, and
// pageable, which a device backend packs into pinned buffers of the source's own); a pass over spans
// reads just their rows; a producer's failure reaches the caller with its message; a pass stopped early
// leaves the source usable; the caps leave no chunk below ROWS_MIN_CHUNK; a pass with a column window
// delivers just its columns, packed, from a producer, from memory (pinned and pageable) and from a file,
// with spans too, and counts the bytes read (whole rows from a producer or file, the window's from memory).
// With "--rate FILE.h5 CHUNK_ROWS" instead: the seconds of h5io_read_lsq_rows over the file's rows by
// chunks against a pass of rows_open_h5 over them (no compute), for docs/solve.md's figures.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/data.h"
#include "core/rows.h"
#include "h5io.h"
#include "harness.h"

enum { COLS = 5 };

// X[i][j] = i·8 + j + 0.25, y[i] = −i; fails at row fail_row when it is in the chunk.
typedef struct prod {
    int64_t fail_row;
} prod;

static int produce(void *arg, int64_t row0, int64_t nrows, void *X, double *y, ds_msg *msg)
{
    const prod *p = arg;
    if (p->fail_row >= row0 && p->fail_row < row0 + nrows)
        return ds_fail(msg, DS_ERR_INPUT, "bad row %lld", (long long)p->fail_row);
    for (int64_t i = 0; i < nrows; i++) {
        for (int j = 0; j < COLS; j++)
            ((double *)X)[i * COLS + j] = (double)(row0 + i) * 8 + j + 0.25;
        y[i] = -(double)(row0 + i);
    }
    return DS_OK;
}

// One pass; returns the rows seen, counting mismatches in *bad (stops after stop chunks when > 0).
static int64_t pass(ds_ctx *ctx, ds_rows *s, int64_t row0, int stop, int64_t *bad, int *rc)
{
    int64_t seen = 0;
    double *hx = malloc((size_t)s->chunk_rows * COLS * 8), *hy = malloc((size_t)s->chunk_rows * 8);
    *rc = rows_begin(ctx, s);
    for (int k = 0; *rc == DS_OK && (stop == 0 || k < stop); k++) {
        ds_mat C;
        const double *yc;
        *rc = rows_next(ctx, s, &C, &yc);
        if (*rc != DS_OK || C.rows == 0)
            break;
        ctx->be->download(ctx, hx, C.data, (size_t)C.rows * COLS * 8);
        ctx->be->download(ctx, hy, yc, (size_t)C.rows * 8);
        for (int64_t i = 0; i < C.rows; i++) {
            const int64_t r = row0 + seen + i;
            *bad += hy[i] != -(double)r;
            for (int j = 0; j < COLS; j++)
                *bad += hx[i * COLS + j] != (double)r * 8 + j + 0.25;
        }
        seen += C.rows;
    }
    const int end = rows_end(ctx, s);
    if (*rc == DS_OK)
        *rc = end;
    free(hx);
    free(hy);
    return seen;
}

static void check_chunks(ds_ctx *ctx)
{
    const int64_t row0 = 1000, rows = 257;
    const int64_t chunks[] = {1, 2, 7, 64, 256, 257, 1000};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        prod p = {-1};
        ds_rows s;
        int rc = rows_open(ctx, &s, produce, &p, row0, rows, COLS, 0, chunks[c], "test: streaming");
        CHECK(rc == DS_OK, "rows_open: %s", ctx->msg.text);
        for (int rep = 0; rc == DS_OK && rep < 3; rep++) {
            int64_t bad = 0;
            const int64_t seen = pass(ctx, &s, row0, 0, &bad, &rc);
            CHECK(rc == DS_OK && seen == rows && bad == 0, "chunk %lld pass %d: rc %d, %lld rows of %lld, %lld wrong",
                  (long long)chunks[c], rep, rc, (long long)seen, (long long)rows, (long long)bad);
            // A pass stopped after one chunk leaves the source as it was.
            int64_t bad2 = 0;
            pass(ctx, &s, row0, 1, &bad2, &rc);
            CHECK(rc == DS_OK && bad2 == 0, "chunk %lld: a pass stopped early: rc %d", (long long)chunks[c], rc);
        }
        CHECK(s.bytes > 0 && s.passes == 6, "chunk %lld: %d passes counted", (long long)chunks[c], s.passes);
        rows_close(ctx, &s);
    }
}

// The producer's rows [row0, row0+rows) in host memory: the backend's host_alloc (pinned on a device
// backend) or, pageable, malloc's (a memory source packs those into pinned buffers of its own).
static int memory_rows(ds_ctx *ctx, int pageable, int64_t row0, int64_t rows, void **X, double **y)
{
    *X = NULL, *y = NULL;
    int rc = DS_OK;
    if (pageable) {
        *X = malloc((size_t)rows * COLS * 8), *y = malloc((size_t)rows * 8);
        rc = *X && *y ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    } else {
        rc = ctx->be->host_alloc(ctx, X, (size_t)rows * COLS * 8);
        if (rc == DS_OK)
            rc = ctx->be->host_alloc(ctx, (void **)y, (size_t)rows * 8);
    }
    return rc == DS_OK ? produce(&(prod){-1}, row0, rows, *X, *y, &ctx->msg) : rc;
}

static void memory_free(ds_ctx *ctx, int pageable, void *X, double *y)
{
    if (pageable) {
        free(X), free(y);
        return;
    }
    if (X)
        ctx->be->host_free(ctx, X);
    if (y)
        ctx->be->host_free(ctx, y);
}

// A memory source (rows_open_memory) over the same rows, pinned or pageable: the same chunks, over
// several passes.
static void check_memory(ds_ctx *ctx, int pageable)
{
    const int64_t row0 = 1000, rows = 257;
    void *X;
    double *y;
    int rc = memory_rows(ctx, pageable, row0, rows, &X, &y);
    CHECK(rc == DS_OK, "memory rows (pageable %d): %s", pageable, ctx->msg.text);
    const int64_t chunks[] = {1, 7, 256, 257, 1000};
    for (size_t c = 0; rc == DS_OK && c < sizeof chunks / sizeof chunks[0]; c++) {
        ds_rows s;
        rc = rows_open_memory(ctx, &s, X, y, row0, rows, COLS, 0, chunks[c], pageable, "test: streaming from memory");
        CHECK(rc == DS_OK, "rows_open_memory: %s", ctx->msg.text);
        for (int rep = 0; rc == DS_OK && rep < 3; rep++) {
            int64_t bad = 0;
            const int64_t seen = pass(ctx, &s, row0, rep == 1 ? 1 : 0, &bad, &rc);
            CHECK(rc == DS_OK && (seen == rows || rep == 1) && bad == 0,
                  "memory (pageable %d), chunk %lld pass %d: rc %d, %lld rows of %lld, %lld wrong", pageable,
                  (long long)chunks[c], rep, rc, (long long)seen, (long long)rows, (long long)bad);
        }
        rows_close(ctx, &s);
    }
    memory_free(ctx, pageable, X, y);
}

// A pass over spans delivers exactly their rows, in order, cut into chunks across the spans' ends; the
// next pass reads every row again.
static void check_spans(ds_ctx *ctx)
{
    const int64_t row0 = 40, rows = 257, spans[] = {3, 10, 20, 21, 100, 257};
    int64_t want[257], nwant = 0;
    for (int i = 0; i < 3; i++)
        for (int64_t r = spans[2 * i]; r < spans[2 * i + 1]; r++)
            want[nwant++] = row0 + r;
    double *hx = malloc(16 * COLS * 8), *hy = malloc(16 * 8);
    ds_rows s;
    int rc = rows_open(ctx, &s, produce, &(prod){-1}, row0, rows, COLS, 0, 16, "test: spans");
    s.spans = spans, s.nspans = 3;
    int64_t seen = 0, bad = 0;
    if (rc == DS_OK)
        rc = rows_begin(ctx, &s);
    for (; rc == DS_OK;) {
        ds_mat C;
        const double *yc;
        rc = rows_next(ctx, &s, &C, &yc);
        if (rc != DS_OK || C.rows == 0)
            break;
        ctx->be->download(ctx, hx, C.data, (size_t)C.rows * COLS * 8);
        ctx->be->download(ctx, hy, yc, (size_t)C.rows * 8);
        for (int64_t i = 0; i < C.rows; i++, seen++)
            bad += seen >= nwant || hy[i] != -(double)want[seen] || hx[i * COLS + 4] != (double)want[seen] * 8 + 4.25;
    }
    const int end = rows_end(ctx, &s);
    CHECK(rc == DS_OK && end == DS_OK && seen == nwant && bad == 0, "spans: rc %d, %lld rows of %lld, %lld wrong", rc,
          (long long)seen, (long long)nwant, (long long)bad);
    CHECK(s.spans == NULL, "spans: still set after the pass");
    pass(ctx, &s, row0, 0, &bad, &rc);
    CHECK(rc == DS_OK && bad == 0, "the pass after spans: rc %d, %lld wrong", rc, (long long)bad);
    rows_close(ctx, &s);
    free(hx);
    free(hy);
}

// One windowed pass: every chunk holds the window's columns of its rows (win: the window as given, in
// any order; want: the columns expected, ascending); returns the rows seen, counting mismatches in *bad.
static int64_t window_pass(ds_ctx *ctx, ds_rows *s, const int64_t *win, int nwin, const int *want, int nwant,
                           const int64_t *rows_want, int64_t *bad, int *rc)
{
    int64_t seen = 0;
    double *hx = malloc((size_t)s->chunk_rows * COLS * 8), *hy = malloc((size_t)s->chunk_rows * 8);
    rows_window(s, win, nwin);
    *bad += s->nwin > ROWS_WINDOW_MAX;
    for (int j = 0; j < nwant; j++)  // where each wanted column sits in the chunks
        *bad += rows_window_col(s, want[j]) != j;
    *rc = rows_begin(ctx, s);
    for (; *rc == DS_OK;) {
        ds_mat C;
        const double *yc;
        *rc = rows_next(ctx, s, &C, &yc);
        if (*rc != DS_OK || C.rows == 0)
            break;
        *bad += C.cols != nwant;
        ctx->be->download(ctx, hx, C.data, (size_t)C.rows * nwant * 8);
        ctx->be->download(ctx, hy, yc, (size_t)C.rows * 8);
        for (int64_t i = 0; i < C.rows; i++, seen++) {
            const int64_t r = rows_want[seen];
            *bad += hy[i] != -(double)r;
            for (int j = 0; j < nwant; j++)
                *bad += hx[i * nwant + j] != (double)r * 8 + want[j] + 0.25;
        }
    }
    const int end = rows_end(ctx, s);
    *rc = *rc == DS_OK ? end : *rc;
    *bad += s->nwin != 0;  // the window is the pass's only
    free(hx);
    free(hy);
    return seen;
}

// The file test_rows_window.h5: the producer's rows 0 .. rows−1.
static int window_file(ds_ctx *ctx, int64_t rows, const char *path)
{
    double *X = malloc((size_t)rows * COLS * 8), *y = malloc((size_t)rows * 8);
    int rc = produce(&(prod){-1}, 0, rows, X, y, &ctx->msg);
    if (rc == DS_OK)
        rc = h5io_create_lsq(path, "X", "y", rows, COLS, 0, 16, &ctx->msg);
    if (rc == DS_OK)
        rc = h5io_write_rows(path, "X", 0, rows, COLS, 0, X, &ctx->msg);
    if (rc == DS_OK)
        rc = h5io_write_rows(path, "y", 0, rows, 0, 0, y, &ctx->msg);
    free(X);
    free(y);
    return rc;
}

// Windows of one range, of two (given out of order), of ranges that touch (one range) and of every
// column, over a producer (whole rows produced, then packed), memory (strided copies) and a file
// (rows_open_h5, as a producer); then spans with a window, and a pass without one after them.
static void check_window(ds_ctx *ctx)
{
    const int64_t rows = 257, all[] = {0, 0, 0, 0};
    const int64_t wins[][4] = {{1, 3, 3, 3}, {3, 5, 0, 1}, {2, 3, 0, 2}, {0, 5, 2, 4}};
    const int nwins[] = {1, 2, 2, 2}, wants[][5] = {{1, 2}, {0, 3, 4}, {0, 1, 2}, {0, 1, 2, 3, 4}};
    const int nwants[] = {2, 3, 3, 5};
    int64_t order[257];
    for (int64_t r = 0; r < rows; r++)
        order[r] = r;
    // A directory of its own (rows_cpu_np1 and rows_gpu_np1 may run side by side under ctest -j).
    if (!test_tmp_open("rows"))
        return;
    char path[600];
    snprintf(path, sizeof path, "%s", test_tmp_path("window.h5"));
    void *X = NULL, *Xp = NULL;  // pinned (on a device backend) and pageable
    double *y = NULL, *yp = NULL;
    int rc = window_file(ctx, rows, path);
    if (rc == DS_OK)
        rc = memory_rows(ctx, 0, 0, rows, &X, &y);
    if (rc == DS_OK)
        rc = memory_rows(ctx, 1, 0, rows, &Xp, &yp);
    CHECK(rc == DS_OK, "window: setup: %s", ctx->msg.text);
    for (int src = 0; rc == DS_OK && src < 4; src++) {
        static const char *names[] = {"producer", "memory", "file", "pageable memory"};
        const int memory = src == 1 || src == 3;
        ds_rows s;
        rc = src == 0 ? rows_open(ctx, &s, produce, &(prod){-1}, 0, rows, COLS, 0, 16, "test: window")
             : src == 1 ? rows_open_memory(ctx, &s, X, y, 0, rows, COLS, 0, 16, 0, "test: window")
             : src == 3 ? rows_open_memory(ctx, &s, Xp, yp, 0, rows, COLS, 0, 16, 1, "test: window")
                        : rows_open_h5(ctx, &s, path, "X", "y", 0, rows, COLS, 0, 16, "test: window");
        CHECK(rc == DS_OK, "window %s: open: %s", names[src], ctx->msg.text);
        for (int w = 0; rc == DS_OK && w < 4; w++) {
            int64_t bad = 0;
            const double before = s.bytes;
            const int64_t seen = window_pass(ctx, &s, wins[w], nwins[w], wants[w], nwants[w], order, &bad, &rc);
            const double read = rows * ((memory ? nwants[w] : COLS) + 1) * 8.0;
            CHECK(rc == DS_OK && seen == rows && bad == 0 && s.bytes - before == read,
                  "window %s %d: rc %d (%s), %lld rows of %lld, %lld wrong, %.0f bytes", names[src], w, rc,
                  ctx->msg.text, (long long)seen, (long long)rows, (long long)bad, s.bytes - before);
        }
        if (rc == DS_OK && !memory) {  // spans: the rows 3..9 and 100..256, columns 1 and 3..4
            const int64_t spans[] = {3, 10, 100, 257};
            int64_t want_rows[257], n = 0, bad = 0;
            for (int i = 0; i < 2; i++)
                for (int64_t r = spans[2 * i]; r < spans[2 * i + 1]; r++)
                    want_rows[n++] = r;
            s.spans = spans, s.nspans = 2;
            const int64_t seen = window_pass(ctx, &s, (const int64_t[]){3, 5, 1, 2}, 2, (const int[]){1, 3, 4}, 3,
                                             want_rows, &bad, &rc);
            CHECK(rc == DS_OK && seen == n && bad == 0, "window %s with spans: rc %d, %lld rows of %lld, %lld wrong",
                  names[src], rc, (long long)seen, (long long)n, (long long)bad);
            window_pass(ctx, &s, all, 0, (const int[]){0, 1, 2, 3, 4}, 5, order, &bad, &rc);
            CHECK(rc == DS_OK && bad == 0, "window %s: the pass after: rc %d, %lld wrong", names[src], rc, (long long)bad);
        }
        rows_close(ctx, &s);
    }
    memory_free(ctx, 0, X, y);
    memory_free(ctx, 1, Xp, yp);
    test_tmp_remove();
}

static void check_failure(ds_ctx *ctx)
{
    prod p = {150};
    ds_rows s;
    int rc = rows_open(ctx, &s, produce, &p, 0, 300, COLS, 0, 16, "test: streaming");
    int64_t bad = 0;
    if (rc == DS_OK)
        pass(ctx, &s, 0, 0, &bad, &rc);
    CHECK(rc == DS_ERR_INPUT && strstr(ctx->msg.text, "bad row 150"), "a failing producer: rc %d, \"%s\"", rc,
          ctx->msg.text);
    ctx->msg.text[0] = '\0';
    rows_close(ctx, &s);
}

static void check_caps(ds_ctx *ctx)
{
    rows_caps caps = {.backend = 1e6, .host = 1e6};
    double least[2];
    const int64_t r = rows_chunk_for(ctx, &caps, 1000000, 100, 0, 2e5, 8, least);
    CHECK(r >= ROWS_MIN_CHUNK && r * 2.0 * 808 + r * 8 + 2e5 <= 1e6, "chunk %lld rows under a 1 MB cap", (long long)r);
    caps.backend = least[0] - 1;
    CHECK(rows_chunk_for(ctx, &caps, 1000000, 100, 0, 2e5, 8, least) == 0, "a cap below the minimum %g", least[0]);
    caps.backend = 1e12;
    CHECK(rows_chunk_for(ctx, &caps, 10, 100, 0, 2e5, 8, least) == 10, "the chunk is at most the rank's rows");
}

// --rate FILE CHUNK: h5io_read_lsq_rows by chunks, then a pass of the row source, each twice.
static int rate(ds_ctx *ctx, const char *path, int64_t chunk)
{
    ds_data d = {0};
    DS_CHECK(data_probe_lsq(ctx, path, "X", "y", 0, &d));
    const double bytes = (double)d.X.rows * (d.X.cols * 8 + 8);
    double *X = malloc((size_t)chunk * d.X.cols * 8), *y = malloc((size_t)chunk * 8);
    for (int rep = 0; rep < 2; rep++) {
        double t = MPI_Wtime();
        for (int64_t r0 = 0; r0 < d.X.rows; r0 += chunk) {
            const int64_t nr = d.X.rows - r0 < chunk ? d.X.rows - r0 : chunk;
            DS_CHECK(h5io_read_lsq_rows(path, "X", "y", d.row0 + r0, nr, d.X.cols, 0, X, y, NULL, &ctx->msg));
        }
        t = MPI_Wtime() - t;
        printf("rank %d: h5io_read_lsq_rows by %lld rows: %.3f s, %.2f GB/s\n", ctx->rank, (long long)chunk, t,
               bytes / t / 1e9);
    }
    ds_rows s;
    DS_CHECK(rows_open_h5(ctx, &s, path, "X", "y", d.row0, d.X.rows, d.X.cols, 0, chunk, "rate"));
    for (int rep = 0; rep < 2; rep++) {
        double t = MPI_Wtime();
        DS_CHECK(rows_begin(ctx, &s));
        for (ds_mat C = {.rows = 1}; C.rows > 0;) {
            const double *yc;
            DS_CHECK(rows_next(ctx, &s, &C, &yc));
        }
        DS_CHECK(rows_end(ctx, &s));
        t = MPI_Wtime() - t;
        printf("rank %d: row source pass by %lld rows: %.3f s, %.2f GB/s\n", ctx->rank, (long long)chunk, t,
               bytes / t / 1e9);
    }
    rows_close(ctx, &s);
    free(X);
    free(y);
    return DS_OK;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    if (gpu && !test_gpus_for_all()) {
        MPI_Finalize();
        return 77;
    }
    ds_ctx ctx;
    if (ctx_open(&ctx, MPI_COMM_WORLD, gpu ? "cuda" : "cpu") != DS_OK) {
        fprintf(stderr, "test_rows: %s\n", ctx.msg.text);
        MPI_Finalize();
        return 1;
    }
    int rc = 0;
    if (argc > 3 && strcmp(argv[1], "--rate") == 0) {
        rc = rate(&ctx, argv[2], atoll(argv[3]));
        if (rc != DS_OK)
            fprintf(stderr, "test_rows: %s\n", ctx.msg.text);
    } else {
        check_chunks(&ctx);
        check_memory(&ctx, 0);
        check_memory(&ctx, 1);
        check_spans(&ctx);
        check_window(&ctx);
        check_failure(&ctx);
        check_caps(&ctx);
    }
    ctx_close(&ctx);
    if (!(argc > 3 && strcmp(argv[1], "--rate") == 0))
        rc = test_finish(gpu ? "test_rows gpu" : "test_rows");
    MPI_Finalize();
    return rc;
}
