// ctx.c: the run context: node-local rank, backend choice (auto or a name from the registry), device,
// agreement.
#define _GNU_SOURCE  // sched_getaffinity, CPU_COUNT
#include "core/ctx.h"

#include "core/watchdog.h"

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

// Every rank must have a device of its own for a device backend: local ranks ≤ local devices on every
// node. Collective.
static int ctx_devices_for_all(ds_ctx *ctx, const ds_backend *be, int *min_devices)
{
    int devices = be->device_count();
    int enough = ctx->local_size <= devices, all_enough = 0;
    MPI_Allreduce(&enough, &all_enough, 1, MPI_INT, MPI_MIN, ctx->comm);
    MPI_Allreduce(&devices, min_devices, 1, MPI_INT, MPI_MIN, ctx->comm);
    return all_enough;
}

// A backend named on the command line: the host one, or a device one when every rank has a device.
static int ctx_take_named(ds_ctx *ctx, const char *choice)
{
    const char *why = NULL;
    const ds_backend *be = ds_backend_find(choice, &why);
    if (!be)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "--backend %s: %s", choice, why);
    int min_devices = 0;
    if (be->device_count && !ctx_devices_for_all(ctx, be, &min_devices))
        return ds_fail(&ctx->msg, DS_ERR_USAGE,
                       "--backend %s: %d ranks on host %s but %d usable GPUs there (one rank per GPU)", choice,
                       ctx->local_size, ctx->host, min_devices);
    ctx->be = be;
    if (be->device_count)
        ctx->device = ctx->local_rank;
    return DS_OK;
}

// auto: the first device backend of the registry that gives every rank a device of its own, else the
// host backend with a note saying why.
static int ctx_take_auto(ds_ctx *ctx)
{
    const char *why = NULL;
    const ds_backend *dev = ds_backend_device(&why);
    ctx->be = ds_backend_host();
    if (!dev) {
        snprintf(ctx->backend_note, sizeof ctx->backend_note, "%s", why);
        return DS_OK;
    }
    int min_devices = 0;
    if (ctx_devices_for_all(ctx, dev, &min_devices)) {
        ctx->be = dev;
        ctx->device = ctx->local_rank;
    } else if (min_devices == 0) {
        snprintf(ctx->backend_note, sizeof ctx->backend_note, "no usable GPU on at least one host");
    } else {
        snprintf(ctx->backend_note, sizeof ctx->backend_note,
                 "more ranks than GPUs on at least one host (%d ranks on %s, fewest GPUs on a host %d)",
                 ctx->local_size, ctx->host, min_devices);
    }
    return DS_OK;
}

static int ctx_choose_backend(ds_ctx *ctx, const char *choice)
{
    return strcmp(choice, "auto") == 0 ? ctx_take_auto(ctx) : ctx_take_named(ctx, choice);
}

// The process's watchdog, shared by its contexts (bench opens two).
static ds_watchdog *ctx_watchdog;
static int ctx_watchdog_refs;

static int ctx_timeout_env(ds_ctx *ctx, double *seconds)
{
    *seconds = WATCHDOG_DEFAULT_S;
    const char *s = getenv("DSOLVE_TIMEOUT");
    if (!s || !*s)
        return DS_OK;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v >= 0.0 && v <= 1e9))
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "DSOLVE_TIMEOUT must be seconds between 0 and 1e9, not \"%s\"", s);
    *seconds = v;
    return DS_OK;
}

// The thread runs from the first ctx_open for the whole run, even with no deadline (it then idles), so that
// every rank maps the node's shared file once.
static void ctx_watch(const ds_ctx *ctx, double seconds)
{
    ctx_watchdog = watchdog_start(seconds > 0 ? seconds : 1e9, ctx->job_tag, ctx->rank, ctx->nranks,
                                  ctx->local_rank, ctx->local_size);
    watchdog_set_timeout(ctx_watchdog, seconds);
}

void ctx_set_timeout(ds_ctx *ctx, double seconds)
{
    (void)ctx;
    watchdog_set_timeout(ctx_watchdog, seconds);
}

void ctx_beat(const ds_ctx *ctx, const char *phase)
{
    (void)ctx;
    watchdog_beat(ctx_watchdog, phase);
}

int ctx_open(ds_ctx *ctx, MPI_Comm comm, const char *backend)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->comm = comm;
    ctx->device = -1;
    MPI_Comm_rank(comm, &ctx->rank);
    MPI_Comm_size(comm, &ctx->nranks);
    gethostname(ctx->host, sizeof ctx->host - 1);
    ctx->job_tag = ctx_process_tag();
    MPI_Bcast(&ctx->job_tag, 1, MPI_UNSIGNED_LONG_LONG, 0, comm);
    ctx_find_local_rank(ctx);
    double timeout = 0;
    int rc = ctx_timeout_env(ctx, &timeout);
    if (rc == DS_OK) {
        ctx->watched = 1;
        if (ctx_watchdog_refs++ == 0)
            ctx_watch(ctx, timeout);
    }
    if (rc == DS_OK)
        rc = ctx_choose_backend(ctx, backend);
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
    if (ctx->be->device_name)
        ctx->be->device_name(ctx, ctx->device_name, sizeof ctx->device_name);
    if (ctx->device_name[0] == '\0')
        snprintf(ctx->device_name, sizeof ctx->device_name, "CPU (%ld cores)", sysconf(_SC_NPROCESSORS_ONLN));
    return DS_OK;
}

void ctx_close(ds_ctx *ctx)
{
    if (ctx->watched && --ctx_watchdog_refs == 0) {
        watchdog_stop(ctx_watchdog);
        ctx_watchdog = NULL;
    }
    ctx->watched = 0;
    if (ctx->be)
        ctx->be->close(ctx);
    ctx->be = NULL;
}

unsigned long long ctx_process_tag(void)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    unsigned long long h = 1469598103934665603ULL;  // FNV-1a
    for (const char *c = host; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    return (h << 22) ^ (unsigned long long)getpid();
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
