// sort_stream_int.h: the state of a streamed sort, shared by its two phases (private to src/sort/):
// sort_stream_runs.c (memory, the runs, the verdict) and sort_stream_seg.c (the segments: exact cuts across
// every rank's runs, the exchange of their pieces, their sort and output).
// provides: stream_state, stream_run_len, stream_progress, stream_take_staged, stream_segments
#ifndef DS_SORT_STREAM_INT_H
#define DS_SORT_STREAM_INT_H

#include <stdint.h>

#include "sort/sort_stream.h"

typedef struct stream_state {
    sort_stream *s;
    sort_plan p;          // k[0], k[1] and the library's scratch for chunk keys
    const sort_ops *ops;
    int w, np, me;
    int64_t chunk;        // keys per run and segment, the same on every rank (the smallest rank's)
    char *store;          // [n] keys, w bytes: the input, then this rank's sorted runs of mapped keys
    void *stage;          // backend buffer of a chunk that the copies land in
    void *out, *recv;     // host buffers of a chunk (device backend): the output segment, received pieces
    int fd;               // the run file of a host backend, else −1
    int64_t *n_all, *off; // [np] every rank's keys and its first global position
    int64_t runs_max, rounds;     // the most runs of a rank; segments of the rank with the most
    int64_t *cut[2];      // [np × runs_max]: cuts of this rank's runs at every rank's segment start, end
    uint64_t *lo, *hi;    // [np] bisection on the key value of each cut
    int64_t *cnt, *less, *eq, *before;  // [np]
    int64_t *slen, *rlen; // [np × runs_max] piece lengths sent to and received from each rank
    void *req;            // MPI_Request [nreq]
    int64_t nreq;
    uint64_t sums[4];     // verify: inversions, output checksum, input checksum, segment boundary faults
    uint64_t first, last; // verify: the first and the last mapped key handed out
    double t_io, t_log;
} stream_state;

int64_t stream_run_len(const stream_state *st, int64_t r);
void stream_progress(ds_ctx *ctx, stream_state *st, const char *what, int64_t done, int64_t all);
// The staged chunk (n keys) into k[0], releasing the stage slot; input: add its checksum (verify).
int stream_take_staged(ds_ctx *ctx, stream_state *st, int64_t n, int input);

// Phase 2: every rank's output positions [off, off + n) in segments of a chunk, round by round, each
// cut exactly across all ranks' runs, gathered, sorted and handed to the sink. Collective.
int stream_segments(ds_ctx *ctx, stream_state *st);

#endif
