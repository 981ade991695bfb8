// ann_predict.c: the network's prediction (ann_predict, see ann.h) and its metrics, whose sums a streamed
// prediction (ann_stream.c) shares.
#include "ann/ann.h"

#include <math.h>
#include <stdlib.h>

#include "ann/ann_stream.h"

static int predict_rows(ds_ctx *ctx, const ann_ops *ops, const ann_model *m, const ds_data *d, double *P)
{
    const ds_backend *be = ctx->be;
    const int64_t n = m->n, K = m->neurons, K1 = K + 1, C = m->outputs;
    ann_opts o = {0};
    const int64_t ch = ann_chunk_rows(ctx, &o, K1 + C, d->X.rows);
    void *Wd = NULL, *Vd = NULL, *H = NULL, *Pd = NULL;
    int rc = ann_upload_new(ctx, &Wd, m->W, (size_t)(K * (n + 1)) * sizeof(double));
    if (rc == DS_OK)
        rc = ann_upload_new(ctx, &Vd, m->V, (size_t)(K1 * C) * sizeof(double));
    if (rc == DS_OK)
        rc = be->alloc(ctx, &H, (size_t)(ch * K1) * sizeof(double));
    if (rc == DS_OK)
        rc = be->alloc(ctx, &Pd, (size_t)(ch * C) * sizeof(double));
    for (int64_t r = 0; rc == DS_OK && r < d->X.rows; r += ch) {
        int64_t nr = d->X.rows - r < ch ? d->X.rows - r : ch;
        rc = ops->forward(ctx, (const double *)d->X.data + r * n, nr, n, Wd, K, NULL, C, H, K1);
        if (rc == DS_OK)
            rc = ops->output(ctx, H, nr, K1, K, Vd, C, Pd);
        if (rc == DS_OK)
            rc = be->download(ctx, P + r * C, Pd, (size_t)(nr * C) * sizeof(double));
    }
    void *bufs[] = {Wd, Vd, H, Pd};
    for (int i = 0; i < 4; i++)
        if (bufs[i])
            be->free(ctx, bufs[i]);
    return rc;
}

// Metrics over all ranks' rows: two passes (means first) so that r near 1 keeps its digits. The sums
// run row by row in order, so that a streamed run, adding chunk after chunk, gets the same bits.
void ann_metrics_sum1(const ann_model *m, const double *P, const double *y, int64_t rows, double s[3],
                      int64_t *correct)
{
    const int64_t C = m->outputs;
    for (int64_t i = 0; i < rows; i++) {
        if (m->classes) {
            int64_t best = 0;
            for (int64_t c = 1; c < C; c++)
                best = P[i * C + c] > P[i * C + best] ? c : best;
            *correct += best == (int64_t)y[i];
        } else {
            s[0] += y[i], s[1] += P[i];
        }
    }
    s[2] += (double)rows;
}

// Σ(y−ȳ)², Σ(p−p̄)², Σ(y−ȳ)(p−p̄), Σ(y−p)² added into c; mean: the global means of y and p.
void ann_metrics_sum2(const double *P, const double *y, int64_t rows, const double mean[2], double c[4])
{
    for (int64_t i = 0; i < rows; i++) {
        double a = y[i] - mean[0], b = P[i] - mean[1], e = y[i] - P[i];
        c[0] += a * a, c[1] += b * b, c[2] += a * b, c[3] += e * e;
    }
}

// After the first sums: the counts into met, the means into mean; 1 when a second pass is needed.
int ann_metrics_means(ds_ctx *ctx, const ann_model *m, const double s[3], int64_t correct, ann_metrics *met,
                      double mean[2])
{
    double g[3];
    int64_t gc = 0;
    MPI_Allreduce(s, g, 3, MPI_DOUBLE, MPI_SUM, ctx->comm);
    MPI_Allreduce(&correct, &gc, 1, MPI_INT64_T, MPI_SUM, ctx->comm);
    met->rows = (int64_t)g[2];
    met->accuracy = m->classes ? (double)gc / g[2] : NAN;
    met->r = met->rmse = met->r2 = NAN;
    mean[0] = g[0] / g[2], mean[1] = g[1] / g[2];
    return !m->classes;
}

void ann_metrics_finish(ds_ctx *ctx, const double c[4], ann_metrics *met)
{
    double gcv[4];
    MPI_Allreduce(c, gcv, 4, MPI_DOUBLE, MPI_SUM, ctx->comm);
    met->r = gcv[2] / sqrt(gcv[0] * gcv[1]);
    met->rmse = sqrt(gcv[3] / (double)met->rows);
    met->r2 = 1 - gcv[3] / gcv[0];
}

static void metrics_of(ds_ctx *ctx, const ann_model *m, const double *P, const double *y, int64_t rows,
                       ann_metrics *met)
{
    double s[3] = {0, 0, 0}, mean[2], c[4] = {0, 0, 0, 0};
    int64_t correct = 0;
    ann_metrics_sum1(m, P, y, rows, s, &correct);
    if (!ann_metrics_means(ctx, m, s, correct, met, mean))
        return;
    ann_metrics_sum2(P, y, rows, mean, c);
    ann_metrics_finish(ctx, c, met);
}

int ann_predict(ds_ctx *ctx, const ann_model *m, const ds_data *d, int has_y, double *P, ann_metrics *met)
{
    const int64_t rows = d->X.rows;
    if (d->X.f32)
        return ctx_agree(ctx, ds_fail(&ctx->msg, DS_ERR_RUNTIME, "the network works on float64 inputs"));
    if (d->X.cols != m->n)
        return ctx_agree(ctx, ds_fail(&ctx->msg, DS_ERR_INPUT, "%s has %lld columns; the model takes %lld", d->source,
                                      (long long)d->X.cols, (long long)m->n));
    double *Pl = P ? P : malloc((size_t)(rows ? rows : 1) * (size_t)m->outputs * sizeof(double));
    double *y = has_y ? malloc((size_t)(rows ? rows : 1) * sizeof(double)) : NULL;
    int rc = Pl && (y || !has_y) ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK)
        rc = predict_rows(ctx, ctx->be->ann, m, d, Pl);
    if (rc == DS_OK && has_y)
        rc = ctx->be->download(ctx, y, d->y, (size_t)rows * sizeof(double));
    if (rc == DS_OK && has_y)
        rc = ann_targets_bad(ctx, d->source, d->row0, y, rows, m->classes);
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK && has_y)
        metrics_of(ctx, m, Pl, y, rows, met);
    if (Pl != P)
        free(Pl);
    free(y);
    return rc;
}

