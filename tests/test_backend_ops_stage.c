// test_backend_ops_stage.c: test_backend_ops's cases of the streaming ops of ds_backend: axpy (within
// one rounding of each term) and host_alloc, stage, stage_2d, stage_wait and stage_release (exact: bit for bit),
// against the CPU backend (gpu mode) or the loops here.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_ops.h"

static const int64_t stage_sizes[] = {0, 1, 3, 17, 130, 1001, 262147};
enum { NSTAGE = sizeof stage_sizes / sizeof stage_sizes[0], GUARD = 3 };

static int axpy_on(ds_ctx *c, const double *y0, const double *x, int64_t n, double alpha, double *out)
{
    ops_mem m = {c};
    double *y = ops_put(&m, y0, (size_t)(n + GUARD) * sizeof(double));
    const double *xd = ops_put(&m, x, (size_t)(n + GUARD) * sizeof(double));
    int rc = ops_ran(c, c->be->axpy(c, y, xd, n, alpha), "axpy");
    ops_get(&m, out, y, (size_t)(n + GUARD) * sizeof(double));
    ops_release(&m);
    return rc;
}

// y[0 .. n) += alpha·x, the GUARD entries after them untouched; entry i within 2u of |y_i| + |alpha·x_i|
// (a fused multiply-add or not).
void case_axpy(ops_run *r)
{
    const double alphas[] = {1.0, -0.75, 3.5};
    for (int s = 0; s < NSTAGE; s++) {
        const int64_t n = ops_dim(r, stage_sizes[s]), len = n + GUARD;
        const double alpha = alphas[s % 3];
        ops_mem h = {NULL};
        double *y0 = ops_new(&h, (size_t)len * 8), *x = ops_new(&h, (size_t)len * 8);
        double *got = ops_new(&h, (size_t)len * 8), *want = ops_new(&h, (size_t)len * 8);
        double *scale = ops_new(&h, (size_t)len * 8);
        ops_fill(r, y0, len, -1, 1, 1);
        ops_fill(r, x, len, -1, 1, 1);
        int st = axpy_on(r->dut, y0, x, n, alpha, got);
        memcpy(want, y0, (size_t)len * 8);
        for (int64_t i = 0; i < n; i++)
            want[i] = y0[i] + alpha * x[i];
        for (int64_t i = 0; i < len; i++)
            scale[i] = i < n ? fabs(y0[i]) + fabs(alpha * x[i]) : 0.0;  // the guard: exact
        char shape[64];
        snprintf(shape, sizeof shape, "n %lld alpha %g", (long long)n, alpha);
        ops_report(r, "axpy", shape, "f64", ops_err_each(got, want, scale, len), 2.0 * OPS_U64, st);
        ops_release(&h);
    }
}

// Through the staging ops as core/rows.c uses them: host_alloc'ed buffers refilled while earlier stages
// are in flight, each slot's backend buffer read (downloaded) before its release, DS_STAGES slots in
// turn over more chunks than slots: every byte arrives, in every slot, and nothing past a chunk.
static int stage_on(ds_ctx *c, const uint8_t *src, int64_t chunk, int chunks, uint8_t *out)
{
    const ds_backend *be = c->be;
    ops_mem m = {c};
    void *host[DS_STAGES] = {NULL};
    uint8_t *dev[DS_STAGES];
    int rc = DS_OK;
    for (int k = 0; k < DS_STAGES; k++) {
        rc = rc == DS_OK ? ops_ran(c, be->host_alloc(c, &host[k], (size_t)chunk + 1), "host_alloc") : rc;
        dev[k] = ops_put(&m, out, (size_t)chunk + 1);  // out's first bytes: a known background
    }
    for (int i = 0; rc == DS_OK && i < chunks; i++) {
        const int k = i % DS_STAGES;
        if (i >= DS_STAGES)
            rc = ops_ran(c, be->stage_wait(c, k), "stage_wait");
        if (rc == DS_OK) {
            memcpy(host[k], src + i * chunk, (size_t)chunk);
            rc = ops_ran(c, be->stage(c, k, dev[k], host[k], (size_t)chunk), "stage");
        }
        if (rc == DS_OK) {
            ops_get(&m, out + (size_t)i * (size_t)(chunk + 1), dev[k], (size_t)chunk + 1);
            rc = ops_ran(c, be->stage_release(c, k), "stage_release");
        }
    }
    for (int k = 0; k < DS_STAGES && rc == DS_OK && k < chunks; k++)
        rc = ops_ran(c, be->stage_wait(c, k), "stage_wait");
    for (int k = 0; k < DS_STAGES; k++)
        if (host[k])
            be->host_free(c, host[k]);
    ops_release(&m);
    return rc;
}

