// backend_cpu.c: the reference backend: host memory, OpenBLAS (all of the rank's cores) and MPI.
// The CUDA backend is tested against it.
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend_cpu.h"

// The workload tables (solve/solve_cpu.c, ann/ann_cpu.c, sort/sort_cpu.c, logreg/logreg_cpu.c,
// bench/bench_cpu.c).
extern const solve_ops solve_ops_cpu;
extern const ann_ops ann_ops_cpu;
extern const sort_ops sort_ops_cpu;
extern const lr_ops lr_ops_cpu;
extern const bench_ops bench_ops_cpu;

typedef struct cpu_state {
    double marks[DS_MARKS];
    int64_t a2a_chunk;  // bytes per MPI message of alltoallv (DS_CPU_A2A_CHUNK unless a test sets it)
    double *scratch;  // float rows converted to double, and per-chunk products
    size_t scratch_len;
} cpu_state;

static cpu_state *cpu_st(ds_ctx *ctx) { return (cpu_state *)ctx->be_state; }

static int cpu_open(ds_ctx *ctx)
{
    cpu_state *st = calloc(1, sizeof(cpu_state));
    ctx->be_state = st;
    if (!st)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    st->a2a_chunk = DS_CPU_A2A_CHUNK;
    const char *s = getenv("DSOLVE_TEST_A2A_CHUNK");
    if (s && *s) {
        char *end = NULL;
        long long v = strtoll(s, &end, 10);
        if (*end != '\0' || v < 1 || v > DS_CPU_A2A_CHUNK)
            return ds_fail(&ctx->msg, DS_ERR_USAGE, "DSOLVE_TEST_A2A_CHUNK must be bytes in 1 .. %lld, not \"%s\"",
                           (long long)DS_CPU_A2A_CHUNK, s);
        st->a2a_chunk = v;
    }
    // OpenBLAS's threads: the rank's cores (ctx_cores; OpenBLAS alone would give every rank all of the
    // node's), unless OPENBLAS_NUM_THREADS says otherwise.
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (!env || !*env)
        openblas_set_num_threads(ctx_cores(ctx));
    return DS_OK;
}

static void cpu_close(ds_ctx *ctx)
{
    cpu_state *st = cpu_st(ctx);
    if (st)
        free(st->scratch);
    free(st);
    ctx->be_state = NULL;
}

double *cpu_scratch(ds_ctx *ctx, size_t len)
{
    cpu_state *st = cpu_st(ctx);
    if (st->scratch_len < len) {
        free(st->scratch);
        st->scratch = malloc(len * sizeof(double));
        st->scratch_len = st->scratch ? len : 0;
    }
    return st->scratch;
}

static int cpu_alloc(ds_ctx *ctx, void **ptr, size_t bytes)
{
    size_t rounded = bytes > SIZE_MAX - 64 ? 0 : (bytes + 63) / 64 * 64;
    *ptr = rounded || !bytes ? aligned_alloc(64, rounded ? rounded : 64) : NULL;
    if (!*ptr)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory allocating %.2f GiB on rank %d",
                       (double)bytes / (1 << 30), ctx->rank);
    return DS_OK;
}

static void cpu_free(ds_ctx *ctx, void *ptr) { free(ptr); }

static int cpu_memcpy(ds_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memmove(dst, src, bytes);
    return DS_OK;
}

static int cpu_fill(ds_ctx *ctx, double *x, int64_t n, double value)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = value;
    return DS_OK;
}

static int cpu_gather(ds_ctx *ctx, double *dst, const double *src, int64_t n, int64_t stride)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = src[i * stride];
    return DS_OK;
}

static int cpu_sync(ds_ctx *ctx) { return DS_OK; }

static int cpu_axpy(ds_ctx *ctx, double *y, const double *x, int64_t n, double alpha)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
    return DS_OK;
}

// Staging on a host backend: the copy is done when stage returns, so there is nothing to wait for.
static int cpu_stage(ds_ctx *ctx, int slot, void *dst, const void *src, size_t bytes)
{
    DS_ASSERT(slot >= 0 && slot < DS_STAGES);
    return cpu_memcpy(ctx, dst, src, bytes);
}

static int cpu_stage_2d(ds_ctx *ctx, int slot, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                        size_t height)
{
    DS_ASSERT(slot >= 0 && slot < DS_STAGES);
    for (size_t i = 0; i < height; i++)
        memcpy((char *)dst + i * dpitch, (const char *)src + i * spitch, width);
    return DS_OK;
}

static int cpu_stage_point(ds_ctx *ctx, int slot)
{
    DS_ASSERT(slot >= 0 && slot < DS_STAGES);
    return DS_OK;
}

static int cpu_mark(ds_ctx *ctx, int slot)
{
    DS_ASSERT(slot >= 0 && slot < DS_MARKS);
    cpu_st(ctx)->marks[slot] = MPI_Wtime();
    return DS_OK;
}

static int cpu_elapsed(ds_ctx *ctx, int from, int to, double *seconds)
{
    *seconds = cpu_st(ctx)->marks[to] - cpu_st(ctx)->marks[from];
    return DS_OK;
}

