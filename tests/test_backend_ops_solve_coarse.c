// test_backend_ops_solve_coarse.c: test_backend_ops's cases of the block solve's smaller solve_ops
// (solve/solve_ops.h): block_sums, coarse_products, coarse_step and block_step with binv, against the
// CPU backend (gpu mode) or the loops here; test_backend_ops_solve_blocks.c has block_pinv and
// gram_sweeps with the block solve.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_ops.h"
#include "solve/solve_ops.h"

static int64_t nblk(int64_t n, int batch)
{
    return (n + batch - 1) / batch;
}

// ---------------------------------------------------------------------------------------------------
// block_sums and coarse_products

static int block_sums_on(ds_ctx *c, const ops_arr *A, int64_t rows, int64_t cols, int batch, int trans, double *out)
{
    ops_mem m = {c};
    const int64_t k = nblk(cols, batch);
    ds_mat M = {ops_put(&m, A->raw, ops_arr_bytes(A)), rows, cols, A->f32};
    double *o = ops_new(&m, (size_t)(rows * k) * 8);
    int rc = ops_ran(c, c->be->solve->block_sums(c, &M, batch, o, trans ? 1 : k, trans ? rows : 1), "solve.block_sums");
    ops_get(&m, out, o, (size_t)(rows * k) * 8);
    ops_release(&m);
    return rc;
}

// Each sum against Σ|A_ij| over its block, tol 2·batch·u; both layouts of the output.
void case_solve_block_sums(ops_run *r)
{
    const int64_t shapes[][3] = {{1, 1, 1}, {17, 3, 2}, {130, 17, 5}, {1001, 130, 32}, {3, 1001, 100}, {5, 40, 1}};
    for (int c = 0; c < 6; c++)
        for (int f32 = 0; f32 <= 1; f32++)
            for (int trans = 0; trans <= 1; trans++) {
                const int64_t rows = shapes[c][0], cols = shapes[c][1], k = nblk(cols, (int)shapes[c][2]);
                const int batch = (int)shapes[c][2];
                ops_mem h = {NULL};
                ops_arr A;
                ops_arr_make(r, &h, rows * cols, f32, -1, 1, 1, &A);
                double *got = ops_new(&h, (size_t)(rows * k) * 8), *want = ops_new(&h, (size_t)(rows * k) * 8);
                double *sc = ops_new(&h, (size_t)(rows * k) * 8);
                int st = block_sums_on(r->dut, &A, rows, cols, batch, trans, got);
                if (r->cpu)
                    st |= block_sums_on(r->cpu, &A, rows, cols, batch, trans, want);
                for (int64_t i = 0; i < rows; i++)
                    for (int64_t b = 0; b < k; b++) {
                        double v = 0.0, a = 0.0;
                        for (int64_t j = b * batch; j < cols && j < (b + 1) * batch; j++) {
                            v += A.d[i * cols + j];
                            a += fabs(A.d[i * cols + j]);
                        }
                        const int64_t at = trans ? i + b * rows : i * k + b;
                        if (!r->cpu)
                            want[at] = v;
                        sc[at] = a;
                    }
                char shape[96];
                snprintf(shape, sizeof shape, "%lld x %lld, batch %d%s", (long long)rows, (long long)cols, batch,
                         trans ? ", transposed" : "");
                ops_report(r, "solve.block_sums", shape, ops_dtype_name(f32), ops_err_each(got, want, sc, rows * k),
                           2.0 * batch * OPS_U64, st);
                ops_release(&h);
            }
}

static int coarse_products_on(ds_ctx *c, const ops_arr *X, int64_t rows, int64_t n, const double *Z, int64_t k,
                              int64_t nw, double *out)
{
    ops_mem m = {c};
    ds_mat M = {ops_put(&m, X->raw, ops_arr_bytes(X)), rows, n, X->f32};
    double *Zd = ops_put(&m, Z, (size_t)(rows * k) * 8), *o = ops_new(&m, (size_t)(k * nw + k * k) * 8);
    int rc = ops_ran(c, c->be->solve->coarse_products(c, &M, Zd, k, nw, o), "solve.coarse_products");
    ops_get(&m, out, o, (size_t)(k * nw + k * k) * 8);
    ops_release(&m);
    return rc;
}

