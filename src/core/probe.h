// probe.h: checks of untrusted input files run in a throw-away process, so that a library that crashes
// on a hostile file (HDF5 1.10 "is not designed to handle maliciously crafted files") ends that process
// and not the run. A helper forked before MPI starts (fork is safe then) forks a worker that runs the
// checks, and a fresh one after a check has killed it, or after SIGALRM ended one that ran past its time
// limit (DSOLVE_PROBE_SECONDS, default 120).
// provides: probe_fn, probe_start, probe_run, probe_signal_name, PROBE_NONE, PROBE_REQ_MAX
#ifndef DS_PROBE_H
#define DS_PROBE_H

#include <stddef.h>

#include "core/err.h"

enum {
    PROBE_REQ_MAX = 8192,  // largest request, bytes
    PROBE_NONE = -1,       // probe_run: this process has no helper; the caller checks in-process
};

// A check, run in the worker on a request of len bytes (what the caller passed to probe_run): a status and
// its one-line message, as the check would return them in-process.
typedef int (*probe_fn)(const void *req, size_t len, ds_msg *msg);

// Forks the helper that will run fn for probe_run. Call it early in main, before MPI_Init, CUDA or any
// thread of dsolve's own; once per process. When the fork fails, probe_run answers PROBE_NONE.
void probe_start(probe_fn fn);

// Runs the helper's fn on req (len ≤ PROBE_REQ_MAX bytes) in the worker process and returns its
// status and message. A worker ended by a signal returns DS_ERR_INPUT with *signo set, one that exited with
// a non-zero status without a verdict DS_ERR_INPUT with *signo = −status; one that could not be forked or
// exited with status 0 without a verdict, DS_ERR_RUNTIME; all leave msg untouched (the caller names the file).
// PROBE_NONE when this process has no helper (it is the helper or a worker, probe_start was not called,
// or the helper is gone). Thread-safe; a caller waits for the worker (milliseconds for a metadata check).
int probe_run(const void *req, size_t len, int *signo, ds_msg *msg);

// "SIGSEGV", "SIGBUS", ... for the signals a crash raises; "signal N" otherwise; for −N (an exit status),
// "its process exited with status N" (thread-local storage).
const char *probe_signal_name(int signo);

#endif
