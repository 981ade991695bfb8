// test_backend_ops_core.c: test_backend_ops's cases of ds_backend's own operations: fill, gather, upload
// and download, copy and alltoallv (exact: bit for bit) and allreduce_sum (within rounding), against the
// CPU backend (gpu mode) or the loops here.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"

static const int64_t core_sizes[] = {0, 1, 3, 17, 130, 1001};
enum { NCORE = sizeof core_sizes / sizeof core_sizes[0], GUARD = 3 };

static int fill_on(ds_ctx *c, const double *init, int64_t n, double value, double *out)
{
    ops_mem m = {c};
    double *x = ops_put(&m, init, (size_t)(n + GUARD) * sizeof(double));
    int rc = ops_ran(c, c->be->fill(c, x, n, value), "fill");
    ops_get(&m, out, x, (size_t)(n + GUARD) * sizeof(double));
    ops_release(&m);
    return rc;
}

// x[0 .. n) = value, the GUARD entries after them untouched; value −0.0 once (its sign must survive).
void case_fill(ops_run *r)
{
    for (int s = 0; s < NCORE; s++) {
        const int64_t n = ops_dim(r, core_sizes[s]), len = n + GUARD;
        ops_mem h = {NULL};
        double *init = ops_new(&h, (size_t)len * 8), *got = ops_new(&h, (size_t)len * 8);
        double *want = ops_new(&h, (size_t)len * 8), value;
        ops_fill(r, init, len, -1, 1, 1);
        ops_fill(r, &value, 1, -4, 4, 0);
        value = s == 2 ? -0.0 : value;
        int st = fill_on(r->dut, init, n, value, got);
        if (r->cpu) {
            st |= fill_on(r->cpu, init, n, value, want);
        } else {
            memcpy(want, init, (size_t)len * 8);
            for (int64_t i = 0; i < n; i++)
                want[i] = value;
        }
        char shape[64];
        snprintf(shape, sizeof shape, "n %lld value %g", (long long)n, value);
        ops_report(r, "fill", shape, "f64", ops_err_bytes(got, want, len, 8), 0, st);
        ops_release(&h);
    }
}

static int gather_on(ds_ctx *c, const double *src, int64_t n, int64_t stride, const double *init, double *out)
{
    ops_mem m = {c};
    const double *s = ops_put(&m, src, (size_t)(n * stride) * sizeof(double));
    double *d = ops_put(&m, init, (size_t)(n + GUARD) * sizeof(double));
    int rc = ops_ran(c, c->be->gather(c, d, s, n, stride), "gather");
    ops_get(&m, out, d, (size_t)(n + GUARD) * sizeof(double));
    ops_release(&m);
    return rc;
}

// dst[i] = src[i·stride], the GUARD entries after dst's n untouched.
void case_gather(ops_run *r)
{
    const int64_t strides[] = {1, 3, 17};
    for (int s = 0; s < NCORE; s++)
        for (int t = 0; t < 3; t++) {
            const int64_t n = ops_dim(r, core_sizes[s]), stride = strides[t], len = n + GUARD;
            ops_mem h = {NULL};
            double *src = ops_new(&h, (size_t)(n * stride) * 8), *init = ops_new(&h, (size_t)len * 8);
            double *got = ops_new(&h, (size_t)len * 8), *want = ops_new(&h, (size_t)len * 8);
            ops_fill(r, src, n * stride, -1, 1, 1);
            ops_fill(r, init, len, -1, 1, 1);
            int st = gather_on(r->dut, src, n, stride, init, got);
            if (r->cpu) {
                st |= gather_on(r->cpu, src, n, stride, init, want);
            } else {
                memcpy(want, init, (size_t)len * 8);
                for (int64_t i = 0; i < n; i++)
                    want[i] = src[i * stride];
            }
            char shape[64];
            snprintf(shape, sizeof shape, "n %lld stride %lld", (long long)n, (long long)stride);
            ops_report(r, "gather", shape, "f64", ops_err_bytes(got, want, len, 8), 0, st);
            ops_release(&h);
        }
}

