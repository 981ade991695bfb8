// logreg.h: multi-class logistic regression (softmax, or one-vs-rest sigmoids) trained data-parallel:
// each rank owns a contiguous range of fixed row blocks; per iteration the logits, a pass over the
// rows, the gradient, and one allreduce of [gradient digits | loss per block | correct].
// The results do not depend on the rank count, to the bit: the blocks (logreg_block_rows) depend on the
// global row count only, each block's partial sums are computed the same way on whichever rank holds
// it, and they are added exactly (the gradient as fixed-point digits, core/exactsum.h; the losses one
// slot a block, summed in block order after the allreduce; the counts are integers).
// provides: lr_model, lr_optimizer, lr_set, lr_opts, lr_result, lr_work, lr_ops, lr_ops_cpu, lr_ops_cuda,
//           logreg_block_rows, logreg_partition, logreg_gbuf_len, logreg_work_init, logreg_fix_scales,
//           logreg_set_alloc, logreg_set_free, logreg_train, logreg_evaluate, logreg_result_free,
//           logreg_pass, logreg_colmax
#ifndef DS_LOGREG_H
#define DS_LOGREG_H

#include <stdint.h>

#include "core/ckpt.h"
#include "core/ctx.h"
#include "core/rows.h"

enum lr_model { LR_SOFTMAX, LR_OVR };
enum lr_optimizer { LR_GD, LR_NESTEROV, LR_LBFGS };
enum { LR_MAX_CLASSES = 64, LR_LBFGS_MEMORY = 10 };

// A rank's rows of a labelled set in backend memory. X: rows × cols row-major (float when f32, else
// double) whose last column is all ones (the bias); labels: rows int32 in 0 .. classes−1.
// Streamed (src not NULL): the first `resident` rows (whole blocks) are X and labels as above, the
// others come through the row source src in chunks of whole blocks (src->chunk_rows a multiple of
// logreg_block_rows), each chunk's labels packed as int32 in the first bytes of the chunk's y
// (logreg_stream.c); host_x, host_y: the pinned rows behind a source from host memory (else NULL),
// freed with the set.
typedef struct lr_set {
    void *X;
    int32_t *labels;
    int64_t rows, cols, rows_global, row0;
    int f32;
    ds_rows *src;
    int64_t resident;
    void *host_x;
    double *host_y;
} lr_set;

typedef struct lr_opts {
    int model, optimizer, iters, classes;
    double lr, l2;
    ds_ckpt *ckpt;  // checkpoints and restart (ckpt.h), or NULL
} lr_opts;

typedef struct lr_result {
    double *W;        // cols × classes row-major (host): the last row is the bias
    double *loss;     // [iters + 1]: the objective (mean loss + l2/2 ‖W without bias‖²) before each iteration and at the end
    int iters;        // iterations done
    double train_accuracy, train_loss, seconds;  // seconds: the training loop, device time
    char stop_reason[96];
} lr_result;

// Scratch of one training run, owned by the ops (sized for the largest set it is used with).
typedef struct lr_work {
    int64_t rows_max, cols, classes;
    int model, f32;
    double l2, inv_n;  // inv_n: 1 / the global row count of the set being trained on
    int64_t block_rows, blocks;  // logreg_block_rows and the global block count of that set
    // The gradient's fixed point (core/exactsum.h), backend memory: fix[j] the scale of column j's
    // classes, 1/q (fix[cols + j] = q); fix_lo the low digit's factor. NULL: no gradient wanted.
    const double *fix;
    double fix_lo;
    void *impl;
} lr_work;

