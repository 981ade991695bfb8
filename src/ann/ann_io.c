// ann_io.c: the network's model file, predictions file and scatter plot (see ann_io.h).
#include "ann/ann_io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "h5io.h"
#include "cli/plot.h"

static int model_write_file(const ann_model *m, const char *tmp, const char *source, const char *options, ds_msg *msg)
{
    const int64_t n1 = m->n + 1;
    h5io_attr attrs[] = {
        {.name = "inputs", .kind = H5IO_INT, .i = m->n},
        {.name = "neurons", .kind = H5IO_INT, .i = m->neurons},
        {.name = "outputs", .kind = H5IO_INT, .i = m->outputs},
        {.name = "classes", .kind = H5IO_INT, .i = m->classes},
        {.name = "y_scale", .kind = H5IO_DOUBLE, .d = m->y_scale},
        {.name = "y_shift", .kind = H5IO_DOUBLE, .d = m->y_shift},
        {.name = "ridge", .kind = H5IO_DOUBLE, .d = m->ridge},
        {.name = "subset", .kind = H5IO_INT, .i = m->subset},
        {.name = "seed", .kind = H5IO_INT, .i = (int64_t)m->seed},
        {.name = "failed_neurons", .kind = H5IO_INT, .i = m->failed},
        {.name = "output_route", .kind = H5IO_STRING, .s = m->route},
        {.name = "source", .kind = H5IO_STRING, .s = source},
        {.name = "options", .kind = H5IO_STRING, .s = options},
        {.name = "generator", .kind = H5IO_STRING, .s = "dsolve ann " DSOLVE_VERSION},
    };
    DS_CHECK(h5io_write_matrix(tmp, 1, "W", m->W, m->neurons, n1, msg));
    DS_CHECK(h5io_write_matrix(tmp, 0, "V", m->V, m->neurons + 1, m->outputs, msg));
    return h5io_write_attrs(tmp, "V", attrs, (int)(sizeof attrs / sizeof attrs[0]), msg);
}

int ann_model_write(ds_ctx *ctx, const ann_model *m, const char *path, const char *source, const char *options)
{
    int rc = DS_OK;
    if (ctx->rank == 0) {
        char tmp[4200];
        h5io_part_name(path, ctx->job_tag, tmp, sizeof tmp);
        cleanup_add(tmp);
        rc = model_write_file(m, tmp, source, options, &ctx->msg);
        if (rc == DS_OK)
            rc = h5io_commit(tmp, path, &ctx->msg);
        if (rc != DS_OK)
            h5io_discard(tmp);
        cleanup_remove(tmp);
    }
    return ctx_agree(ctx, rc);
}

// The attributes of /V that a model file holds, read at once (h5io_read_attrs_num): the shape, which
// must agree with /W and /V where present; classes, required; the rest informative only (prediction does
// not use them), absent in hand-made models.
enum { ATTR_INPUTS, ATTR_NEURONS, ATTR_OUTPUTS, ATTR_CLASSES, ATTR_Y_SCALE, ATTR_Y_SHIFT, ATTR_RIDGE, ATTR_SUBSET,
       ATTR_SEED, ATTR_COUNT };
static const char *const model_attr_names[ATTR_COUNT] = {"inputs",  "neurons", "outputs", "classes", "y_scale",
                                                         "y_shift", "ridge",   "subset",  "seed"};