static void random_bytes(ops_run *r, uint8_t *b, int64_t n)
{
    const uint64_t s = ops_stream(r);
    for (int64_t i = 0; i < n; i++)
        b[i] = (uint8_t)ops_bits(r, s, r->rank, i);
}

// Upload src and download it again (into back, unless NULL), then copy bytes from src + so to dst + sd
// (dst uploaded from init) and download dst (out).
static int copy_on(ds_ctx *c, const uint8_t *src, const uint8_t *init, int64_t len, int64_t bytes, int64_t so,
                   int64_t sd, uint8_t *back, uint8_t *out)
{
    ops_mem m = {c};
    uint8_t *s = ops_put(&m, src, (size_t)len), *d = ops_put(&m, init, (size_t)len);
    if (back)
        ops_get(&m, back, s, (size_t)len);
    int rc = ops_ran(c, c->be->copy(c, d + sd, s + so, (size_t)bytes), "copy");
    ops_get(&m, out, d, (size_t)len);
    ops_release(&m);
    return rc;
}

// upload then download gives the bytes back; copy moves bytes between odd offsets and nothing else.
void case_copy(ops_run *r)
{
    const int64_t offsets[][2] = {{0, 0}, {1, 5}, {7, 0}};
    for (int s = 0; s < NCORE + 1; s++) {
        const int64_t bytes = s < NCORE ? ops_dim(r, core_sizes[s]) : ((int64_t)1 << 20) + 7, len = bytes + 16;
        const int64_t so = offsets[s % 3][0], sd = offsets[s % 3][1];
        ops_mem h = {NULL};
        uint8_t *src = ops_new(&h, (size_t)len), *init = ops_new(&h, (size_t)len), *back = ops_new(&h, (size_t)len);
        uint8_t *got = ops_new(&h, (size_t)len), *want = ops_new(&h, (size_t)len);
        random_bytes(r, src, len);
        random_bytes(r, init, len);
        int st = copy_on(r->dut, src, init, len, bytes, so, sd, back, got);
        const double err_back = ops_err_bytes(back, src, len, 1);
        if (r->cpu) {
            st |= copy_on(r->cpu, src, init, len, bytes, so, sd, NULL, want);
        } else {
            memcpy(want, init, (size_t)len);
            memcpy(want + sd, src + so, (size_t)bytes);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "%lld bytes", (long long)len);
        ops_report(r, "upload+download", shape, "u8", err_back, 0, DS_OK);
        snprintf(shape, sizeof shape, "%lld bytes, src +%lld, dst +%lld", (long long)bytes, (long long)so,
                 (long long)sd);
        ops_report(r, "copy", shape, "u8", ops_err_bytes(got, want, len, 1), 0, st);
        ops_release(&h);
    }
}

// Fills block p (n doubles) with v, then reads its first, middle and last windows back: the count of
// entries that are not v (n + 1 when an op failed).
static int64_t alloc_check(ds_ctx *c, double *p, int64_t n, double v, double *host, int64_t win)
{
    if (ops_ran(c, c->be->fill(c, p, n, v), "fill") != DS_OK)
        return n + 1;
    int64_t bad = 0;
    const int64_t at[3] = {0, n / 2 - win / 2, n - win};
    for (int w = 0; w < 3; w++) {
        if (ops_ran(c, c->be->download(c, host, p + at[w], (size_t)win * sizeof(double)), "download") != DS_OK)
            return n + 1;
        for (int64_t i = 0; i < win; i++)
            bad += host[i] != v;
    }
    return bad;
}

