// ann_ckpt.c: checkpoints of the network's training (see ann_ckpt.h). Two kinds of safe point: after the
// hidden fits and the all-gather of W (the state is W), and between two chunks of the Gram pass (W, the
// digits of the rows done summed over the ranks, and the spans of rows still to do). Not inside the fits: they
// take a small share of a training (a few per cent on the seed's problem) and their rounds shard the
// neurons by rank count, so a partial set would not map onto another number of ranks simply.
#include "ann/ann_ckpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt.h"

// The checkpoint's counters: whether it holds digits (0 or 1), the spans still to do, the failed neurons.
enum { CK_DIGITS, CK_SPANS, CK_FAILED, CK_LEN };
static const int64_t MAX_STATE = (int64_t)1 << 40;  // doubles: larger is a damaged file, not a run
static const int64_t PIECE = (int64_t)1 << 27;      // doubles a message, within MPI's int counts

static int whole_in(double v, double lo, double hi)
{
    return v == floor(v) && v >= lo && v <= hi;
}

static int counters_check(ds_ctx *ctx, const ann_opts *o, const double *ck, int64_t wlen, int64_t dlen, int64_t m)
{
    const char *f = o->ckpt->restart;
    if (!whole_in(ck[CK_DIGITS], 0, 1) || !whole_in(ck[CK_SPANS], 0, (double)m) ||
        !whole_in(ck[CK_FAILED], 0, (double)o->neurons))
        return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /counters out of range", f);
    if ((double)wlen + ck[CK_DIGITS] * (double)dlen + 2 * ck[CK_SPANS] > (double)MAX_STATE)
        return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /counters: a state of more than 2^40 values", f);
    return DS_OK;
}

// A span's bound: a block's first row, or m.
static int on_block(double v, int64_t block, int64_t m)
{
    return v == (double)m || fmod(v, (double)block) == 0;
}

// The spans: whole rows, each non-empty, in increasing order without overlap, within 0 .. m, whole blocks.
static int spans_check(ds_ctx *ctx, const ann_opts *o, const ann_resume *rs, int64_t m, int64_t block)
{
    const double *sp = rs->state + rs->spans_at;
    for (int64_t i = 0; i < rs->spans; i++) {
        const double end = i > 0 ? sp[2 * i - 1] : 0;  // the span before ends here
        if (!whole_in(sp[2 * i], end, (double)m) || !whole_in(sp[2 * i + 1], sp[2 * i] + 1, (double)m))
            return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /state: span %lld of the rows still to do is out of order",
                           o->ckpt->restart, (long long)i);
        if (!on_block(sp[2 * i], block, m) || !on_block(sp[2 * i + 1], block, m))
            return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /state: span %lld of the rows still to do is not whole "
                           "blocks of %lld rows", o->ckpt->restart, (long long)i, (long long)block);
    }
    return DS_OK;
}

int ann_ckpt_read(ds_ctx *ctx, const ann_opts *o, int64_t n, int64_t dlen, int64_t m, int64_t block, ann_resume *rs)
{
    const int64_t wlen = o->neurons * (n + 1);
    double ck[CK_LEN] = {0};
    memset(rs, 0, sizeof *rs);
    DS_CHECK(ckpt_read_head(ctx, o->ckpt, ck, CK_LEN));
    int rc = counters_check(ctx, o, ck, wlen, dlen, m);
    if (rc == DS_OK) {
        *rs = (ann_resume){.digits = (int64_t)ck[CK_DIGITS], .spans = (int64_t)ck[CK_SPANS],
                           .failed = (int64_t)ck[CK_FAILED], .digits_at = wlen};
        rs->spans_at = wlen + rs->digits * dlen;
        rs->state = malloc((size_t)(rs->spans_at + 2 * rs->spans) * sizeof(double));
        if (!rs->state)
            rc = ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for the checkpoint %s", o->ckpt->restart);
    }
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = ckpt_read_state(ctx, o->ckpt, rs->state, rs->spans_at + 2 * rs->spans);
    if (rc == DS_OK)
        rc = ctx_agree(ctx, spans_check(ctx, o, rs, m, block));
    return rc;
}

