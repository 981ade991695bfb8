// sort_stream.h: the streamed sort of keys beyond backend memory (`dsolve sort` under --device-memory /
// --host-memory), on any number of ranks: each rank's chunks of keys are sorted into runs kept in host
// memory (pinned) or, on a host backend, in a temporary file mapped into memory; every rank's output
// (its share of the global order) is then cut at exact global ranks into segments of a chunk, whose
// pieces (from every rank's runs, by MPI on host memory) are sorted again on the backend and handed out
// in order. Four crossings of the bus in all (docs/sort.md, "Keys beyond memory").
// provides: sort_stream, sort_keys_fn, sort_sink_fn, sort_stream_backend_bytes, sort_stream_plan,
//           sort_stream_run, SORT_STREAM_MIN_CHUNK
#ifndef DS_SORT_STREAM_H
#define DS_SORT_STREAM_H

#include <stdint.h>

#include "core/ctx.h"
#include "sort/sort.h"

// Fills out with the rank's keys [i0, i0+n) (native type). Runs on the calling thread.
typedef int (*sort_keys_fn)(void *arg, int64_t i0, int64_t n, void *out, ds_msg *msg);
// Takes sorted keys [at, at+n) of the output (native type, host memory, valid during the call).
typedef int (*sort_sink_fn)(void *arg, int64_t at, int64_t n, const void *keys, ds_msg *msg);

// A streamed sort smaller than this many keys per chunk is not worth running: a cap that leaves less
// is a usage error naming the working minimum.
#define SORT_STREAM_MIN_CHUNK 16384

typedef struct sort_stream {
    sort_opts o;           // dtype, descending (no argsort, no values)
    int64_t n;             // the rank's keys (and its share of the output)
    int64_t chunk;         // keys per run and per segment (sort_stream_plan)
    const char *tmp_dir;   // where a host backend keeps its runs (a file, unlinked once open)
    sort_keys_fn produce;
    void *produce_arg;
    sort_sink_fn sink;     // NULL: the sorted keys are only checked
    void *sink_arg;
    int verify;

    // Results
    int64_t runs, segments;
    double seconds;        // the sort: wall time less producing and sinking
    double io_seconds;     // producing (generation or reading) and sinking (writing)
    double bytes_moved;    // bytes that crossed between host and backend memory (or the run file)
    int verified;          // −1 not checked, 0 failed, 1 passed
    char why[256];
} sort_stream;

// Backend bytes a chunk of c keys of w bytes needs: three buffers and the library's scratch.
double sort_stream_backend_bytes(int64_t c, int w);

// The chunk for the caps (bytes): at most what the backend cap leaves, at most n; on a device backend
// also what the host cap leaves beside the keys for a segment's pinned buffers (the output, and with
// several ranks the received pieces). 0 when less than SORT_STREAM_MIN_CHUNK keys fit; min[0], min[1]:
// the backend and host bytes that chunk needs.
int64_t sort_stream_plan(const ds_ctx *ctx, int64_t n, int w, double backend_cap, double host_cap, double min[2]);

// Runs the streamed sort of s (chunk set; the ranks use the smallest). Collective.
int sort_stream_run(ds_ctx *ctx, sort_stream *s);

#endif
