// bench_cases.c: the matmul and add cases of `dsolve bench` (solve is in bench_solve.c): the same
// inputs on the CPU (OpenBLAS, threaded loop) and the GPU (cuBLAS, a vectorised kernel), timed, with
// the GPU's result checked against the CPU's, and the GPU's ceiling (cuBLAS alone, the device copy)
// measured in the same run.
// provides: bench_case_matmul, bench_case_add
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/data.h"

// The checked result is perturbed (DSOLVE_BENCH_CORRUPT=1) on the last rank, so the tests can see
// the check and its reduction over ranks fail.
static void maybe_corrupt(const bench_run *b, void *got, int64_t index, int f32, double by)
{
    if (!b->corrupt || b->cpu.rank != b->cpu.nranks - 1)
        return;
    if (f32)
        ((float *)got)[index] += (float)by;
    else
        ((double *)got)[index] += by;
}

// The rank's rows of a size split over the ranks (strong) or every rank's own copy of it (weak).
static void split_rows(const bench_run *b, int64_t global, int64_t *row0, int64_t *rows, int64_t *total)
{
    if (b->weak) {
        *rows = global;
        *row0 = global * b->cpu.rank;
        *total = global * b->cpu.nranks;
    } else {
        data_partition(global, b->cpu.nranks, b->cpu.rank, row0, rows);
        *total = global;
    }
}

