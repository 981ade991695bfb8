// logreg_cpu.c: the reference lr_ops: OpenBLAS GEMMs for the logits and the gradient, one pair a row
// block (logreg.h), plain loops for the rows, the blocks' exact sums and the optimisers' vector updates.
// The CUDA ops (logreg_cuda.c) are tested against it.
// provides: lr_ops_cpu
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/exactsum.h"
#include "logreg/logreg.h"

typedef struct cpu_work {
    double *Z;  // block_rows × classes: a block's logits, then P − Y (double, or float in the first half when f32)
    double *G;  // cols × classes: a block's Xᵀ(P − Y)
    float *Wf, *Gf;  // cols × classes, f32 only
} cpu_work;

static int cpu_open(ds_ctx *ctx, lr_work *w)
{
    cpu_work *c = calloc(1, sizeof *c);
    const size_t dk = (size_t)(w->cols * w->classes);
    if (c) {
        c->Z = malloc((size_t)(w->block_rows > 0 ? w->block_rows : 1) * (size_t)w->classes * sizeof(double));
        c->G = malloc(dk * sizeof(double));
        c->Wf = malloc(dk * sizeof(float));
        c->Gf = malloc(dk * sizeof(float));
    }
    w->impl = c;
    if (!c || !c->Z || !c->G || !c->Wf || !c->Gf)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory for logistic regression's scratch");
    return DS_OK;
}

static void cpu_close(ds_ctx *ctx, lr_work *w)
{
    cpu_work *c = w->impl;
    if (c) {
        free(c->Z);
        free(c->G);
        free(c->Wf);
        free(c->Gf);
    }
    free(c);
    w->impl = NULL;
}

static int cpu_colmax(ds_ctx *ctx, lr_work *w, const lr_set *s, double *xmax)
{
    const int64_t D = s->cols;
    for (int64_t j = 0; j < D; j++)
        xmax[j] = 0.0;
    for (int64_t i = 0; i < s->rows; i++)
        for (int64_t j = 0; j < D; j++) {
            const double v = fabs(s->f32 ? (double)((const float *)s->X)[i * D + j] : ((const double *)s->X)[i * D + j]);
            xmax[j] = v > xmax[j] ? v : xmax[j];
        }
    return DS_OK;
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

// A block's n rows: Z (double, or float when f32) turned into P − Y; *loss and *correct their sums.
static void cpu_rows(const lr_work *w, const int32_t *labels, int64_t n, void *Z, double *loss, double *correct)
{
    const int K = (int)w->classes;
    *loss = *correct = 0;
    for (int64_t i = 0; i < n; i++) {
        double z[LR_MAX_CLASSES] = {0};
        for (int k = 0; k < K; k++)
            z[k] = w->f32 ? ((float *)Z)[i * K + k] : ((double *)Z)[i * K + k];
        int ok = 0;
        *loss += cpu_row(z, K, labels[i], w->model, &ok);
        *correct += ok;
        for (int k = 0; k < K; k++) {
            if (w->f32)
                ((float *)Z)[i * K + k] = (float)z[k];
            else
                ((double *)Z)[i * K + k] = z[k];
        }
    }
}

// A block's logits Z = X_b·W (n rows from X_b). One GEMM of the block's shape, whichever rank holds it:
// OpenBLAS splits a GEMM's threads over the output, never over the summed dimension, so the bits do not
// depend on its thread count either.
static void cpu_logits(const lr_work *w, const cpu_work *c, const void *Xb, int64_t n, const double *W)
{
    const int D = (int)w->cols, K = (int)w->classes;
    if (w->f32)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, K, D, 1.0f, Xb, D, c->Wf, K, 0.0f,
                    (float *)c->Z, K);
    else
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, K, D, 1.0, Xb, D, W, K, 0.0, c->Z, K);
}

// A block's gradient partial into c->G (cols × classes doubles).
static void cpu_block_grad(const lr_work *w, cpu_work *c, const void *Xb, int64_t n)
{
    const int D = (int)w->cols, K = (int)w->classes;
    const int64_t dk = w->cols * w->classes;
    if (w->f32) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, K, (int)n, 1.0f, Xb, D, (float *)c->Z, K, 0.0f, c->Gf, K);
        for (int64_t i = 0; i < dk; i++)
            c->G[i] = c->Gf[i];
    } else {
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, K, (int)n, 1.0, Xb, D, c->Z, K, 0.0, c->G, K);
    }
}

// The digits of a block's partial G added to gbuf's (core/exactsum.h): exact, in any order.
static void cpu_fix_add(const lr_work *w, const double *G, double *gbuf)
{
    const int64_t K = w->classes, dk = w->cols * w->classes;
    for (int64_t j = 0; j < w->cols; j++)
        for (int64_t k = 0; k < K; k++)
            exactsum_split(G[j * K + k], w->fix[j], w->fix_lo, &gbuf[j * K + k], &gbuf[dk + j * K + k]);
}

static int cpu_pass(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W, int grad, double *gbuf)
{
    cpu_work *c = w->impl;
    const int64_t dk = w->cols * w->classes, rb = w->block_rows, b0 = s->row0 / rb;
    const size_t row_bytes = (size_t)w->cols * (w->f32 ? sizeof(float) : sizeof(double));
    DS_ASSERT(s->row0 % rb == 0 && s->rows <= w->rows_max && s->f32 == w->f32);
    double *loss = gbuf + 2 * dk, correct = 0;
    memset(loss, 0, (size_t)w->blocks * sizeof(double));
    if (grad)
        memset(gbuf, 0, (size_t)(2 * dk) * sizeof(double));
    for (int64_t i = 0; w->f32 && i < dk; i++)
        c->Wf[i] = (float)W[i];
    for (int64_t r = 0; r < s->rows; r += rb) {
        const int64_t n = s->rows - r < rb ? s->rows - r : rb;
        const void *Xb = (const char *)s->X + (size_t)r * row_bytes;
        double ok = 0;
        cpu_logits(w, c, Xb, n, W);
        cpu_rows(w, s->labels + r, n, c->Z, &loss[b0 + r / rb], &ok);
        correct += ok;
        if (grad) {
            cpu_block_grad(w, c, Xb, n);
            cpu_fix_add(w, c->G, gbuf);
        }
    }
    loss[w->blocks] = correct;
    return DS_OK;
}

static int cpu_finish(ds_ctx *ctx, lr_work *w, const double *gbuf, const double *W, double *g, double *out,
                      double *hist)
{
    const int64_t dk = w->cols * w->classes, reg = (w->cols - 1) * w->classes;  // the bias row is not penalised
    double ww = 0, loss = 0;
    for (int64_t i = 0; i < dk; i++) {
        const double r = i < reg ? w->l2 * W[i] : 0.0, s = w->fix[i / w->classes];
        g[i] = exactsum_join(gbuf[i], gbuf[dk + i], s, w->fix_lo) * w->inv_n + r;
        ww += i < reg ? W[i] * W[i] : 0.0;
    }
    for (int64_t b = 0; b < w->blocks; b++)
        loss += gbuf[2 * dk + b];
    out[0] = loss * w->inv_n + 0.5 * w->l2 * ww;
    out[1] = gbuf[2 * dk + w->blocks] * w->inv_n;
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
    .colmax = cpu_colmax,
    .pass = cpu_pass,
    .finish = cpu_finish,
    .gd = cpu_gd,
    .nesterov = cpu_nesterov,
    .lbfgs_dir = cpu_lbfgs_dir,
    .axpy = cpu_axpy,
    .lbfgs_accept = cpu_lbfgs_accept,
};