void ann_resume_free(ann_resume *rs)
{
    free(rs->state);
    rs->state = NULL;
}

int ann_left_make(ds_ctx *ctx, const ann_resume *rs, int64_t row0, int64_t rows, ann_left *td)
{
    memset(td, 0, sizeof *td);
    const int64_t cap = rs ? rs->spans : 1;
    td->s = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *td->s);
    if (!td->s)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (!rs) {
        if (rows > 0)
            td->s[td->n++] = (ann_span){row0, row0 + rows};
        return DS_OK;
    }
    const double *sp = rs->state + rs->spans_at;
    for (int64_t i = 0; i < rs->spans; i++) {
        int64_t a = (int64_t)sp[2 * i], b = (int64_t)sp[2 * i + 1];
        a = a > row0 ? a : row0;
        b = b < row0 + rows ? b : row0 + rows;
        if (a < b)
            td->s[td->n++] = (ann_span){a, b};
    }
    return DS_OK;
}

int64_t ann_left_next(ann_left *td, int64_t ch, int64_t *a)
{
    if (td->at >= td->n)
        return 0;
    const ann_span *s = &td->s[td->at];
    *a = s->a + td->off;
    const int64_t nr = s->b - *a < ch ? s->b - *a : ch;
    td->off += nr;
    if (s->a + td->off >= s->b)
        td->at++, td->off = 0;
    return nr;
}

int64_t ann_left_chunks(const ann_left *td, int64_t ch)
{
    int64_t c = 0;
    for (int64_t i = td->at; i < td->n; i++) {
        const int64_t len = td->s[i].b - td->s[i].a - (i == td->at ? td->off : 0);
        c += (len + ch - 1) / ch;
    }
    return c;
}

void ann_resume_start(const ann_resume *rs, int64_t dlen, double *dig)
{
    memcpy(dig, rs->state + rs->digits_at, (size_t)dlen * sizeof(double));
}

// ---------------------------------------------------------------------------------------------------
// Writing: rank 0 assembles the state (the other ranks send it their parts) and core/ckpt writes it.

// After ckpt_write (rc, agreed): the log line, and DS_STOPPED when the checkpoint was taken on a signal.
static int after_write(ds_ctx *ctx, const ann_opts *o, int due, int rc, const char *when)
{
    DS_CHECK(rc);
    ctx_log(ctx, "ann: checkpoint %s written to %s", when, o->ckpt->path);
    if (due == 2)
        return ds_fail(&ctx->msg, DS_STOPPED, "ann: stopped on a signal %s; resume with --restart %s", when,
                       o->ckpt->path);
    return DS_OK;
}

int ann_ckpt_fitted(ds_ctx *ctx, const ann_opts *o, const ann_model *m, int64_t rows_global)
{
    const int due = ckpt_due(ctx, o->ckpt);
    if (!due)
        return DS_OK;
    const int64_t wlen = m->neurons * (m->n + 1);
    double *state = ctx->rank == 0 ? malloc((size_t)(wlen + 2) * sizeof(double)) : NULL;
    int rc = ctx->rank == 0 && !state ? ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for a checkpoint") : DS_OK;
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK) {
        if (state) {  // no partial Gram yet: every row still to do
            memcpy(state, m->W, (size_t)wlen * sizeof(double));
            state[wlen] = 0, state[wlen + 1] = (double)rows_global;
        }
        const double ck[CK_LEN] = {0, 1, (double)m->failed};
        rc = ckpt_write(ctx, o->ckpt, state, wlen + 2, ck, CK_LEN);
    }
    free(state);
    return after_write(ctx, o, due, rc, "after the hidden fits");
}

