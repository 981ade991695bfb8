// ann.c: training and prediction of the least-squares network (see ann.h), written against ds_backend
// and ann_ops: the output layer, the targets, prediction and metrics. The hidden layer is in
// ann_hidden.c, its subsets and row exchange in ann_rows.c, the output Gram's exact sums in ann_gram.c,
// the checkpoints' state in ann_ckpt.c.
#include "ann/ann.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ann/ann_ckpt.h"
#include "ann/ann_gram.h"
#include "ann/ann_hidden.h"
#include "ann/ann_stream.h"
#include "core/ckpt.h"

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
    double tc_max;            // the largest |tc| over all ranks' rows (ann_ymap.tc_max)
} ann_targets;

// ---------------------------------------------------------------------------------------------------
// Output layer: S = [H 1 T]ᵀ[H 1 T] over all ranks' rows, exactly (ann_gram.c), then the solve.

int64_t ann_chunk_rows(const ds_ctx *ctx, const ann_opts *o, int64_t ld, int64_t rows)
{
    int64_t c = ann_budget(ctx, o) / (ld * (int64_t)sizeof(double));
    c = c < 1 ? 1 : c > INT_MAX ? INT_MAX : c;  // BLAS takes int sizes
    return c < rows ? c : rows > 0 ? rows : 1;
}

// λ: the option, or ANN_RIDGE_REL times the mean diagonal of HᵀH.
static int output_ridge(ds_ctx *ctx, const ann_opts *o, const double *S, int64_t ld, int64_t K1, double *lambda)
{
    if (o->ridge >= 0) {
        *lambda = o->ridge;
        return DS_OK;
    }
    double *diag = malloc((size_t)K1 * sizeof(double));
    void *dd = NULL;
    int rc = diag ? ctx->be->alloc(ctx, &dd, (size_t)K1 * sizeof(double)) : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK)
        rc = ctx->be->gather(ctx, dd, S, K1, ld + 1);
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
    const int64_t K1 = o->neurons + 1, ld = K1 + m->outputs;
    void *S = NULL, *Vd = NULL;
    int rc = ctx->be->alloc(ctx, &S, (size_t)(ld * ld) * sizeof(double));
    if (rc == DS_OK)
        rc = ctx->be->alloc(ctx, &Vd, (size_t)(K1 * m->outputs) * sizeof(double));
    rc = ctx_agree(ctx, rc);
    double t0 = MPI_Wtime();
    if (rc == DS_OK)
        rc = ann_output_gram(ctx, d, o, Wd, tc, tg->tc_max, m, rs, S);
    double t1 = MPI_Wtime();
    if (rc == DS_OK)
        rc = output_ridge(ctx, o, S, ld, K1, &m->ridge);
    if (rc == DS_OK)
        rc = ops->solve(ctx, S, ld, K1, m->outputs, m->ridge, Vd, m->route, sizeof m->route);
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
    if (S)
        ctx->be->free(ctx, S);
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
//   tc (output layer): (y − mid-range) / half-range, so that HᵀT keeps its digits whatever y's offset;
//      the solution is scaled back (tc_scale, tc_shift). With classes both are the labels.
static int targets_map(ds_ctx *ctx, const ds_data *d, const ann_opts *o, const double *y, ann_model *m,
                       ann_targets *tg)
{
    const int64_t rows = d->X.rows;
    double st[2];
    ann_y_stats(y, rows, st);
    ann_ymap t;
    DS_CHECK(ann_ymap_agree(ctx, d->source, st, o->classes, &t, m));
    tg->tc_scale = t.tc_scale, tg->tc_shift = t.tc_shift, tg->tc_max = t.tc_max;
    for (int64_t i = 0; i < rows; i++) {
        tg->z[i] = ann_z_of(&t, y[i]);
        tg->tc[i] = ann_tc_of(&t, y[i]);
    }
    return DS_OK;
}

void ann_y_stats(const double *y, int64_t rows, double st[2])
{
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < rows; i++)
        lo = y[i] < lo ? y[i] : lo, hi = y[i] > hi ? y[i] : hi;
    st[0] = lo, st[1] = hi;
}

int ann_ymap_agree(ds_ctx *ctx, const char *source, const double st[2], int classes, ann_ymap *t, ann_model *m)
{
    double glo, ghi;
    MPI_Allreduce(&st[0], &glo, 1, MPI_DOUBLE, MPI_MIN, ctx->comm);
    MPI_Allreduce(&st[1], &ghi, 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
    if (!ann_ymap_make(glo, ghi, classes, t, m))
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
    tg->tc_scale = t.tc_scale, tg->tc_shift = t.tc_shift, tg->tc_max = t.tc_max;
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
    int64_t row0 = 0, rows = 0;
    ann_partition(m, ctx->nranks, ctx->rank, &row0, &rows);
    if (d->row0 != row0 || d->X.rows != rows)  // the exact Gram's blocks (ann_gram.h)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "rank %d holds rows %lld .. %lld of %s, not its whole blocks %lld .. "
                       "%lld: load the training set with ds_data.block_rows = ann_block_rows", ctx->rank,
                       (long long)d->row0, (long long)(d->row0 + d->X.rows), d->source, (long long)row0,
                       (long long)(row0 + rows));
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
    ann_dev dv = {.X = &d->X, .z = zd, .row0 = d->row0, .m = d->rows_global, .block_rows = d->block_rows};
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
    ann_targets tg = {malloc(rb), malloc(rb), 1, 0, 1};
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
        rc = ann_ckpt_read(ctx, o, n, 2 * ann_tri(K + 1 + m->outputs), d->rows_global, ann_block_rows(d->rows_global),
                           &rs);
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
