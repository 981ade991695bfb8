// test_backend_ops_logreg_steps.c: test_backend_ops's cases of lr_ops's finish (the gradient's
// fixed-point digits joined, the blocks' loss slots summed in order) and the optimisers' vector steps
// (logreg/logreg.h): gd, nesterov, lbfgs_dir, axpy and lbfgs_accept, against the CPU backend (gpu mode)
// or the loops here, each inside the ops' own open and close.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_ops.h"
#include "core/exactsum.h"
#include "logreg/logreg.h"

// ---------------------------------------------------------------------------------------------------
// The vector steps: vectors of dk = cols·classes doubles.

static const int64_t vec_shapes[][2] = {{2, 1}, {4, 3}, {41, 5}, {785, 10}};  // cols, classes
enum { NVEC = 4 };

static void vec_text(const lr_work *w, const char *extra, char *buf, size_t len)
{
    snprintf(buf, len, "%lld x %lld%s", (long long)w->cols, (long long)w->classes, extra);
}

// gbuf: logreg_gbuf_len(shape) doubles; fix: 2·cols (lr_work.fix's layout).
static int finish_on(ds_ctx *c, const lr_work *shape, const double *gbuf, const double *fix, const double *W, int hist,
                     double *g, double *out)
{
    const int64_t dk = shape->cols * shape->classes, len = logreg_gbuf_len(shape);
    lr_work w;
    ops_mem m = {c};
    int rc = ops_lr_open(c, &w, 1, shape->cols, shape->classes, LR_SOFTMAX, 0);
    w.l2 = shape->l2, w.inv_n = shape->inv_n, w.blocks = shape->blocks, w.fix_lo = shape->fix_lo;
    if (rc == DS_OK) {
        const double *gb = ops_put(&m, gbuf, (size_t)len * 8), *Wd = ops_put(&m, W, (size_t)dk * 8);
        w.fix = ops_put(&m, fix, (size_t)(2 * shape->cols) * 8);
        double *gd = ops_new(&m, (size_t)dk * 8), *od = ops_new(&m, 3 * 8);
        rc = ops_ran(c, c->be->logreg->finish(c, &w, gb, Wd, gd, od, hist ? od + 2 : NULL), "logreg.finish");
        ops_get(&m, g, gd, (size_t)dk * 8);
        ops_get(&m, out, od, 3 * 8);
    }
    c->be->logreg->close(c, &w);
    ops_release(&m);
    return rc;
}

// Random digits (high up to 2^40, low up to 2^30), scales 2^(30 .. 36), loss slots and a count.
static void finish_inputs(ops_run *r, const lr_work *w, double *gbuf, double *fix)
{
    const int64_t dk = w->cols * w->classes, len = logreg_gbuf_len(w);
    ops_fill(r, gbuf, len, -1, 1, 1);
    for (int64_t i = 0; i < dk; i++) {
        gbuf[i] = rint(gbuf[i] * 0x1p40);
        gbuf[dk + i] = rint(gbuf[dk + i] * 0x1p30);
    }
    for (int64_t b = 0; b < w->blocks; b++)
        gbuf[2 * dk + b] = fabs(gbuf[2 * dk + b]) * 50;
    gbuf[len - 1] = floor(fabs(gbuf[len - 1]) * 500);
    for (int64_t j = 0; j < w->cols; j++) {
        fix[j] = ldexp(1.0, 30 + (int)(j % 7));
        fix[w->cols + j] = 1.0 / fix[j];
    }
}

