// ann_stream.h: the network's training and prediction when X does not fit the memory caps (issue 13):
// the rank's rows come through a row source (core/rows.h), from the HDF5 file or from host memory, and
// every phase that reads X becomes a pass over it: the targets' statistics (y alone), one pass a round
// of hidden fits (each round's subset rows gathered from the chunks as they pass: a round holds as many
// neurons as its memory allows, so the rounds, and the passes, are few), the Gram of [H 1 T] by chunks,
// and prediction (two passes for the metrics: means first, as in memory). Also what ann.c shares with it.
// provides: ann_feed, ann_source, ann_stream, ann_source_open_file, ann_source_open_memory, ann_source_close,
//           ann_stream_targets, ann_stream_dev, ann_stream_gram, ann_stream_predict, ann_stream_close,
//           ann_chunk_rows, ann_y_stats, ann_ymap_agree, ann_targets_bad, ann_metrics_sum1, ann_metrics_sum2,
//           ann_metrics_means, ann_metrics_finish
#ifndef DS_ANN_STREAM_H
#define DS_ANN_STREAM_H

#include "ann/ann_types.h"
#include "ann/ann_rows.h"
#include "ann/ann_target.h"
#include "core/data.h"
#include "core/rows.h"

enum { ANN_FEED_Y, ANN_FEED_Z, ANN_FEED_TC };  // what a chunk's y holds: y (or labels), z, tc

// A file source's producer settings (the reader thread reads them; they change between passes only).
typedef struct ann_feed {
    char path[4096], xname[256], yname[256];  // yname "": no y (zeros)
    int64_t cols;
    int classes;       // yname holds integer labels
    int mode;          // ANN_FEED_*
    ann_ymap map;      // for ANN_FEED_Z and ANN_FEED_TC
    int32_t *labels;   // [chunk rows], with classes
    rows_stamp st;     // the file as the source opened it: a change while it streams is bad input
} ann_feed;

// One set's rows as a stream: from the file (feed) or from host memory (y, and the targets z and tc
// made from it, host_alloc'd).
typedef struct ann_source {
    ds_rows rows;
    ann_feed *feed;    // file, else NULL
    const double *y;   // memory: the rank's y (host)
    double *z, *tc;    // memory: the targets, once made
    int open;
} ann_source;

typedef struct ann_stream {
    ann_source train, test;
    int from_memory;
    // A round's gather: the local rows asked (host), bucketed by chunk (sidx, spos: row and place,
    // host and backend memory), the bucket bounds; allocated for the largest round, grown when needed.
    int64_t cap, *idx_h, *sidx_h, *spos_h, *bounds;
    void *sidx_d, *spos_d;
} ann_stream;

// A source over rows row0 .. row0+rows−1 of path's xname and yname (labels with classes; yname NULL:
// none), validated by the caller. Not collective.
int ann_source_open_file(ds_ctx *ctx, ann_source *src, const char *path, const char *xname, const char *yname,
                         int classes, int64_t row0, int64_t rows, int64_t cols, int64_t chunk, const char *phase);
// A source over d's rows in host memory (d->host: loaded there). Not collective.
int ann_source_open_memory(ds_ctx *ctx, ann_source *src, const ds_data *d, int64_t chunk, const char *phase);
void ann_source_close(ds_ctx *ctx, ann_source *src);
void ann_stream_close(ds_ctx *ctx, ann_stream *st);

// The targets' map from y over all ranks (checked as in memory: exit 3 for a non-finite y or a bad label),
// set on the training source; m->y_scale, m->y_shift. Collective.
int ann_stream_targets(ds_ctx *ctx, ann_stream *st, const ds_data *d, int classes, ann_model *m, ann_ymap *t);
// The hidden layer's view of the streamed training set: d's shape, rows gathered by passes.
void ann_stream_dev(ann_stream *st, const ds_data *d, ann_dev *dv);
// dig (2·ann_tri(ld)) = the digits of the rank's Gram of [H 1 T] (width ld) over its rows, the chunks'
// (whole blocks of fx->block rows) by ann_ops.gram_digits with scratch. Not collective.
int ann_stream_gram(ds_ctx *ctx, ann_stream *st, const ann_model *m, const double *Wd, int64_t ld, const ann_fix *fx,
                    double *scratch, double *dig);
// ann_predict over a streamed set: the metrics (has_y) over all ranks; with tmp (ann_predictions_begin's
// file), the outputs written into it as they are made. Collective.
int ann_stream_predict(ds_ctx *ctx, const ann_model *m, ann_source *src, const char *source, int has_y,
                       const char *tmp, ann_metrics *met);

// ann.c's pieces that a streamed run shares (the same expressions, so the same bits): the rows of an
// H chunk of width ld within o's memory bound, the targets' statistics and checks, the metrics' sums
// (ann_predict.c).
int64_t ann_chunk_rows(const ds_ctx *ctx, const ann_opts *o, int64_t ld, int64_t rows);
void ann_y_stats(const double *y, int64_t rows, double st[2]);  // least, largest
int ann_ymap_agree(ds_ctx *ctx, const char *source, const double st[2], int classes, ann_ymap *t, ann_model *m);
// DS_ERR_INPUT naming source and the global row (row0 + i) of the first y not finite or not a class.
int ann_targets_bad(ds_ctx *ctx, const char *source, int64_t row0, const double *y, int64_t rows, int classes);
void ann_metrics_sum1(const ann_model *m, const double *P, const double *y, int64_t rows, double s[3],
                      int64_t *correct);
void ann_metrics_sum2(const double *P, const double *y, int64_t rows, const double mean[2], double c[4]);
int ann_metrics_means(ds_ctx *ctx, const ann_model *m, const double s[3], int64_t correct, ann_metrics *met,
                      double mean[2]);
void ann_metrics_finish(ds_ctx *ctx, const double c[4], ann_metrics *met);

#endif
