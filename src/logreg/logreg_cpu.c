// logreg_cpu.c: the reference lr_ops: OpenBLAS GEMMs for the logits and the gradient, plain loops for
// the rows and for the optimisers' vector updates. The CUDA ops (logreg_cuda.c) are tested against it.
// provides: lr_ops_cpu
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "logreg/logreg.h"

typedef struct cpu_work {
    double *Z;  // rows_max × classes: logits, then P − Y (double, or float in the first half when f32)
    float *Wf, *Gf;  // cols × classes, f32 only
} cpu_work;

static int cpu_open(ds_ctx *ctx, lr_work *w)
{
    cpu_work *c = calloc(1, sizeof *c);
    const size_t dk = (size_t)(w->cols * w->classes);
    if (c) {
        c->Z = malloc((size_t)(w->rows_max > 0 ? w->rows_max : 1) * (size_t)w->classes * sizeof(double));
        c->Wf = malloc(dk * sizeof(float));
        c->Gf = malloc(dk * sizeof(float));
    }
    w->impl = c;
    if (!c || !c->Z || !c->Wf || !c->Gf)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for logistic regression's scratch");
    return DS_OK;
}

static void cpu_close(ds_ctx *ctx, lr_work *w)
{
    cpu_work *c = w->impl;
    if (c) {
        free(c->Z);
        free(c->Wf);
        free(c->Gf);
    }
    free(c);
    w->impl = NULL;
}

// One row's loss and its P − Y in place over its logits z[0 .. K−1]; *correct: argmax == label.
static double cpu_row(double *z, int K, int label, int model, int *correct)
{
    int best = 0;
    for (int k = 1; k < K; k++)
        best = z[k] > z[best] ? k : best;
    *correct = best == label;
    double loss = 0;
    if (model == LR_SOFTMAX) {
        double mx = z[best], sum = 0;
        for (int k = 0; k < K; k++)
            sum += exp(z[k] - mx);
        loss = mx + log(sum) - z[label];
        for (int k = 0; k < K; k++)
            z[k] = exp(z[k] - mx) / sum - (k == label);
    } else {
        for (int k = 0; k < K; k++) {
            const double v = z[k], y = k == label;
            loss += fmax(v, 0.0) + log1p(exp(-fabs(v))) - y * v;
            z[k] = 1.0 / (1.0 + exp(-v)) - y;
        }
    }
    return loss;
}

// The rows: Z (double, or float when f32) turned into P − Y; gbuf[dk], gbuf[dk+1] the sums.
static void cpu_rows(lr_work *w, const lr_set *s, void *Z, double *gbuf)
{
    const int K = (int)w->classes;
    const int64_t dk = w->cols * w->classes;
    double loss = 0, correct = 0;
    for (int64_t i = 0; i < s->rows; i++) {
        double z[LR_MAX_CLASSES] = {0};
        for (int k = 0; k < K; k++)
            z[k] = w->f32 ? ((float *)Z)[i * K + k] : ((double *)Z)[i * K + k];
        int ok = 0;
        loss += cpu_row(z, K, s->labels[i], w->model, &ok);
        correct += ok;
        for (int k = 0; k < K; k++) {
            if (w->f32)
                ((float *)Z)[i * K + k] = (float)z[k];
            else
                ((double *)Z)[i * K + k] = z[k];
        }
    }
    gbuf[dk] = loss;
    gbuf[dk + 1] = correct;
}

static int cpu_pass(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W, int grad, double *gbuf)
{
    cpu_work *c = w->impl;
    const int n = (int)s->rows, D = (int)w->cols, K = (int)w->classes;
    const int64_t dk = w->cols * w->classes;
    if (w->f32) {
        for (int64_t i = 0; i < dk; i++)
            c->Wf[i] = (float)W[i];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, K, D, 1.0f, s->X, D, c->Wf, K, 0.0f, (float *)c->Z, K);
    } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, K, D, 1.0, s->X, D, W, K, 0.0, c->Z, K);
    }
    cpu_rows(w, s, c->Z, gbuf);
    if (!grad)
        return DS_OK;
    if (w->f32) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, K, n, 1.0f, s->X, D, (float *)c->Z, K, 0.0f, c->Gf, K);
        for (int64_t i = 0; i < dk; i++)
            gbuf[i] = c->Gf[i];
    } else {
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, K, n, 1.0, s->X, D, c->Z, K, 0.0, gbuf, K);
    }
    return DS_OK;
}