static int cpu_allreduce_sum(ds_ctx *ctx, double *buf, int64_t count)
{
    if (ctx->nranks == 1)
        return DS_OK;
    for (int64_t done = 0; done < count;) {
        int part = count - done > INT_MAX / 2 ? INT_MAX / 2 : (int)(count - done);
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + done, part, MPI_DOUBLE, MPI_SUM, ctx->comm);
        if (rc != MPI_SUCCESS)
            return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "MPI_Allreduce failed on rank %d", ctx->rank);
        done += part;
    }
    return DS_OK;
}

// One round of alltoallv: piece k (bytes k·chunk .. (k+1)·chunk) of every pair that has one. Both sides
// of a pair agree on whether the piece exists because their counts match. Returns 1 in *more when some
// pair of this rank has a later piece.
static int cpu_a2a_round(ds_ctx *ctx, const char *send, const int64_t *scount, const int64_t *sdispl, char *recv,
                         const int64_t *rcount, const int64_t *rdispl, int64_t k, MPI_Request *req, int *more)
{
    const int64_t chunk = cpu_st(ctx)->a2a_chunk, off = k * chunk;
    int nreq = 0;
    *more = 0;
    for (int r = 0; r < ctx->nranks; r++) {
        if (r == ctx->rank)
            continue;
        if (rcount[r] > off) {
            int part = (int)(rcount[r] - off < chunk ? rcount[r] - off : chunk);
            *more |= rcount[r] - off > chunk;
            if (MPI_Irecv(recv + rdispl[r] + off, part, MPI_BYTE, r, 71, ctx->comm, &req[nreq++]) != MPI_SUCCESS)
                return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "MPI_Irecv failed on rank %d", ctx->rank);
        }
        if (scount[r] > off) {
            int part = (int)(scount[r] - off < chunk ? scount[r] - off : chunk);
            *more |= scount[r] - off > chunk;
            if (MPI_Isend(send + sdispl[r] + off, part, MPI_BYTE, r, 71, ctx->comm, &req[nreq++]) != MPI_SUCCESS)
                return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "MPI_Isend failed on rank %d", ctx->rank);
        }
    }
    if (MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "MPI_Waitall in alltoallv failed on rank %d", ctx->rank);
    return DS_OK;
}

// Point-to-point in rounds of at most one piece per pair, so no MPI count exceeds int and at most
// 2·(p − 1) requests are open. A rank with fewer pieces than a peer leaves the loop early; the peer's
// later rounds then only involve ranks that still have pieces.
static int cpu_alltoallv(ds_ctx *ctx, const void *send, const int64_t *scount, const int64_t *sdispl, void *recv,
                         const int64_t *rcount, const int64_t *rdispl)
{
    DS_ASSERT(scount[ctx->rank] == rcount[ctx->rank]);
    if (scount[ctx->rank] > 0)
        memcpy((char *)recv + rdispl[ctx->rank], (const char *)send + sdispl[ctx->rank], (size_t)scount[ctx->rank]);
    if (ctx->nranks == 1)
        return DS_OK;
    MPI_Request *req = malloc(2 * (size_t)ctx->nranks * sizeof *req);
    if (!req)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int rc = DS_OK, more = 1;
    for (int64_t k = 0; more && rc == DS_OK; k++)
        rc = cpu_a2a_round(ctx, send, scount, sdispl, recv, rcount, rdispl, k, req, &more);
    free(req);
    return rc;
}

// Rough rates of one rank: FP64 matrix product (its share of the node's cores), memory bandwidth, the
// Gram sweeps' reads of G, and one block step (an MPI allreduce when there are several ranks).
static void cpu_costs(const ds_ctx *ctx, ds_costs *c)
{
    const double cores = (double)sysconf(_SC_NPROCESSORS_ONLN) / (ctx->local_size > 0 ? ctx->local_size : 1);
    c->flops = 15e9 * (cores > 1 ? cores : 1);
    c->bandwidth = 8e9;
    c->sweep_bandwidth = 20e9;
    c->latency = ctx->nranks > 1 ? 20e-6 : 1e-6;
}

const ds_backend ds_backend_cpu = {
    .name = "cpu",
    .host_memory = 1,
    .open = cpu_open,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .fill = cpu_fill,
    .gather = cpu_gather,
    .sync = cpu_sync,
    .axpy = cpu_axpy,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .stage = cpu_stage,
    .stage_2d = cpu_stage_2d,
    .stage_wait = cpu_stage_point,
    .stage_release = cpu_stage_point,
    .mark = cpu_mark,
    .elapsed = cpu_elapsed,
    .allreduce_sum = cpu_allreduce_sum,
    .alltoallv = cpu_alltoallv,
    .costs = cpu_costs,
    .solve = &solve_ops_cpu,
    .ann = &ann_ops_cpu,
    .sort = &sort_ops_cpu,
    .logreg = &lr_ops_cpu,
    .bench = &bench_ops_cpu,
};
