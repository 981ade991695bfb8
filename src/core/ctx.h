// ctx.h: the run context passed first to every distributed function: the communicator, this rank's
// place on its node, the backend and its device.
// provides: ds_ctx, ctx_open, ctx_close, ctx_agree, ctx_log, ctx_cores
#ifndef DS_CTX_H
#define DS_CTX_H

#include <mpi.h>

#include "backend/backend.h"
#include "core/err.h"

typedef struct ds_ctx {
    MPI_Comm comm;
    int rank, nranks;
    int local_rank, local_size;  // place among the ranks of this node
    char host[64];
    const ds_backend *be;
    void *be_state;  // owned by the backend
    int device;      // CUDA device ordinal, or −1
    char device_name[128];
    char backend_note[256];  // why auto chose the backend it chose ("" when there is nothing to say)
    ds_msg msg;              // the first failure's message on this rank
    int quiet;               // 1: ctx_log prints nothing
    int agreed_failure;      // the status of a failure all ranks have agreed on, or DS_OK
    unsigned long long job_tag;  // rank 0's host and process, the same on every rank: names temporary files
    int watched;                 // holds a reference to the process's watchdog (ctx_close drops it)
} ds_ctx;

// Sets up ctx over comm with backend "auto" or a registry name ("cpu", "cuda") and opens the backend.
// Collective.
// On failure every rank returns the same status and message.
int ctx_open(ds_ctx *ctx, MPI_Comm comm, const char *backend);
void ctx_close(ds_ctx *ctx);

// A number for this process on this host (its pid and a hash of the host name): two runs at once, here
// or on another node of a shared file system, differ in it.
unsigned long long ctx_process_tag(void);

// The job's watchdog (core/watchdog.h), one per process, started by the first ctx_open with
// DSOLVE_TIMEOUT's seconds (default WATCHDOG_DEFAULT_S, 0: none) and stopped by the last ctx_close.
// ctx_set_timeout restarts it with another deadline (--timeout); ctx_beat marks progress (a static
// phase name: "solve: sweeps"). Call ctx_beat at the same points on every rank.
void ctx_set_timeout(ds_ctx *ctx, double seconds);
void ctx_beat(const ds_ctx *ctx, const char *phase);

// Collective: every rank learns whether any rank failed. Returns the status of the lowest failing
// rank and copies its message into ctx->msg, or DS_OK when all succeeded. Once a failure is agreed,
// later calls return it at once without a collective, so a rank that failed early and one that
// learns of it later make the same sequence of collectives.
int ctx_agree(ds_ctx *ctx, int status);

// The cores this rank may use: its affinity mask's CPUs when the launcher bound it to fewer than the
// node's, otherwise the node's online CPUs shared among the node's ranks. At least 1.
int ctx_cores(const ds_ctx *ctx);

// Rank 0 prints one line to stderr (progress and notes), unless ctx->quiet.
void ctx_log(const ds_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
