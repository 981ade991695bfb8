// test_backend_ops_solve_blocks.c: test_backend_ops's cases of the block solve's solve_ops
// (solve/solve_ops.h): block_pinv, block_sums, coarse_products, coarse_step, block_step with binv and
// gram_sweeps with binv (and the coarse correction), against the CPU backend (gpu mode) or the loops
// here. The Gram matrices are XᵀX of X = √½·U + √½·z·1ᵀ (U, z uniform in [−½, ½)), so that blocks are
// as correlated as the solve's ρ = 0.5 problem, with a zero column and a column that copies an earlier
// one of its block (scaled, where the columns are): what the pseudo-inverse must skip without NaN.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "solve/solve_ops.h"

typedef struct gshape {
    int64_t n;
    int batch;
    int64_t zero, dup, src;  // a zero column, and column dup a copy of column src (same block): −1 for none
    int scaled;              // columns scaled by 10^uniform(−3, 3)
} gshape;

static int64_t nblk(int64_t n, int batch)
{
    return (n + batch - 1) / batch;
}

static int gshape_skipped(const gshape *s, int64_t j)
{
    return j == s->zero || j == s->dup;
}

// G = XᵀX (n × n) for this rank's X of 2n + 10 rows as above, shape s's columns applied.
static void gram_make(ops_run *r, ops_mem *h, const gshape *s, double *G)
{
    const int64_t n = s->n, m = 2 * n + 10;
    double *X = ops_new(h, (size_t)(m * n) * 8), *z = ops_new(h, (size_t)m * 8), *d = ops_new(h, (size_t)n * 8);
    ops_fill(r, X, m * n, -0.5, 0.5, 1);
    ops_fill(r, z, m, -0.5, 0.5, 1);
    ops_fill(r, d, n, -3, 3, 1);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double *x = X + i * n;
            x[j] = j == s->zero ? 0.0 : sqrt(0.5) * x[j] + sqrt(0.5) * z[i];
            x[j] *= s->scaled ? pow(10.0, d[j]) : 1.0;
            if (j == s->dup)
                x[j] = x[s->src] * (s->scaled ? pow(10.0, d[j] - d[s->src]) : 1.0);
        }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j <= i; j++) {
            double v = 0.0;
            for (int64_t k = 0; k < m; k++)
                v += X[k * n + i] * X[k * n + j];
            G[i * n + j] = G[j * n + i] = v;
        }
}

// The loops' pseudo-inverse of G's diagonal blocks (out: slabs of batch², ld batch): the inverse of the
// block's kept columns (all but the shape's zero column and copy) by Cholesky, 0 elsewhere. cond (when
// given): the largest κ₁ of a kept block after equilibration.
static void pinv_ref(ops_mem *h, const gshape *s, const double *G, double *out, double *cond)
{
    const int64_t n = s->n, B = s->batch;
    double *H = ops_new(h, (size_t)(B * B) * 8), *I = ops_new(h, (size_t)(B * B) * 8);
    int64_t *K = ops_new(h, (size_t)B * sizeof(int64_t));
    for (int64_t b = 0; b < nblk(n, s->batch); b++) {
        int64_t nk = 0;
        for (int64_t j = b * B; j < n && j < (b + 1) * B; j++)
            if (!gshape_skipped(s, j))
                K[nk++] = j;
        for (int64_t p = 0; p < nk; p++)
            for (int64_t q = 0; q < nk; q++) {
                H[p * nk + q] = G[K[p] * n + K[q]];
                I[p * nk + q] = p == q;
            }
        double hn = 0.0, in = 0.0;  // ‖S·H·S‖₁ and ‖(S·H·S)⁻¹‖₁
        for (int64_t p = 0; p < nk; p++) {
            double row = 0.0;
            for (int64_t q = 0; q < nk; q++)
                row += fabs(H[p * nk + q]) / sqrt(H[p * nk + p] * H[q * nk + q]);
            hn = fmax(hn, row);
        }
        ops_chol_solve(H, nk, I, nk);
        double *o = out + b * B * B;
        memset(o, 0, (size_t)(B * B) * 8);
        for (int64_t p = 0; p < nk; p++) {
            double row = 0.0;
            for (int64_t q = 0; q < nk; q++) {
                o[(K[p] - b * B) * B + K[q] - b * B] = I[p * nk + q];
                row += fabs(I[p * nk + q]) * sqrt(G[K[p] * n + K[p]] * G[K[q] * n + K[q]]);
            }
            in = fmax(in, row);
        }
        if (cond)
            *cond = fmax(*cond, hn * in);
    }
}

// ---------------------------------------------------------------------------------------------------
// block_pinv