// Rank 0 receives the sum over the ranks of their n digits into sum, in pieces that MPI's int counts can
// hold: integers below 2^53, so the sum is exact whatever order MPI takes.
static void reduce_big(ds_ctx *ctx, const double *mine, int64_t n, double *sum)
{
    for (int64_t i = 0; i < n; i += PIECE)
        MPI_Reduce(mine + i, sum ? sum + i : NULL, (int)(n - i < PIECE ? n - i : PIECE), MPI_DOUBLE, MPI_SUM, 0,
                   ctx->comm);
}

// This rank's rows still to do as (a, b) pairs into left (2 × spans): the rest of td from its position.
static int64_t rows_left(const ann_left *td, double *left)
{
    int64_t k = 0;
    for (int64_t i = td->at; i < td->n; i++, k++) {
        left[2 * k] = (double)(td->s[i].a + (i == td->at ? td->off : 0));
        left[2 * k + 1] = (double)td->s[i].b;
    }
    return k;
}

// Rank 0 receives every rank's spans after the Grams (at state + at); *total: their count. Each rank's
// spans lie in its own block, so rank order keeps them in increasing order. cnt: 2p ints on rank 0.
static void gather_spans(ds_ctx *ctx, const double *left, int64_t nleft, double *state, int64_t at, int *cnt,
                         int64_t *total)
{
    const int mine = (int)(2 * nleft);
    MPI_Gather(&mine, 1, MPI_INT, cnt, 1, MPI_INT, 0, ctx->comm);
    int64_t sum = 0;
    for (int q = 0; cnt && q < ctx->nranks; q++)
        cnt[ctx->nranks + q] = (int)sum, sum += cnt[q];
    *total = sum / 2;
    MPI_Gatherv(left, mine, MPI_DOUBLE, state ? state + at : NULL, cnt, cnt ? cnt + ctx->nranks : NULL, MPI_DOUBLE, 0,
                ctx->comm);
}

int ann_ckpt_gram(ds_ctx *ctx, const ann_opts *o, const ann_model *m, const double *dig, int64_t dlen,
                  const ann_left *td, int64_t chunk, int64_t chunks)
{
    const int due = ckpt_due(ctx, o->ckpt);
    if (!due)
        return DS_OK;
    const int64_t p = ctx->nranks, wlen = m->neurons * (m->n + 1), at = wlen + dlen;
    double *mine = malloc((size_t)dlen * sizeof(double)), *left = malloc((size_t)(2 * td->n + 2) * sizeof(double));
    // Rank 0's state: W, the summed digits, then room for every rank's spans (at most nmax each).
    int64_t nmax = td->n + 1;
    MPI_Allreduce(MPI_IN_PLACE, &nmax, 1, MPI_INT64_T, MPI_MAX, ctx->comm);
    double *state = ctx->rank == 0 ? malloc((size_t)(at + 2 * p * nmax) * sizeof(double)) : NULL;
    int *cnt = ctx->rank == 0 ? malloc((size_t)(2 * p) * sizeof(int)) : NULL;
    int rc = mine && left && ((state && cnt) || ctx->rank != 0)
                 ? DS_OK
                 : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for a checkpoint");
    if (rc == DS_OK)
        rc = ctx->be->download(ctx, mine, dig, (size_t)dlen * sizeof(double));
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK) {
        int64_t total = 0;
        if (state)
            memcpy(state, m->W, (size_t)wlen * sizeof(double));
        reduce_big(ctx, mine, dlen, state ? state + wlen : NULL);
        gather_spans(ctx, left, rows_left(td, left), state, at, cnt, &total);
        const double ck[CK_LEN] = {1, (double)total, (double)m->failed};
        rc = ckpt_write(ctx, o->ckpt, state, at + 2 * total, ck, CK_LEN);
    }
    free(mine), free(left), free(state), free(cnt);
    char when[96];
    snprintf(when, sizeof when, "after %lld of %lld row chunks of H'H", (long long)chunk, (long long)chunks);
    return after_write(ctx, o, due, rc, when);
}
