// ann_ckpt.h: checkpoints of the network's training (ann_ckpt.c, on core/ckpt.h): the hidden weights
// once fitted, then the Gram pass's progress (each rank's partial Gram and the rows not yet in it). The
// Gram pass walks a rank's rows as a list of spans (ann_left), so that a restart on another number of
// ranks can hand each new rank the rows still to do within its block.
// provides: ann_span, ann_left, ann_resume, ann_left_make, ann_left_next, ann_left_chunks, ann_ckpt_read,
//           ann_ckpt_fitted, ann_ckpt_gram, ann_resume_start, ann_resume_free
#ifndef DS_ANN_CKPT_H
#define DS_ANN_CKPT_H

#include "ann/ann_types.h"
#include "core/ctx.h"

typedef struct ann_span {
    int64_t a, b;  // global rows a .. b−1
} ann_span;

// The rows a rank still has to add to its Gram: spans of global rows in increasing order, and where the
// pass is in them (its next chunk starts at s[at].a + off).
typedef struct ann_left {
    ann_span *s;  // host
    int64_t n, at, off;
} ann_left;

// --restart: what the checkpoint holds. state: W (K × (n+1)), then grams partial Grams (gsize each, in
// the writing run's rank order; 0 when it stopped right after the fits), then spans pairs (a, b): the
// rows in none of those Grams.
typedef struct ann_resume {
    int64_t grams, spans, failed;
    int64_t grams_at, spans_at;  // where the Grams and the spans start in state
    double *state;               // host, every rank
} ann_resume;

// Every rank reads o->ckpt->restart (m: the training set's rows, for the spans' range check).
// DS_ERR_INPUT for a checkpoint of another run or an inconsistent one. Collective.
int ann_ckpt_read(ds_ctx *ctx, const ann_opts *o, int64_t n, int64_t gsize, int64_t m, ann_resume *rs);
void ann_resume_free(ann_resume *rs);

// The rank's rows to do: its block row0 .. row0+rows−1, or, resuming, the checkpoint's spans within it.
// td->s is allocated here; the caller frees it.
int ann_left_make(ds_ctx *ctx, const ann_resume *rs, int64_t row0, int64_t rows, ann_left *td);
// The next chunk (at most ch rows) into *a (global row); its rows, 0 when none are left.
int64_t ann_left_next(ann_left *td, int64_t ch, int64_t *a);
// The chunks of at most ch rows left.
int64_t ann_left_chunks(const ann_left *td, int64_t ch);

// The Gram this rank starts from when resuming (host, gsize values), or 0 when it starts from zero: on
// the checkpoint's rank count, this rank's own partial Gram (the run goes on bitwise as if never
// stopped); on another, their sum on rank 0 (in rank order) and zero elsewhere.
int ann_resume_start(const ds_ctx *ctx, const ann_resume *rs, int64_t gsize, double *G);

// The safe point after the hidden fits (m->W whole on every rank; rows_global: the training set's
// rows, all still to do). DS_STOPPED after writing on a signal. Collective; free when o->ckpt is NULL.
int ann_ckpt_fitted(ds_ctx *ctx, const ann_opts *o, const ann_model *m, int64_t rows_global);

// The safe point between two chunks of the Gram pass: acc (backend memory, gsize) is this rank's
// partial Gram of the rows before td's position. chunk and chunks: for the messages. Collective.
int ann_ckpt_gram(ds_ctx *ctx, const ann_opts *o, const ann_model *m, const double *acc, int64_t gsize,
                  const ann_left *td, int64_t chunk, int64_t chunks);

#endif