static const gshape pinv_shapes[] = {{1, 1, -1, -1, -1, 0},   {17, 5, 7, 4, 2, 1},      {130, 32, 40, 70, 65, 1},
                                     {130, 1, 3, -1, -1, 1},  {301, 100, 250, 150, 120, 0}, {40, 40, 9, 30, 5, 1},
                                     {130, 135, -1, 100, 0, 0}};
enum { NPINV = sizeof pinv_shapes / sizeof pinv_shapes[0] };

// slab 0: the input is G itself (the Gram route's diagonal blocks); 1: the blocks packed into slabs of
// batch² (the residual route's block Grams).
static int block_pinv_on(ds_ctx *c, const gshape *s, const double *G, int slab, double *out)
{
    ops_mem m = {c};
    const int64_t n = s->n, B = s->batch, len = nblk(n, s->batch) * B * B;
    double *A;
    if (slab) {
        double *packed = calloc((size_t)len, 8);
        for (int64_t b = 0; b < nblk(n, s->batch); b++)
            for (int64_t i = b * B; i < n && i < (b + 1) * B; i++)
                for (int64_t j = b * B; j < n && j < (b + 1) * B; j++)
                    packed[b * B * B + (i - b * B) * B + j - b * B] = G[i * n + j];
        A = ops_put(&m, packed, (size_t)len * 8);
        free(packed);
    } else {
        A = ops_put(&m, G, (size_t)(n * n) * 8);
    }
    double *o = ops_new(&m, (size_t)len * 8);
    int rc = ops_ran(c, c->be->solve->block_pinv(c, A, n, s->batch, slab ? B * B : B * (n + 1), slab ? B : n, o),
                     "solve.block_pinv");
    ops_get(&m, out, o, (size_t)len * 8);
    ops_release(&m);
    return rc;
}

// In the equilibrated variables (entry ij times √(G_ii·G_jj)), over the largest such entry of want;
// a skipped column's row and column must be exactly 0 on both sides. tol 8·(nb + 4)·u·κ₁ (the largest κ₁
// over the ranks' own G).
void case_solve_block_pinv(ops_run *r)
{
    for (int c = 0; c < NPINV; c++)
        for (int slab = 0; slab <= 1; slab++) {
            const gshape *s = &pinv_shapes[c];
            const int64_t n = s->n, B = s->batch, len = nblk(n, s->batch) * B * B;
            ops_mem h = {NULL};
            double *G = ops_new(&h, (size_t)(n * n) * 8), *got = ops_new(&h, (size_t)len * 8);
            double *want = ops_new(&h, (size_t)len * 8), *ref = ops_new(&h, (size_t)len * 8), cond = 1.0;
            gram_make(r, &h, s, G);
            pinv_ref(&h, s, G, ref, &cond);
            int st = block_pinv_on(r->dut, s, G, slab, got);
            if (r->cpu)
                st |= block_pinv_on(r->cpu, s, G, slab, want);
            else
                memcpy(want, ref, (size_t)len * 8);
            double err = 0.0, scale = 0.0;
            for (int pass = 0; pass < 2; pass++)
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = i / B * B; j < n && j < (i / B + 1) * B; j++) {
                        const int64_t at = i / B * B * B + (i % B) * B + j % B;
                        const double w = sqrt(G[i * n + i] * G[j * n + j]);
                        if (pass == 0)
                            scale = fmax(scale, fabs(want[at]) * w);
                        else if (gshape_skipped(s, i) || gshape_skipped(s, j))
                            err = fmax(err, got[at] == 0.0 && want[at] == 0.0 ? 0.0 : INFINITY);
                        else
                            err = fmax(err, fabs(got[at] - want[at]) * w / scale);
                    }
            MPI_Allreduce(MPI_IN_PLACE, &cond, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // one tol on every rank
            char shape[128];
            snprintf(shape, sizeof shape, "n %lld batch %d%s%s, %s, cond %.1e", (long long)n, s->batch,
                     s->zero >= 0 ? ", a zero column" : "", s->dup >= 0 ? ", a copy" : "", slab ? "slabs" : "in G",
                     cond);
            ops_report(r, "solve.block_pinv", shape, "f64", isnan(err) ? INFINITY : err,
                       8.0 * (double)(B + 4) * OPS_U64 * cond, st);
            ops_release(&h);
        }
}

// ---------------------------------------------------------------------------------------------------
// gram_sweeps with the block solve

static const gshape sweep_shapes[] = {{17, 5, 7, 4, 2, 0},     {130, 32, 40, 70, 65, 0},  {130, 32, 40, 70, 65, 0},
                                      {130, 1, 3, -1, -1, 0},  {301, 100, 250, 150, 120, 0}, {301, 37, -1, -1, -1, 0},
                                      {130, 200, -1, 100, 0, 0}};
static const int sweep_coarse[] = {1, 1, 0, 1, 1, 1, 0}, sweep_count[] = {3, 3, 3, 2, 3, 2, 2};
enum { NSWEEP = sizeof sweep_shapes / sizeof sweep_shapes[0] };

