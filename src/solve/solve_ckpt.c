// solve_ckpt.c: checkpoints of a solve and the restart from them (solve_work.h). Two kinds of state:
//   phase 1, inside the Gram pass of a streamed X (hours for a file of terabytes): each rank's partial
//     [G | c | yy] over the rows it has read, and the rows it has yet to read as global ranges. A restart
//     on the same ranks (each rank's block the same) gives every rank its own partial and ranges back, so
//     the sums meet the same rounding as without the stop: the same bits. On other ranks, rank 0 starts
//     from the partials summed and every rank reads the ranges that fall in its new block: the sum of
//     the same terms in another order, equal to a few units of rounding.
//   phase 2, after the sum over ranks: [G | c | yy] and the Gram route's sweep state (a, g, ‖e‖², the
//     history, the stop test's values). The sweeps run replicated on every rank, so a restart continues
//     them to the same bits on any number of ranks; X is read again only for the certificate.
// State layout, phase 1: parts × [row0, rows, ranges] | ranges × [first, end) | parts × len partials;
// phase 2: [G | c | yy] (len) | a (n) | g (n) | ‖e‖² | history (iters + 1); both then end in the scales:
// the powers of two the sums' X's columns (n) and y were divided by, and the largest magnitudes read of X's
// columns and y (n + 1; phase 1's, before the stop: a stream's rescale decision counts them).
// Format SB_CK_FORMAT (ds_ckpt.format).
#include "solve/solve_work.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t sb_ck_len(int64_t n)
{
    return n * n + n + 1;
}

static int64_t sb_ck_scales_len(int64_t n)
{
    return 2 * n + 2;
}

static int64_t sb_ck_state_len(const double *ck, int64_t n, int iters)
{
    if ((int)ck[SB_CK_PHASE] == 1)
        return 3 * (int64_t)ck[SB_CK_PARTS] + 2 * (int64_t)ck[SB_CK_SPANS] + (int64_t)ck[SB_CK_PARTS] * sb_ck_len(n) +
               sb_ck_scales_len(n);
    return sb_ck_len(n) + 2 * n + 1 + iters + 1 + sb_ck_scales_len(n);
}

// Scales read back: whole powers of two within double's reach, magnitudes finite and not negative.
static int sb_ck_scales_ok(const double *sc, int64_t n)
{
    for (int64_t j = 0; j <= n; j++)
        if (!(fabs(sc[j]) <= 4096 && sc[j] == floor(sc[j]) && sc[n + 1 + j] >= 0 && sc[n + 1 + j] <= DBL_MAX))
            return 0;
    return 1;
}

// The powers of two the solve's sums divide by: a file stream's (set between its passes), else those of
// the data in memory.
static void sb_ck_exps(const sb_work *w, const int **xe, int *ye)
{
    const int stream = w->rows && !w->rows->mem_x;
    *xe = stream ? w->rows->x_exps : w->xe;
    *ye = stream ? w->rows->y_exp : w->ye;
}

// The scales (sb_ck_scales_len) into dst: big, the largest magnitudes read (n + 1), or NULL for none.
static void sb_ck_put_scales(const sb_work *w, int64_t n, const double *big, double *dst)
{
    const int *xe;
    int ye;
    sb_ck_exps(w, &xe, &ye);
    for (int64_t j = 0; j < n; j++)
        dst[j] = xe ? xe[j] : 0;
    dst[n] = ye;
    for (int64_t j = 0; j <= n; j++)
        dst[n + 1 + j] = big ? big[j] : 0.0;
}

// A restart's powers of two: a file stream divides its chunks by them (as the rows summed before the stop
// were); data in memory must have been divided by the same (data.h's rule on the same file gives them).
static int sb_ck_take_scales(ds_ctx *ctx, sb_work *w, int64_t n)
{
    const double *sc = w->rs.scales;
    if (w->rows && !w->rows->mem_x) {
        int64_t k = 0;
        for (int64_t j = 0; j < n; j++)
            k += sc[j] != 0;
        free(w->rows->x_exps);
        w->rows->x_exps = k ? malloc((size_t)n * sizeof(int)) : NULL;
        if (k && !w->rows->x_exps)
            return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
        for (int64_t j = 0; k && j < n; j++)
            w->rows->x_exps[j] = (int)sc[j];
        w->rows->y_exp = (int)sc[n];
        return DS_OK;
    }
    int same = (int)sc[n] == w->ye;
    for (int64_t j = 0; j < n; j++)
        same &= (int)sc[j] == (w->xe ? w->xe[j] : 0);
    return same ? DS_OK
                : ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /state: its sums divide X or y by other powers of two than "
                          "this data needs (not the same file?): run it again from the start", w->ckpt->restart);
}