// g = the digits joined·inv_n + l2·W and out = (objective, accuracy) with the bias row out of the
// penalty and the loss slots summed in order, relative, tol 4·(dk + blocks + 2)·u; hist (when given)
// the bits of out[0].
void case_lr_finish(ops_run *r)
{
    for (int s = 0; s < NVEC; s++) {
        lr_work w = {.cols = vec_shapes[s][0], .classes = vec_shapes[s][1], .l2 = 1e-3 * (s + 1), .inv_n = 1.0 / 997,
                     .blocks = 1 + 3 * s, .fix_lo = exactsum_lo(997)};
        const int64_t dk = w.cols * w.classes, reg = (w.cols - 1) * w.classes, len = logreg_gbuf_len(&w);
        ops_mem h = {NULL};
        double *gbuf = ops_new(&h, (size_t)len * 8), *W = ops_new(&h, (size_t)dk * 8);
        double *fix = ops_new(&h, (size_t)(2 * w.cols) * 8);
        double *g = ops_new(&h, (size_t)dk * 8), *wg = ops_new(&h, (size_t)dk * 8), out[3] = {0}, wout[3] = {0};
        finish_inputs(r, &w, gbuf, fix);
        ops_fill(r, W, dk, -1, 1, 1);
        const int hist = s % 2;
        int st = finish_on(r->dut, &w, gbuf, fix, W, hist, g, out);
        if (r->cpu) {
            st |= finish_on(r->cpu, &w, gbuf, fix, W, hist, wg, wout);
        } else {
            double ww = 0.0, loss = 0.0;
            for (int64_t i = 0; i < dk; i++) {
                const double sum = gbuf[i] / fix[i / w.classes] + gbuf[dk + i] / (fix[i / w.classes] * w.fix_lo);
                wg[i] = sum * w.inv_n + (i < reg ? w.l2 * W[i] : 0.0);
                ww += i < reg ? W[i] * W[i] : 0.0;
            }
            for (int64_t b = 0; b < w.blocks; b++)
                loss += gbuf[2 * dk + b];
            wout[0] = loss * w.inv_n + 0.5 * w.l2 * ww;
            wout[1] = gbuf[len - 1] * w.inv_n;
            wout[2] = hist ? wout[0] : 0.0;
        }
        double err = fmax(ops_err_rel(g, wg, dk), fmax(ops_err_rel(out, wout, 1), ops_err_rel(out + 1, wout + 1, 1)));
        if (hist)
            err = fmax(err, ops_err_bytes(out + 2, out, 1, 8) > 0 ? INFINITY : 0.0);
        char shape[64];
        vec_text(&w, hist ? ", hist" : "", shape, sizeof shape);
        ops_report(r, "logreg.finish", shape, "f64", err, 4.0 * (double)(dk + w.blocks + 2) * OPS_U64, st);
        ops_release(&h);
    }
}

static int gd_on(ds_ctx *c, int64_t cols, int64_t K, const double *W, const double *g, double lr, double *out)
{
    const int64_t dk = cols * K;
    lr_work w;
    ops_mem m = {c};
    int rc = ops_lr_open(c, &w, 1, cols, K, LR_SOFTMAX, 0);
    if (rc == DS_OK) {
        double *Wd = ops_put(&m, W, (size_t)dk * 8);
        const double *gd = ops_put(&m, g, (size_t)dk * 8);
        rc = ops_ran(c, c->be->logreg->gd(c, &w, Wd, gd, lr), "logreg.gd");
        ops_get(&m, out, Wd, (size_t)dk * 8);
    }
    c->be->logreg->close(c, &w);
    ops_release(&m);
    return rc;
}

// W −= lr·g; each entry against |W| + |lr·g|, tol 4·u.
void case_lr_gd(ops_run *r)
{
    for (int s = 0; s < NVEC; s++) {
        const int64_t cols = vec_shapes[s][0], K = vec_shapes[s][1], dk = cols * K;
        const double lr = 0.37 * (s + 1);
        ops_mem h = {NULL};
        double *W = ops_new(&h, (size_t)dk * 8), *g = ops_new(&h, (size_t)dk * 8), *got = ops_new(&h, (size_t)dk * 8);
        double *want = ops_new(&h, (size_t)dk * 8), *scale = ops_new(&h, (size_t)dk * 8);
        ops_fill(r, W, dk, -1, 1, 1);
        ops_fill(r, g, dk, -1, 1, 1);
        for (int64_t i = 0; i < dk; i++) {
            want[i] = W[i] - lr * g[i];
            scale[i] = fabs(W[i]) + fabs(lr * g[i]);
        }
        int st = gd_on(r->dut, cols, K, W, g, lr, got);
        if (r->cpu)
            st |= gd_on(r->cpu, cols, K, W, g, lr, want);
        char shape[64];
        snprintf(shape, sizeof shape, "%lld x %lld, lr %.2f", (long long)cols, (long long)K, lr);
        ops_report(r, "logreg.gd", shape, "f64", ops_err_each(got, want, scale, dk), 4 * OPS_U64, st);
        ops_release(&h);
    }
}

typedef struct nest_io {
    double *x, *y, t;
} nest_io;

