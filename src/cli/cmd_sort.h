// cmd_sort.h: what `dsolve sort`'s two files share (internal to src/cli): the run's settings and state
// (cmd_sort.c) and the streamed sort of keys beyond the memory caps (cmd_sort_stream.c).
// provides: sort_cmd, sort_stream_decide, sort_streamed
#ifndef DS_CMD_SORT_H
#define DS_CMD_SORT_H

#include "cli/opts.h"
#include "sort/sort.h"
#include "sort/sort_stream.h"

typedef struct sort_cmd {
    ds_args a;
    sort_opts o;
    int dist, default_run;
    int64_t n_global, i0, n_local;
    void *hkeys, *hvals;       // host copies of this rank's input
    void *dkeys, *dvals;       // the same in backend memory (the host copies on the CPU backend)
    const char *input, *dataset, *values;
    double *times;             // [5 × repeat]: the slowest rank's whole-sort times, then each phase's
    sort_result res;
    double phase[4], seconds, total, imbalance;
    int verified;              // −1 not checked, 0 failed, 1 passed
    char why[256];
    int streamed;              // 1: the keys did not fit the caps and were sorted by sort_streamed
    sort_stream ss;
} sort_cmd;

// Whether the rank's keys fit the memory caps (c->streamed = 0) or are streamed (1, c->ss.chunk set);
// DS_ERR_USAGE when they must stream but cannot: a cap below the working minimum (named), --argsort,
// --values, --repeat, --cub-only. Every rank decides alike (the caller agrees).
int sort_stream_decide(ds_ctx *ctx, sort_cmd *c);

// The streamed sort of the ranks' keys (from --gen or --input), written as it is produced to a temporary
// output renamed when complete, verified when asked.
int sort_streamed(ds_ctx *ctx, sort_cmd *c);

#endif
