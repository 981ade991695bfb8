// test_backend_ops_ann_output.c: test_backend_ops's cases of the output layer's ann_ops (ann/ann.h): the
// forward pass, its Gram, the output product, add and the output solve (both routes), against the CPU
// backend (gpu mode) or the loops here.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ann/ann.h"
#include "backend_ops.h"

// ---------------------------------------------------------------------------------------------------
// forward, forward_gram

// A forward pass: rows (m + rank, none on the last rank when empty) × n inputs, K neurons, outputs
// targets (0: y NULL), H of leading dimension ld.
typedef struct fwd_in {
    int64_t m, rows, n, K, outputs, ld;
    int empty;
    double *X, *W, *y;
} fwd_in;

static void fwd_make(ops_run *r, ops_mem *h, const int64_t *c, fwd_in *f)
{
    *f = (fwd_in){.m = ops_dim(r, c[0]), .n = c[1], .K = ops_dim(r, c[2]), .outputs = c[3], .empty = (int)c[5]};
    f->rows = ops_rows(r, f->m, f->empty);
    f->ld = f->K + 1 + f->outputs + c[4];
    f->X = ops_new(h, (size_t)(f->rows * f->n) * 8);
    f->W = ops_new(h, (size_t)(f->K * (f->n + 1)) * 8);
    f->y = f->outputs ? ops_new(h, (size_t)f->rows * 8) : NULL;
    ops_fill(r, f->X, f->rows * f->n, -0.5, 0.5, 1);
    ops_fill(r, f->W, f->K * (f->n + 1), -2.0 / (double)f->n, 2.0 / (double)f->n, 0);
    if (f->y)
        ops_fill(r, f->y, f->rows, -1, 1, 1);
    for (int64_t i = 0; f->outputs > 1 && i < f->rows; i++)
        f->y[i] = floor((f->y[i] + 1) / 2 * (double)f->outputs);  // labels 0 .. outputs − 1
}

static const int64_t fwd_shapes[][6] = {  // rows m, n, K, outputs (0: no y), extra ld, empty
    {1, 1, 1, 0, 0, 1}, {17, 3, 17, 1, 0, 0}, {130, 40, 17, 3, 0, 1}, {1001, 3, 130, 1, 0, 0},
    {17, 40, 130, 0, 2, 0}, {1001, 6, 50, 3, 0, 1}};
enum { NFWD = sizeof fwd_shapes / sizeof fwd_shapes[0] };

static void fwd_text(const ops_run *r, const fwd_in *f, char *buf, size_t len)
{
    snprintf(buf, len, "%lld+r x %lld, K %lld, ld %lld, %s", (long long)f->m, (long long)f->n, (long long)f->K,
             (long long)f->ld, f->outputs == 0 ? "no y" : f->outputs == 1 ? "y" : "classes");
    if (f->empty)
        snprintf(buf + strlen(buf), len - strlen(buf), ", rank %d none", r->nranks - 1);
}

// H by the contract, from libm's tanh; columns not written keep init.
static void forward_ref(const fwd_in *f, const double *init, double *H)
{
    memcpy(H, init, (size_t)(f->rows * f->ld) * 8);
    for (int64_t i = 0; i < f->rows; i++) {
        double *hr = H + i * f->ld;
        for (int64_t k = 0; k < f->K; k++) {
            const double *w = f->W + k * (f->n + 1);
            double s = w[f->n];
            for (int64_t c = 0; c < f->n; c++)
                s += f->X[i * f->n + c] * w[c];
            hr[k] = tanh(s);
        }
        hr[f->K] = 1.0;
        for (int64_t c = 0; c < f->outputs; c++)
            hr[f->K + 1 + c] = f->outputs == 1 ? f->y[i] : (double)c == f->y[i] ? 1.0 : 0.0;
    }
}

static int forward_on(ds_ctx *c, const fwd_in *f, const double *init, double *H)
{
    ops_mem m = {c};
    const size_t hb = (size_t)(f->rows * f->ld) * 8;
    const double *X = ops_put(&m, f->X, (size_t)(f->rows * f->n) * 8);
    const double *W = ops_put(&m, f->W, (size_t)(f->K * (f->n + 1)) * 8);
    const double *y = f->y ? ops_put(&m, f->y, (size_t)f->rows * 8) : NULL;
    double *Hd = ops_put(&m, init, hb);
    int rc = ops_ran(c, c->be->ann->forward(c, X, f->rows, f->n, W, f->K, y, f->outputs ? f->outputs : 1, Hd, f->ld),
                     "ann.forward");
    ops_get(&m, H, Hd, hb);
    ops_release(&m);
    return rc;
}

