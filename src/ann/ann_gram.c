// ann_gram.c: the output layer's Gram, summed exactly (see ann_gram.h): the blocks, the partition and
// the fixed point; the pass over a rank's rows (in memory: chunks of whole blocks with a checkpoint's
// safe point between two; streamed: ann_stream_gram), the allreduce of the digits and their join.
#include "ann/ann_gram.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "ann/ann_stream.h"
#include "core/exactsum.h"

int64_t ann_block_rows(int64_t rows_global)
{
    return data_block_rows(rows_global, 4096, 16384);
}

void ann_partition(int64_t rows_global, int nranks, int rank, int64_t *row0, int64_t *rows)
{
    data_partition_blocks(rows_global, ann_block_rows(rows_global), nranks, rank, row0, rows);
}

int64_t ann_tri(int64_t ld)
{
    return ld * (ld + 1) / 2;
}

// 2^⌈log2 v⌉ (1 for a v that is 0 or not finite).
static double pow2_above(double v)
{
    if (!(isfinite(v) && v > 0))
        return 1.0;
    int e = 0;
    const double f = frexp(v, &e);  // v = f·2^e, f in [½, 1)
    return ldexp(1.0, f == 0.5 ? e - 1 : e);
}

// Entry (i, j)'s terms, the blocks' Grams, add up in magnitude to about Σ_rows |h_i|·|h_j| ≤ m·c_i·c_j,
// c the columns' largest magnitudes (tanh's and the bias's 1, the targets' tc_max); the bound is twice
// that, for the blocks' own rounding and tanh's. With p = 2^⌈log2 c⌉ its scale exactsum_scale(2m·p_i·p_j)
// is exactsum_scale(2m)/(p_i·p_j), exactly: s0·col[i]·col[j] with col = 1/p. The terms are the blocks.
double ann_fix_scales(int64_t rows_global, int64_t K1, int64_t outputs, double tc_max, double *col, double *s0)
{
    for (int64_t i = 0; i < K1 + outputs; i++)
        col[i] = i < K1 ? 1.0 : 1.0 / pow2_above(tc_max);
    *s0 = exactsum_scale(2.0 * (double)rows_global);
    const int64_t block = ann_block_rows(rows_global);
    return exactsum_lo((rows_global + block - 1) / block);
}

// ---------------------------------------------------------------------------------------------------
// The pass in memory: the rank's rows to do (ann_left: its whole blocks, or a checkpoint's spans of
// them) in chunks of ch rows, whole blocks (within the memory budget's H chunk when it holds one).

typedef struct gram_pass {
    double *dig, *scratch;  // backend memory: the digits (dlen), gram_digits' scratch
    int64_t ch, ld, dlen;
    ann_left left;
} gram_pass;

static int64_t gram_chunk_rows(const ds_ctx *ctx, const ann_opts *o, int64_t ld, int64_t block)
{
    const int64_t c = ann_chunk_rows(ctx, o, ld, INT64_MAX) / block * block;
    return c > block ? c : block;
}

// dig += the digits of the rows to do, a checkpoint's safe point between two chunks. Every rank takes as
// many steps as the rank with the most chunks, so that the safe points' collectives match.
static int gram_rows(ds_ctx *ctx, const ds_data *d, const ann_opts *o, const double *Wd, const double *tc,
                     const ann_model *m, const ann_fix *fx, gram_pass *g)
{
    const int64_t n = d->X.cols;
    int64_t steps = ann_left_chunks(&g->left, g->ch);
    MPI_Allreduce(MPI_IN_PLACE, &steps, 1, MPI_INT64_T, MPI_MAX, ctx->comm);
    int rc = DS_OK;
    for (int64_t s = 0; rc == DS_OK && s < steps; s++) {
        if (s > 0)
            rc = ann_ckpt_gram(ctx, o, m, g->dig, g->dlen, &g->left, s, steps);
        int64_t a = 0, nr = rc == DS_OK ? ann_left_next(&g->left, g->ch, &a) : 0;
        ctx_beat(ctx, "ann: H'H by row chunks");
        const int64_t r = a - d->row0;
        if (nr > 0)
            rc = ctx->be->ann->gram_digits(ctx, (const double *)d->X.data + r * n, nr, n, Wd, o->neurons, tc + r,
                                           m->outputs, g->ld, fx, g->scratch, g->dig);
        rc = ctx_agree(ctx, rc);
    }
    return rc;
}

