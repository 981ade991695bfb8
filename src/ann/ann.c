// ann.c: training and prediction of the least-squares network (see ann.h), written against ds_backend
// and ann_ops: the output layer, the targets, prediction and metrics. The hidden layer is in
// ann_hidden.c, its subsets and row exchange in ann_rows.c, the checkpoints' state in ann_ckpt.c.
#include "ann/ann.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ann/ann_ckpt.h"
#include "ann/ann_hidden.h"
#include "ann/ann_stream.h"
#include "core/ckpt.h"
#include "solve/solve_ops.h"

static int64_t ann_budget(const ds_ctx *ctx, const ann_opts *o)
{
    if (o->budget_bytes > 0)
        return o->budget_bytes;
    return ctx->be->host_memory ? (int64_t)256 << 20 : (int64_t)2 << 30;
}

// The training targets (see targets_map): z for the hidden fits, tc for the output layer.
typedef struct ann_targets {
    double *z, *tc;           // [rows], host
    double tc_scale, tc_shift;  // y = tc_scale·tc + tc_shift
} ann_targets;

// ---------------------------------------------------------------------------------------------------
// Output layer: S = [H 1 T]ᵀ[H 1 T] over the rank's rows chunk by chunk, one allreduce, the solve.

// The Gram's buffer: [HᵀH … (ld × ld) | ld | 1], as the solve table's gram writes it.
static int64_t gram_size(int64_t ld)
{
    return ld * ld + ld + 1;
}

int64_t ann_chunk_rows(const ds_ctx *ctx, const ann_opts *o, int64_t ld, int64_t rows)
{
    int64_t c = ann_budget(ctx, o) / (ld * (int64_t)sizeof(double));
    c = c < 1 ? 1 : c > INT_MAX ? INT_MAX : c;  // BLAS takes int sizes
    return c < rows ? c : rows > 0 ? rows : 1;
}

// The Gram pass over a rank's rows to do (ann_left), in chunks of ch rows: by forward_gram where the
// backend has it (the CPU's, which never stores H), else each chunk of H formed by forward and its Gram
// taken by the solve table's gram. A chunk's Gram goes straight into acc while acc is still zero, into
// tmp and then added otherwise: the same sums in the same order whether or not the pass was resumed
// from a checkpoint between chunks (on the same ranks: bitwise).
typedef struct gram_pass {
    void *H, *tmp;  // backend memory: a chunk of H (ch × ld; not with forward_gram), a chunk's Gram (gsize)
    double *start;  // host: the Gram a resumed rank starts from (ann_resume_start)
    int fresh;      // acc is still zero
    int64_t ch, ld, gsize;
    ann_left left;
} gram_pass;

// out = the Gram of the rank's local rows r .. r+nr−1 (out's first ld·ld entries, the rest zero or as
// the solve table's gram leaves them).
static int gram_chunk(ds_ctx *ctx, const ann_ops *ops, const ds_data *d, const ann_opts *o, const double *Wd,
                      const double *tc, int64_t r, int64_t nr, const gram_pass *g, double *out)
{
    const int64_t n = d->X.cols, K = o->neurons, outputs = o->classes ? o->classes : 1;
    const double *Xc = (const double *)d->X.data + r * n;
    if (ops->forward_gram) {
        DS_CHECK(ctx->be->fill(ctx, out, g->gsize, 0.0));
        return ops->forward_gram(ctx, Xc, nr, n, Wd, K, tc + r, outputs, g->ld, out);
    }
    DS_CHECK(ops->forward(ctx, Xc, nr, n, Wd, K, tc + r, outputs, g->H, g->ld));
    ds_mat Hm = {g->H, nr, g->ld, 0};
    return ctx->be->solve->gram(ctx, &Hm, tc + r, out);
}

