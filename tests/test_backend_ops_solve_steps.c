// test_backend_ops_solve_steps.c: test_backend_ops's cases of the solve_ops that step the coefficients
// (solve/solve_ops.h): block_step and gram_sweeps, against the CPU backend (gpu mode) or the loops here.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_ops.h"
#include "solve/solve_ops.h"

// ---------------------------------------------------------------------------------------------------
// block_step

typedef struct step_in {
    int nb, ld, line_search, ee;  // ee: with an ee slot
    double *gbuf, *diag, *gbb, *a0;
} step_in;

static int block_step_on(ds_ctx *c, const step_in *in, double *a, double *coef, double *ee)
{
    ops_mem m = {c};
    const int nb = in->nb;
    ds_step_args s = {.gbuf = ops_put(&m, in->gbuf, (size_t)(nb + 1) * 8),
                      .diag = ops_put(&m, in->diag, (size_t)nb * 8),
                      .gbb = ops_put(&m, in->gbb, (size_t)nb * in->ld * 8),
                      .nb = nb,
                      .ld = in->ld,
                      .line_search = in->line_search,
                      .a = ops_put(&m, in->a0, (size_t)nb * 8),
                      .coef = ops_new(&m, (size_t)nb * 8),
                      .ee_slot = in->ee ? ops_new(&m, 8) : NULL};
    int rc = ops_ran(c, c->be->solve->block_step(c, &s), "solve.block_step");
    ops_get(&m, a, s.a, (size_t)nb * 8);
    ops_get(&m, coef, s.coef, (size_t)nb * 8);
    if (in->ee)
        ops_get(&m, ee, s.ee_slot, 8);
    ops_release(&m);
    return rc;
}

static void block_step_ref(const step_in *in, double *a, double *coef, double *ee)
{
    const int nb = in->nb;
    double num = 0.0, den = 0.0;
    for (int j = 0; j < nb; j++) {
        coef[j] = in->diag[j] != 0 ? in->gbuf[j] / in->diag[j] : 0.0;  // da for now
        num += coef[j] * in->gbuf[j];
    }
    for (int j = 0; j < nb; j++)
        for (int k = 0; k < nb; k++)
            den += coef[j] * in->gbb[(int64_t)j * in->ld + k] * coef[k];
    const double alpha = in->line_search && nb > 1 ? (den > 0 ? num / den : 0.0) : 1.0;
    for (int j = 0; j < nb; j++) {
        coef[j] *= alpha;
        a[j] = in->a0[j] + coef[j];
    }
    *ee = in->gbuf[nb];
}