// ZᵀX_0 and ZᵀZ entrywise against the sums of absolute products, tol 2·(m + p)·u for ranks of up to
// m + p − 1 rows; no rows on the last rank in one shape (the result is then 0).
void case_solve_coarse_products(ops_run *r)
{
    const int64_t shapes[][4] = {{1, 1, 1, 1}, {17, 30, 3, 10}, {130, 17, 4, 5}, {4099, 130, 2, 100}, {1001, 300, 10, 100}};
    for (int c = 0; c < 5; c++)
        for (int f32 = 0; f32 <= 1; f32++) {
            const int64_t n = shapes[c][1], k = shapes[c][2], nw = shapes[c][3];
            const int64_t rows = ops_rows(r, shapes[c][0], c == 2);
            ops_mem h = {NULL};
            ops_arr X;
            ops_arr_make(r, &h, rows * n, f32, -0.5, 0.5, 1, &X);
            const int64_t len = k * nw + k * k;
            double *Z = ops_new(&h, (size_t)(rows * k + 1) * 8), *got = ops_new(&h, (size_t)len * 8);
            double *want = ops_new(&h, (size_t)len * 8), *sc = ops_new(&h, (size_t)len * 8);
            ops_fill(r, Z, rows * k, -2, 2, 1);
            int st = coarse_products_on(r->dut, &X, rows, n, Z, k, nw, got);
            if (r->cpu)
                st |= coarse_products_on(r->cpu, &X, rows, n, Z, k, nw, want);
            for (int64_t p = 0; p < k; p++)
                for (int64_t q = 0; q < nw + k; q++) {
                    double v = 0.0, a = 0.0;
                    for (int64_t i = 0; i < rows; i++) {
                        const double x = q < nw ? X.d[i * n + q] : Z[i * k + q - nw];
                        v += Z[i * k + p] * x;
                        a += fabs(Z[i * k + p] * x);
                    }
                    const int64_t at = q < nw ? p * nw + q : k * nw + p * k + q - nw;
                    if (!r->cpu)
                        want[at] = v;
                    sc[at] = a;
                }
            char shape[96];
            snprintf(shape, sizeof shape, "%lld+r x %lld, k %lld, nw %lld%s", (long long)shapes[c][0], (long long)n,
                     (long long)k, (long long)nw, c == 2 ? ", last rank none" : "");
            ops_report(r, "solve.coarse_products", shape, ops_dtype_name(f32), ops_err_each(got, want, sc, len),
                       2.0 * (double)(shapes[c][0] + r->nranks) * OPS_U64, st);
            ops_release(&h);
        }
}

// ---------------------------------------------------------------------------------------------------
// coarse_step

// One case: k blocks of batch over n columns; resid: g, ee and t in one buffer [g | ee | t] with
// gn = ldw = batch, as the residual route has them; else g of all n (the Gram route's layout).
typedef struct cstep_in {
    int64_t k, n, gn, ldw;
    int batch, resid;
    double *cinv, *cmat, *wt, *t, *diag, *g0, *a0, ee0;
} cstep_in;

typedef struct cstep_out {
    double *delta, *g, *a, ee;
} cstep_out;

static int coarse_step_on(ds_ctx *c, const cstep_in *in, cstep_out *out)
{
    ops_mem m = {c};
    const int64_t k = in->k, gn = in->gn;
    double *buf = ops_new(&m, (size_t)(gn + 1 + k) * 8), *t = in->resid ? buf + gn + 1 : ops_new(&m, (size_t)k * 8);
    double *ee = in->resid ? buf + gn : ops_new(&m, 8);
    ops_upload(c, buf, in->g0, (size_t)gn * 8);
    ops_upload(c, ee, &in->ee0, 8);
    ops_upload(c, t, in->t, (size_t)k * 8);
    ds_coarse_args a = {.cinv = ops_put(&m, in->cinv, (size_t)(k * k) * 8), .cmat = ops_put(&m, in->cmat, (size_t)(k * k) * 8),
                        .wt = ops_put(&m, in->wt, (size_t)(k * in->ldw) * 8), .t = t,
                        .diag = ops_put(&m, in->diag, (size_t)in->n * 8), .g = buf,
                        .a = ops_put(&m, in->a0, (size_t)in->n * 8), .ee = ee, .delta = ops_new(&m, (size_t)k * 8),
                        .n = in->n, .gn = gn, .ldw = in->ldw, .k = k, .batch = in->batch};
    int rc = ops_ran(c, c->be->solve->coarse_step(c, &a), "solve.coarse_step");
    ops_get(&m, out->delta, a.delta, (size_t)k * 8);
    ops_get(&m, out->g, buf, (size_t)gn * 8);
    ops_get(&m, out->a, a.a, (size_t)in->n * 8);
    ops_get(&m, &out->ee, ee, 8);
    ops_release(&m);
    return rc;
}