// Blocks allocated, freed and allocated again in the orders that the CUDA backend's kept block
// (backend_cuda_mem.c: one freed block of 256 MB or more handed to the next allocation it fits) takes
// each way: reused by a slightly smaller request, left alone by a small one, given back before a larger
// one; every block written and read back while the others live. Large blocks on a GPU, small on the CPU.
void case_alloc(ops_run *r)
{
    ds_ctx *c = r->dut;
    const int64_t big = r->cpu ? (int64_t)40 << 20 : (int64_t)1 << 20, win = 1 << 16;  // doubles
    const int64_t sizes[5] = {big, big - 1000, big, big / 3, 2 * big + 4096};
    double *host = malloc((size_t)win * sizeof(double)), *p[5] = {NULL};
    int64_t bad = host ? 0 : 1;
    int st = host ? DS_OK : DS_ERR_RUNTIME;
    for (int k = 0; k < 5 && st == DS_OK; k++) {
        st = ops_ran(c, c->be->alloc(c, (void **)&p[k], (size_t)sizes[k] * sizeof(double)), "alloc");
        if (st != DS_OK)
            break;
        bad += alloc_check(c, p[k], sizes[k], 1.0 + k, host, win);
        if (k == 2)  // blocks 1 and 2 live together: 1 still holds its values
            bad += alloc_check(c, p[1], sizes[1], 2.0, host, win);
        if (k == 0 || k >= 2) {  // block 0 freed at once (kept), 1 and 2 after both were written, then each
            c->be->free(c, p[k]);
            p[k] = NULL;
        }
        if (k == 2) {
            c->be->free(c, p[1]);
            p[1] = NULL;
        }
    }
    for (int k = 0; k < 5; k++)
        c->be->free(c, p[k]);
    free(host);
    char shape[64];
    snprintf(shape, sizeof shape, "blocks of %lld to %lld doubles", (long long)sizes[3], (long long)sizes[4]);
    ops_report(r, "alloc", shape, "f64", (double)bad, 0, st);
}

static int allreduce_on(ds_ctx *c, const double *x, int64_t n, double *out)
{
    ops_mem m = {c};
    double *b = ops_put(&m, x, (size_t)n * sizeof(double));
    int rc = ops_ran(c, c->be->allreduce_sum(c, b, n), "allreduce_sum");
    ops_get(&m, out, b, (size_t)n * sizeof(double));
    ops_release(&m);
    return rc;
}

// The sum over the ranks; each entry's scale is Σ_ranks |x| (every rank regenerates the others' inputs),
// tol 2·p·u.
void case_allreduce_sum(ops_run *r)
{
    for (int s = 0; s < NCORE + 1; s++) {
        const int64_t n = s < NCORE ? ops_dim(r, core_sizes[s]) : 130001;
        const uint64_t stream = ops_stream(r);
        ops_mem h = {NULL};
        double *x = ops_new(&h, (size_t)n * 8), *got = ops_new(&h, (size_t)n * 8), *want = ops_new(&h, (size_t)n * 8);
        double *scale = ops_new(&h, (size_t)n * 8);
        for (int64_t i = 0; i < n; i++)
            x[i] = 2 * ops_uniform(r, stream, r->rank, i) - 1;
        for (int who = 0; who < r->nranks; who++)
            for (int64_t i = 0; i < n; i++) {
                const double v = 2 * ops_uniform(r, stream, who, i) - 1;
                want[i] += v;
                scale[i] += fabs(v);
            }
        int st = allreduce_on(r->dut, x, n, got);
        if (r->cpu)
            st |= allreduce_on(r->cpu, x, n, want);
        char shape[64];
        snprintf(shape, sizeof shape, "n %lld", (long long)n);
        const double tol = 2.0 * r->nranks * OPS_U64;
        ops_report(r, "allreduce_sum", shape, "f64", ops_err_each(got, want, scale, n), tol, st);
        ops_release(&h);
    }
}

// The pair src → dst of an exchange: its byte count (a third are empty) and byte i of its block.
static int64_t a2a_count(const ops_run *r, uint64_t s, int src, int dst, int64_t maxc)
{
    const double u = ops_uniform(r, s, OPS_SHARED, (int64_t)src * r->nranks + dst);
    return u < 0.3 ? 0 : (int64_t)(u * (double)maxc);
}