// coef componentwise relative, a against |a0| + |coef|, the ee slot exact. A zero column (diag 0) in
// every case; all of them zero in one (then alpha is 0).
void case_solve_block_step(ops_run *r)
{
    const int cases[][5] = {  // nb, ld − nb, line search, ee slot, all columns zero
        {1, 0, 1, 1, 0}, {3, 7, 1, 1, 0}, {17, 0, 0, 1, 0}, {17, 7, 1, 0, 0}, {100, 0, 1, 1, 0}, {37, 27, 1, 1, 1}};
    for (int c = 0; c < 6; c++) {
        const int nb = cases[c][0];
        ops_mem h = {NULL};
        step_in in = {nb, nb + cases[c][1], cases[c][2], cases[c][3]};
        in.gbuf = ops_new(&h, (size_t)(nb + 1) * 8);
        in.diag = ops_new(&h, (size_t)nb * 8);
        in.gbb = ops_new(&h, (size_t)nb * in.ld * 8);
        in.a0 = ops_new(&h, (size_t)nb * 8);
        ops_fill(r, in.gbuf, nb + 1, -1, 1, 1);
        ops_fill(r, in.diag, nb, 0.5, 2, 1);
        ops_fill(r, in.a0, nb, -1, 1, 1);
        for (int j = 0; j < nb; j++)
            in.diag[j] = cases[c][4] || (nb > 1 && j == nb / 2) ? 0.0 : in.diag[j];
        for (int j = 0; j < nb; j++)
            for (int k = 0; k < nb; k++)
                in.gbb[j * in.ld + k] = j == k ? in.diag[j] : 0.1 * (in.diag[j] + in.diag[k]) / nb;
        double *a = ops_new(&h, (size_t)nb * 8), *coef = ops_new(&h, (size_t)nb * 8), ee = 0, wee = 0;
        double *wa = ops_new(&h, (size_t)nb * 8), *wc = ops_new(&h, (size_t)nb * 8), *sa = ops_new(&h, (size_t)nb * 8);
        double *sc = ops_new(&h, (size_t)nb * 8);
        int st = block_step_on(r->dut, &in, a, coef, &ee);
        if (r->cpu)
            st |= block_step_on(r->cpu, &in, wa, wc, &wee);
        else
            block_step_ref(&in, wa, wc, &wee);
        for (int j = 0; j < nb; j++) {
            sc[j] = fabs(wc[j]);
            sa[j] = fabs(in.a0[j]) + fabs(wc[j]);
        }
        double err = fmax(ops_err_each(coef, wc, sc, nb), ops_err_each(a, wa, sa, nb));
        if (in.ee && ops_err_bytes(&ee, &wee, 1, 8) > 0)
            err = INFINITY;
        char shape[96];
        snprintf(shape, sizeof shape, "nb %d ld %d%s%s%s", nb, in.ld, in.line_search ? ", line search" : "",
                 in.ee ? ", ee slot" : "", cases[c][4] ? ", all diag 0" : "");
        ops_report(r, "solve.block_step", shape, "f64", err, 8.0 * (nb + 2) * OPS_U64, st);
        ops_release(&h);
    }
}

// ---------------------------------------------------------------------------------------------------
// gram_sweeps

typedef struct sweep_in {
    int64_t n;
    int batch, line_search, sweeps;
    double *G, *diag, *g0, *a0, ee0;
} sweep_in;

typedef struct sweep_out {
    double *a, *g, *hist, ee;
} sweep_out;

static int gram_sweeps_on(ds_ctx *c, const sweep_in *in, sweep_out *out)
{
    ops_mem m = {c};
    const int64_t n = in->n;
    ds_gram_args s = {.G = ops_put(&m, in->G, (size_t)(n * n) * 8),
                      .diag = ops_put(&m, in->diag, (size_t)n * 8),
                      .g = ops_put(&m, in->g0, (size_t)n * 8),
                      .a = ops_put(&m, in->a0, (size_t)n * 8),
                      .ee = ops_put(&m, &in->ee0, 8),
                      .ee_hist = ops_new(&m, (size_t)in->sweeps * 8),
                      .n = n,
                      .batch = in->batch,
                      .line_search = in->line_search,
                      .sweeps = in->sweeps};
    int rc = ops_ran(c, c->be->solve->gram_sweeps(c, &s), "solve.gram_sweeps");
    ops_get(&m, out->a, s.a, (size_t)n * 8);
    ops_get(&m, out->g, s.g, (size_t)n * 8);
    ops_get(&m, out->hist, s.ee_hist, (size_t)in->sweeps * 8);
    ops_get(&m, &out->ee, s.ee, 8);
    ops_release(&m);
    return rc;
}

static void gram_sweeps_ref(const sweep_in *in, sweep_out *out)
{
    const int64_t n = in->n;
    double da[256];  // batch ≤ 256 here
    memcpy(out->a, in->a0, (size_t)n * 8);
    memcpy(out->g, in->g0, (size_t)n * 8);
    out->ee = in->ee0;
    for (int sw = 0; sw < in->sweeps; sw++) {
        for (int64_t b0 = 0; b0 < n; b0 += in->batch) {
            const int nb = (int)(n - b0 < in->batch ? n - b0 : in->batch);
            double num = 0.0, den = 0.0;
            for (int j = 0; j < nb; j++) {
                da[j] = in->diag[b0 + j] > 0 ? out->g[b0 + j] / in->diag[b0 + j] : 0.0;
                num += da[j] * out->g[b0 + j];
            }
            for (int j = 0; j < nb; j++)
                for (int k = 0; k < nb; k++)
                    den += da[j] * in->G[(b0 + j) * n + b0 + k] * da[k];
            const double alpha = in->line_search && nb > 1 ? (den > 0 ? num / den : 0.0) : 1.0;
            for (int j = 0; j < nb; j++) {
                out->a[b0 + j] += alpha * da[j];
                for (int64_t i = 0; i < n; i++)
                    out->g[i] -= alpha * da[j] * in->G[(b0 + j) * n + i];
            }
            out->ee -= 2.0 * alpha * num - alpha * alpha * den;
        }
        out->hist[sw] = out->ee;
    }
}