// What a backend provides; all vectors are cols·classes (DK) doubles in backend memory unless said.
// gbuf (logreg_gbuf_len doubles): [0, DK) and [DK, 2·DK) the high and low digits of Xᵀ(P − Y) at the
// scales w->fix, [2·DK, 2·DK + blocks) Σ loss_i of each global block, [2·DK + blocks] the count of rows
// whose largest logit is their label's (ties: the lowest class).
typedef struct lr_ops {
    int (*open)(ds_ctx *ctx, lr_work *w);
    void (*close)(ds_ctx *ctx, lr_work *w);
    // xmax[j] (host memory, cols doubles) = max over the rank's rows of |X[i][j]| (0 without rows). Waits.
    int (*colmax)(ds_ctx *ctx, lr_work *w, const lr_set *s, double *xmax);
    // This rank's share of gbuf at W (s->row0 a multiple of w->block_rows): its blocks' loss slots
    // (the others' 0), its count, and when grad the digits of its blocks' partial sums of Xᵀ(P − Y),
    // each block's (or each fixed part of a block's) partial computed identically on any rank. Without
    // grad the digits are left as they are.
    int (*pass)(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W, int grad, double *gbuf);
    // From the global gbuf: g = Xᵀ(P − Y)·inv_n + l2·W (bias row excluded), out[0] = (Σ of the loss slots
    // in block order)·inv_n + l2/2·‖W‖² (bias excluded), out[1] = count·inv_n; hist (or NULL) = out[0].
    int (*finish)(ds_ctx *ctx, lr_work *w, const double *gbuf, const double *W, double *g, double *out, double *hist);
    // W −= lr·g.
    int (*gd)(ds_ctx *ctx, lr_work *w, double *W, const double *g, double lr);
    // Nesterov's accelerated gradient from the point y (where g was taken), x the previous iterate,
    // t[0] the momentum parameter: x⁺ = y − lr·g; restart (t = 1) when (y − x⁺)·(x⁺ − x) > 0;
    // t⁺ = (1 + √(1 + 4t²))/2; y = x⁺ + (t − 1)/t⁺·(x⁺ − x); x = x⁺.
    int (*nesterov)(ds_ctx *ctx, lr_work *w, double *x, double *y, const double *g, double lr, double *t);
    // The two-loop recursion: d = −H·g from the pairs (S_i, Y_i, rho_i), i = 0 .. count−1, the newest
    // at index newest (a ring of LR_LBFGS_MEMORY; a pair with rho 0 is skipped); H₀ = (sᵀy/yᵀy)·I of
    // the newest kept pair, else I/‖g‖. A d that is not a descent direction becomes −g. gtd[0] = gᵀd.
    int (*lbfgs_dir)(ds_ctx *ctx, lr_work *w, const double *g, const double *S, const double *Y, const double *rho,
                     int count, int newest, double *d, double *gtd);
    // out = W + alpha·d.
    int (*axpy)(ds_ctx *ctx, lr_work *w, double *out, const double *W, double alpha, const double *d);
    // s = Wt − W, y = gt − g, rho = 1/yᵀs when yᵀs > 1e-10·yᵀy, else 0 (the pair is skipped); W = Wt, g = gt.
    int (*lbfgs_accept)(ds_ctx *ctx, lr_work *w, double *W, double *g, const double *Wt, const double *gt, double *s,
                        double *y, double *rho);
} lr_ops;

// Rows per block for a set of rows_global rows: a power of two from 16 to 1024, near rows_global/64 (at
// least 64 blocks where the rows allow, so that ranks share them evenly; at most 1024 rows, so that a
// rank's partial sums stay few). Depends on the global row count only.
int64_t logreg_block_rows(int64_t rows_global);

// The rank's rows: a contiguous range of whole blocks (the last block of the set may be short), blocks
// shared as evenly as whole blocks allow. A rank may get none.
void logreg_partition(int64_t rows_global, int nranks, int rank, int64_t *row0, int64_t *rows);

// The length of gbuf for w (lr_ops).
int64_t logreg_gbuf_len(const lr_work *w);

// A work for training on s with o (before lr_ops.open): sizes, blocks, l2 and inv_n; fix not yet set.
void logreg_work_init(lr_work *w, const lr_set *s, const lr_opts *o);

// The gradient's fixed point for a set of rows_global rows whose columns' maxima of |X| over all ranks
// are xmax[0 .. cols): fix (host, 2·cols doubles) in lr_work.fix's layout; returns lr_work.fix_lo.
double logreg_fix_scales(const double *xmax, int64_t cols, int64_t rows_global, double *fix);

// Allocates a set of rows × cols (cols counts the bias column) in backend memory; free releases it.
int logreg_set_alloc(ds_ctx *ctx, lr_set *s, int64_t rows, int64_t cols, int f32);
void logreg_set_free(ds_ctx *ctx, lr_set *s);

// Trains from W = 0 for o->iters iterations (L-BFGS stops early when no step decreases the
// objective). Collective; every rank gets the same result.
int logreg_train(ds_ctx *ctx, const lr_set *train, const lr_opts *o, lr_result *res);

// Accuracy and objective of res->W on a set (collective).
int logreg_evaluate(ds_ctx *ctx, const lr_set *s, const lr_opts *o, const double *W, double *accuracy, double *loss);

void logreg_result_free(lr_result *res);

// lr_ops.pass and lr_ops.colmax over a set held either way (logreg_stream.c): in memory, the op itself;
// streamed, one pass of the source, the op on each chunk (a chunk of whole blocks gives its blocks'
// sums exactly as in memory). pass: the first chunk's sums go to gbuf, each later one's to acc
// (logreg_gbuf_len doubles of backend memory; unused in memory) and are added to gbuf, exactly (the
// digits and counts are integers, the loss slots of other blocks 0). colmax waits on each chunk (set-up).
int logreg_pass(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W, int grad, double *gbuf, double *acc);
int logreg_colmax(ds_ctx *ctx, lr_work *w, const lr_set *s, double *xmax);

#endif