// acc += the Gram of the rows to do, a checkpoint's safe point between two chunks. Every rank takes as
// many steps as the rank with the most chunks, so that the safe points' collectives match.
static int gram_rows(ds_ctx *ctx, const ann_ops *ops, const ds_data *d, const ann_opts *o, const double *Wd,
                     const double *tc, const ann_model *m, gram_pass *g, double *acc)
{
    int64_t steps = ann_left_chunks(&g->left, g->ch);
    MPI_Allreduce(MPI_IN_PLACE, &steps, 1, MPI_INT64_T, MPI_MAX, ctx->comm);
    int rc = DS_OK;
    for (int64_t s = 0; rc == DS_OK && s < steps; s++) {
        if (s > 0)
            rc = ann_ckpt_gram(ctx, o, m, acc, g->gsize, &g->left, s, steps);
        int64_t a = 0, nr = rc == DS_OK ? ann_left_next(&g->left, g->ch, &a) : 0;
        ctx_beat(ctx, "ann: H'H by row chunks");
        if (nr > 0)
            rc = gram_chunk(ctx, ops, d, o, Wd, tc, a - d->row0, nr, g, g->fresh ? acc : g->tmp);
        if (rc == DS_OK && nr > 0 && !g->fresh)
            rc = ops->add(ctx, acc, g->tmp, g->gsize);
        g->fresh = g->fresh && nr == 0;
        rc = ctx_agree(ctx, rc);
    }
    return rc;
}

// acc = zero, or the resumed rank's start; the pass's rows and buffers.
static int gram_open(ds_ctx *ctx, const ann_ops *ops, const ds_data *d, const ann_resume *rs, double *acc,
                     gram_pass *g)
{
    const ds_backend *be = ctx->be;
    DS_CHECK(ann_left_make(ctx, rs, d->row0, d->X.rows, &g->left));
    DS_CHECK(be->fill(ctx, acc, g->gsize, 0.0));  // a rank without rows still adds its (zero) share
    g->start = rs && rs->grams > 0 ? malloc((size_t)g->gsize * sizeof(double)) : NULL;
    if (rs && rs->grams > 0 && !g->start)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    g->fresh = !ann_resume_start(ctx, rs, g->gsize, g->start);
    if (!g->fresh)
        DS_CHECK(be->upload(ctx, acc, g->start, (size_t)g->gsize * sizeof(double)));
    if (!ops->forward_gram)
        DS_CHECK(be->alloc(ctx, &g->H, (size_t)(g->ch * g->ld) * sizeof(double)));
    if (!g->fresh || ann_left_chunks(&g->left, g->ch) > 1)
        DS_CHECK(be->alloc(ctx, &g->tmp, (size_t)g->gsize * sizeof(double)));
    return DS_OK;
}

static void gram_close(ds_ctx *ctx, gram_pass *g)
{
    if (g->H)
        ctx->be->free(ctx, g->H);
    if (g->tmp)
        ctx->be->free(ctx, g->tmp);
    free(g->start);
    free(g->left.s);
}

// acc = the Gram of [H 1 T] over all ranks' rows (its first ld·ld entries; the rest as the solve table's
// gram leaves them), resumed from rs when not NULL.
static int output_gram(ds_ctx *ctx, const ann_ops *ops, const ds_data *d, const ann_opts *o, const double *Wd,
                       const double *tc, const ann_model *m, const ann_resume *rs, double *acc)
{
    const int64_t ld = o->neurons + 1 + m->outputs;
    if (o->stream) {  // the stream's chunks are the pass's (its plan takes chunk_rows' when they fit)
        int rc = ctx_agree(ctx, ann_stream_gram(ctx, o->stream, m, Wd, ld, gram_size(ld), acc));
        if (rc == DS_OK)
            rc = ctx_agree(ctx, ctx->be->sync(ctx));
        return rc == DS_OK ? ctx_agree(ctx, ctx->be->allreduce_sum(ctx, acc, gram_size(ld))) : rc;
    }
    gram_pass g = {.ch = ann_chunk_rows(ctx, o, ld, d->X.rows), .ld = ld, .gsize = gram_size(ld)};
    int rc = ctx_agree(ctx, gram_open(ctx, ops, d, rs, acc, &g));
    if (rc == DS_OK)
        rc = gram_rows(ctx, ops, d, o, Wd, tc, m, &g, acc);
    if (rc == DS_OK)
        rc = ctx_agree(ctx, ctx->be->sync(ctx));
    if (rc == DS_OK)
        rc = ctx_agree(ctx, ctx->be->allreduce_sum(ctx, acc, g.gsize));
    gram_close(ctx, &g);
    return rc;
}