// The digits start at zero, or on rank 0 at a resumed run's (ann_resume_start); the rows to do.
static int gram_open(ds_ctx *ctx, const ds_data *d, const ann_resume *rs, gram_pass *g)
{
    DS_CHECK(ann_left_make(ctx, rs, d->row0, d->X.rows, &g->left));
    DS_CHECK(ctx->be->fill(ctx, g->dig, g->dlen, 0.0));  // a rank without rows still adds its (zero) share
    if (!rs || rs->digits == 0 || ctx->rank != 0)
        return DS_OK;
    double *start = malloc((size_t)g->dlen * sizeof(double));
    if (!start)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    ann_resume_start(rs, g->dlen, start);
    const int rc = ctx->be->upload(ctx, g->dig, start, (size_t)g->dlen * sizeof(double));
    free(start);
    return rc;
}

// dig = the digits of the rank's rows (plus, resumed, the checkpoint's on rank 0). Collective.
static int gram_local(ds_ctx *ctx, const ds_data *d, const ann_opts *o, const double *Wd, const double *tc,
                      const ann_model *m, const ann_resume *rs, const ann_fix *fx, gram_pass *g)
{
    if (o->stream)  // the stream's chunks are whole blocks (cmd_ann_stream.c's plan)
        return ctx_agree(ctx, ann_stream_gram(ctx, o->stream, m, Wd, g->ld, fx, g->scratch, g->dig));
    g->ch = gram_chunk_rows(ctx, o, g->ld, fx->block);
    int rc = ctx_agree(ctx, gram_open(ctx, d, rs, g));
    return rc == DS_OK ? gram_rows(ctx, d, o, Wd, tc, m, fx, g) : rc;
}

// The fixed point's scales into *fx (col uploaded into *cold) and the pass's buffers.
static int gram_buffers(ds_ctx *ctx, const ds_data *d, const ann_model *m, double tc_max, ann_fix *fx,
                        void **cold, gram_pass *g)
{
    const ds_backend *be = ctx->be;
    const int64_t K1 = m->neurons + 1, ns = be->ann->gram_scratch(g->ld, fx->block);
    double *col = malloc((size_t)g->ld * sizeof(double));
    if (!col)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    fx->lo = ann_fix_scales(d->rows_global, K1, m->outputs, tc_max, col, &fx->s0);
    int rc = ann_upload_new(ctx, cold, col, (size_t)g->ld * sizeof(double));
    free(col);
    fx->col = *cold;
    if (rc == DS_OK)
        rc = be->alloc(ctx, (void **)&g->dig, (size_t)g->dlen * sizeof(double));
    if (rc == DS_OK && ns > 0)
        rc = be->alloc(ctx, (void **)&g->scratch, (size_t)ns * sizeof(double));
    return rc;
}

int ann_output_gram(ds_ctx *ctx, const ds_data *d, const ann_opts *o, const double *Wd, const double *tc,
                    double tc_max, const ann_model *m, const ann_resume *rs, double *S)
{
    const ds_backend *be = ctx->be;
    const int64_t ld = o->neurons + 1 + m->outputs;
    ann_fix fx = {.block = ann_block_rows(d->rows_global)};
    gram_pass g = {.ld = ld, .dlen = 2 * ann_tri(ld)};
    void *cold = NULL;
    int rc = ctx_agree(ctx, gram_buffers(ctx, d, m, tc_max, &fx, &cold, &g));
    if (rc == DS_OK)
        rc = gram_local(ctx, d, o, Wd, tc, m, rs, &fx, &g);
    if (rc == DS_OK)
        rc = ctx_agree(ctx, be->sync(ctx));
    if (rc == DS_OK)  // integers below 2^53: the allreduce adds them exactly, in any order
        rc = ctx_agree(ctx, be->allreduce_sum(ctx, g.dig, g.dlen));
    if (rc == DS_OK)
        rc = ctx_agree(ctx, be->ann->gram_join(ctx, g.dig, ld, &fx, S));
    void *bufs[] = {cold, g.dig, g.scratch};
    for (int i = 0; i < 3; i++)
        if (bufs[i])
            be->free(ctx, bufs[i]);
    free(g.left.s);
    return rc;
}