// A phase-1 state names rows of this problem only: ranges within the rows, parts that tile them.
static int sb_ck_spans_ok(const double *ck, const double *st, int64_t rows_global)
{
    const int64_t parts = (int64_t)ck[SB_CK_PARTS], spans = (int64_t)ck[SB_CK_SPANS];
    int64_t covered = 0, listed = 0;
    for (int64_t q = 0; q < parts; q++) {
        const double r0 = st[3 * q], nr = st[3 * q + 1], k = st[3 * q + 2];
        if (!(r0 >= 0 && nr >= 0 && r0 + nr <= (double)rows_global && k >= 0 && k <= (double)spans))
            return 0;
        covered += (int64_t)nr, listed += (int64_t)k;
    }
    const double *sp = st + 3 * parts;
    for (int64_t i = 0; i < spans; i++)
        if (!(sp[2 * i] >= 0 && sp[2 * i] <= sp[2 * i + 1] && sp[2 * i + 1] <= (double)rows_global))
            return 0;
    return covered == rows_global && listed == spans;
}

int sb_ckpt_begin(ds_ctx *ctx, const sb_opts *o, int64_t n, int64_t rows_global, sb_work *w)
{
    w->ckpt = o->ckpt;
    if (!o->ckpt)
        return DS_OK;
    ckpt_start(ctx, o->ckpt);
    if (!o->ckpt->restart)
        return DS_OK;
    double *ck = w->rs.ck;
    DS_CHECK(ckpt_read_head(ctx, o->ckpt, ck, SB_CK_LEN));
    const int phase = (int)ck[SB_CK_PHASE];
    int rc = DS_OK;
    if (!((phase == 1 && ck[SB_CK_PARTS] >= 1 && ck[SB_CK_PARTS] <= 1e6 && ck[SB_CK_SPANS] >= 0 &&
           ck[SB_CK_SPANS] <= 1e6) ||
          (phase == 2 && ck[SB_CK_SWEEP] >= 0 && ck[SB_CK_SWEEP] <= o->iters)))
        rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /counters out of range", o->ckpt->restart);
    DS_CHECK(ctx_agree(ctx, rc));
    const int64_t len = sb_ck_state_len(ck, n, o->iters);
    w->rs.state = malloc((size_t)len * sizeof(double));
    rc = w->rs.state ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for the checkpoint (%.3g GB)",
                                       (double)len * 8e-9);
    DS_CHECK(ctx_agree(ctx, rc));
    DS_CHECK(ckpt_read_state(ctx, o->ckpt, w->rs.state, len));
    w->rs.scales = w->rs.state + len - sb_ck_scales_len(n);
    if (phase == 1 && !sb_ck_spans_ok(ck, w->rs.state, rows_global))
        rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /state: row ranges that do not belong to %lld rows",
                     o->ckpt->restart, (long long)rows_global);
    else if (!sb_ck_scales_ok(w->rs.scales, n))
        rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /state: powers of two or magnitudes out of range",
                     o->ckpt->restart);
    DS_CHECK(ctx_agree(ctx, rc));
    w->rs.phase = phase;
    ctx_log(ctx, "solve: resuming from %s (%s)", o->ckpt->restart,
            phase == 1 ? "inside the pass over X" : "after X'X");
    return DS_OK;
}

void sb_ckpt_end(sb_work *w)
{
    free(w->rs.state);
    free(w->rs.spans);
    w->rs.state = NULL, w->rs.spans = NULL, w->rs.scales = NULL;
    w->rs.phase = 0;
}