static int model_attrs(const char *path, ann_model *m, ds_msg *msg)
{
    double v[ATTR_COUNT] = {[ATTR_Y_SCALE] = 1};  // the defaults of the informative ones
    int status[ATTR_COUNT];
    ds_msg why[ATTR_COUNT];
    DS_CHECK(h5io_read_attrs_num(path, "V", ATTR_COUNT, model_attr_names, v, status, why, msg));
    const int64_t actual[] = {m->n, m->neurons, m->outputs};
    for (int i = ATTR_INPUTS; i <= ATTR_OUTPUTS; i++)  // present in dsolve's models: they must agree with /W and /V
        if (status[i] == DS_OK && v[i] != (double)actual[i])
            return ds_fail(msg, DS_ERR_INPUT, "%s: attribute %s = %g, but /W and /V hold %lld", path,
                           model_attr_names[i], v[i], (long long)actual[i]);
    if (status[ATTR_CLASSES] != DS_OK)
        return ds_fail(msg, status[ATTR_CLASSES], "%s", why[ATTR_CLASSES].text);
    const double classes = v[ATTR_CLASSES];
    const double subset = v[ATTR_SUBSET] >= 0 && v[ATTR_SUBSET] < 9e18 ? v[ATTR_SUBSET] : 0;
    const double seed = v[ATTR_SEED] >= 0 && v[ATTR_SEED] < 1.8e19 ? v[ATTR_SEED] : 0;
    if (classes < 0 || classes == 1 || classes != floor(classes) || (classes > 0 && classes != (double)m->outputs) ||
        (classes == 0 && m->outputs != 1))
        return ds_fail(msg, DS_ERR_INPUT, "%s: attribute classes = %g does not match /V's %lld columns", path, classes,
                       (long long)m->outputs);
    m->classes = (int)classes, m->y_scale = v[ATTR_Y_SCALE], m->y_shift = v[ATTR_Y_SHIFT], m->ridge = v[ATTR_RIDGE];
    m->subset = (int64_t)subset, m->seed = (uint64_t)seed;
    return DS_OK;
}

static int model_read_file(const char *path, ann_model *m, ds_msg *msg)
{
    int64_t wr, wc, vr, vc;
    DS_CHECK(h5io_read_matrix(path, "W", &wr, &wc, &m->W, msg));
    DS_CHECK(h5io_read_matrix(path, "V", &vr, &vc, &m->V, msg));
    if (wc < 2)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset /W has %lld columns; a model needs inputs + 1 >= 2", path,
                       (long long)wc);
    if (vr != wr + 1)
        return ds_fail(msg, DS_ERR_INPUT, "%s: dataset /V has %lld rows; /W's %lld neurons need %lld", path,
                       (long long)vr, (long long)wr, (long long)(wr + 1));
    m->n = wc - 1, m->neurons = wr, m->outputs = vc;
    DS_CHECK(model_attrs(path, m, msg));
    for (int64_t i = 0; i < wr * wc; i++)
        if (!isfinite(m->W[i]))
            return ds_fail(msg, DS_ERR_INPUT, "%s: dataset /W: element %lld is not finite", path, (long long)i);
    for (int64_t i = 0; i < vr * vc; i++)
        if (!isfinite(m->V[i]))
            return ds_fail(msg, DS_ERR_INPUT, "%s: dataset /V: element %lld is not finite", path, (long long)i);
    snprintf(m->route, sizeof m->route, "from file");
    return DS_OK;
}

int ann_model_read(ds_ctx *ctx, const char *path, ann_model *m)
{
    memset(m, 0, sizeof *m);
    int rc = ctx_agree(ctx, model_read_file(path, m, &ctx->msg));
    if (rc != DS_OK)
        free(m->W), free(m->V), m->W = m->V = NULL;
    return rc;
}

// ---------------------------------------------------------------------------------------------------

int ann_predictions_rows(const ann_model *m, const char *tmp, int64_t row0, int64_t rows, const double *P,
                         int64_t *cls, ds_msg *msg)
{
    const int64_t C = m->outputs;
    DS_CHECK(h5io_write_rows(tmp, "yhat", row0, rows, m->classes ? C : 0, 0, P, msg));
    if (!m->classes)
        return DS_OK;
    for (int64_t i = 0; i < rows; i++) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            best = P[i * C + c] > P[i * C + best] ? c : best;
        cls[i] = best;
    }
    return h5io_write_keys(tmp, "class", H5IO_KEY_I64, row0, rows, cls, msg);
}

static int predictions_block(const ann_model *m, const ds_data *d, const double *P, const char *tmp, ds_msg *msg)
{
    int64_t *cls = m->classes ? malloc((size_t)(d->X.rows ? d->X.rows : 1) * sizeof(int64_t)) : NULL;
    if (m->classes && !cls)
        return ds_fail(msg, DS_ERR_RUNTIME, "out of host memory");
    int rc = ann_predictions_rows(m, tmp, d->row0, d->X.rows, P, cls, msg);
    free(cls);
    return rc;
}

