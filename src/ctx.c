// ctx.c: the run context: node-local rank, backend choice (auto, cpu, cuda), device, agreement.
#define _GNU_SOURCE  // sched_getaffinity, CPU_COUNT
#include "ctx.h"

#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

static void ctx_find_local_rank(ds_ctx *ctx)
{
    MPI_Comm node;
    MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &ctx->local_rank);
    MPI_Comm_size(node, &ctx->local_size);
    MPI_Comm_free(&node);
}

int ctx_cores(const ds_ctx *ctx)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN), cores = online / (ctx->local_size > 0 ? ctx->local_size : 1);
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) == 0 && CPU_COUNT(&mask) < online)
        cores = CPU_COUNT(&mask);
    return cores < 1 ? 1 : cores > INT_MAX ? INT_MAX : (int)cores;
}

// Every rank must have a GPU of its own for CUDA: local ranks ≤ local GPUs on every node.
static int ctx_gpus_for_all(ds_ctx *ctx, int *min_gpus)
{
    int gpus = 0;
#ifdef DSOLVE_HAVE_CUDA
    gpus = ds_cuda_device_count();
#endif
    int enough = ctx->local_size <= gpus, all_enough = 0;
    MPI_Allreduce(&enough, &all_enough, 1, MPI_INT, MPI_MIN, ctx->comm);
    MPI_Allreduce(&gpus, min_gpus, 1, MPI_INT, MPI_MIN, ctx->comm);
    return all_enough;
}

static int ctx_choose_backend(ds_ctx *ctx, const char *choice)
{
    int min_gpus = 0;
    const int all = ctx_gpus_for_all(ctx, &min_gpus);
#ifndef DSOLVE_HAVE_CUDA
    (void)all;
    if (strcmp(choice, "cuda") == 0)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "--backend cuda: this dsolve was built without CUDA (DSOLVE_CUDA=OFF)");
    ctx->be = &ds_backend_cpu;
    if (strcmp(choice, "auto") == 0)
        snprintf(ctx->backend_note, sizeof ctx->backend_note, "built without CUDA");
    return DS_OK;
#else
    if (strcmp(choice, "cpu") == 0) {
        ctx->be = &ds_backend_cpu;
        return DS_OK;
    }
    if (all) {
        ctx->be = &ds_backend_cuda;
        ctx->device = ctx->local_rank;
        return DS_OK;
    }
    if (strcmp(choice, "cuda") == 0)
        return ds_fail(&ctx->msg, DS_ERR_USAGE,
                       "--backend cuda: %d ranks on host %s but %d usable GPUs there (one rank per GPU)",
                       ctx->local_size, ctx->host, min_gpus);
    ctx->be = &ds_backend_cpu;
    if (min_gpus == 0)
        snprintf(ctx->backend_note, sizeof ctx->backend_note, "no usable GPU on at least one host");
    else
        snprintf(ctx->backend_note, sizeof ctx->backend_note,
                 "more ranks than GPUs on at least one host (%d ranks on %s, fewest GPUs on a host %d)",
                 ctx->local_size, ctx->host, min_gpus);
    return DS_OK;
#endif
}

int ctx_open(ds_ctx *ctx, MPI_Comm comm, const char *backend)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->comm = comm;
    ctx->device = -1;
    MPI_Comm_rank(comm, &ctx->rank);
    MPI_Comm_size(comm, &ctx->nranks);
    gethostname(ctx->host, sizeof ctx->host - 1);
    ctx_find_local_rank(ctx);
    int rc = ctx_choose_backend(ctx, backend);
    rc = ctx_agree(ctx, rc);
    if (rc != DS_OK)
        return rc;
    rc = ctx->be->open(ctx);  // collective; agrees internally before any collective that could hang
    rc = ctx_agree(ctx, rc);
    if (rc != DS_OK) {
        ctx->be->close(ctx);
        ctx->be = NULL;
        return rc;
    }
#ifdef DSOLVE_HAVE_CUDA
    if (ctx->be == &ds_backend_cuda)
        ds_cuda_device_name(ctx, ctx->device_name, sizeof ctx->device_name);
#endif
    if (ctx->device_name[0] == '\0')
        snprintf(ctx->device_name, sizeof ctx->device_name, "CPU (%ld cores)", sysconf(_SC_NPROCESSORS_ONLN));
    return DS_OK;
}

void ctx_close(ds_ctx *ctx)
{
    if (ctx->be)
        ctx->be->close(ctx);
    ctx->be = NULL;
}

int ctx_agree(ds_ctx *ctx, int status)
{
    if (ctx->agreed_failure != DS_OK)  // every rank already knows: no further collective
        return ctx->agreed_failure;
    int key = status != DS_OK ? ctx->rank : ctx->nranks, first = 0;
    MPI_Allreduce(&key, &first, 1, MPI_INT, MPI_MIN, ctx->comm);
    if (first == ctx->nranks)
        return DS_OK;
    int shared = status;
    MPI_Bcast(&shared, 1, MPI_INT, first, ctx->comm);
    MPI_Bcast(ctx->msg.text, sizeof ctx->msg.text, MPI_CHAR, first, ctx->comm);
    ctx->agreed_failure = shared;
    return shared;
}

void ctx_log(const ds_ctx *ctx, const char *fmt, ...)
{
    if (ctx->rank != 0 || ctx->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}