static int sb_cmp_span(const void *a, const void *b)
{
    const int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
    return (x > y) - (x < y);
}

// This rank's part of the checkpoint's ranges: its own (same ranks) or every range clipped to its block.
static int sb_ck_my_spans(ds_ctx *ctx, sb_work *w, int same)
{
    const ds_rows *s = w->rows;
    const double *st = w->rs.state;
    const int64_t parts = (int64_t)w->rs.ck[SB_CK_PARTS], nsp = (int64_t)w->rs.ck[SB_CK_SPANS];
    const double *sp = st + 3 * parts;
    int64_t first = 0, count = nsp;
    if (same) {
        for (int64_t q = 0; q < ctx->rank; q++)
            first += (int64_t)st[3 * q + 2];
        count = (int64_t)st[3 * ctx->rank + 2];
    }
    w->rs.spans = malloc((size_t)(count + 1) * 2 * sizeof(int64_t));
    if (!w->rs.spans)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    int k = 0;
    for (int64_t i = first; i < first + count; i++) {
        const int64_t a = (int64_t)sp[2 * i] - s->row0, b = (int64_t)sp[2 * i + 1] - s->row0;
        const int64_t lo = a > 0 ? a : 0, hi = b < s->rows ? b : s->rows;
        if (lo < hi)
            w->rs.spans[2 * k] = lo, w->rs.spans[2 * k + 1] = hi, k++;
    }
    qsort(w->rs.spans, (size_t)k, 2 * sizeof(int64_t), sb_cmp_span);
    w->rs.nspans = k;
    return DS_OK;
}

int sb_ckpt_pass_start(ds_ctx *ctx, sb_work *w, int64_t len, double *sum, int *have_sum)
{
    *have_sum = 0;
    if (w->rs.phase != 1)
        return DS_OK;
    const double *st = w->rs.state, *ck = w->rs.ck;
    const int64_t parts = (int64_t)ck[SB_CK_PARTS];
    const double *partial = st + 3 * parts + 2 * (int64_t)ck[SB_CK_SPANS];
    int same = parts == ctx->nranks && st[3 * ctx->rank] == (double)w->rows->row0 &&
               st[3 * ctx->rank + 1] == (double)w->rows->rows;
    MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, ctx->comm);
    int rc = sb_ck_my_spans(ctx, w, same);
    DS_CHECK(ctx_agree(ctx, rc == DS_OK ? sb_ck_take_scales(ctx, w, w->rows->cols) : rc));
    w->rows->spans = w->rs.spans, w->rows->nspans = w->rs.nspans;
    if (same) {
        *have_sum = 1;
        return ctx->be->upload(ctx, sum, partial + (int64_t)ctx->rank * len, (size_t)len * sizeof(double));
    }
    if (ctx->rank != 0)
        return DS_OK;
    double *acc = w->rs.state + 3 * parts + 2 * (int64_t)ck[SB_CK_SPANS];  // partial 0, summed into in place
    for (int64_t q = 1; q < parts; q++)
        for (int64_t i = 0; i < len; i++)
            acc[i] += partial[q * len + i];
    *have_sum = 1;
    return ctx->be->upload(ctx, sum, acc, (size_t)len * sizeof(double));
}

// The rows of this rank's pass not yet read after `consumed` of them, as global ranges (at most
// nspans + 1 pairs in out).
static int sb_ck_left(const ds_rows *s, int64_t consumed, int64_t *out)
{
    const int64_t full[2] = {0, s->rows};
    const int64_t *sp = s->spans ? s->spans : full;
    const int nsp = s->spans ? s->nspans : 1;
    int k = 0;
    for (int i = 0; i < nsp; i++) {
        const int64_t len = sp[2 * i + 1] - sp[2 * i], skip = consumed < len ? consumed : len;
        consumed -= skip;
        if (skip < len)
            out[2 * k] = s->row0 + sp[2 * i] + skip, out[2 * k + 1] = s->row0 + sp[2 * i + 1], k++;
    }
    return k;
}