int ann_predictions_begin(ds_ctx *ctx, const ann_model *m, int64_t rows_global, const char *path, char *tmp,
                          size_t len)
{
    h5io_part_name(path, ctx->job_tag, tmp, len);
    cleanup_add(tmp);
    int rc = DS_OK;
    if (ctx->rank == 0) {
        rc = h5io_create_dataset(tmp, 1, "yhat", rows_global, m->classes ? m->outputs : 0, &ctx->msg);
        if (rc == DS_OK && m->classes)
            rc = h5io_create_keys(tmp, 0, "class", H5IO_KEY_I64, rows_global, &ctx->msg);
    }
    return ctx_agree(ctx, rc);
}

int ann_predictions_end(ds_ctx *ctx, int rc, const char *tmp, const char *path)
{
    if (rc == DS_OK && ctx->rank == 0)
        rc = h5io_commit(tmp, path, &ctx->msg);
    rc = ctx_agree(ctx, rc);
    if (rc != DS_OK && ctx->rank == 0)
        h5io_discard(tmp);
    cleanup_remove(tmp);
    return rc;
}

int ann_predictions_write(ds_ctx *ctx, const ann_model *m, const ds_data *d, const double *P, const char *path)
{
    char tmp[4200];
    int rc = ann_predictions_begin(ctx, m, d->rows_global, path, tmp, sizeof tmp);
    for (int turn = 0; rc == DS_OK && turn < ctx->nranks; turn++)
        rc = ctx_agree(ctx, turn == ctx->rank ? predictions_block(m, d, P, tmp, &ctx->msg) : DS_OK);
    return ann_predictions_end(ctx, rc, tmp, path);
}

// ---------------------------------------------------------------------------------------------------

int ann_scatter_plot(ds_ctx *ctx, const ds_data *d, const double *P, const double *y, const char *path,
                     const char *title)
{
    enum { MAX_POINTS = 4000 };
    const int64_t stride = (d->rows_global + MAX_POINTS - 1) / MAX_POINTS;
    const int64_t first = (d->row0 + stride - 1) / stride * stride;  // the rank's first global multiple
    int mine = first < d->row0 + d->X.rows ? (int)((d->row0 + d->X.rows - 1 - first) / stride + 1) : 0;
    double *pts = malloc((size_t)(2 * mine + 1) * sizeof(double));
    for (int i = 0; pts && i < mine; i++) {
        int64_t r = first - d->row0 + (int64_t)i * stride;
        pts[2 * i] = y[r], pts[2 * i + 1] = P[r];
    }
    int *cnt = ctx->rank == 0 ? malloc((size_t)ctx->nranks * 2 * sizeof(int)) : NULL;
    int rc = pts && (ctx->rank != 0 || cnt) ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    rc = ctx_agree(ctx, rc);
    int n2 = 2 * mine, total = 0;
    double *all = NULL;
    if (rc == DS_OK)
        MPI_Gather(&n2, 1, MPI_INT, cnt, 1, MPI_INT, 0, ctx->comm);
    if (rc == DS_OK && ctx->rank == 0) {
        for (int q = 0; q < ctx->nranks; q++)
            cnt[ctx->nranks + q] = total, total += cnt[q];
        all = malloc((size_t)(total + 1) * sizeof(double));
        rc = all ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    }
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        MPI_Gatherv(pts, n2, MPI_DOUBLE, all, cnt, cnt ? cnt + ctx->nranks : NULL, MPI_DOUBLE, 0, ctx->comm);
    if (rc == DS_OK && ctx->rank == 0) {
        int np = total / 2;
        double *xs = malloc((size_t)(np + 1) * sizeof(double)), *ys = malloc((size_t)(np + 1) * sizeof(double));
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; xs && ys && i < np; i++) {
            xs[i] = all[2 * i], ys[i] = all[2 * i + 1];
            lo = fmin(lo, fmin(xs[i], ys[i])), hi = fmax(hi, fmax(xs[i], ys[i]));
        }
        double line_x[2] = {lo, hi};
        char label[64];
        snprintf(label, sizeof label, "%d rows (one in %lld)", np, (long long)stride);
        ds_series s[2] = {{label, xs, ys, np, 1}, {"y = x", line_x, line_x, 2, 0}};
        rc = xs && ys ? plot_svg(path, title, "actual y", "predicted y", 0, 0, s, 2, &ctx->msg)
                      : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
        free(xs), free(ys);
    }
    free(pts), free(cnt), free(all);
    return ctx_agree(ctx, rc);
}