// H entries are bounded by 1: the absolute error, tol 1e-14 (the products' rounding and tanh's, both far
// smaller). H is initialised alike on both sides, so columns left alone must stay as they were.
void case_ann_forward(ops_run *r)
{
    for (int s = 0; s < NFWD; s++) {
        ops_mem h = {NULL};
        fwd_in f;
        fwd_make(r, &h, fwd_shapes[s], &f);
        const int64_t len = f.rows * f.ld;
        double *init = ops_new(&h, (size_t)len * 8), *got = ops_new(&h, (size_t)len * 8),
               *want = ops_new(&h, (size_t)len * 8);
        ops_fill(r, init, len, 2, 3, 1);
        int st = forward_on(r->dut, &f, init, got);
        if (r->cpu)
            st |= forward_on(r->cpu, &f, init, want);
        else
            forward_ref(&f, init, want);
        char shape[96];
        fwd_text(r, &f, shape, sizeof shape);
        ops_report(r, "ann.forward", shape, "f64", ops_err(got, want, len, 1.0), 1e-14, st);
        ops_release(&h);
    }
}

enum { ACC_GUARD = 5 };

static int forward_gram_on(ds_ctx *c, const fwd_in *f, const double *init, double *acc)
{
    ops_mem m = {c};
    const size_t ab = (size_t)(f->ld * f->ld + ACC_GUARD) * 8;
    const double *X = ops_put(&m, f->X, (size_t)(f->rows * f->n) * 8);
    const double *W = ops_put(&m, f->W, (size_t)(f->K * (f->n + 1)) * 8);
    const double *y = f->y ? ops_put(&m, f->y, (size_t)f->rows * 8) : NULL;
    double *a = ops_put(&m, init, ab);
    int rc =
        ops_ran(c, c->be->ann->forward_gram(c, X, f->rows, f->n, W, f->K, y, f->outputs ? f->outputs : 1, f->ld, a),
                "ann.forward_gram");
    ops_get(&m, acc, a, ab);
    ops_release(&m);
    return rc;
}

// HᵀH against max |HᵀH| (at least the rows, from the column of ones), tol 2·(m + p)·u plus 1e-14 for
// tanh's rounding; the entries after acc's ld·ld exact (left alone). Only shapes with y: forward_gram
// is for the output layer's [H 1 T].
void case_ann_forward_gram(ops_run *r)
{
    if (!r->dut->be->ann->forward_gram || (r->cpu && !r->cpu->be->ann->forward_gram)) {
        ops_skip(r, "ann.forward_gram", "optional, and NULL here (the output Gram is formed by forward and gram)");
        return;
    }
    for (int s = 0; s < NFWD; s++) {
        if (fwd_shapes[s][3] == 0)
            continue;
        ops_mem h = {NULL};
        fwd_in f;
        fwd_make(r, &h, fwd_shapes[s], &f);
        const int64_t ll = f.ld * f.ld, len = ll + ACC_GUARD;
        double *init = ops_new(&h, (size_t)len * 8), *got = ops_new(&h, (size_t)len * 8),
               *want = ops_new(&h, (size_t)len * 8);
        ops_fill(r, init + ll, ACC_GUARD, -1, 1, 1);
        int st = forward_gram_on(r->dut, &f, init, got);
        if (r->cpu) {
            st |= forward_gram_on(r->cpu, &f, init, want);
        } else {
            double *zero = ops_new(&h, (size_t)(f.rows * f.ld) * 8), *H = ops_new(&h, (size_t)(f.rows * f.ld) * 8);
            forward_ref(&f, zero, H);
            for (int64_t i = 0; i < f.ld; i++)
                for (int64_t j = 0; j < f.ld; j++)
                    for (int64_t k = 0; k < f.rows; k++)
                        want[i * f.ld + j] += H[k * f.ld + i] * H[k * f.ld + j];
            memcpy(want + ll, init + ll, ACC_GUARD * 8);
        }
        double err = ops_err_rel(got, want, ll);
        if (ops_err_bytes(got + ll, want + ll, ACC_GUARD, 8) > 0)
            err = INFINITY;
        char shape[96];
        fwd_text(r, &f, shape, sizeof shape);
        ops_report(r, "ann.forward_gram", shape, "f64", err, 2.0 * (double)(f.m + r->nranks) * OPS_U64 + 1e-14, st);
        ops_release(&h);
    }
}

// ---------------------------------------------------------------------------------------------------
// output, add

static int output_on(ds_ctx *c, const double *H, int64_t rows, int64_t ld, int64_t K, const double *V, int64_t outputs,
                     double *P)
{
    ops_mem m = {c};
    const double *Hd = ops_put(&m, H, (size_t)(rows * ld) * 8), *Vd = ops_put(&m, V, (size_t)((K + 1) * outputs) * 8);
    double *Pd = ops_new(&m, (size_t)(rows * outputs) * 8);
    int rc = ops_ran(c, c->be->ann->output(c, Hd, rows, ld, K, Vd, outputs, Pd), "ann.output");
    ops_get(&m, P, Pd, (size_t)(rows * outputs) * 8);
    ops_release(&m);
    return rc;
}