static int nesterov_on(ds_ctx *c, int64_t cols, int64_t K, const nest_io *in, const double *g, double lr, nest_io *out)
{
    const int64_t dk = cols * K;
    lr_work w;
    ops_mem m = {c};
    int rc = ops_lr_open(c, &w, 1, cols, K, LR_SOFTMAX, 0);
    if (rc == DS_OK) {
        double *x = ops_put(&m, in->x, (size_t)dk * 8), *y = ops_put(&m, in->y, (size_t)dk * 8);
        double *t = ops_put(&m, &in->t, 8);
        const double *gd = ops_put(&m, g, (size_t)dk * 8);
        rc = ops_ran(c, c->be->logreg->nesterov(c, &w, x, y, gd, lr, t), "logreg.nesterov");
        ops_get(&m, out->x, x, (size_t)dk * 8);
        ops_get(&m, out->y, y, (size_t)dk * 8);
        ops_get(&m, &out->t, t, 8);
    }
    c->be->logreg->close(c, &w);
    ops_release(&m);
    return rc;
}

static void nesterov_ref(int64_t dk, const nest_io *in, const double *g, double lr, nest_io *out)
{
    double restart = 0.0;
    for (int64_t i = 0; i < dk; i++)
        restart += lr * g[i] * (in->y[i] - lr * g[i] - in->x[i]);
    const double t0 = restart > 0 ? 1.0 : in->t, t1 = 0.5 * (1.0 + sqrt(1.0 + 4.0 * t0 * t0)), beta = (t0 - 1.0) / t1;
    for (int64_t i = 0; i < dk; i++) {
        const double xn = in->y[i] - lr * g[i];
        out->y[i] = xn + beta * (xn - in->x[i]);
        out->x[i] = xn;
    }
    out->t = t1;
}

// From y with the previous iterate x: without a restart (x = y + lr·g: the step turns back) and with
// one (x = y − 2·lr·g), momentum t 1 and 3.7. x and t relative, y against |x⁺| + |β|·(|x⁺| + |x|);
// tol 16·u.
void case_lr_nesterov(ops_run *r)
{
    for (int s = 0; s < NVEC; s++)
        for (int restart = 0; restart <= 1; restart++) {
            const int64_t cols = vec_shapes[s][0], K = vec_shapes[s][1], dk = cols * K;
            const double lr = 0.5;
            ops_mem h = {NULL};
            nest_io in = {ops_new(&h, (size_t)dk * 8), ops_new(&h, (size_t)dk * 8), s % 2 ? 3.7 : 1.0};
            nest_io got = {ops_new(&h, (size_t)dk * 8), ops_new(&h, (size_t)dk * 8)};
            nest_io want = {ops_new(&h, (size_t)dk * 8), ops_new(&h, (size_t)dk * 8)};
            double *g = ops_new(&h, (size_t)dk * 8), *sy = ops_new(&h, (size_t)dk * 8);
            ops_fill(r, in.y, dk, -1, 1, 1);
            ops_fill(r, g, dk, -1, 1, 1);
            for (int64_t i = 0; i < dk; i++)
                in.x[i] = restart ? in.y[i] - 2 * lr * g[i] : in.y[i] + lr * g[i];
            nesterov_ref(dk, &in, g, lr, &want);
            int st = nesterov_on(r->dut, cols, K, &in, g, lr, &got);
            if (r->cpu)
                st |= nesterov_on(r->cpu, cols, K, &in, g, lr, &want);
            const double t0 = restart ? 1.0 : in.t, beta = fabs((t0 - 1.0) / want.t);
            for (int64_t i = 0; i < dk; i++)
                sy[i] = fabs(want.x[i]) + beta * (fabs(want.x[i]) + fabs(in.x[i])) + 1e-300;
            double err = fmax(ops_err_rel(got.x, want.x, dk), ops_err_each(got.y, want.y, sy, dk));
            err = fmax(err, ops_err_rel(&got.t, &want.t, 1));
            char shape[64];
            snprintf(shape, sizeof shape, "%lld x %lld, t %.1f%s", (long long)cols, (long long)K, in.t,
                     restart ? ", restart" : "");
            ops_report(r, "logreg.nesterov", shape, "f64", err, 16 * OPS_U64, st);
            ops_release(&h);
        }
}

// The pairs of L-BFGS's memory (a ring of LR_LBFGS_MEMORY) and where to start.
typedef struct lbfgs_in {
    int64_t dk;
    int count, newest;
    double *g, *S, *Y, rho[LR_LBFGS_MEMORY];
} lbfgs_in;