// The loops' step, and the scales of its entries: sums of absolute values of the terms (δ's own bound
// carried into g, a and ee).
static void coarse_step_ref(const cstep_in *in, cstep_out *w, cstep_out *sc)
{
    const int64_t k = in->k;
    double dt = 0.0, den = 0.0, sdt = 0.0;
    for (int64_t p = 0; p < k; p++) {
        double v = 0.0, s = 0.0;
        for (int64_t q = 0; q < k; q++) {
            v += in->cinv[p * k + q] * in->t[q];
            s += fabs(in->cinv[p * k + q] * in->t[q]);
        }
        w->delta[p] = v;
        sc->delta[p] = s;
        dt += v * in->t[p];
    }
    for (int64_t p = 0; p < k; p++) {
        double v = 0.0, s = 0.0;
        for (int64_t q = 0; q < k; q++) {
            v += in->cmat[p * k + q] * w->delta[q];
            s += fabs(in->cmat[p * k + q]) * (fabs(w->delta[q]) + sc->delta[q]);
        }
        den += w->delta[p] * v;
        sdt += 2.0 * (fabs(w->delta[p]) + sc->delta[p]) * (fabs(in->t[p]) + s);
    }
    for (int64_t i = 0; i < in->gn; i++) {
        double u = 0.0, s = fabs(in->g0[i]);
        for (int64_t q = 0; q < k; q++) {
            u += in->wt[q * in->ldw + i] * w->delta[q];
            s += fabs(in->wt[q * in->ldw + i]) * (fabs(w->delta[q]) + sc->delta[q]);
        }
        w->g[i] = in->g0[i] - u;
        sc->g[i] = s;
    }
    for (int64_t i = 0; i < in->n; i++) {
        const int live = in->diag[i] > 0;
        w->a[i] = in->a0[i] + (live ? w->delta[i / in->batch] : 0.0);
        sc->a[i] = live ? fabs(in->a0[i]) + fabs(w->delta[i / in->batch]) + sc->delta[i / in->batch] : 0.0;
    }
    w->ee = in->ee0 - (2.0 * dt - den);
    sc->ee = fabs(in->ee0) + sdt;
}

// δ, g, a and ee entrywise against their scales, tol 4·(k + 2)·u; a zero column's a exactly unchanged.
void case_solve_coarse_step(ops_run *r)
{
    const int64_t shapes[][4] = {{2, 3, 5, 1}, {10, 100, 1000, 1}, {17, 8, 130, 0}, {130, 1, 130, 0}, {3, 100, 250, 0}};
    for (int c = 0; c < 5; c++) {
        const int64_t k = shapes[c][0], n = shapes[c][2];
        const int batch = (int)shapes[c][1], resid = (int)shapes[c][3];
        cstep_in in = {k, n, resid ? batch : n, resid ? batch : n, batch, resid};
        ops_mem h = {NULL};
        double **ins[] = {&in.cinv, &in.cmat, &in.wt, &in.t, &in.diag, &in.g0, &in.a0};
        const int64_t lens[] = {k * k, k * k, k * in.ldw, k, n, in.gn, n};
        for (int i = 0; i < 7; i++) {
            *ins[i] = ops_new(&h, (size_t)lens[i] * 8);
            ops_fill(r, *ins[i], lens[i], i == 4 ? 0 : -1, 1, 1);
        }
        in.diag[n / 2] = 0.0;  // a zero column
        in.ee0 = 10.0;
        cstep_out got, want, sc;
        cstep_out *outs[] = {&got, &want, &sc};
        for (int i = 0; i < 3; i++)
            *outs[i] = (cstep_out){ops_new(&h, (size_t)k * 8), ops_new(&h, (size_t)in.gn * 8), ops_new(&h, (size_t)n * 8)};
        int st = coarse_step_on(r->dut, &in, &got);
        coarse_step_ref(&in, &want, &sc);
        if (r->cpu)
            st |= coarse_step_on(r->cpu, &in, &want);
        double err = fmax(ops_err_each(got.delta, want.delta, sc.delta, k), ops_err_each(got.g, want.g, sc.g, in.gn));
        err = fmax(err, fmax(ops_err_each(got.a, want.a, sc.a, n), ops_err_each(&got.ee, &want.ee, &sc.ee, 1)));
        char shape[96];
        snprintf(shape, sizeof shape, "k %lld, batch %d, n %lld, %s", (long long)k, batch, (long long)n,
                 resid ? "residual layout" : "gram layout");
        ops_report(r, "solve.coarse_step", shape, "f64", err, 4.0 * (double)(k + 2) * OPS_U64, st);
        ops_release(&h);
    }
}

