// watchdog.h: a deadline for every wait. Each rank runs one watchdog thread; the algorithms beat
// (ctx_beat: a sweep, a chunk, a round, a phase) and a rank that has not beaten for the timeout ends
// the job: one line on stderr naming the phase and the rank that fell behind, then _exit, which makes
// the launcher (mpirun, srun --kill-on-bad-exit) end every other rank. Inside an MPI collective, a GPU
// wait or an NCCL sum alike: the thread needs nothing from them.
// Which rank fell behind: the ranks of a node share a small file in /dev/shm (named by the job's tag)
// holding each one's pid and beat count: a rank whose process is gone or stopped, else the one with the
// lowest count (stuck in a phase its peers have left). The first watchdog of a node to fire reports;
// the others of that node stay silent. Ranks on other nodes are not seen (the line says so).
// provides: ds_watchdog, watchdog_start, watchdog_set_timeout, watchdog_beat, watchdog_stop, WATCHDOG_DEFAULT_S
#ifndef DS_WATCHDOG_H
#define DS_WATCHDOG_H

#include <stdint.h>

#define WATCHDOG_DEFAULT_S 600.0

typedef struct ds_watchdog ds_watchdog;

// Starts the thread for this rank (timeout_s > 0; 0 starts none and returns NULL). tag: the job's tag
// (ds_ctx.job_tag), rank and nranks of the job, local_rank and local_size on this node.
ds_watchdog *watchdog_start(double timeout_s, unsigned long long tag, int rank, int nranks, int local_rank,
                            int local_size);
// Another deadline from now on (0: none, the thread idles).
void watchdog_set_timeout(ds_watchdog *w, double timeout_s);
// Progress: phase names what comes next (a static string), e.g. "solve: sweeps". Cheap (no lock, no
// system call): call it as often as the work allows.
void watchdog_beat(ds_watchdog *w, const char *phase);
// Stops and joins the thread, releases the shared file. NULL is fine.
void watchdog_stop(ds_watchdog *w);

#endif