// Rank 0 gathers every rank's [row0, rows, ranges], ranges and partial into one state.
static int sb_ck_gather_pass(ds_ctx *ctx, const sb_work *w, int64_t len, const double *mine, int64_t consumed,
                             double **state, int64_t *nstate, int *nspans)
{
    const ds_rows *s = w->rows;
    const int p = ctx->nranks;
    int64_t *left = malloc((size_t)(s->spans ? s->nspans + 1 : 2) * 2 * sizeof(int64_t));
    if (!left)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    const int k = sb_ck_left(s, consumed, left);
    double head[3] = {(double)s->row0, (double)s->rows, (double)k};
    double *heads = ctx->rank == 0 ? malloc((size_t)p * 3 * sizeof(double)) : NULL;
    int rc = ctx->rank != 0 || heads ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    MPI_Gather(head, 3, MPI_DOUBLE, heads, 3, MPI_DOUBLE, 0, ctx->comm);
    int total = 0;
    int *counts = NULL, *displs = NULL;
    double *mysp = malloc((size_t)(2 * k + 1) * sizeof(double));
    for (int i = 0; mysp && i < 2 * k; i++)
        mysp[i] = (double)left[i];
    if (ctx->rank == 0 && heads) {
        counts = calloc((size_t)p, sizeof(int)), displs = calloc((size_t)p, sizeof(int));
        for (int q = 0; counts && displs && q < p; q++)
            displs[q] = 2 * total, counts[q] = 2 * (int)heads[3 * q + 2], total += (int)heads[3 * q + 2];
        *nstate = 3 * (int64_t)p + 2 * (int64_t)total + (int64_t)p * len + sb_ck_scales_len(s->cols);
        *state = counts && displs ? malloc((size_t)*nstate * sizeof(double)) : NULL;
        if (!*state)
            rc = ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for the checkpoint (%.3g GB)",
                         (double)*nstate * 8e-9);
        else
            memcpy(*state, heads, (size_t)p * 3 * sizeof(double));
    }
    rc = mysp ? rc : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK) {
        MPI_Gatherv(mysp, 2 * k, MPI_DOUBLE, ctx->rank == 0 ? *state + 3 * p : NULL, counts, displs, MPI_DOUBLE, 0,
                    ctx->comm);
        // The partials one rank at a time (each up to n² doubles: no single message of p of them).
        for (int q = 0; q < p; q++) {
            if (ctx->rank == 0) {
                double *dst = *state + 3 * p + 2 * (int64_t)total + (int64_t)q * len;
                if (q == 0)
                    memcpy(dst, mine, (size_t)len * sizeof(double));
                else
                    MPI_Recv(dst, (int)len, MPI_DOUBLE, q, 77, ctx->comm, MPI_STATUS_IGNORE);
            } else if (ctx->rank == q) {
                MPI_Send(mine, (int)len, MPI_DOUBLE, 0, 77, ctx->comm);
            }
        }
    }
    *nspans = total;
    free(left), free(heads), free(counts), free(displs), free(mysp);
    return rc;
}

// After a checkpoint: the line that says so, and DS_STOPPED when a signal asked for it.
static int sb_ck_written(ds_ctx *ctx, const sb_work *w, int due, const char *where)
{
    ctx_log(ctx, "solve: checkpoint %s written to %s", where, w->ckpt->path);
    if (due != 2)
        return DS_OK;
    return ds_fail(&ctx->msg, DS_STOPPED, "solve: stopped on a signal after a checkpoint %s; resume with --restart %s",
                   where, w->ckpt->path);
}