static uint8_t a2a_byte(const ops_run *r, uint64_t s, int src, int dst, int64_t i)
{
    return (uint8_t)ops_bits(r, s + 1, src, ((int64_t)dst << 40) + i);
}

typedef struct a2a_plan {
    int64_t *sc, *sd, *rc, *rd;  // [p] each: byte counts and displacements
    int64_t sbytes, rbytes;
} a2a_plan;

// Send blocks in reverse rank order and receive blocks in rank order, GUARD bytes after each.
static void a2a_make(const ops_run *r, ops_mem *h, uint64_t s, int64_t maxc, a2a_plan *p)
{
    const int np = r->nranks;
    int64_t *v = ops_new(h, (size_t)(4 * np) * sizeof(int64_t));
    p->sc = v, p->sd = v + np, p->rc = v + 2 * np, p->rd = v + 3 * np;
    p->sbytes = p->rbytes = 0;
    for (int q = np - 1; q >= 0; q--) {
        p->sc[q] = a2a_count(r, s, r->rank, q, maxc);
        p->sd[q] = p->sbytes;
        p->sbytes += p->sc[q] + GUARD;
    }
    for (int q = 0; q < np; q++) {
        p->rc[q] = a2a_count(r, s, q, r->rank, maxc);
        p->rd[q] = p->rbytes;
        p->rbytes += p->rc[q] + GUARD;
    }
}

static int a2a_on(ds_ctx *c, const a2a_plan *p, const uint8_t *send, const uint8_t *init, uint8_t *out)
{
    ops_mem m = {c};
    const uint8_t *s = ops_put(&m, send, (size_t)p->sbytes);
    uint8_t *d = ops_put(&m, init, (size_t)p->rbytes);
    int rc = ops_ran(c, c->be->alltoallv(c, s, p->sc, p->sd, d, p->rc, p->rd), "alltoallv");
    ops_get(&m, out, d, (size_t)p->rbytes);
    ops_release(&m);
    return rc;
}

// Every received block holds its sender's bytes; the gaps between them keep their guard bytes.
void case_alltoallv(ops_run *r)
{
    const int64_t maxcs[] = {0, 1, 17, 1001, 70001};
    for (int k = 0; k < 5; k++) {
        const int64_t maxc = ops_dim(r, maxcs[k]);
        const uint64_t s = ops_stream(r);
        ops_stream(r);  // s + 1: the bytes
        ops_mem h = {NULL};
        a2a_plan p;
        a2a_make(r, &h, s, maxc, &p);
        uint8_t *send = ops_new(&h, (size_t)p.sbytes), *init = ops_new(&h, (size_t)p.rbytes);
        uint8_t *got = ops_new(&h, (size_t)p.rbytes), *want = ops_new(&h, (size_t)p.rbytes);
        memset(send, 0x11, (size_t)p.sbytes);
        memset(init, 0xA5, (size_t)p.rbytes);
        for (int q = 0; q < r->nranks; q++)
            for (int64_t i = 0; i < p.sc[q]; i++)
                send[p.sd[q] + i] = a2a_byte(r, s, r->rank, q, i);
        int st = a2a_on(r->dut, &p, send, init, got);
        if (r->cpu) {
            st |= a2a_on(r->cpu, &p, send, init, want);
        } else {
            memcpy(want, init, (size_t)p.rbytes);
            for (int q = 0; q < r->nranks; q++)
                for (int64_t i = 0; i < p.rc[q]; i++)
                    want[p.rd[q] + i] = a2a_byte(r, s, q, r->rank, i);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "pairs of 0 .. %lld bytes", (long long)maxc);
        ops_report(r, "alltoallv", shape, "u8", ops_err_bytes(got, want, p.rbytes, 1), 0, st);
        ops_release(&h);
    }
}