static int split_ok(const bench_run *b, const char *what, int64_t global, ds_msg *msg)
{
    if (!b->weak && global < b->cpu.nranks)
        return ds_fail(msg, DS_ERR_INPUT, "bench %s = %lld is fewer than the %d ranks (strong scaling splits it over them)",
                       what, (long long)global, b->cpu.nranks);
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// matmul: C = A·B, A sharded by rows, B on every rank (broadcast from rank 0 on the GPU)

typedef struct mm_shape {
    int64_t m, n, k;        // global M, N, K
    int64_t row0, rows, m_all;  // this rank's rows of A and C; all ranks' rows
    size_t es;
} mm_shape;

static void mm_shape_of(const bench_run *b, int64_t size, mm_shape *s)
{
    const ds_args *a = &b->args;
    int given = opts_given(a, "m");
    s->m = given ? opts_int(a, "m") : size;
    s->n = given ? opts_int(a, "n") : size;
    s->k = given ? opts_int(a, "k") : size;
    s->es = b->f32 ? 4 : 8;
    split_rows(b, s->m, &s->row0, &s->rows, &s->m_all);
}

static int mm_need(bench_run *b, int64_t size, double *host, double *dev, ds_msg *msg)
{
    mm_shape s;
    mm_shape_of(b, size, &s);
    DS_CHECK(split_ok(b, "matmul: M", s.m, msg));
    if (s.n > INT_MAX || s.k > INT_MAX || s.rows > INT_MAX)
        return ds_fail(msg, DS_ERR_INPUT, "bench matmul: %lld x %lld x %lld: BLAS takes dimensions up to %d",
                       (long long)s.m, (long long)s.n, (long long)s.k, INT_MAX);
    double a = (double)s.rows * s.k * s.es, bb = (double)s.k * s.n * s.es, c = (double)s.rows * s.n * s.es;
    *host = a + bb + 2 * c;  // A, B, the CPU's C and the GPU's C brought back (less when the CPU is not timed)
    *dev = a + bb + c;
    return DS_OK;
}

typedef struct mm_call {
    const bench_ops *ops;
    const mm_shape *s;
    int f32;
    const void *A, *B;
    void *C;
    // with --include-transfer (GPU): the host inputs copied in and the result copied out on every call
    const void *hA, *hB;
    void *hC;
} mm_call;

static int mm_fn(ds_ctx *ctx, void *arg)
{
    mm_call *c = arg;
    const mm_shape *s = c->s;
    if (c->hA) {
        DS_CHECK(ctx->be->upload(ctx, (void *)c->A, c->hA, (size_t)(s->rows * s->k) * s->es));
        DS_CHECK(ctx->be->upload(ctx, (void *)c->B, c->hB, (size_t)(s->k * s->n) * s->es));
    }
    DS_CHECK(c->ops->gemm(ctx, c->f32, s->rows, s->n, s->k, c->A, c->B, c->C));
    if (c->hC)
        DS_CHECK(ctx->be->download(ctx, c->hC, c->C, (size_t)(s->rows * s->n) * s->es));
    return DS_OK;
}

// The rows of this rank's C that a sampled check compares: up to 8, first and last among them (fewer
// for the plain loop, which is slow). Returns their number.
static int mm_sample(const mm_shape *s, int loop, int64_t *idx)
{
    const double per = (double)s->n * (double)s->k;
    int ns = loop ? (int)fmin(8.0, fmax(1.0, 2e8 / per)) : 8;
    ns = s->rows < ns ? (int)s->rows : ns;
    for (int r = 0; r < ns; r++)
        idx[r] = ns > 1 ? r * (s->rows - 1) / (ns - 1) : 0;
    return ns;
}

// The slowest rank's value of a per-rank time, once all ranks agree that it was measured.
static int max_over_ranks(bench_run *b, ds_ctx *ctx, int rc, double *seconds)
{
    DS_CHECK(bench_agree(b, ctx, rc));
    MPI_Allreduce(MPI_IN_PLACE, seconds, 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
    return DS_OK;
}

// B from rank 0 to every GPU (the other ranks' device B holds only what the broadcast brings), timed
// after one untimed broadcast (NCCL connects its rings on first use).
static int mm_gpu_bcast(bench_run *b, const mm_shape *s, void *dB, bench_row *row)
{
    ds_ctx *g = &b->gpu;
    if (g->nranks == 1)
        return DS_OK;
    double t = 0;
    int rc = g->be->bench->bcast(g, dB, (size_t)(s->k * s->n) * s->es, 0);
    if (rc == DS_OK)
        rc = g->be->mark(g, 2);
    if (rc == DS_OK)
        rc = g->be->bench->bcast(g, dB, (size_t)(s->k * s->n) * s->es, 0);
    if (rc == DS_OK)
        rc = g->be->mark(g, 3);
    if (rc == DS_OK)
        rc = g->be->elapsed(g, 2, 3, &t);
    DS_CHECK(max_over_ranks(b, g, rc, &t));
    row->bcast_s = t;
    return DS_OK;
}

// C back to the host: all of it (full), or only the sampled rows, one after another.
static int mm_gpu_result(ds_ctx *g, const mm_shape *s, const void *dC, void *hG, int full)
{
    const size_t row_bytes = (size_t)s->n * s->es;
    if (full)
        return g->be->download(g, hG, dC, (size_t)s->rows * row_bytes);
    int64_t idx[8];
    const int ns = mm_sample(s, 0, idx);
    for (int r = 0; r < ns; r++)
        DS_CHECK(g->be->download(g, (char *)hG + (size_t)r * row_bytes, (const char *)dC + (size_t)idx[r] * row_bytes,
                                 row_bytes));
    return DS_OK;
}

// The GPU's time, cuBLAS alone and the result in hG (all of C when full, else the sampled rows).
static int mm_gpu_timed(bench_run *b, const mm_shape *s, void *dA, void *dB, void *dC, const void *hA,
                        const void *hB, void *hG, int full, bench_row *row)
{
    ds_ctx *g = &b->gpu;
    int tr = b->include_transfer;
    mm_call call = {g->be->bench, s, b->f32, dA, dB, dC, tr ? hA : NULL, tr ? hB : NULL, tr ? hG : NULL};
    DS_CHECK(bench_time(b, g, mm_fn, &call, &row->gpu_s));
    double alone = 0;
    int rc = g->be->bench->gemm_alone(g, b->f32, s->rows, s->n, s->k, dA, dB, dC, b->repeat, &alone);
    DS_CHECK(max_over_ranks(b, g, rc, &alone));
    row->ref_s = alone;
    row->ref_rate = row->work / alone / 1e9;
    return bench_agree(b, g, mm_gpu_result(g, s, dC, hG, full));
}

static int mm_gpu(bench_run *b, const mm_shape *s, const void *hA, const void *hB, void *hG, int full, bench_row *row)
{
    ds_ctx *g = &b->gpu;
    const ds_backend *be = g->be;
    void *dA = NULL, *dB = NULL, *dC = NULL;
    int rc = be->alloc(g, &dA, (size_t)(s->rows * s->k) * s->es);
    if (rc == DS_OK)
        rc = be->alloc(g, &dB, (size_t)(s->k * s->n) * s->es);
    if (rc == DS_OK)
        rc = be->alloc(g, &dC, (size_t)(s->rows * s->n) * s->es);
    if (rc == DS_OK)
        rc = be->upload(g, dA, hA, (size_t)(s->rows * s->k) * s->es);
    if (rc == DS_OK && g->rank == 0)
        rc = be->upload(g, dB, hB, (size_t)(s->k * s->n) * s->es);
    rc = bench_agree(b, g, rc);
    if (rc == DS_OK)
        rc = mm_gpu_bcast(b, s, dB, row);
    if (rc == DS_OK)
        rc = mm_gpu_timed(b, s, dA, dB, dC, hA, hB, hG, full, row);
    be->free(g, dA);
    be->free(g, dB);
    be->free(g, dC);
    return rc;
}

// Rows of A·B by a plain triple loop (the CPU-only check of OpenBLAS), or by OpenBLAS on those rows
// alone (the check of a GPU result whose CPU run was skipped). idx: ns row indices.
static int mm_ref_rows(bench_run *b, const mm_shape *s, const void *hA, const void *hB, const int64_t *idx, int ns,
                       int loop, double *ref)
{
    void *As = NULL, *Cs = NULL;
    DS_CHECK(bench_host_alloc(b, &As, (double)ns * s->k * s->es));
    int rc = bench_host_alloc(b, &Cs, (double)ns * s->n * s->es);
    for (int r = 0; rc == DS_OK && r < ns; r++)
        memcpy((char *)As + (size_t)(r * s->k) * s->es, (const char *)hA + (size_t)(idx[r] * s->k) * s->es,
               (size_t)s->k * s->es);
    if (rc == DS_OK && !loop)
        rc = b->cpu.be->bench->gemm(&b->cpu, b->f32, ns, s->n, s->k, As, hB, Cs);
    for (int64_t e = 0; rc == DS_OK && e < ns * s->n; e++) {
        int64_t r = e / s->n, j = e % s->n;
        double acc = 0;
        if (loop)
            for (int64_t l = 0; l < s->k; l++)
                acc += b->f32 ? (double)((const float *)As)[r * s->k + l] * ((const float *)hB)[l * s->n + j]
                              : ((const double *)As)[r * s->k + l] * ((const double *)hB)[l * s->n + j];
        else
            acc = b->f32 ? ((const float *)Cs)[e] : ((const double *)Cs)[e];
        ref[e] = acc;
    }
    free(As);
    free(Cs);
    return rc;
}

// Sampled rows of got (all rows × n, or only the sampled rows when compact) against reference rows;
// err and wrong into the row.
static int mm_check_rows(bench_run *b, const mm_shape *s, const void *hA, const void *hB, const void *got,
                         int compact, int loop, bench_row *row)
{
    int64_t idx[8];
    const int ns = mm_sample(s, loop, idx);
    double *ref = NULL, *g = NULL;
    DS_CHECK(bench_host_alloc(b, (void **)&ref, (double)ns * s->n * 8));
    int rc = bench_host_alloc(b, (void **)&g, (double)ns * s->n * 8);
    if (rc == DS_OK)
        rc = mm_ref_rows(b, s, hA, hB, idx, ns, loop, ref);
    for (int64_t e = 0; rc == DS_OK && e < ns * s->n; e++) {
        int64_t i = (compact ? e / s->n : idx[e / s->n]) * s->n + e % s->n;
        g[e] = b->f32 ? ((const float *)got)[i] : ((const double *)got)[i];
    }
    if (rc == DS_OK)
        bench_compare(g, ref, ns * s->n, 0, 0.25 * (double)s->k, row->tol, &row->err, &row->wrong);
    snprintf(row->check, sizeof row->check, "%s, %d sampled rows per rank", loop ? "cpu vs plain loop" : "cuda vs cpu",
             ns);
    free(ref);
    free(g);
    return rc;
}

static int mm_run(bench_run *b, int64_t size, bench_row *row)
{
    mm_shape s;
    mm_shape_of(b, size, &s);
    snprintf(row->shape, sizeof row->shape, "%lldx%lldx%lld", (long long)s.m_all, (long long)s.n, (long long)s.k);
    row->work = 2.0 * (double)s.m_all * (double)s.n * (double)s.k;
    // Inputs are uniform in [−½, ½): |C_ij| ≤ K/4, and the error of either product is a small multiple of
    // ε·K/4 (γ_K bounds, far smaller in practice); a wrong element is off by far more.
    row->tol = 100 * (b->f32 ? FLT_EPSILON : DBL_EPSILON);
    const int cpu_run = bench_cpu_wanted(b, row->work, 5e9 * b->threads * b->cpu.nranks);
    void *hA = NULL, *hB = NULL, *hC = NULL, *hG = NULL;
    int rc = bench_host_alloc(b, &hA, (double)(s.rows * s.k) * s.es);
    if (rc == DS_OK)
        rc = bench_host_alloc(b, &hB, (double)(s.k * s.n) * s.es);
    if (rc == DS_OK && cpu_run)
        rc = bench_host_alloc(b, &hC, (double)(s.rows * s.n) * s.es);
    // Without the CPU's full C to compare with, only the sampled rows of the GPU's come back.
    const int full = cpu_run || b->include_transfer;
    if (rc == DS_OK && b->have_gpu)
        rc = bench_host_alloc(b, &hG, (double)((full ? s.rows : 8) * s.n) * s.es);
    rc = bench_agree(b, &b->cpu, rc);
    if (rc == DS_OK) {
        bench_fill(b, hA, s.rows * s.k, b->f32, 1, s.row0 * s.k);
        bench_fill(b, hB, s.k * s.n, b->f32, 2, 0);
    }
    mm_call call = {b->cpu.be->bench, &s, b->f32, hA, hB, hC, NULL, NULL, NULL};
    if (rc == DS_OK && cpu_run)
        rc = bench_time(b, &b->cpu, mm_fn, &call, &row->cpu_s);
    if (rc == DS_OK && b->have_gpu)
        rc = mm_gpu(b, &s, hA, hB, hG, full, row);
    void *got = b->have_gpu ? hG : hC;
    if (rc == DS_OK)
        maybe_corrupt(b, got, s.n / 2, b->f32, 0.25 * (double)s.k);
    if (rc == DS_OK && b->have_gpu && cpu_run) {
        bench_compare(hG, hC, s.rows * s.n, b->f32, 0.25 * s.k, row->tol, &row->err, &row->wrong);
        snprintf(row->check, sizeof row->check, "cuda vs cpu, all elements");
    } else if (rc == DS_OK) {
        rc = mm_check_rows(b, &s, hA, hB, got, b->have_gpu && !full, !b->have_gpu, row);
    }
    free(hA);
    free(hB);
    free(hC);
    free(hG);
    return rc;
}

const bench_case bench_case_matmul = {
    .name = "matmul",
    .about = "C = A·B (GEMM; A sharded by rows, B on every rank); GFLOP/s",
    .unit = "GFLOP/s",
    .size_label = "N",
    .default_sizes = "10:10000:x10",
    .ref_label = "cuBLAS alone (back-to-back GEMMs between two events)",
    .need = mm_need,
    .run = mm_run,
};

// ---------------------------------------------------------------------------------------------------
// add: c = a + b, the vectors sharded over the ranks

typedef struct add_shape {
    int64_t n, row0, rows, n_all;  // the size; this rank's elements; all ranks' elements
    size_t es;
} add_shape;

static void add_shape_of(const bench_run *b, int64_t size, add_shape *s)
{
    s->n = size;
    s->es = b->f32 ? 4 : 8;
    split_rows(b, size, &s->row0, &s->rows, &s->n_all);
}

static int add_need(bench_run *b, int64_t size, double *host, double *dev, ds_msg *msg)
{
    add_shape s;
    add_shape_of(b, size, &s);
    DS_CHECK(split_ok(b, "add: N", size, msg));
    *host = 4.0 * (double)s.rows * s.es;  // a, b, the CPU's c, the GPU's c brought back
    *dev = 3.0 * (double)s.rows * s.es;
    return DS_OK;
}

typedef struct add_call {
    const bench_ops *ops;
    int f32;
    int64_t n;
    size_t es;
    const void *a, *b;
    void *c;
    const void *ha, *hb;  // --include-transfer (GPU)
    void *hc;
} add_call;

static int add_fn(ds_ctx *ctx, void *arg)
{
    add_call *c = arg;
    if (c->ha) {
        DS_CHECK(ctx->be->upload(ctx, (void *)c->a, c->ha, (size_t)c->n * c->es));
        DS_CHECK(ctx->be->upload(ctx, (void *)c->b, c->hb, (size_t)c->n * c->es));
    }
    DS_CHECK(c->ops->add(ctx, c->f32, c->n, c->a, c->b, c->c));
    if (c->hc)
        DS_CHECK(ctx->be->download(ctx, c->hc, c->c, (size_t)c->n * c->es));
    return DS_OK;
}

// The GPU's time and result (in hG), then the device copy's bandwidth over the same bytes.
static int add_gpu_timed(bench_run *b, const add_shape *s, void *da, void *db, void *dc, const void *ha,
                         const void *hb, void *hG, bench_row *row)
{
    ds_ctx *g = &b->gpu;
    int tr = b->include_transfer;
    add_call call = {g->be->bench, b->f32, s->rows, s->es, da, db, dc, tr ? ha : NULL, tr ? hb : NULL, tr ? hG : NULL};
    DS_CHECK(bench_time(b, g, add_fn, &call, &row->gpu_s));
    DS_CHECK(bench_agree(b, g, g->be->download(g, hG, dc, (size_t)s->rows * s->es)));
    double copy = 0;
    int rc = g->be->bench->copy_alone(g, dc, da, (size_t)s->rows * s->es, b->repeat, &copy);
    DS_CHECK(max_over_ranks(b, g, rc, &copy));
    row->ref_s = copy;
    row->ref_rate = 2.0 * (double)s->n_all * (double)s->es / copy / 1e9;  // read + write, as the add's rate counts
    return DS_OK;
}

static int add_gpu(bench_run *b, const add_shape *s, const void *ha, const void *hb, void *hG, bench_row *row)
{
    ds_ctx *g = &b->gpu;
    const ds_backend *be = g->be;
    const size_t bytes = (size_t)s->rows * s->es;
    void *da = NULL, *db = NULL, *dc = NULL;
    int rc = be->alloc(g, &da, bytes);
    if (rc == DS_OK)
        rc = be->alloc(g, &db, bytes);
    if (rc == DS_OK)
        rc = be->alloc(g, &dc, bytes);
    if (rc == DS_OK)
        rc = be->upload(g, da, ha, bytes);
    if (rc == DS_OK)
        rc = be->upload(g, db, hb, bytes);
    rc = bench_agree(b, g, rc);
    if (rc == DS_OK)
        rc = add_gpu_timed(b, s, da, db, dc, ha, hb, hG, row);
    be->free(g, da);
    be->free(g, db);
    be->free(g, dc);
    return rc;
}

// The CPU-only check: the threaded add against a plain one-thread loop into want.
static void add_loop(int f32, int64_t n, const void *a, const void *b, void *want)
{
    for (int64_t i = 0; i < n; i++)
        if (f32)
            ((float *)want)[i] = ((const float *)a)[i] + ((const float *)b)[i];
        else
            ((double *)want)[i] = ((const double *)a)[i] + ((const double *)b)[i];
}

static int add_run(bench_run *b, int64_t size, bench_row *row)
{
    add_shape s;
    add_shape_of(b, size, &s);
    snprintf(row->shape, sizeof row->shape, "%lld", (long long)s.n_all);
    row->work = 3.0 * (double)s.n_all * (double)s.es;  // bytes: read a and b, write c
    row->tol = b->f32 ? FLT_EPSILON : DBL_EPSILON;    // a + b is one correctly rounded operation: expect 0
    const int cpu_run = bench_cpu_wanted(b, row->work, 2e9 * b->threads * b->cpu.nranks);
    const double bytes = (double)s.rows * s.es;
    void *ha = NULL, *hb = NULL, *hc = NULL, *hg = NULL;
    int rc = bench_host_alloc(b, &ha, bytes);
    if (rc == DS_OK)
        rc = bench_host_alloc(b, &hb, bytes);
    if (rc == DS_OK)
        rc = bench_host_alloc(b, &hc, bytes);
    if (rc == DS_OK)
        rc = bench_host_alloc(b, &hg, bytes);
    rc = bench_agree(b, &b->cpu, rc);
    if (rc == DS_OK) {
        bench_fill(b, ha, s.rows, b->f32, 3, s.row0);
        bench_fill(b, hb, s.rows, b->f32, 4, s.row0);
    }
    add_call call = {b->cpu.be->bench, b->f32, s.rows, s.es, ha, hb, hc, NULL, NULL, NULL};
    if (rc == DS_OK)
        rc = cpu_run ? bench_time(b, &b->cpu, add_fn, &call, &row->cpu_s) : add_fn(&b->cpu, &call);
    if (rc == DS_OK && b->have_gpu)
        rc = add_gpu(b, &s, ha, hb, hg, row);
    if (rc == DS_OK) {
        if (!b->have_gpu)
            add_loop(b->f32, s.rows, ha, hb, hg);
        void *got = b->have_gpu ? hg : hc, *want = b->have_gpu ? hc : hg;
        maybe_corrupt(b, got, s.rows / 2, b->f32, 1.0);
        bench_compare(got, want, s.rows, b->f32, 1.0, row->tol, &row->err, &row->wrong);
        snprintf(row->check, sizeof row->check, "%s, all elements",
                 b->have_gpu ? "cuda vs cpu" : "cpu threads vs plain loop");
    }
    free(ha);
    free(hb);
    free(hc);
    free(hg);
    return rc;
}

const bench_case bench_case_add = {
    .name = "add",
    .about = "c = a + b on vectors sharded over the ranks; GB/s (read a and b, write c)",
    .unit = "GB/s",
    .size_label = "N",
    .default_sizes = "1e3:1e8:x10",
    .ref_label = "device-to-device cudaMemcpy, GB/s read + written",
    .need = add_need,
    .run = add_run,
};