// P = H[:, :K+1]·V; each entry's scale is (|H|·|V|)_ij, tol 2·(K + 1)·u.
void case_ann_output(ops_run *r)
{
    const int64_t shapes[][5] = {  // rows m, K, extra ld, outputs, empty
        {1, 1, 0, 1, 0}, {17, 17, 1, 1, 0}, {1001, 130, 3, 3, 1}, {130, 50, 0, 3, 0}};
    for (int s = 0; s < 4; s++) {
        const int64_t m = ops_dim(r, shapes[s][0]), K = ops_dim(r, shapes[s][1]), outputs = shapes[s][3];
        const int64_t rows = ops_rows(r, m, (int)shapes[s][4]), ld = K + 1 + shapes[s][2];
        ops_mem h = {NULL};
        double *H = ops_new(&h, (size_t)(rows * ld) * 8), *V = ops_new(&h, (size_t)((K + 1) * outputs) * 8);
        double *got = ops_new(&h, (size_t)(rows * outputs) * 8), *want = ops_new(&h, (size_t)(rows * outputs) * 8);
        double *scale = ops_new(&h, (size_t)(rows * outputs) * 8);
        ops_fill(r, H, rows * ld, -1, 1, 1);
        ops_fill(r, V, (K + 1) * outputs, -1, 1, 0);
        ops_abs_product(H, ld, V, outputs, rows, outputs, K + 1, scale);
        int st = output_on(r->dut, H, rows, ld, K, V, outputs, got);
        if (r->cpu) {
            st |= output_on(r->cpu, H, rows, ld, K, V, outputs, want);
        } else {
            for (int64_t i = 0; i < rows; i++)
                for (int64_t c = 0; c < outputs; c++)
                    for (int64_t k = 0; k <= K; k++)
                        want[i * outputs + c] += H[i * ld + k] * V[k * outputs + c];
        }
        char shape[96];
        snprintf(shape, sizeof shape, "%lld+r x %lld, K %lld, %lld outputs%s", (long long)m, (long long)ld,
                 (long long)K, (long long)outputs, shapes[s][4] ? ", last rank none" : "");
        ops_report(r, "ann.output", shape, "f64", ops_err_each(got, want, scale, rows * outputs),
                   2.0 * (double)(K + 1) * OPS_U64, st);
        ops_release(&h);
    }
}

static int add_on(ds_ctx *c, const double *a, const double *b, int64_t n, double *out)
{
    ops_mem m = {c};
    double *d = ops_put(&m, a, (size_t)n * 8);
    const double *s = ops_put(&m, b, (size_t)n * 8);
    int rc = ops_ran(c, c->be->ann->add(c, d, s, n), "ann.add");
    ops_get(&m, out, d, (size_t)n * 8);
    ops_release(&m);
    return rc;
}

// dst += src, one rounding: exact.
void case_ann_add(ops_run *r)
{
    const int64_t sizes[] = {0, 1, 3, 17, 130, 1001, 130001};
    for (int s = 0; s < 7; s++) {
        const int64_t n = ops_dim(r, sizes[s]);
        ops_mem h = {NULL};
        double *a = ops_new(&h, (size_t)n * 8), *b = ops_new(&h, (size_t)n * 8);
        double *got = ops_new(&h, (size_t)n * 8), *want = ops_new(&h, (size_t)n * 8);
        ops_fill(r, a, n, -1, 1, 1);
        ops_fill(r, b, n, -1e3, 1e3, 1);
        int st = add_on(r->dut, a, b, n, got);
        if (r->cpu) {
            st |= add_on(r->cpu, a, b, n, want);
        } else {
            for (int64_t i = 0; i < n; i++)
                want[i] = a[i] + b[i];
        }
        char shape[32];
        snprintf(shape, sizeof shape, "n %lld", (long long)n);
        ops_report(r, "ann.add", shape, "f64", ops_err_bytes(got, want, n, 8), 0, st);
        ops_release(&h);
    }
}

// ---------------------------------------------------------------------------------------------------
// solve

typedef struct solve_in {
    int64_t K1, outputs, ld, zero;  // zero: a row and column of S that are zero (a dead neuron), or −1
    double lambda;
    double *S;
} solve_in;