// λ: the option, or ANN_RIDGE_REL times the mean diagonal of HᵀH.
static int output_ridge(ds_ctx *ctx, const ann_opts *o, const double *acc, int64_t ld, int64_t K1, double *lambda)
{
    if (o->ridge >= 0) {
        *lambda = o->ridge;
        return DS_OK;
    }
    double *diag = malloc((size_t)K1 * sizeof(double));
    void *dd = NULL;
    int rc = diag ? ctx->be->alloc(ctx, &dd, (size_t)K1 * sizeof(double)) : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK)
        rc = ctx->be->gather(ctx, dd, acc, K1, ld + 1);
    if (rc == DS_OK)
        rc = ctx->be->download(ctx, diag, dd, (size_t)K1 * sizeof(double));
    double tr = 0;
    for (int64_t i = 0; rc == DS_OK && i < K1; i++)
        tr += diag[i];
    *lambda = ANN_RIDGE_REL * tr / (double)K1;
    if (dd)
        ctx->be->free(ctx, dd);
    free(diag);
    return rc;
}

static int output_solve(ds_ctx *ctx, const ann_ops *ops, const ds_data *d, const ann_opts *o, const double *Wd,
                        const double *tc, const ann_targets *tg, const ann_resume *rs, ann_model *m, ann_times *t)
{
    const int64_t K1 = o->neurons + 1, ld = K1 + m->outputs, gsize = gram_size(ld);
    void *acc = NULL, *Vd = NULL;
    int rc = ctx->be->alloc(ctx, &acc, (size_t)gsize * sizeof(double));
    if (rc == DS_OK)
        rc = ctx->be->alloc(ctx, &Vd, (size_t)(K1 * m->outputs) * sizeof(double));
    rc = ctx_agree(ctx, rc);
    double t0 = MPI_Wtime();
    if (rc == DS_OK)
        rc = output_gram(ctx, ops, d, o, Wd, tc, m, rs, acc);
    double t1 = MPI_Wtime();
    if (rc == DS_OK)
        rc = output_ridge(ctx, o, acc, ld, K1, &m->ridge);
    if (rc == DS_OK)
        rc = ops->solve(ctx, acc, ld, K1, m->outputs, m->ridge, Vd, m->route, sizeof m->route);
    if (rc == DS_OK)
        rc = ctx->be->download(ctx, m->V, Vd, (size_t)(K1 * m->outputs) * sizeof(double));
    if (rc == DS_OK && !o->classes) {  // back from the centred and scaled target to y
        for (int64_t k = 0; k < K1; k++)
            m->V[k] *= tg->tc_scale;
        m->V[K1 - 1] += tg->tc_shift;
    }
    for (int64_t i = 0; rc == DS_OK && i < K1 * m->outputs; i++)
        if (!isfinite(m->V[i]))
            rc = ds_fail(&ctx->msg, DS_ERR_NUMERIC, "the output layer's solution is not finite (route %s, ridge %.3g)",
                         m->route, m->ridge);
    t->hidden = t1 - t0;
    t->solve = MPI_Wtime() - t1;
    if (acc)
        ctx->be->free(ctx, acc);
    if (Vd)
        ctx->be->free(ctx, Vd);
    return ctx_agree(ctx, rc);
}

// ---------------------------------------------------------------------------------------------------
// Targets: y is mapped linearly into [−ANN_TARGET, ANN_TARGET] (left as it is when already inside,
// as the seed's y = sin(Σx)/2 is) and z = arctanh of it; labels are checked and kept as they are.

// The first row whose y is not finite or, with classes, not a class in 0 .. classes−1; −1 when none.
static int64_t first_bad_target(const double *y, int64_t rows, int classes)
{
    for (int64_t i = 0; i < rows; i++)
        if (!isfinite(y[i]) || (classes && (y[i] != floor(y[i]) || y[i] < 0 || y[i] >= classes)))
            return i;
    return -1;
}

int ann_targets_bad(ds_ctx *ctx, const char *source, int64_t row0, const double *y, int64_t rows, int classes)
{
    int64_t bad = first_bad_target(y, rows, classes);
    if (bad < 0)
        return DS_OK;
    if (classes)
        return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: label %g of row %lld is not a class in 0 .. %d", source, y[bad],
                       (long long)(row0 + bad), classes - 1);
    return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: y of row %lld is not finite", source, (long long)(row0 + bad));
}

static int targets_bad(ds_ctx *ctx, const ds_data *d, const double *y, int classes)
{
    return ann_targets_bad(ctx, d->source, d->row0, y, d->X.rows, classes);
}