static int lbfgs_dir_on(ds_ctx *c, int64_t cols, int64_t K, const lbfgs_in *in, double *d, double *gtd)
{
    const int64_t dk = cols * K, mem = LR_LBFGS_MEMORY * dk;
    lr_work w;
    ops_mem m = {c};
    int rc = ops_lr_open(c, &w, 1, cols, K, LR_SOFTMAX, 0);
    if (rc == DS_OK) {
        const double *g = ops_put(&m, in->g, (size_t)dk * 8), *S = ops_put(&m, in->S, (size_t)mem * 8);
        const double *Y = ops_put(&m, in->Y, (size_t)mem * 8), *rho = ops_put(&m, in->rho, sizeof in->rho);
        double *dd = ops_new(&m, (size_t)dk * 8), *gd = ops_new(&m, 8);
        rc = ops_ran(c, c->be->logreg->lbfgs_dir(c, &w, g, S, Y, rho, in->count, in->newest, dd, gd),
                     "logreg.lbfgs_dir");
        ops_get(&m, d, dd, (size_t)dk * 8);
        ops_get(&m, gtd, gd, 8);
    }
    c->be->logreg->close(c, &w);
    ops_release(&m);
    return rc;
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

// The two-loop recursion of the contract.
static void lbfgs_dir_ref(const lbfgs_in *in, double *d, double *gtd)
{
    const int64_t n = in->dk;
    const int m = LR_LBFGS_MEMORY;
    double a[LR_LBFGS_MEMORY] = {0}, gamma = 0.0;
    memcpy(d, in->g, (size_t)n * 8);
    for (int j = 0; j < in->count; j++) {
        const int i = (in->newest - j + m) % m;
        if (in->rho[i] == 0)
            continue;
        a[i] = in->rho[i] * dot(in->S + i * n, d, n);
        for (int64_t e = 0; e < n; e++)
            d[e] -= a[i] * in->Y[i * n + e];
        if (gamma == 0)
            gamma = 1.0 / (in->rho[i] * dot(in->Y + i * n, in->Y + i * n, n));
    }
    if (gamma == 0) {
        const double gn = sqrt(dot(in->g, in->g, n));
        gamma = gn > 0 ? 1.0 / gn : 1.0;
    }
    for (int64_t e = 0; e < n; e++)
        d[e] *= gamma;
    for (int j = in->count - 1; j >= 0; j--) {
        const int i = (in->newest - j + m) % m;
        if (in->rho[i] == 0)
            continue;
        const double b = in->rho[i] * dot(in->Y + i * n, d, n);
        for (int64_t e = 0; e < n; e++)
            d[e] += (a[i] - b) * in->S[i * n + e];
    }
    double gd = -dot(in->g, d, n);
    if (!(gd < 0)) {
        memcpy(d, in->g, (size_t)n * 8);
        gd = -dot(in->g, in->g, n);
    }
    for (int64_t e = 0; e < n; e++)
        d[e] = -d[e];
    *gtd = gd;
}

// No pairs; 3 pairs; a full ring that wraps, with a skipped pair (rho 0); and one pair (s = g, y = −g)
// whose direction is not one of descent, so −g. Pairs y = D·s with D diagonal in [½, 2] (positive
// curvature). d against max |d| and gᵀd relative, tol 1e-12 (several passes of dot products).
void case_lr_lbfgs_dir(ops_run *r)
{
    const int cases[][3] = {{0, 0, 0}, {3, 2, 0}, {10, 4, 1}, {1, 0, 2}};  // count, newest, kind
    for (int s = 0; s < NVEC; s++)
        for (int c = 0; c < 4; c++) {
            const int64_t cols = vec_shapes[s][0], K = vec_shapes[s][1], dk = cols * K, mem = LR_LBFGS_MEMORY * dk;
            ops_mem h = {NULL};
            lbfgs_in in = {dk, cases[c][0], cases[c][1], ops_new(&h, (size_t)dk * 8), ops_new(&h, (size_t)mem * 8),
                           ops_new(&h, (size_t)mem * 8)};
            double *D = ops_new(&h, (size_t)dk * 8);
            ops_fill(r, in.g, dk, -1, 1, 1);
            ops_fill(r, in.S, mem, -0.1, 0.1, 1);
            ops_fill(r, D, dk, 0.5, 2, 1);
            for (int i = 0; i < LR_LBFGS_MEMORY; i++) {
                for (int64_t e = 0; e < dk; e++) {
                    if (cases[c][2] == 2 && i == 0)
                        in.S[e] = in.g[e];
                    in.Y[i * dk + e] = cases[c][2] == 2 && i == 0 ? -in.g[e] : D[e] * in.S[i * dk + e];
                }
                in.rho[i] = cases[c][2] == 1 && i == 7 ? 0.0 : 1.0 / dot(in.Y + i * dk, in.S + i * dk, dk);
            }
            double *d = ops_new(&h, (size_t)dk * 8), *wd = ops_new(&h, (size_t)dk * 8), gtd = 0, wgtd = 0;
            int st = lbfgs_dir_on(r->dut, cols, K, &in, d, &gtd);
            if (r->cpu)
                st |= lbfgs_dir_on(r->cpu, cols, K, &in, wd, &wgtd);
            else
                lbfgs_dir_ref(&in, wd, &wgtd);
            const double err = fmax(ops_err_rel(d, wd, dk), ops_err_rel(&gtd, &wgtd, 1));
            char shape[64], extra[48];
            snprintf(extra, sizeof extra, ", %d pairs%s", in.count,
                     cases[c][2] == 1 ? ", a ring with one skipped" : cases[c][2] == 2 ? ", no descent" : "");
            snprintf(shape, sizeof shape, "%lld x %lld%s", (long long)cols, (long long)K, extra);
            ops_report(r, "logreg.lbfgs_dir", shape, "f64", err, 1e-12, st);
            ops_release(&h);
        }
}

static int axpy_on(ds_ctx *c, int64_t cols, int64_t K, const double *W, double alpha, const double *d, double *out)
{
    const int64_t dk = cols * K;
    lr_work w;
    ops_mem m = {c};
    int rc = ops_lr_open(c, &w, 1, cols, K, LR_SOFTMAX, 0);
    if (rc == DS_OK) {
        const double *Wd = ops_put(&m, W, (size_t)dk * 8), *dd = ops_put(&m, d, (size_t)dk * 8);
        double *o = ops_new(&m, (size_t)dk * 8);
        rc = ops_ran(c, c->be->logreg->axpy(c, &w, o, Wd, alpha, dd), "logreg.axpy");
        ops_get(&m, out, o, (size_t)dk * 8);
    }
    c->be->logreg->close(c, &w);
    ops_release(&m);
    return rc;
}

// out = W + alpha·d; each entry against |W| + |alpha·d|, tol 4·u.
void case_lr_axpy(ops_run *r)
{
    for (int s = 0; s < NVEC; s++) {
        const int64_t cols = vec_shapes[s][0], K = vec_shapes[s][1], dk = cols * K;
        const double alpha = ldexp(1.0, -s) * 0.9;
        ops_mem h = {NULL};
        double *W = ops_new(&h, (size_t)dk * 8), *d = ops_new(&h, (size_t)dk * 8), *got = ops_new(&h, (size_t)dk * 8);
        double *want = ops_new(&h, (size_t)dk * 8), *scale = ops_new(&h, (size_t)dk * 8);
        ops_fill(r, W, dk, -1, 1, 1);
        ops_fill(r, d, dk, -1, 1, 1);
        for (int64_t i = 0; i < dk; i++) {
            want[i] = W[i] + alpha * d[i];
            scale[i] = fabs(W[i]) + fabs(alpha * d[i]);
        }
        int st = axpy_on(r->dut, cols, K, W, alpha, d, got);
        if (r->cpu)
            st |= axpy_on(r->cpu, cols, K, W, alpha, d, want);
        char shape[64];
        snprintf(shape, sizeof shape, "%lld x %lld, alpha %.3f", (long long)cols, (long long)K, alpha);
        ops_report(r, "logreg.axpy", shape, "f64", ops_err_each(got, want, scale, dk), 4 * OPS_U64, st);
        ops_release(&h);
    }
}

typedef struct accept_io {
    double *W, *g, *s, *y, rho;
} accept_io;

static int accept_on(ds_ctx *c, int64_t cols, int64_t K, const double *W, const double *g, const double *Wt,
                     const double *gt, accept_io *out)
{
    const int64_t dk = cols * K;
    lr_work w;
    ops_mem m = {c};
    int rc = ops_lr_open(c, &w, 1, cols, K, LR_SOFTMAX, 0);
    if (rc == DS_OK) {
        double *Wd = ops_put(&m, W, (size_t)dk * 8), *gd = ops_put(&m, g, (size_t)dk * 8);
        const double *Wtd = ops_put(&m, Wt, (size_t)dk * 8), *gtd = ops_put(&m, gt, (size_t)dk * 8);
        double *sd = ops_new(&m, (size_t)dk * 8), *yd = ops_new(&m, (size_t)dk * 8), *rd = ops_new(&m, 8);
        rc = ops_ran(c, c->be->logreg->lbfgs_accept(c, &w, Wd, gd, Wtd, gtd, sd, yd, rd), "logreg.lbfgs_accept");
        ops_get(&m, out->W, Wd, (size_t)dk * 8);
        ops_get(&m, out->g, gd, (size_t)dk * 8);
        ops_get(&m, out->s, sd, (size_t)dk * 8);
        ops_get(&m, out->y, yd, (size_t)dk * 8);
        ops_get(&m, &out->rho, rd, 8);
    }
    c->be->logreg->close(c, &w);
    ops_release(&m);
    return rc;
}

// s = Wt − W and y = gt − g (one rounding: exact), rho = 1/yᵀs (relative, tol 4·dk·u) or 0 where the
// curvature is negative (gt = g − D·(Wt − W)); W and g become Wt and gt (exact).
void case_lr_lbfgs_accept(ops_run *r)
{
    for (int s = 0; s < NVEC; s++)
        for (int negative = 0; negative <= 1; negative++) {
            const int64_t cols = vec_shapes[s][0], K = vec_shapes[s][1], dk = cols * K;
            ops_mem h = {NULL};
            double *W = ops_new(&h, (size_t)dk * 8), *g = ops_new(&h, (size_t)dk * 8),
                   *Wt = ops_new(&h, (size_t)dk * 8);
            double *gt = ops_new(&h, (size_t)dk * 8), *D = ops_new(&h, (size_t)dk * 8);
            accept_io got = {ops_new(&h, (size_t)dk * 8), ops_new(&h, (size_t)dk * 8), ops_new(&h, (size_t)dk * 8),
                             ops_new(&h, (size_t)dk * 8)};
            accept_io want = {ops_new(&h, (size_t)dk * 8), ops_new(&h, (size_t)dk * 8), ops_new(&h, (size_t)dk * 8),
                              ops_new(&h, (size_t)dk * 8)};
            ops_fill(r, W, dk, -1, 1, 1);
            ops_fill(r, g, dk, -1, 1, 1);
            ops_fill(r, Wt, dk, -0.1, 0.1, 1);
            ops_fill(r, D, dk, 0.5, 2, 1);
            for (int64_t i = 0; i < dk; i++) {
                Wt[i] += W[i];
                gt[i] = g[i] + (negative ? -1 : 1) * D[i] * (Wt[i] - W[i]);
            }
            int st = accept_on(r->dut, cols, K, W, g, Wt, gt, &got);
            if (r->cpu) {
                st |= accept_on(r->cpu, cols, K, W, g, Wt, gt, &want);
            } else {
                double ys = 0.0, yy = 0.0;
                for (int64_t i = 0; i < dk; i++) {
                    want.s[i] = Wt[i] - W[i];
                    want.y[i] = gt[i] - g[i];
                    ys += want.y[i] * want.s[i];
                    yy += want.y[i] * want.y[i];
                }
                want.rho = ys > 1e-10 * yy ? 1.0 / ys : 0.0;
                memcpy(want.W, Wt, (size_t)dk * 8);
                memcpy(want.g, gt, (size_t)dk * 8);
            }
            double err = ops_err_rel(&got.rho, &want.rho, 1);
            const double exact = ops_err_bytes(got.s, want.s, dk, 8) + ops_err_bytes(got.y, want.y, dk, 8) +
                                 ops_err_bytes(got.W, want.W, dk, 8) + ops_err_bytes(got.g, want.g, dk, 8);
            if (exact > 0)
                err = INFINITY;
            char shape[64];
            snprintf(shape, sizeof shape, "%lld x %lld, %s curvature", (long long)cols, (long long)K,
                     negative ? "negative" : "positive");
            ops_report(r, "logreg.lbfgs_accept", shape, "f64", err, 4.0 * (double)dk * OPS_U64, st);
            ops_release(&h);
        }
}
