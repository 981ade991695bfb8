// cleanup.h: the temporary files this process is writing, removed when a signal ends it (SIGTERM from
// Slurm, scancel or mpirun, SIGINT, SIGHUP), so that no `.part` file outlives a killed run.
// Also: a crash inside a read of an untrusted file's data made into exit 3 with one line.
// provides: cleanup_install, cleanup_add, cleanup_remove, cleanup_defer, cleanup_pending, cleanup_crash_scope
#ifndef DS_CLEANUP_H
#define DS_CLEANUP_H

// Once, from main: the handlers, which unlink every registered file and then end the process by the
// same signal (its default action), so the exit status still says which signal it was.
void cleanup_install(void);

// Before creating path (a temporary output): register it. Returns 0, or −1 when every slot is taken
// (the file is then not removed on a signal; nothing else changes).
int cleanup_add(const char *path);

// After path was renamed into place or removed.
void cleanup_remove(const char *path);

// For a run that checkpoints: from now on SIGTERM and SIGUSR1 (Slurm's `--signal=USR1@T` warning before
// the time limit) do not end the process but are only noted, for cleanup_pending to report; the run
// writes its checkpoint at its next safe point and stops (SIGINT and SIGHUP still end it at once).
void cleanup_defer(void);

// The signal noted since cleanup_defer (SIGTERM or SIGUSR1), or 0.
int cleanup_pending(void);

// The calling thread enters (path, a static or long-lived string naming the file) or leaves (NULL) a read of
// a file's data by a library that a crafted file can crash (HDF5's decompression and conversion of the
// bulk reads, which follow checks that run in the probe worker). A crash signal (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT) in that thread while inside removes the temporary outputs, writes `dsolve: PATH: the
// HDF5 library crashed reading its data (SIGSEGV): a damaged or crafted file` and ends the process with
// exit 3 (mpirun then ends the other ranks). In other threads, or outside, the signal goes to the handler
// that was there before the first scope (MPI's, a sanitizer's, or the default action).
void cleanup_crash_scope(const char *path);

#endif
