// test_backend_ops_logreg.c: test_backend_ops's case of lr_ops's row pass (logreg/logreg.h): its
// gradient (read back from its fixed-point digits), loss (from its blocks' slots) and count, on f32 and
// f64 sets and on f32 shapes that take the CUDA backend's fused pass, partial tiles and its fallback,
// against the CPU backend (gpu mode) or the loops here. The other
// ops are in test_backend_ops_logreg_steps.c. Every op runs inside the ops' own open and close.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_ops.h"
#include "core/exactsum.h"
#include "logreg/logreg.h"

int ops_lr_open(ds_ctx *c, lr_work *w, int64_t rows_max, int64_t cols, int64_t K, int model, int f32)
{
    const int64_t rb = logreg_block_rows(rows_max);
    *w = (lr_work){.rows_max = rows_max, .cols = cols, .classes = K, .model = model, .f32 = f32, .l2 = 1e-3,
                   .inv_n = 1e-2, .block_rows = rb, .blocks = (rows_max + rb - 1) / rb};
    return ops_ran(c, c->be->logreg->open(c, w), "logreg.open");
}

// ---------------------------------------------------------------------------------------------------
// pass

// A rank's rows: X (rows × cols, features in [0, 1), the last column 1), labels, and W (cols × K).
typedef struct pass_in {
    int64_t m, rows, cols, K;
    int empty, model;
    ops_arr X;
    int32_t *labels;
    double *W;
} pass_in;

// The work for in on c, opened, with the fixed point of in's rows (their own column maxima: the sums
// here are the rank's).
static int pass_open(ds_ctx *c, const pass_in *in, ops_mem *m, ops_mem *h, lr_work *w)
{
    const int64_t rb = logreg_block_rows(in->m), D = in->cols;
    *w = (lr_work){.rows_max = in->rows, .cols = D, .classes = in->K, .model = in->model, .f32 = in->X.f32,
                   .l2 = 1e-3, .inv_n = 1e-2, .block_rows = rb, .blocks = (in->m + rb - 1) / rb};
    double *xmax = ops_new(h, (size_t)D * 8), *fix = ops_new(h, (size_t)(2 * D) * 8);
    for (int64_t i = 0; i < in->rows; i++)
        for (int64_t j = 0; j < D; j++)
            xmax[j] = fmax(xmax[j], fabs(in->X.d[i * D + j]));
    w->fix_lo = logreg_fix_scales(xmax, D, in->m, fix);
    w->fix = ops_put(m, fix, (size_t)(2 * D) * 8);
    return ops_ran(c, c->be->logreg->open(c, w), "logreg.open");
}

// The pass on c, its gbuf read back as [Xᵀ(P − Y) (the digits joined) | Σ loss (the slots in order) |
// correct] in gbuf (dk + 2 doubles).
static int pass_on(ds_ctx *c, const pass_in *in, int grad, double *gbuf)
{
    const int64_t dk = in->cols * in->K;
    lr_set s;
    lr_work w = {0};
    ops_mem m = {c}, h = {NULL};
    int rc = ops_ran(c, logreg_set_alloc(c, &s, in->rows, in->cols, in->X.f32), "logreg_set_alloc");
    if (rc == DS_OK) {
        s.rows_global = in->m, s.row0 = 0;
        ops_upload(c, s.X, in->X.raw, ops_arr_bytes(&in->X));
        ops_upload(c, s.labels, in->labels, (size_t)in->rows * sizeof(int32_t));
        rc = pass_open(c, in, &m, &h, &w);
    }
    if (rc == DS_OK) {
        const int64_t len = logreg_gbuf_len(&w);
        double *raw = ops_new(&h, (size_t)len * 8), *fix = ops_new(&h, (size_t)(2 * in->cols) * 8);
        const double *W = ops_put(&m, in->W, (size_t)dk * 8);
        double *gb = ops_put(&m, raw, (size_t)len * 8);  // zeros: the digits a pass without grad leaves
        rc = ops_ran(c, c->be->logreg->pass(c, &w, &s, W, grad, gb), "logreg.pass");
        ops_get(&m, raw, gb, (size_t)len * 8);
        ops_get(&m, fix, w.fix, (size_t)(2 * in->cols) * 8);
        for (int64_t i = 0; i < dk; i++)
            gbuf[i] = exactsum_join(raw[i], raw[dk + i], fix[i / in->K], w.fix_lo);
        gbuf[dk] = 0.0;
        for (int64_t b = 0; b < w.blocks; b++)
            gbuf[dk] += raw[2 * dk + b];
        gbuf[dk + 1] = raw[2 * dk + w.blocks];
    }
    c->be->logreg->close(c, &w);
    logreg_set_free(c, &s);
    ops_release(&m);
    ops_release(&h);
    return rc;
}

