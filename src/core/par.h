// par.h: one parallel for over POSIX threads, for the host loops that split a range by parts (bench's
// inputs and checks, the generators' rows and keys, the CPU sort's passes).
// provides: par_fn, par_for, PAR_MAX_THREADS
#ifndef DS_PAR_H
#define DS_PAR_H

#include <stdint.h>

#define PAR_MAX_THREADS 256

// One part of the range: [lo, hi), part in 0 .. P−1.
typedef void (*par_fn)(void *arg, int part, int64_t lo, int64_t hi);

// fn over [0, n) in P = min(threads, PAR_MAX_THREADS, n / min_part) contiguous parts, each on a thread of
// its own (a part whose thread cannot be started runs in the caller); one call in the caller when
// P <= 1. Returns P (at least 1).
int par_for(int threads, int64_t n, int64_t min_part, par_fn fn, void *arg);

#endif