// ---------------------------------------------------------------------------------------------------
// block_step with binv (the block solve)

static int block_solve_step_on(ds_ctx *c, int nb, int ld, int slot, const double *binv, const double *gbuf,
                               const double *a0, double *a, double *coef, double *ee)
{
    ops_mem m = {c};
    ds_step_args s = {.gbuf = ops_put(&m, gbuf, (size_t)(nb + 1) * 8), .nb = nb, .ld = ld, .line_search = 1,
                      .a = ops_put(&m, a0, (size_t)nb * 8), .coef = ops_new(&m, (size_t)nb * 8),
                      .ee_slot = slot ? ops_new(&m, 8) : NULL, .binv = ops_put(&m, binv, (size_t)nb * ld * 8)};
    int rc = ops_ran(c, c->be->solve->block_step(c, &s), "solve.block_step");
    ops_get(&m, a, s.a, (size_t)nb * 8);
    ops_get(&m, coef, s.coef, (size_t)nb * 8);
    if (slot)
        ops_get(&m, ee, s.ee_slot, 8);
    ops_release(&m);
    return rc;
}

// coef = binv·g against Σ|binv||g| per entry, a against |a0| + that, tol 2·(nb + 1)·u; the ee slot exact.
void case_solve_block_solve_step(ops_run *r)
{
    const int cases[][3] = {{1, 1, 1}, {3, 10, 1}, {17, 17, 0}, {100, 100, 1}, {37, 64, 1}};  // nb, ld, ee slot
    for (int c = 0; c < 5; c++) {
        const int nb = cases[c][0], ld = cases[c][1], slot = cases[c][2];
        ops_mem h = {NULL};
        double *binv = ops_new(&h, (size_t)nb * ld * 8), *g = ops_new(&h, (size_t)(nb + 1) * 8);
        double *a0 = ops_new(&h, (size_t)nb * 8), *a = ops_new(&h, (size_t)nb * 8), *coef = ops_new(&h, (size_t)nb * 8);
        double *wa = ops_new(&h, (size_t)nb * 8), *wc = ops_new(&h, (size_t)nb * 8), *sa = ops_new(&h, (size_t)nb * 8);
        double *sc = ops_new(&h, (size_t)nb * 8), ee = 0, wee = 0;
        ops_fill(r, binv, (int64_t)nb * ld, -1, 1, 1);
        ops_fill(r, g, nb + 1, -1, 1, 1);
        ops_fill(r, a0, nb, -1, 1, 1);
        int st = block_solve_step_on(r->dut, nb, ld, slot, binv, g, a0, a, coef, &ee);
        for (int j = 0; j < nb; j++) {
            double v = 0.0, s = 0.0;
            for (int q = 0; q < nb; q++) {
                v += binv[(int64_t)j * ld + q] * g[q];
                s += fabs(binv[(int64_t)j * ld + q] * g[q]);
            }
            wc[j] = v;
            wa[j] = a0[j] + v;
            sc[j] = s;
            sa[j] = fabs(a0[j]) + s;
        }
        wee = g[nb];
        if (r->cpu)
            st |= block_solve_step_on(r->cpu, nb, ld, slot, binv, g, a0, wa, wc, &wee);
        double err = fmax(ops_err_each(coef, wc, sc, nb), ops_err_each(a, wa, sa, nb));
        if (slot && ops_err_bytes(&ee, &wee, 1, 8) > 0)
            err = INFINITY;
        char shape[96];
        snprintf(shape, sizeof shape, "nb %d ld %d%s", nb, ld, slot ? ", ee slot" : "");
        ops_report(r, "solve.block_step block solve", shape, "f64", err, 2.0 * (nb + 1) * OPS_U64, st);
        ops_release(&h);
    }
}