// The training targets from y (host copy of the rank's rows), agreed over ranks (ann_target.h):
//   z  (hidden fits): arctanh of y mapped into [−ANN_TARGET, ANN_TARGET] (left as it is when already
//      inside), computed as y_scale·(y − min) − ANN_TARGET so that a large offset cancels exactly;
//   tc (output layer): (y − mean) / spread, so that HᵀT keeps its digits whatever y's offset; the
//      solution is scaled back (tc_scale, tc_shift). With classes both are the labels.
static int targets_map(ds_ctx *ctx, const ds_data *d, const ann_opts *o, const double *y, ann_model *m,
                       ann_targets *tg)
{
    const int64_t rows = d->X.rows;
    double st[4];
    ann_y_stats(y, rows, st);
    ann_ymap t;
    DS_CHECK(ann_ymap_agree(ctx, d->source, st, o->classes, &t, m));
    tg->tc_scale = t.tc_scale, tg->tc_shift = t.tc_shift;
    for (int64_t i = 0; i < rows; i++) {
        tg->z[i] = ann_z_of(&t, y[i]);
        tg->tc[i] = ann_tc_of(&t, y[i]);
    }
    return DS_OK;
}

void ann_y_stats(const double *y, int64_t rows, double st[4])
{
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < rows; i++)
        lo = y[i] < lo ? y[i] : lo, hi = y[i] > hi ? y[i] : hi, sum += y[i];
    st[0] = lo, st[1] = hi, st[2] = sum, st[3] = (double)rows;
}

int ann_ymap_agree(ds_ctx *ctx, const char *source, const double st[4], int classes, ann_ymap *t, ann_model *m)
{
    double glo, ghi, gsum[2];
    MPI_Allreduce(&st[0], &glo, 1, MPI_DOUBLE, MPI_MIN, ctx->comm);
    MPI_Allreduce(&st[1], &ghi, 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
    MPI_Allreduce(&st[2], gsum, 2, MPI_DOUBLE, MPI_SUM, ctx->comm);
    if (!ann_ymap_make(glo, ghi, gsum[0], gsum[1], classes, t, m))
        return ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: y is constant (%g): there is nothing to fit", source, glo);
    return DS_OK;
}

static int targets_make(ds_ctx *ctx, const ds_data *d, const ann_opts *o, ann_model *m, ann_targets *tg)
{
    const int64_t rows = d->X.rows;
    double *y = malloc((size_t)(rows ? rows : 1) * sizeof(double));
    int rc = y ? ctx->be->download(ctx, y, d->y, (size_t)rows * sizeof(double))
               : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK)
        rc = targets_bad(ctx, d, y, o->classes);
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = ctx_agree(ctx, targets_map(ctx, d, o, y, m, tg));
    free(y);
    return rc;
}

// The streamed run's targets: the map set on its source, the output's scale here.
static int stream_targets(ds_ctx *ctx, const ds_data *d, const ann_opts *o, ann_model *m, ann_targets *tg)
{
    ann_ymap t;
    DS_CHECK(ann_stream_targets(ctx, o->stream, d, o->classes, m, &t));
    tg->tc_scale = t.tc_scale, tg->tc_shift = t.tc_shift;
    return DS_OK;
}

static int train_check(ds_ctx *ctx, const ds_data *d, const ann_opts *o, int64_t *S)
{
    const int64_t m = d->rows_global;
    *S = o->subset > 0 ? o->subset : m / o->neurons;
    if (o->neurons > m)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "--neurons %lld is more than the %lld rows of %s", (long long)o->neurons,
                       (long long)m, d->source);
    if (*S < 1 || *S > m)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "--subset %lld must be between 1 and the %lld rows", (long long)*S,
                       (long long)m);
    if (d->X.f32)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "the network works on float64 inputs");
    if (o->classes && o->neurons < o->classes)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "--neurons %lld is fewer than the %d classes: each class needs a neuron",
                       (long long)o->neurons, o->classes);
    return DS_OK;
}