int sb_ckpt_pass(ds_ctx *ctx, sb_work *w, int64_t len, const double *sum, int have_sum, int64_t consumed)
{
    const int due = ckpt_due(ctx, w->ckpt);
    if (!due)
        return DS_OK;
    double *mine = calloc((size_t)len, sizeof(double)), *state = NULL;
    int rc = mine ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK && have_sum)
        rc = ctx->be->download(ctx, mine, sum, (size_t)len * sizeof(double));
    int64_t nstate = 0;
    int nspans = 0;
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = sb_ck_gather_pass(ctx, w, len, mine, consumed, &state, &nstate, &nspans);
    const ds_rows *s = w->rows;
    const int64_t n = s->cols;
    double *big = rc == DS_OK ? calloc((size_t)n + 1, sizeof(double)) : NULL;
    rc = ctx_agree(ctx, rc == DS_OK && !big ? ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory") : rc);
    if (rc == DS_OK) {
        pthread_mutex_lock((pthread_mutex_t *)&s->mu);  // the reader raises them
        for (int64_t j = 0; s->big && j <= n; j++)
            big[j] = s->big[j];
        pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
        MPI_Allreduce(MPI_IN_PLACE, big, (int)n + 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
        for (int64_t j = 0; w->rs.scales && j <= n; j++)  // the rows summed before a restart count too
            big[j] = fmax(big[j], w->rs.scales[n + 1 + j]);
        if (ctx->rank == 0)
            sb_ck_put_scales(w, n, big, state + nstate - sb_ck_scales_len(n));
        const double ck[SB_CK_LEN] = {[SB_CK_PHASE] = 1, [SB_CK_PARTS] = ctx->nranks, [SB_CK_SPANS] = nspans};
        rc = ckpt_write(ctx, w->ckpt, state, nstate, ck, SB_CK_LEN);
    }
    free(big);
    free(mine), free(state);
    DS_CHECK(rc);
    return sb_ck_written(ctx, w, due, "inside the pass over X");
}

// The backend vectors of phase 2, in state order.
static void sb_ck_system(const sb_work *w, int64_t n, int iters, double *v[5], int64_t len[5])
{
    double *bufs[5] = {w->sys, w->a, w->g, w->ee, w->hist};
    const int64_t lens[5] = {sb_ck_len(n), n, n, 1, iters + 1};
    for (int i = 0; i < 5; i++)
        v[i] = bufs[i], len[i] = lens[i];
}

int sb_ckpt_sweep(ds_ctx *ctx, sb_work *w, int64_t n, int iters, int s, const double loop[4])
{
    const int due = ckpt_due(ctx, w->ckpt);
    if (!due)
        return DS_OK;
    double *v[5];
    int64_t len[5], total = sb_ck_scales_len(n);
    sb_ck_system(w, n, iters, v, len);
    for (int i = 0; i < 5; i++)
        total += len[i];
    double *state = ctx->rank == 0 ? malloc((size_t)total * sizeof(double)) : NULL;
    if (state)
        sb_ck_put_scales(w, n, NULL, state + total - sb_ck_scales_len(n));
    int rc = ctx->rank != 0 || state ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int i = 0, off = 0; ctx->rank == 0 && rc == DS_OK && i < 5; off += (int)len[i], i++)
        rc = ctx->be->download(ctx, state + off, v[i], (size_t)len[i] * sizeof(double));
    if (rc == DS_OK)
        rc = ctx->be->sync(ctx);
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK) {
        const double ck[SB_CK_LEN] = {[SB_CK_PHASE] = 2, [SB_CK_SWEEP] = s, [SB_CK_EE_PREV] = loop[0],
                                      [SB_CK_D_PREV] = loop[1], [SB_CK_YY] = loop[2], [SB_CK_REL_PREV] = loop[3]};
        rc = ckpt_write(ctx, w->ckpt, state, total, ck, SB_CK_LEN);
    }
    free(state);
    DS_CHECK(rc);
    char where[64];
    snprintf(where, sizeof where, "after %d sweep%s", s, s == 1 ? "" : "s");
    return sb_ck_written(ctx, w, due, where);
}

int sb_ckpt_resume_system(ds_ctx *ctx, sb_work *w, int64_t n, int iters)
{
    double *v[5];
    int64_t len[5], off = 0;
    sb_ck_system(w, n, iters, v, len);
    DS_CHECK(sb_ck_take_scales(ctx, w, n));  // the certificate's pass divides X as the sums did
    for (int i = 0; i < 5; off += len[i], i++)
        DS_CHECK(ctx->be->upload(ctx, v[i], w->rs.state + off, (size_t)len[i] * sizeof(double)));
    sb_tiny_later(w, w->sys, w->sys + n * n, 0);  // the restored G is checked as a fresh one (sb_gram_setup)
    return ctx->be->gather(ctx, w->diag, w->sys, n, n + 1);
}
