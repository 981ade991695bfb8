// ckpt.h: checkpoints of long runs. The state a restart needs is written by rank 0, atomically (a
// temporary file, then a rename), every --checkpoint-every seconds and when SIGTERM or SIGUSR1 arrives
// (after which the run stops with DS_STOPPED); --restart reads it back on every rank, on any number of
// ranks. A file holds /state (the run's state, doubles), /counters (its loop counters, as doubles) and
// /fingerprint (what run it belongs to: a restart with other data or settings is refused).
// provides: ds_ckpt, ckpt_hash, ckpt_start, ckpt_due, ckpt_write, ckpt_read, ckpt_read_head, ckpt_read_state
#ifndef DS_CKPT_H
#define DS_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "core/ctx.h"

typedef struct ds_ckpt {
    const char *path;      // --checkpoint, or NULL: no checkpoints
    const char *restart;   // --restart, or NULL
    double every;          // seconds between checkpoints (0: at every safe point)
    double last;           // MPI_Wtime of the last checkpoint, or of ckpt_start
    uint64_t fingerprint;  // the run's data and settings (ckpt_hash), set by the command
    double format;         // the layout of the command's state, set by it when it changed (0: 1, the first)
    const char *what;      // the command's name, for messages
} ds_ckpt;

// FNV-1a over n bytes, continuing from h (start with 0).
uint64_t ckpt_hash(uint64_t h, const void *p, size_t n);

// At the start of the loop: the clock of --checkpoint-every, and SIGTERM and SIGUSR1 deferred
// (cleanup_defer) when checkpoints are on.
void ckpt_start(ds_ctx *ctx, ds_ckpt *c);

// At a safe point of the loop (every rank): 0 nothing to do; 1 a checkpoint is due; 2 due, and the run
// stops after it (a rank got SIGTERM or SIGUSR1). Collective when checkpoints are on (one small
// allreduce), free otherwise.
int ckpt_due(ds_ctx *ctx, const ds_ckpt *c);

// Rank 0 writes state (n values, host memory) and counters; every rank returns the agreed status.
int ckpt_write(ds_ctx *ctx, ds_ckpt *c, const double *state, int64_t n, const double *counters, int ncounters);

// Every rank reads c->restart: DS_ERR_INPUT when it is not a checkpoint of this run (its fingerprint or
// its sizes differ) or is one in another format. Collective.
int ckpt_read(ds_ctx *ctx, const ds_ckpt *c, double *state, int64_t n, double *counters, int ncounters);
// ckpt_read in two steps, for a state whose length the counters give: the fingerprint and the counters,
// then the state. Collective, as ckpt_read.
int ckpt_read_head(ds_ctx *ctx, const ds_ckpt *c, double *counters, int ncounters);
int ckpt_read_state(ds_ctx *ctx, const ds_ckpt *c, double *state, int64_t n);

#endif
