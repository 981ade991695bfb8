// cleanup.h: the temporary files this process is writing, removed when a signal ends it (SIGTERM from
// Slurm, scancel or mpirun, SIGINT, SIGHUP), so that no `.part` file outlives a killed run.
// provides: cleanup_install, cleanup_add, cleanup_remove, cleanup_defer, cleanup_pending
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

#endif
