// test_backend_ops_ann_output.c: test_backend_ops's cases of the output layer's ann_ops (ann/ann.h): the
// forward pass, its Gram by blocks of exact digits, the output product and the output solve (both
// routes), against the CPU backend (gpu mode) or the loops here.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ann/ann.h"
#include "ann/ann_gram.h"
#include "core/exactsum.h"
#include "backend_ops.h"

// ---------------------------------------------------------------------------------------------------
// forward, gram_digits and gram_join

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

// gram_digits and gram_join on one side: dig_all = the digits of the rank's rows in one call, dig_two =
// in two calls cut at block cut (the second X from that block's first row); S = the join of dig_all.
typedef struct gram_out {
    double *dig_all, *dig_two, *S;
} gram_out;

static int gram_digits_on(ds_ctx *c, const fwd_in *f, const ann_fix *host_fx, const double *col, int64_t cut,
                          gram_out *out)
{
    ops_mem m = {c};
    const int64_t ld = f->ld, dlen = 2 * ann_tri(ld), n = f->n, K = f->K, C = f->outputs;
    const int64_t r0 = cut * host_fx->block < f->rows ? cut * host_fx->block : f->rows;
    const double *X = ops_put(&m, f->X, (size_t)(f->rows * n) * 8);
    const double *W = ops_put(&m, f->W, (size_t)(K * (n + 1)) * 8);
    const double *y = ops_put(&m, f->y, (size_t)f->rows * 8);
    ann_fix fx = *host_fx;
    fx.col = ops_put(&m, col, (size_t)ld * 8);
    double *all = ops_new(&m, (size_t)dlen * 8), *two = ops_new(&m, (size_t)dlen * 8);
    double *S = ops_new(&m, (size_t)(ld * ld) * 8);
    double *scratch = ops_new(&m, (size_t)(c->be->ann->gram_scratch(ld, fx.block) + 1) * 8);
    const ann_ops *o = c->be->ann;
    int rc = ops_ran(c, c->be->fill(c, all, dlen, 0.0), "fill");
    if (rc == DS_OK)
        rc = ops_ran(c, c->be->fill(c, two, dlen, 0.0), "fill");
    if (rc == DS_OK)
        rc = ops_ran(c, o->gram_digits(c, X, f->rows, n, W, K, y, C, ld, &fx, scratch, all), "ann.gram_digits");
    if (rc == DS_OK && r0 > 0)
        rc = ops_ran(c, o->gram_digits(c, X, r0, n, W, K, y, C, ld, &fx, scratch, two), "ann.gram_digits");
    if (rc == DS_OK && r0 < f->rows)
        rc = ops_ran(c, o->gram_digits(c, X + r0 * n, f->rows - r0, n, W, K, y + r0, C, ld, &fx, scratch, two),
                     "ann.gram_digits");
    if (rc == DS_OK)
        rc = ops_ran(c, o->gram_join(c, all, ld, &fx, S), "ann.gram_join");
    ops_get(&m, out->dig_all, all, (size_t)dlen * 8);
    ops_get(&m, out->dig_two, two, (size_t)dlen * 8);
    ops_get(&m, out->S, S, (size_t)(ld * ld) * 8);
    ops_release(&m);
    return rc;
}

// [H 1 T]ᵀ[H 1 T] of the rank's rows by the contract (libm's tanh), in long double.
static void gram_ref(const fwd_in *f, double *zero, double *H, double *want)
{
    forward_ref(f, zero, H);
    for (int64_t i = 0; i < f->ld; i++)
        for (int64_t j = 0; j < f->ld; j++) {
            long double s = 0;
            for (int64_t k = 0; k < f->rows; k++)
                s += (long double)H[k * f->ld + i] * H[k * f->ld + j];
            want[i * f->ld + j] = (double)s;
        }
}

// The joined Gram against the Gram of the contract's H, relative to max |S| (at least the rows, from the
// column of ones): tol 2·(block + p)·u (a block's own sums; the digits add exactly) plus 1e-14 for tanh's
// rounding. And the digits in two calls cut at a block must be the one call's, to the bit (ops_err_bytes
// adds to the error): a block's Gram does not depend on the rows around it. Blocks of 50 rows (the op
// takes any), so that the rows are several blocks and a short one.
void case_ann_gram_digits(ops_run *r)
{
    for (int s = 0; s < NFWD; s++) {
        if (fwd_shapes[s][3] == 0 || fwd_shapes[s][4] != 0)
            continue;  // the output Gram: [H 1 T], ld = K + 1 + outputs
        ops_mem h = {NULL};
        fwd_in f;
        fwd_make(r, &h, fwd_shapes[s], &f);
        const int64_t ld = f.ld, dlen = 2 * ann_tri(ld), K1 = f.K + 1, blocks = (f.rows + 49) / 50;
        double *col = ops_new(&h, (size_t)ld * 8);
        ann_fix fx = {.block = 50};
        (void)ann_fix_scales(f.m + r->nranks, K1, f.outputs, 1.0, col, &fx.s0);
        fx.lo = exactsum_lo(blocks > 0 ? blocks : 1);
        const size_t db = (size_t)dlen * 8, sb = (size_t)(ld * ld) * 8;
        gram_out got = {ops_new(&h, db), ops_new(&h, db), ops_new(&h, sb)};
        gram_out ref = {ops_new(&h, db), ops_new(&h, db), ops_new(&h, sb)};
        int st = gram_digits_on(r->dut, &f, &fx, col, blocks / 2, &got);
        if (r->cpu)
            st |= gram_digits_on(r->cpu, &f, &fx, col, blocks / 2, &ref);
        else
            gram_ref(&f, ops_new(&h, (size_t)(f.rows * ld) * 8), ops_new(&h, (size_t)(f.rows * ld) * 8), ref.S);
        const double err = ops_err_rel(got.S, ref.S, ld * ld) + ops_err_bytes(got.dig_two, got.dig_all, dlen, 8);
        char shape[96];
        fwd_text(r, &f, shape, sizeof shape);
        ops_report(r, "ann.gram_digits", shape, "f64", err, 2.0 * (double)(50 + r->nranks) * OPS_U64 + 1e-14, st);
        ops_release(&h);
    }
}

// ---------------------------------------------------------------------------------------------------
// output

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