// The inputs of one case: G = XᵀX, g = G·(a_true − a), ee = ‖X·(a_true − a)‖² (a consistent y), the
// blocks' pseudo-inverses (the loops'), and with coarse Wt = (G·P)ᵀ, C = PᵀGP and C's pseudo-inverse.
typedef struct bs_in {
    gshape s;
    int coarse, sweeps;
    int64_t k;
    double *G, *diag, *g0, *a0, ee0, *binv, *wt, *cmat, *cinv, cond;  // cond: κ₁ of the equilibrated C
} bs_in;

typedef struct bs_out {
    double *a, *g, *hist, ee;
} bs_out;

static void bs_make(ops_run *r, ops_mem *h, int c, bs_in *in)
{
    const int64_t n = sweep_shapes[c].n, B = sweep_shapes[c].batch, k = nblk(n, (int)B);
    *in = (bs_in){.s = sweep_shapes[c], .coarse = sweep_coarse[c], .sweeps = sweep_count[c], .k = k};
    double *d = ops_new(h, (size_t)n * 8);
    in->G = ops_new(h, (size_t)(n * n) * 8);
    in->diag = ops_new(h, (size_t)n * 8);
    in->g0 = ops_new(h, (size_t)n * 8);
    in->a0 = ops_new(h, (size_t)n * 8);
    in->binv = ops_new(h, (size_t)(k * B * B) * 8);
    gram_make(r, h, &in->s, in->G);
    ops_fill(r, d, n, -1, 1, 1);
    ops_fill(r, in->a0, n, -1, 1, 1);
    for (int64_t i = 0; i < n; i++) {
        double v = 0.0;
        for (int64_t j = 0; j < n; j++)
            v += in->G[i * n + j] * d[j];
        in->g0[i] = v;
        in->diag[i] = in->G[i * n + i];
        in->ee0 += d[i] * v;
    }
    pinv_ref(h, &in->s, in->G, in->binv, NULL);
    if (!in->coarse)
        return;
    in->wt = ops_new(h, (size_t)(k * n) * 8);
    in->cmat = ops_new(h, (size_t)(k * k) * 8);
    in->cinv = ops_new(h, (size_t)(k * k) * 8);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            in->wt[j / B * n + i] += in->G[i * n + j];
    for (int64_t c2 = 0; c2 < k; c2++)
        for (int64_t i = 0; i < n; i++)
            in->cmat[i / B * k + c2] += in->wt[c2 * n + i];
    const gshape cs = {k, (int)k, B == 1 ? in->s.zero : -1, -1, -1, 0};  // a block of one zero column: C's zero row
    in->cond = 1.0;
    pinv_ref(h, &cs, in->cmat, in->cinv, &in->cond);
}

static int bs_sweeps_on(ds_ctx *c, const bs_in *in, bs_out *out)
{
    ops_mem m = {c};
    const int64_t n = in->s.n, k = in->k, B = in->s.batch;
    ds_gram_args s = {.G = ops_put(&m, in->G, (size_t)(n * n) * 8), .diag = ops_put(&m, in->diag, (size_t)n * 8),
                      .g = ops_put(&m, in->g0, (size_t)n * 8), .a = ops_put(&m, in->a0, (size_t)n * 8),
                      .ee = ops_put(&m, &in->ee0, 8), .ee_hist = ops_new(&m, (size_t)in->sweeps * 8), .n = n,
                      .batch = (int)B, .line_search = 1, .sweeps = in->sweeps,
                      .binv = ops_put(&m, in->binv, (size_t)(k * B * B) * 8)};
    if (in->coarse) {
        s.cinv = ops_put(&m, in->cinv, (size_t)(k * k) * 8);
        s.cmat = ops_put(&m, in->cmat, (size_t)(k * k) * 8);
        s.wt = ops_put(&m, in->wt, (size_t)(k * n) * 8);
    }
    int rc = ops_ran(c, c->be->solve->gram_sweeps(c, &s), "solve.gram_sweeps");
    ops_get(&m, out->a, s.a, (size_t)n * 8);
    ops_get(&m, out->g, s.g, (size_t)n * 8);
    ops_get(&m, out->hist, s.ee_hist, (size_t)in->sweeps * 8);
    ops_get(&m, &out->ee, s.ee, 8);
    ops_release(&m);
    return rc;
}