// The pass by the contract in double (W rounded to float as the ops use it for f32 X), and each
// gradient entry's scale Σ_i |x_ij| (|P − Y| ≤ 1).
static void pass_ref(const pass_in *in, double *gbuf, double *scale)
{
    const int64_t D = in->cols, K = in->K;
    double z[LR_MAX_CLASSES], loss = 0.0, correct = 0.0;
    memset(gbuf, 0, (size_t)(D * K + 2) * 8);
    memset(scale, 0, (size_t)(D * K) * 8);
    for (int64_t i = 0; i < in->rows; i++) {
        const double *x = in->X.d + i * D;
        const int y = in->labels[i];
        int best = 0;
        for (int64_t k = 0; k < K; k++) {
            z[k] = 0.0;
            for (int64_t j = 0; j < D; j++)
                z[k] += x[j] * (in->X.f32 ? (double)(float)in->W[j * K + k] : in->W[j * K + k]);
            best = z[k] > z[best] ? (int)k : best;
        }
        correct += best == y;
        double sum = 0.0;
        for (int64_t k = 0; k < K; k++)
            sum += exp(z[k] - z[best]);
        if (in->model == LR_SOFTMAX)
            loss += z[best] + log(sum) - z[y];
        for (int64_t k = 0; k < K; k++) {
            double res;
            if (in->model == LR_SOFTMAX) {
                res = exp(z[k] - z[best]) / sum - (k == y);
            } else {
                loss += fmax(z[k], 0.0) + log1p(exp(-fabs(z[k]))) - (k == y) * z[k];
                res = 1.0 / (1.0 + exp(-z[k])) - (k == y);
            }
            for (int64_t j = 0; j < D; j++) {
                gbuf[j * K + k] += x[j] * res;
                scale[j * K + k] += fabs(x[j]);
            }
        }
    }
    gbuf[D * K] = loss;
    gbuf[D * K + 1] = correct;
}

static void pass_make(ops_run *r, ops_mem *h, const int64_t *shape, int f32, int model, pass_in *in)
{
    *in = (pass_in){.m = ops_dim(r, shape[0]), .cols = shape[1], .K = shape[2], .empty = (int)shape[3], .model = model};
    in->rows = ops_rows(r, in->m / r->nranks, in->empty);
    ops_arr_make(r, h, in->rows * in->cols, f32, 0, 1, 1, &in->X);
    for (int64_t i = 0; i < in->rows; i++) {
        in->X.d[i * in->cols + in->cols - 1] = 1.0;
        if (f32)
            ((float *)in->X.raw)[i * in->cols + in->cols - 1] = 1.0f;
    }
    double *u = ops_new(h, (size_t)in->rows * 8);
    ops_fill(r, u, in->rows, 0, (double)in->K, 1);
    in->labels = ops_new(h, (size_t)in->rows * sizeof(int32_t));
    for (int64_t i = 0; i < in->rows; i++)
        in->labels[i] = (int32_t)u[i];
    in->W = ops_new(h, (size_t)(in->cols * in->K) * 8);
    const double a = 2.0 / sqrt((double)in->cols);
    ops_fill(r, in->W, in->cols * in->K, -a, a, 0);
}

// Three lines a run. The gradient (componentwise against Σ|x|) and the loss sum (relative) with tol
// 4·(m + cols)·u in f64 and 1e-4 in f32 (float logits and sums); the rows whose largest logit is their
// label's, exact in f64 and within 2 rows in f32 (near ties); and the pass without the gradient, whose
// loss and count must be the bits of the pass with it.
static void pass_one(ops_run *r, const int64_t *shape, int f32, int model)
{
    ops_mem h = {NULL};
    pass_in in;
    pass_make(r, &h, shape, f32, model, &in);
    const int64_t dk = in.cols * in.K;
    double *got = ops_new(&h, (size_t)(dk + 2) * 8), *want = ops_new(&h, (size_t)(dk + 2) * 8);
    double *nog = ops_new(&h, (size_t)(dk + 2) * 8), *scale = ops_new(&h, (size_t)dk * 8);
    pass_ref(&in, want, scale);
    int st = pass_on(r->dut, &in, 1, got);
    if (r->cpu) {
        memset(want, 0, (size_t)(dk + 2) * 8);
        st |= pass_on(r->cpu, &in, 1, want);
    }
    const int st2 = pass_on(r->dut, &in, 0, nog);
    const double err = fmax(ops_err_each(got, want, scale, dk), ops_err(got + dk, want + dk, 1, fabs(want[dk])));
    char shape_s[96];
    snprintf(shape_s, sizeof shape_s, "%lld/p+r x %lld, %lld classes, %s%s", (long long)in.m, (long long)in.cols,
             (long long)in.K, model == LR_SOFTMAX ? "softmax" : "ovr", in.empty ? ", last rank none" : "");
    const double tol = f32 ? 1e-4 : 4.0 * (double)(in.m + in.cols + r->nranks) * OPS_U64;
    ops_report(r, "logreg.pass", shape_s, ops_dtype_name(f32), err, tol, st);
    const double wrong = ops_err(got + dk + 1, want + dk + 1, 1, 1.0);  // rows
    ops_report(r, "logreg.pass correct", shape_s, ops_dtype_name(f32), wrong, f32 ? 2 : 0, st);
    ops_report(r, "logreg.pass no gradient", shape_s, ops_dtype_name(f32), ops_err_bytes(nog + dk, got + dk, 2, 8), 0, st2);
    ops_release(&h);
}

void case_lr_pass(ops_run *r)
{
    const int64_t small[][4] = {{1, 2, 2, 0}, {17, 4, 3, 0}, {390, 41, 5, 1}, {3001, 17, 16, 0}};  // m, cols, K, empty
    // f32 shapes of the fused CUDA pass (MNIST's 785 × 10; 16 classes; partial tiles) and one past its
    // column limit (the GEMM route).
    const int64_t fused[][4] = {{6007, 785, 10, 0}, {4133, 300, 16, 1}, {999, 1024, 3, 0}, {2500, 1100, 10, 0}};
    for (int model = LR_SOFTMAX; model <= LR_OVR; model++) {
        for (int s = 0; s < 4; s++)
            for (int f32 = 0; f32 <= 1; f32++)
                pass_one(r, small[s], f32, model);
        for (int s = 0; s < 4; s++)
            pass_one(r, fused[s], 1, model);
    }
}
