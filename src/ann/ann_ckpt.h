// ann_ckpt.h: checkpoints of the network's training (ann_ckpt.c, on core/ckpt.h): the hidden weights
// once fitted, then the Gram pass's progress (the digits of the Gram of the rows done, summed over the
// ranks: exact, ann_gram.h, and the rows not yet in it). The Gram pass walks a rank's rows as a list
// of spans of whole blocks (ann_left), so that a restart on another number of ranks can hand each new
// rank the blocks still to do within its range; it goes on as if never stopped, to the bit.
// provides: ANN_CKPT_FORMAT, ann_span, ann_left, ann_resume, ann_left_make, ann_left_next, ann_left_chunks,
//           ann_ckpt_read, ann_ckpt_fitted, ann_ckpt_gram, ann_resume_start, ann_resume_free
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

// The format of an ann checkpoint (ds_ckpt.format): 2 holds the Gram's digits; 1 (before) held each
// rank's partial Gram, which another rank count could only add in another order: refused.
#define ANN_CKPT_FORMAT 2.0

// --restart: what the checkpoint holds. state: W (K × (n+1)), then, when digits is 1, the digits of the
// Gram of the rows done (dlen: ann_ops.gram_digits' layout, summed over the writing run's ranks; none
// when it stopped right after the fits), then spans pairs (a, b): the rows still to do, whole blocks.
typedef struct ann_resume {
    int64_t digits, spans, failed;
    int64_t digits_at, spans_at;  // where the digits and the spans start in state
    double *state;                // host, every rank
} ann_resume;

// Every rank reads o->ckpt->restart (m: the training set's rows and block its blocks' rows, for the
// spans' checks; dlen: the digits' length). DS_ERR_INPUT for a checkpoint of another run or format or
// an inconsistent one. Collective.
int ann_ckpt_read(ds_ctx *ctx, const ann_opts *o, int64_t n, int64_t dlen, int64_t m, int64_t block, ann_resume *rs);
void ann_resume_free(ann_resume *rs);

// The rank's rows to do: its block row0 .. row0+rows−1, or, resuming, the checkpoint's spans within it.
// td->s is allocated here; the caller frees it.
int ann_left_make(ds_ctx *ctx, const ann_resume *rs, int64_t row0, int64_t rows, ann_left *td);
// The next chunk (at most ch rows) into *a (global row); its rows, 0 when none are left.
int64_t ann_left_next(ann_left *td, int64_t ch, int64_t *a);
// The chunks of at most ch rows left.
int64_t ann_left_chunks(const ann_left *td, int64_t ch);

// The digits a resumed run starts from on rank 0 (host, dlen values; rs->digits 1); the other ranks
// start from zero. The digits add exactly, so this is the uninterrupted run's sum on any rank count.
void ann_resume_start(const ann_resume *rs, int64_t dlen, double *dig);

// The safe point after the hidden fits (m->W whole on every rank; rows_global: the training set's
// rows, all still to do). DS_STOPPED after writing on a signal. Collective; free when o->ckpt is NULL.
int ann_ckpt_fitted(ds_ctx *ctx, const ann_opts *o, const ann_model *m, int64_t rows_global);

// The safe point between two chunks of the Gram pass: dig (backend memory, dlen) is this rank's digits
// of the rows before td's position. chunk and chunks: for the messages. Collective.
int ann_ckpt_gram(ds_ctx *ctx, const ann_opts *o, const ann_model *m, const double *dig, int64_t dlen,
                  const ann_left *td, int64_t chunk, int64_t chunks);

#endif