// The coarse correction in loops (ds_gram_args): t = Pᵀg, δ = cinv·t, g −= Wtᵀδ, a += P·δ, ee.
static void bs_coarse_ref(const bs_in *in, bs_out *out, double *t, double *delta)
{
    const int64_t n = in->s.n, k = in->k, B = in->s.batch;
    double dt = 0.0, den = 0.0;
    for (int64_t c = 0; c < k; c++)
        t[c] = 0.0;
    for (int64_t i = 0; i < n; i++)
        t[i / B] += out->g[i];
    for (int64_t c = 0; c < k; c++) {
        delta[c] = 0.0;
        for (int64_t q = 0; q < k; q++)
            delta[c] += in->cinv[c * k + q] * t[q];
        dt += delta[c] * t[c];
    }
    for (int64_t c = 0; c < k; c++)
        for (int64_t q = 0; q < k; q++)
            den += delta[c] * in->cmat[c * k + q] * delta[q];
    for (int64_t i = 0; i < n; i++) {
        for (int64_t c = 0; c < k; c++)
            out->g[i] -= in->wt[c * n + i] * delta[c];
        out->a[i] += in->diag[i] > 0 ? delta[i / B] : 0.0;
    }
    out->ee -= 2.0 * dt - den;
}

static void bs_sweeps_ref(ops_mem *h, const bs_in *in, bs_out *out)
{
    const int64_t n = in->s.n, B = in->s.batch;
    double *da = ops_new(h, (size_t)B * 8), *t = ops_new(h, (size_t)in->k * 8), *delta = ops_new(h, (size_t)in->k * 8);
    memcpy(out->a, in->a0, (size_t)n * 8);
    memcpy(out->g, in->g0, (size_t)n * 8);
    out->ee = in->ee0;
    for (int sw = 0; sw < in->sweeps; sw++) {
        for (int64_t b0 = 0; b0 < n; b0 += B) {
            const int64_t nb = n - b0 < B ? n - b0 : B;
            const double *Bi = in->binv + b0 * B;
            double num = 0.0, den = 0.0;
            for (int64_t j = 0; j < nb; j++) {
                da[j] = 0.0;
                for (int64_t q = 0; q < nb; q++)
                    da[j] += Bi[j * B + q] * out->g[b0 + q];
                num += da[j] * out->g[b0 + j];
            }
            for (int64_t j = 0; j < nb; j++)
                for (int64_t q = 0; q < nb; q++)
                    den += da[j] * in->G[(b0 + j) * n + b0 + q] * da[q];
            for (int64_t j = 0; j < nb; j++) {
                out->a[b0 + j] += da[j];
                for (int64_t i = 0; i < n; i++)
                    out->g[i] -= da[j] * in->G[(b0 + j) * n + i];
            }
            out->ee -= 2.0 * num - den;
        }
        if (in->coarse)
            bs_coarse_ref(in, out, t, delta);
        out->hist[sw] = out->ee;
    }
}

// a against max |a|, g against max |g0|, ee and its history against max(ee0, |history|); tol 1e-10 (the
// iterates of several sweeps, as for the seed's step). A zero column's coefficient exactly a0's.
void case_solve_gram_sweeps_bs(ops_run *r)
{
    for (int c = 0; c < NSWEEP; c++) {
        ops_mem h = {NULL};
        bs_in in;
        bs_make(r, &h, c, &in);
        const int64_t n = in.s.n;
        bs_out got = {ops_new(&h, (size_t)n * 8), ops_new(&h, (size_t)n * 8), ops_new(&h, (size_t)in.sweeps * 8)};
        bs_out want = {ops_new(&h, (size_t)n * 8), ops_new(&h, (size_t)n * 8), ops_new(&h, (size_t)in.sweeps * 8)};
        int st = bs_sweeps_on(r->dut, &in, &got);
        if (r->cpu)
            st |= bs_sweeps_on(r->cpu, &in, &want);
        else
            bs_sweeps_ref(&h, &in, &want);
        double sg = 0.0, se = fabs(in.ee0);
        for (int64_t i = 0; i < n; i++)
            sg = fmax(sg, fabs(in.g0[i]));
        for (int i = 0; i < in.sweeps; i++)
            se = fmax(se, fabs(want.hist[i]));
        double err = fmax(ops_err_rel(got.a, want.a, n), ops_err(got.g, want.g, n, sg));
        err = fmax(err, fmax(ops_err(got.hist, want.hist, in.sweeps, se), ops_err(&got.ee, &want.ee, 1, se)));
        if (in.s.zero >= 0 && got.a[in.s.zero] != in.a0[in.s.zero])
            err = INFINITY;
        char shape[128];
        snprintf(shape, sizeof shape, "n %lld batch %d%s%s%s, %d sweeps, cond C %.0e", (long long)n, in.s.batch,
                 in.coarse ? ", coarse" : "", in.s.zero >= 0 ? ", a zero column" : "", in.s.dup >= 0 ? ", a copy" : "",
                 in.sweeps, in.cond);
        ops_report(r, "solve.gram_sweeps block solve", shape, "f64", err, 1e-10, st);
        ops_release(&h);
    }
}