static int solve_on(ds_ctx *c, const solve_in *in, double *V, char *route, size_t len)
{
    ops_mem m = {c};
    double *S = ops_put(&m, in->S, (size_t)(in->ld * in->ld) * 8),
           *Vd = ops_new(&m, (size_t)(in->K1 * in->outputs) * 8);
    int rc = ops_ran(c, c->be->ann->solve(c, S, in->ld, in->K1, in->outputs, in->lambda, Vd, route, len), "ann.solve");
    ops_get(&m, V, Vd, (size_t)(in->K1 * in->outputs) * 8);
    ops_release(&m);
    return rc;
}

// Cholesky of HᵀH + λI; where it fails (here only for the exact zero row of a dead neuron, λ = 0) the
// eigen route drops that direction, which is the Cholesky solution of the others with V = 0 for it.
static void solve_ref(const solve_in *in, double *V, char *route, size_t len)
{
    const int64_t K1 = in->K1, C = in->outputs;
    int64_t *keep = malloc((size_t)K1 * 8), nk = 0;
    double *G = malloc((size_t)(K1 * K1) * 8), *B = malloc((size_t)(K1 * C) * 8);
    for (int pass = 0; pass < 2; pass++) {
        nk = 0;
        for (int64_t i = 0; i < K1; i++)
            if (pass == 0 || i != in->zero)
                keep[nk++] = i;
        for (int64_t a = 0; a < nk; a++) {
            for (int64_t b = 0; b < nk; b++)
                G[a * nk + b] = in->S[keep[a] * in->ld + keep[b]] + (a == b ? in->lambda : 0.0);
            for (int64_t c = 0; c < C; c++)
                B[a * C + c] = in->S[keep[a] * in->ld + K1 + c];
        }
        if (ops_chol_solve(G, nk, B, C)) {
            snprintf(route, len, "%s", pass == 0 ? "cholesky" : "eigen");
            break;
        }
    }
    memset(V, 0, (size_t)(K1 * C) * 8);
    for (int64_t a = 0; a < nk; a++)
        memcpy(V + keep[a] * C, B + a * C, (size_t)C * 8);
    free(keep), free(G), free(B);
}

// S = BᵀB of a random B with 2·K1 + 3 rows (condition about 30); its unused entries (beyond K1 +
// outputs) NaN, which the op must not read. V against max |V|, tol 1e-10; the route exact.
void case_ann_solve(ops_run *r)
{
    const int64_t cases[][4] = {  // K1, outputs, extra ld, a dead neuron
        {1, 1, 0, 0}, {17, 1, 0, 0}, {17, 3, 2, 1}, {130, 3, 0, 0}, {130, 1, 1, 1}, {3, 1, 0, 1}};
    for (int c = 0; c < 6; c++) {
        const int64_t K1 = c == 0 || c == 5 ? cases[c][0] : ops_dim(r, cases[c][0]), C = cases[c][1];
        const int64_t w = K1 + C, ld = w + cases[c][2], nb = 2 * K1 + 3;
        solve_in in = {K1, C, ld, cases[c][3] ? K1 / 2 : -1, cases[c][3] ? 0.0 : 1e-3};
        ops_mem h = {NULL};
        double *B = ops_new(&h, (size_t)(nb * w) * 8);
        in.S = ops_new(&h, (size_t)(ld * ld) * 8);
        ops_fill(r, B, nb * w, -0.5, 0.5, 1);
        for (int64_t i = 0; i < ld; i++)
            for (int64_t j = 0; j < ld; j++) {
                double s = i < w && j < w ? 0.0 : NAN;
                for (int64_t k = 0; i < w && j < w && k < nb; k++)
                    s += B[k * w + i] * B[k * w + j];
                in.S[i * ld + j] = i == in.zero || j == in.zero ? 0.0 : s;
            }
        double *V = ops_new(&h, (size_t)(K1 * C) * 8), *wV = ops_new(&h, (size_t)(K1 * C) * 8);
        char route[48] = "", wroute[48] = "";
        int st = solve_on(r->dut, &in, V, route, sizeof route);
        if (r->cpu)
            st |= solve_on(r->cpu, &in, wV, wroute, sizeof wroute);
        else
            solve_ref(&in, wV, wroute, sizeof wroute);
        double err = ops_err_rel(V, wV, K1 * C);
        if (strcmp(route, wroute) != 0) {
            fprintf(stderr, "rank %d: ann.solve K1 %lld: route %s, expected %s\n", r->rank, (long long)K1, route,
                    wroute);
            err = INFINITY;
        }
        char shape[96];
        snprintf(shape, sizeof shape, "K1 %lld, %lld outputs, ld %lld, %s", (long long)K1, (long long)C, (long long)ld,
                 in.zero >= 0 ? "a dead neuron (eigen)" : "cholesky");
        ops_report(r, "ann.solve", shape, "f64", err, 1e-10, st);
        ops_release(&h);
    }
}