// W and the failed neurons' count on every rank: the hidden fits, or, resuming, the checkpoint's.
static int hidden_layer(ds_ctx *ctx, const ann_ops *ops, const ds_data *d, const ann_opts *o, int64_t S,
                        const ann_targets *tg, const ann_resume *rs, ann_model *m)
{
    if (rs) {
        memcpy(m->W, rs->state, (size_t)(o->neurons * (d->X.cols + 1)) * sizeof(double));
        m->failed = rs->failed;
        return DS_OK;
    }
    if (o->stream) {
        ann_dev dv;
        ann_stream_dev(o->stream, d, &dv);
        ctx_beat(ctx, "ann: the hidden neurons' fits");
        return ann_fit_hidden(ctx, ops, &dv, o, S, o->hidden_bytes > 0 ? o->hidden_bytes : ann_budget(ctx, o), m);
    }
    void *zd = NULL;
    int rc = ctx_agree(ctx, ann_upload_new(ctx, &zd, tg->z, (size_t)d->X.rows * sizeof(double)));
    ann_dev dv = {.X = &d->X, .z = zd, .row0 = d->row0, .m = d->rows_global};
    ctx_beat(ctx, "ann: the hidden neurons' fits");
    if (rc == DS_OK)
        rc = ann_fit_hidden(ctx, ops, &dv, o, S, ann_budget(ctx, o), m);
    if (zd)
        ctx->be->free(ctx, zd);
    return rc;
}

int ann_train(ds_ctx *ctx, const ds_data *d, const ann_opts *o, ann_model *m, ann_times *t)
{
    const ann_ops *ops = ctx->be->ann;
    const int64_t n = d->X.cols, K = o->neurons;
    int64_t S = 0;
    memset(m, 0, sizeof *m);
    memset(t, 0, sizeof *t);
    DS_CHECK(ctx_agree(ctx, train_check(ctx, d, o, &S)));
    *m = (ann_model){.n = n, .neurons = K, .outputs = o->classes ? o->classes : 1, .classes = o->classes,
                     .subset = S, .seed = o->seed};
    m->W = malloc((size_t)(K * (n + 1)) * sizeof(double));
    m->V = malloc((size_t)((K + 1) * m->outputs) * sizeof(double));
    const size_t rb = (size_t)(d->X.rows && !o->stream ? d->X.rows : 1) * sizeof(double);
    ann_targets tg = {malloc(rb), malloc(rb), 1, 0};
    ann_resume rs = {0};
    const int resume = o->ckpt && o->ckpt->restart;
    void *tcd = NULL, *Wd = NULL;
    int rc = m->W && m->V && tg.z && tg.tc ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK && !o->stream)
        rc = targets_make(ctx, d, o, m, &tg);
    if (rc == DS_OK && o->stream)
        rc = stream_targets(ctx, d, o, m, &tg);
    if (rc == DS_OK && resume)
        rc = ann_ckpt_read(ctx, o, n, gram_size(K + 1 + m->outputs), d->rows_global, &rs);
    if (rc == DS_OK)
        rc = ctx_agree(ctx, ctx->be->sync(ctx));
    MPI_Barrier(ctx->comm);  // the phases start together; the targets are set-up, not training
    if (o->ckpt)
        ckpt_start(ctx, o->ckpt);
    double t0 = MPI_Wtime();
    if (rc == DS_OK)
        rc = hidden_layer(ctx, ops, d, o, S, &tg, resume ? &rs : NULL, m);
    double t1 = MPI_Wtime();
    if (rc == DS_OK && !resume)
        rc = ann_ckpt_fitted(ctx, o, m, d->rows_global);
    if (rc == DS_OK)
        rc = ann_upload_new(ctx, &Wd, m->W, (size_t)(K * (n + 1)) * sizeof(double));
    if (rc == DS_OK && !o->stream)
        rc = ann_upload_new(ctx, &tcd, tg.tc, (size_t)d->X.rows * sizeof(double));
    rc = ctx_agree(ctx, rc);
    ctx_beat(ctx, "ann: the output layer");
    if (rc == DS_OK)
        rc = output_solve(ctx, ops, d, o, Wd, tcd, &tg, resume ? &rs : NULL, m, t);
    t->fit = t1 - t0;
    t->total = MPI_Wtime() - t0;
    if (Wd)
        ctx->be->free(ctx, Wd);
    if (tcd)
        ctx->be->free(ctx, tcd);
    free(tg.z), free(tg.tc);
    ann_resume_free(&rs);
    return rc;
}

void ann_model_free(ann_model *m)
{
    free(m->W);
    free(m->V);
    m->W = m->V = NULL;
}