static int cpu_finish(ds_ctx *ctx, lr_work *w, const double *gbuf, const double *W, double *g, double *out,
                      double *hist)
{
    const int64_t dk = w->cols * w->classes, reg = (w->cols - 1) * w->classes;  // the bias row is not penalised
    double ww = 0;
    for (int64_t i = 0; i < dk; i++) {
        const double r = i < reg ? w->l2 * W[i] : 0.0;
        g[i] = gbuf[i] * w->inv_n + r;
        ww += i < reg ? W[i] * W[i] : 0.0;
    }
    out[0] = gbuf[dk] * w->inv_n + 0.5 * w->l2 * ww;
    out[1] = gbuf[dk + 1] * w->inv_n;
    if (hist)
        *hist = out[0];
    return DS_OK;
}

static int cpu_gd(ds_ctx *ctx, lr_work *w, double *W, const double *g, double lr)
{
    for (int64_t i = 0; i < w->cols * w->classes; i++)
        W[i] -= lr * g[i];
    return DS_OK;
}

static int cpu_nesterov(ds_ctx *ctx, lr_work *w, double *x, double *y, const double *g, double lr, double *t)
{
    const int64_t dk = w->cols * w->classes;
    double restart = 0;
    for (int64_t i = 0; i < dk; i++) {
        const double xn = y[i] - lr * g[i];
        restart += (y[i] - xn) * (xn - x[i]);
    }
    const double t0 = restart > 0 ? 1.0 : *t, t1 = 0.5 * (1.0 + sqrt(1.0 + 4.0 * t0 * t0)), beta = (t0 - 1.0) / t1;
    for (int64_t i = 0; i < dk; i++) {
        const double xn = y[i] - lr * g[i];
        y[i] = xn + beta * (xn - x[i]);
        x[i] = xn;
    }
    *t = t1;
    return DS_OK;
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static int cpu_lbfgs_dir(ds_ctx *ctx, lr_work *w, const double *g, const double *S, const double *Y, const double *rho,
                         int count, int newest, double *d, double *gtd)
{
    const int64_t n = w->cols * w->classes;
    const int m = LR_LBFGS_MEMORY;
    double a[LR_LBFGS_MEMORY] = {0}, gamma = 0;
    memcpy(d, g, (size_t)n * sizeof(double));
    for (int j = 0; j < count; j++) {  // newest to oldest
        const int i = (newest - j + m) % m;
        if (rho[i] == 0)
            continue;
        a[i] = rho[i] * dot(S + i * n, d, n);
        for (int64_t e = 0; e < n; e++)
            d[e] -= a[i] * Y[i * n + e];
        if (gamma == 0)
            gamma = 1.0 / (rho[i] * dot(Y + i * n, Y + i * n, n));
    }
    if (gamma == 0) {
        const double gn = sqrt(dot(g, g, n));
        gamma = gn > 0 ? 1.0 / gn : 1.0;
    }
    for (int64_t e = 0; e < n; e++)
        d[e] *= gamma;
    for (int j = count - 1; j >= 0; j--) {  // oldest to newest
        const int i = (newest - j + m) % m;
        if (rho[i] == 0)
            continue;
        const double b = rho[i] * dot(Y + i * n, d, n);
        for (int64_t e = 0; e < n; e++)
            d[e] += (a[i] - b) * S[i * n + e];
    }
    double gd = -dot(g, d, n);
    if (!(gd < 0)) {  // not a descent direction (or NaN): steepest descent
        memcpy(d, g, (size_t)n * sizeof(double));
        gd = -dot(g, g, n);
    }
    for (int64_t e = 0; e < n; e++)
        d[e] = -d[e];
    *gtd = gd;
    return DS_OK;
}

static int cpu_axpy(ds_ctx *ctx, lr_work *w, double *out, const double *W, double alpha, const double *d)
{
    for (int64_t i = 0; i < w->cols * w->classes; i++)
        out[i] = W[i] + alpha * d[i];
    return DS_OK;
}

static int cpu_lbfgs_accept(ds_ctx *ctx, lr_work *w, double *W, double *g, const double *Wt, const double *gt,
                            double *s, double *y, double *rho)
{
    const int64_t n = w->cols * w->classes;
    double ys = 0, yy = 0;
    for (int64_t i = 0; i < n; i++) {
        s[i] = Wt[i] - W[i];
        y[i] = gt[i] - g[i];
        ys += y[i] * s[i];
        yy += y[i] * y[i];
    }
    *rho = ys > 1e-10 * yy ? 1.0 / ys : 0.0;
    memcpy(W, Wt, (size_t)n * sizeof(double));
    memcpy(g, gt, (size_t)n * sizeof(double));
    return DS_OK;
}

const lr_ops lr_ops_cpu = {
    .open = cpu_open,
    .close = cpu_close,
    .pass = cpu_pass,
    .finish = cpu_finish,
    .gd = cpu_gd,
    .nesterov = cpu_nesterov,
    .lbfgs_dir = cpu_lbfgs_dir,
    .axpy = cpu_axpy,
    .lbfgs_accept = cpu_lbfgs_accept,
};