// G: symmetric, diagonally dominant (so positive definite and well conditioned) but for one zero
// column (diag 0: skipped); a0 random. a against max |a|, g against max |g0|, ee and its history
// against max(ee0, |history|); tol 1e-10 (the iterates of several sweeps, not one sum).
void case_solve_gram_sweeps(ops_run *r)
{
    const int cases[][4] = {  // n, batch, line search, sweeps
        {1, 1, 1, 2}, {3, 1, 0, 3}, {17, 3, 1, 3}, {130, 32, 1, 3}, {130, 17, 0, 2}, {130, 200, 1, 2},
        {301, 100, 1, 2}, {1100, 100, 1, 2}};
    for (int c = 0; c < 8; c++) {
        const int64_t n = cases[c][0] > 1 ? ops_dim(r, cases[c][0]) : 1;
        ops_mem h = {NULL};
        sweep_in in = {n, cases[c][1], cases[c][2], cases[c][3]};
        in.G = ops_new(&h, (size_t)(n * n) * 8);
        in.diag = ops_new(&h, (size_t)n * 8);
        in.g0 = ops_new(&h, (size_t)n * 8);
        in.a0 = ops_new(&h, (size_t)n * 8);
        ops_fill(r, in.G, n * n, -0.5, 0.5, 1);
        ops_fill(r, in.g0, n, -1, 1, 1);
        ops_fill(r, in.a0, n, -1, 1, 1);
        in.ee0 = 10.0 * (double)n;
        const int64_t zero = n > 2 ? n / 2 : -1;
        for (int64_t i = 0; i < n; i++) {
            in.G[i * n + i] += 0.5 * (double)n + 1.0;
            for (int64_t j = 0; j < i; j++)
                in.G[i * n + j] = in.G[j * n + i];  // the upper triangle drawn, the lower mirrored
        }
        for (int64_t i = 0; zero >= 0 && i < n; i++)
            in.G[i * n + zero] = in.G[zero * n + i] = 0.0;
        for (int64_t i = 0; i < n; i++)
            in.diag[i] = in.G[i * n + i];
        sweep_out got = {ops_new(&h, (size_t)n * 8), ops_new(&h, (size_t)n * 8), ops_new(&h, (size_t)in.sweeps * 8)};
        sweep_out want = {ops_new(&h, (size_t)n * 8), ops_new(&h, (size_t)n * 8), ops_new(&h, (size_t)in.sweeps * 8)};
        int st = gram_sweeps_on(r->dut, &in, &got);
        if (r->cpu)
            st |= gram_sweeps_on(r->cpu, &in, &want);
        else
            gram_sweeps_ref(&in, &want);
        double sg = 0.0, se = fabs(in.ee0);
        for (int64_t i = 0; i < n; i++)
            sg = fmax(sg, fabs(in.g0[i]));
        for (int i = 0; i < in.sweeps; i++)
            se = fmax(se, fabs(want.hist[i]));
        double err = fmax(ops_err_rel(got.a, want.a, n), ops_err(got.g, want.g, n, sg));
        err = fmax(err, fmax(ops_err(got.hist, want.hist, in.sweeps, se), ops_err(&got.ee, &want.ee, 1, se)));
        char shape[96];
        snprintf(shape, sizeof shape, "n %lld batch %d%s, %d sweeps", (long long)n, in.batch,
                 in.line_search ? ", line search" : "", in.sweeps);
        ops_report(r, "solve.gram_sweeps", shape, "f64", err, 1e-10, st);
        ops_release(&h);
    }
}
