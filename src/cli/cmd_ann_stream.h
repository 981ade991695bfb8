// cmd_ann_stream.h: how `dsolve ann` and `dsolve predict` decide to stream an --input X that does not
// fit the memory caps (--device-memory, --host-memory), and where from (cmd_ann_stream.c).
// provides: ann_plan, ann_cli_plan, ann_cli_probe, ann_cli_open, ann_cli_stats
#ifndef DS_CMD_ANN_STREAM_H
#define DS_CMD_ANN_STREAM_H

#include "ann/ann_stream.h"
#include "cli/opts.h"

typedef struct ann_plan {
    int stream;       // every rank streams (one rank's rows not fitting is enough)
    int from_memory;  // device backend: X and y kept in pinned host memory, the chunks cross the bus
    int64_t chunk;    // rows a chunk, the least over ranks
    int64_t block;    // the training set's: chunks are whole blocks of block rows (ann_gram.h); 0: any
    int64_t budget;   // bytes of an H chunk and, in memory, of a round of hidden fits (ann_opts.budget_bytes)
    int64_t hidden;   // bytes of a round of hidden fits: what the caps leave beside the chunks, so that the
                      // rounds, each a pass over X, are few (ann_opts.hidden_bytes)
    double fixed;     // the working bytes besides the chunks (for the summary)
} ann_plan;

// What a plan weighs: backend bytes that do not scale with the rows (fixed), more bytes per row in
// memory besides X and y (row_extra), the memory bound of rounds and H chunks (budget: the option's, or 0
// for the default budget0) and its least useful value, the width of an H chunk (ld) and a name for the
// minimum's message; for a training set, the rows of its blocks (block: chunks of whole blocks), else 0.
typedef struct ann_weights {
    double fixed, row_extra, least;
    int64_t budget, budget0, ld, block;
    const char *what;
} ann_weights;

// The plan for the rank's rows of d (shape only: data_probe_lsq or ann_cli_probe). DS_ERR_USAGE when a
// cap is below the working minimum, naming it. Collective.
int ann_cli_plan(ds_ctx *ctx, const ds_args *a, const ds_data *d, const ann_weights *w, ann_plan *p);

// data_probe_lsq for a regression set (yname may be NULL), or its labelled counterpart (classes); the
// rows split as d->block_rows says (data_place). Collective.
int ann_cli_probe(ds_ctx *ctx, const char *path, const char *xname, const char *yname, int classes, ds_data *d);

// The source of a set planned to stream: from the file, or (p->from_memory) loaded into pinned host
// memory first, its chunks whole blocks of p->block rows when set. d: from ann_cli_probe. Collective.
int ann_cli_open(ds_ctx *ctx, const ann_plan *p, const char *path, const char *xname, const char *yname, int classes,
                 ds_data *d, ann_source *src, const char *phase);

// Bytes moved over all ranks and the slowest rank's seconds, from the sources' passes. Collective.
void ann_cli_stats(ds_ctx *ctx, const ann_source *a, const ann_source *b, double *bytes, double *seconds);

#endif