void case_stage(ops_run *r)
{
    for (int s = 1; s < NSTAGE; s++) {
        const int64_t chunk = ops_dim(r, stage_sizes[s]);
        const int chunks = 2 * DS_STAGES + 1;
        const int64_t len = chunk * chunks, olen = (chunk + 1) * chunks;
        ops_mem h = {NULL};
        uint8_t *src = ops_new(&h, (size_t)len), *got = ops_new(&h, (size_t)olen), *want = ops_new(&h, (size_t)olen);
        const uint64_t st_ = ops_stream(r);
        for (int64_t i = 0; i < len; i++)
            src[i] = (uint8_t)ops_bits(r, st_, r->rank, i);
        memset(got, 0xA5, (size_t)olen);  // the background each device buffer starts from
        int st = stage_on(r->dut, src, chunk, chunks, got);
        for (int i = 0; i < chunks; i++) {  // chunk i, then the byte after it, never written
            memcpy(want + i * (chunk + 1), src + i * chunk, (size_t)chunk);
            want[i * (chunk + 1) + chunk] = 0xA5;
        }
        char shape[64];
        snprintf(shape, sizeof shape, "%d chunks of %lld bytes", chunks, (long long)chunk);
        ops_report(r, "stage", shape, "u8", ops_err_bytes(got, want, olen, 1), 0, st);
        ops_release(&h);
    }
}

// stage_2d as core/rows.c uses it for a column window: two column ranges of a row-major host matrix
// (rows × cols bytes) packed side by side into backend memory, over DS_STAGES slots in turn, each
// slot's buffer read before its release; the bytes past the packed rows are never written.
static int stage_2d_on(ds_ctx *c, const uint8_t *src, int64_t rows, int64_t cols, const int64_t win[4], int reps,
                       uint8_t *out)
{
    const ds_backend *be = c->be;
    const int64_t w = win[1] - win[0] + win[3] - win[2], len = rows * w + 1;
    ops_mem m = {c};
    void *host = NULL;
    uint8_t *dev[DS_STAGES];
    int rc = ops_ran(c, be->host_alloc(c, &host, (size_t)(rows * cols) + 1), "host_alloc");
    if (rc == DS_OK)
        memcpy(host, src, (size_t)(rows * cols));
    for (int k = 0; k < DS_STAGES; k++)
        dev[k] = ops_put(&m, out, (size_t)len);  // out's first bytes: a known background
    for (int i = 0; rc == DS_OK && i < reps; i++) {
        const int k = i % DS_STAGES;
        rc = ops_ran(c, be->stage_2d(c, k, dev[k], (size_t)w, (const uint8_t *)host + win[0], (size_t)cols,
                                     (size_t)(win[1] - win[0]), (size_t)rows), "stage_2d");
        if (rc == DS_OK)
            rc = ops_ran(c, be->stage_2d(c, k, dev[k] + (win[1] - win[0]), (size_t)w, (const uint8_t *)host + win[2],
                                         (size_t)cols, (size_t)(win[3] - win[2]), (size_t)rows), "stage_2d");
        if (rc == DS_OK) {
            ops_get(&m, out + (size_t)i * (size_t)len, dev[k], (size_t)len);
            rc = ops_ran(c, be->stage_release(c, k), "stage_release");
        }
    }
    for (int k = 0; k < DS_STAGES && rc == DS_OK && k < reps; k++)
        rc = ops_ran(c, be->stage_wait(c, k), "stage_wait");
    if (host)
        be->host_free(c, host);
    ops_release(&m);
    return rc;
}

void case_stage_2d(ops_run *r)
{
    // rows × cols, and the window's two ranges [a, b) and [c, d) of columns (bytes)
    const int64_t shapes[][6] = {{1, 8, 0, 1, 7, 8}, {17, 100, 3, 40, 40, 41}, {1001, 808, 0, 200, 600, 808},
                                 {3, 5, 0, 0, 2, 5}, {0, 16, 0, 8, 8, 16}};
    for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
        const int64_t rows = shapes[q][0], cols = shapes[q][1], *win = shapes[q] + 2;
        const int64_t w = win[1] - win[0] + win[3] - win[2], len = rows * w + 1;
        const int reps = DS_STAGES + 1;
        ops_mem h = {NULL};
        uint8_t *src = ops_new(&h, (size_t)(rows * cols) + 1), *got = ops_new(&h, (size_t)(len * reps));
        uint8_t *want = ops_new(&h, (size_t)(len * reps));
        const uint64_t st_ = ops_stream(r);
        for (int64_t i = 0; i < rows * cols; i++)
            src[i] = (uint8_t)ops_bits(r, st_, r->rank, i);
        memset(got, 0xA5, (size_t)(len * reps));
        int st = stage_2d_on(r->dut, src, rows, cols, win, reps, got);
        for (int i = 0; i < reps; i++) {
            uint8_t *o = want + i * len;
            for (int64_t row = 0; row < rows; row++) {
                memcpy(o + row * w, src + row * cols + win[0], (size_t)(win[1] - win[0]));
                memcpy(o + row * w + win[1] - win[0], src + row * cols + win[2], (size_t)(win[3] - win[2]));
            }
            o[rows * w] = 0xA5;
        }
        char shape[96];
        snprintf(shape, sizeof shape, "%lld x %lld bytes, columns %lld..%lld and %lld..%lld", (long long)rows,
                 (long long)cols, (long long)win[0], (long long)win[1], (long long)win[2], (long long)win[3]);
        ops_report(r, "stage_2d", shape, "u8", ops_err_bytes(got, want, len * reps, 1), 0, st);
        ops_release(&h);
    }
}
