// ann_gram.h: the output layer's Gram S = [H 1 T]ᵀ[H 1 T] (ld = K + 1 + outputs wide), summed so that
// its bits do not depend on the rank count, the chunks or a restart (issues 13 and 15), as logreg's
// gradient is (logreg.h): the rows are cut into fixed blocks (ann_block_rows, a function of the global
// row count), every rank holds whole blocks (ann_partition: ds_data.block_rows = ann_block_rows), each
// block's Gram is formed the same way whichever rank or chunk holds it (ann_ops.gram_digits), and is
// added as fixed-point digits (core/exactsum.h) whose sums are exact in any order: over a rank's blocks
// and chunks, in the ranks' allreduce, and from a checkpoint resumed on any rank count.
// provides: ann_block_rows, ann_partition, ann_tri, ann_fix_scales, ann_output_gram
#ifndef DS_ANN_GRAM_H
#define DS_ANN_GRAM_H

#include <stdint.h>

#include "ann/ann_ckpt.h"
#include "ann/ann_ops.h"
#include "ann/ann_types.h"
#include "core/data.h"

// Rows a block for a training set of rows_global rows: a power of two from 4096 to 16384, near
// rows_global/64 (blocks many enough for the ranks to share evenly, large enough that a block's Gram
// outweighs its digits' split on a GPU). Depends on the global row count only.
int64_t ann_block_rows(int64_t rows_global);

// The rank's training rows: whole blocks (data_partition_blocks with ann_block_rows). A rank may get none.
void ann_partition(int64_t rows_global, int nranks, int rank, int64_t *row0, int64_t *rows);

// Entries of the Gram's packed upper triangle (the digits' layout, ann_ops.gram_digits): ld(ld+1)/2.
int64_t ann_tri(int64_t ld);

// The fixed point of a Gram of width ld = K1 + outputs over rows_global rows whose target columns are
// at most tc_max in magnitude (one-hot classes: 1): col (host, ld) and *s0 as ann_fix holds them; returns
// ann_fix.lo.
double ann_fix_scales(int64_t rows_global, int64_t K1, int64_t outputs, double tc_max, double *col, double *s0);

// S (ld × ld, backend memory, full symmetric) = the Gram of [H 1 T] over all ranks' rows for the hidden
// weights Wd (backend memory), the targets tc (backend memory, the rank's rows; unused when o->stream)
// whose magnitude is at most tc_max, resumed from rs when not NULL (checkpoints between chunks of whole
// blocks, ann_ckpt.h). Collective.
int ann_output_gram(ds_ctx *ctx, const ds_data *d, const ann_opts *o, const double *Wd, const double *tc,
                    double tc_max, const ann_model *m, const ann_resume *rs, double *S);

#endif
