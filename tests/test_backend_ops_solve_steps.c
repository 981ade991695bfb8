// test_backend_ops_solve_steps.c: test_backend_ops's cases of the solve_ops that step or solve for the
// coefficients (solve/solve_ops.h): block_step, gram_sweeps, and the equilibrated Cholesky factor and
// solve of --method cholesky, against the CPU backend (gpu mode) or the loops here.
#include <lapacke.h>
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

// ---------------------------------------------------------------------------------------------------
// chol_factor and chol_solve: the equilibrated Cholesky of --method cholesky

// A Gram-like G = D·(AᵀA + σ·I)·D: A k × n uniform in [−½, ½) with k = n/4 + 8 rows (AᵀA alone is
// singular once n > k), σ = 1e-2 × the mean of diag(AᵀA), which keeps κ₁ of the equilibrated matrix
// between 10 and about 1e5 (printed with each case), D diagonal 10^uniform(−4, 4) (the equilibration
// must undo it). zero: columns set to 0 (1: the middle one, or the only one when n = 1; 2: the first and
// the last). bad 1–3: row and column b replaced by twice column 0's with G_bb = G_00, so that
// (2e₀ − e_b)ᵀG(2e₀ − e_b) = −3·G_00 while the leading minors of order ≤ b are untouched: column b's
// pivot is −3 after scaling, and info = b + 1 exactly, whatever the blocking of the factorization.
// bad 4: column b = n/2 an exact copy of column c = n/3 (X with a duplicated column): b's pivot is 0 in
// exact arithmetic and rounding-level either side of 0 in floating point, and info = b + 1 is wanted
// (by construction, not from the loops here): what the solve's duplicate-column check needs.
typedef struct chol_shape {
    int64_t n;
    int zero;
    int bad;  // 0: none; 1: column 1; 2: the middle; 3: the third last (past a first block of 1000+); 4: a copy
} chol_shape;

static const chol_shape chol_shapes[] = {{1, 0, 0},  {3, 0, 0},   {17, 0, 0}, {130, 0, 0}, {1000, 0, 0},
                                         {1, 1, 0},  {17, 2, 0},  {130, 1, 0}, {17, 0, 1}, {130, 0, 2},
                                         {1000, 0, 3}, {17, 0, 4}, {130, 0, 4}};
enum { NCHOL = sizeof chol_shapes / sizeof chol_shapes[0] };

// One case's input and its reference (the loops here): s, the factor of S·G·S (lower triangle), info
// as LAPACK's, and LAPACK dpocon's estimate of κ₁(S·G·S) (= κ_∞: it is symmetric; 0 when info > 0).
typedef struct chol_in {
    int64_t n, bad;  // bad: the replaced column, or −1
    int zero, copy;  // copy: bad is a copy (bad 4)
    double *G, *s, *L, cond;
    int info;
} chol_in;

static void chol_spd(ops_run *r, ops_mem *h, int64_t n, double *G)
{
    const int64_t k = n / 4 + 8;
    double *A = ops_new(h, (size_t)(k * n) * 8), *d = ops_new(h, (size_t)n * 8), mean = 0.0;
    ops_fill(r, A, k * n, -0.5, 0.5, 1);
    ops_fill(r, d, n, -4, 4, 1);
    for (int64_t l = 0; l < k; l++)  // the lower triangle of AᵀA, row of A by row of A
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j <= i; j++)
                G[i * n + j] += A[l * n + i] * A[l * n + j];
    for (int64_t i = 0; i < n; i++)
        mean += G[i * n + i] / (double)n;
    for (int64_t i = 0; i < n; i++) {
        G[i * n + i] += 1e-2 * mean;
        for (int64_t j = 0; j <= i; j++)
            G[i * n + j] = G[j * n + i] = G[i * n + j] * pow(10.0, d[i]) * pow(10.0, d[j]);
    }
}

// s, and H ← S·H·S with e_j for a zero column (s_j = 0). Returns ‖S·H·S‖₁.
static double chol_ref_scale(double *H, int64_t n, double *s)
{
    double norm = 0.0;
    for (int64_t j = 0; j < n; j++)
        s[j] = H[j * n + j] > 0 ? 1.0 / sqrt(H[j * n + j]) : 0.0;
    for (int64_t i = 0; i < n; i++) {
        double row = 0.0;
        for (int64_t j = 0; j < n; j++) {
            H[i * n + j] = i == j && s[i] == 0.0 ? 1.0 : H[i * n + j] * s[i] * s[j];
            row += fabs(H[i * n + j]);
        }
        norm = fmax(norm, row);
    }
    return norm;
}

// H = L·Lᵀ in place (L in the lower triangle). Returns info as LAPACK's: 0, or j when the pivot of
// column j − 1 is not positive.
static int chol_ref_factor(double *H, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        double d = H[j * n + j];
        for (int64_t k = 0; k < j; k++)
            d -= H[j * n + k] * H[j * n + k];
        if (!(d > 0))
            return (int)j + 1;
        H[j * n + j] = sqrt(d);
        for (int64_t i = j + 1; i < n; i++) {
            double v = H[i * n + j];
            for (int64_t k = 0; k < j; k++)
                v -= H[i * n + k] * H[j * n + k];
            H[i * n + j] = v / H[j * n + j];
        }
    }
    return 0;
}

// x = S·(L·Lᵀ)⁻¹·S·b, or x += that with add (LAPACK's dpotrs with the loops' L).
static void chol_ref_solve(const double *L, const double *s, int64_t n, const double *b, double *x, int add, double *t)
{
    for (int64_t i = 0; i < n; i++)
        t[i] = s[i] * b[i];
    LAPACKE_dpotrs(LAPACK_ROW_MAJOR, 'L', (lapack_int)n, 1, L, (lapack_int)n, t, 1);
    for (int64_t i = 0; i < n; i++)
        x[i] = add ? x[i] + s[i] * t[i] : s[i] * t[i];
}

static void chol_make(ops_run *r, ops_mem *h, const chol_shape *cs, chol_in *in)
{
    const int64_t n = cs->n > 3 ? ops_dim(r, cs->n) : cs->n;
    *in = (chol_in){.n = n, .zero = cs->zero, .bad = -1, .copy = cs->bad == 4};
    in->G = ops_new(h, (size_t)(n * n) * 8);
    chol_spd(r, h, n, in->G);
    const int64_t zeros[2] = {cs->zero == 2 ? 0 : n / 2, cs->zero == 2 ? n - 1 : -1};
    for (int z = 0; z < cs->zero; z++)
        for (int64_t i = 0; i < n; i++)
            in->G[i * n + zeros[z]] = in->G[zeros[z] * n + i] = 0.0;
    const int64_t b = cs->bad == 1 ? 1 : cs->bad == 2 || cs->bad == 4 ? n / 2 : n - 3, c = cs->bad == 4 ? n / 3 : 0;
    for (int64_t i = 0; cs->bad && i < n; i++)
        in->G[i * n + b] = in->G[b * n + i] = i == b ? in->G[c * n + c] : (cs->bad == 4 ? 1.0 : 2.0) * in->G[i * n + c];
    in->bad = cs->bad ? b : -1;
    in->s = ops_new(h, (size_t)n * 8);
    in->L = ops_put(h, in->G, (size_t)(n * n) * 8);
    const double anorm = chol_ref_scale(in->L, n, in->s);
    in->info = cs->bad == 4 ? (int)b + 1 : chol_ref_factor(in->L, n);
    double rcond = 0.0;
    if (in->info == 0 && LAPACKE_dpocon(LAPACK_ROW_MAJOR, 'L', (lapack_int)n, in->L, (lapack_int)n, anorm, &rcond) != 0)
        rcond = 0.0;
    in->cond = rcond > 0 ? 1.0 / rcond : 0.0;
}

static void chol_text(const chol_in *in, const char *extra, char *buf, size_t len)
{
    char what[64] = "";
    if (in->zero)
        snprintf(what, sizeof what, ", %d zero column%s", in->zero, in->zero > 1 ? "s" : "");
    else if (in->bad >= 0)
        snprintf(what, sizeof what, ", %s at column %lld", in->copy ? "a copy" : "not SPD", (long long)in->bad);
    snprintf(buf, len, "n %lld, cond %.1e%s%s", (long long)in->n, in->cond, what, extra);
}

// One backend's chol_factor of in->G: its factor and s stay in backend memory m (for chol_solve),
// s and info are also copied to the host.
typedef struct chol_side {
    ops_mem m;
    double *F, *sd, *s, cond;
    int info, st;
} chol_side;

static void chol_side_factor(ds_ctx *c, ops_mem *h, const chol_in *in, int low, chol_side *d)
{
    const int64_t n = in->n;
    *d = (chol_side){.m = {c}, .info = -1};
    d->F = ops_put(&d->m, in->G, (size_t)(n * n) * 8);
    d->sd = ops_new(&d->m, (size_t)n * 8);
    d->s = ops_new(h, (size_t)n * 8);
    d->st = ops_ran(c, c->be->solve->chol_factor(c, d->F, n, d->sd, low, &d->info, &d->cond), "solve.chol_factor");
    ops_get(&d->m, d->s, d->sd, (size_t)n * 8);
}

// s per entry against the reference's (relative, 4u: a square root and a division; a zero column's
// s exactly 0), and info exactly: against the CPU backend and the reference in gpu mode; cond.
void case_solve_chol_factor(ops_run *r)
{
    for (int c = 0; c < NCHOL; c++) {
        ops_mem h = {NULL};
        chol_in in;
        chol_make(r, &h, &chol_shapes[c], &in);
        const int64_t n = in.n;
        chol_side got, want = {.info = in.info, .s = in.s};
        chol_side_factor(r->dut, &h, &in, 0, &got);
        if (r->cpu)
            chol_side_factor(r->cpu, &h, &in, 0, &want);
        double *sc = ops_new(&h, (size_t)n * 8);
        for (int64_t j = 0; j < n; j++)
            sc[j] = fabs(want.s[j]);
        char shape[128];
        chol_text(&in, "", shape, sizeof shape);
        ops_report(r, "solve.chol_factor", shape, "f64", ops_err_each(got.s, want.s, sc, n), 4 * OPS_U64,
                   got.st | want.st);
        const double info_err = fmax(fabs((double)(got.info - want.info)), fabs((double)(got.info - in.info)));
        if (info_err > 0)
            fprintf(stderr, "  rank %d: solve.chol_factor %s: info %d, want %d (the reference's %d)\n", r->rank,
                    shape, got.info, want.info, in.info);
        ops_report(r, "solve.chol_factor info", shape, "f64", info_err, 0, got.st | want.st);
        for (int64_t j = 0; j < n && in.info == 0 && got.info == 0; j++)
            sc[j] = in.L[j * n + j];  // cond: the diagonal ratio of the reference's factor, to 1e-6
        if (in.info == 0 && got.info == 0)
            ops_report(r, "solve.chol_factor cond", shape, "f64", fabs(got.cond / chol_diag_cond(sc, n) - 1), 1e-6,
                       got.st);
        ops_release(&got.m);
        ops_release(&want.m);  // nothing in cpu mode
        ops_release(&h);
    }
}

// chol_solve with one side's factor, x starting at x0; b is downloaded again into b_after.
static int chol_side_solve(ds_ctx *c, const chol_side *d, int64_t n, const double *b, const double *x0, int add,
                           double *x, double *b_after)
{
    ops_mem m = {c};
    double *bd = ops_put(&m, b, (size_t)n * 8), *xd = ops_put(&m, x0, (size_t)n * 8);
    int rc = ops_ran(c, c->be->solve->chol_solve(c, d->F, d->sd, n, bd, xd, add), "solve.chol_solve");
    ops_get(&m, x, xd, (size_t)n * 8);
    ops_get(&m, b_after, bd, (size_t)n * 8);
    ops_release(&m);
    return rc | d->st | (d->info != 0 ? DS_ERR_NUMERIC : DS_OK);
}

// The error in z = S⁻¹x (got and want are overwritten with z): max |z − z_want| over max |z_want|
// (+ max |z0| with add). A zero column (s_j = 0) must match exactly.
static double chol_err(double *got, double *want, const double *x0, const double *s, int64_t n)
{
    double scale = 0.0, z0 = 0.0;
    for (int64_t j = 0; j < n; j++) {
        if (s[j] == 0.0) {
            got[j] = got[j] == want[j] ? 0.0 : NAN;
            want[j] = 0.0;
            continue;
        }
        got[j] /= s[j];
        want[j] /= s[j];
        scale = fmax(scale, fabs(want[j]));
        z0 = x0 ? fmax(z0, fabs(x0[j] / s[j])) : 0.0;
    }
    return ops_err(got, want, n, scale + z0);
}

// x (add 0, from NaN: it must be overwritten) and x0 + x (add 1) against the CPU backend or the
// reference, measured in the equilibrated variables z = S⁻¹x, which the bound speaks of, with S·b and z0
// of order 1: tol 4·(n + 4)·u·cond, the forward error bound of a Cholesky solve (on either side) with
// dpocon's estimate of κ_∞(S·G·S), the 4 for the scaling's own roundings (each side's s within 2 ulps,
// which moves S·G·S, S·b and x). A zero column's entry exactly as wanted (0 without add); b unchanged.
// Then with the device's factor from chol_factor's low (in float where the backend does so) for n ≤ 17
// (cond up to about 1e3), within the same bound in float's unit.
void case_solve_chol_solve(ops_run *r)
{
    for (int c = 0; c < 2 * NCHOL; c++) {
        const int low = c >= NCHOL;  // the shapes of n ≤ 17 only (each rank's G is its own: the same shape)
        if (chol_shapes[c % NCHOL].bad || (low && chol_shapes[c % NCHOL].n > 17))
            continue;
        ops_mem h = {NULL};
        chol_in in;
        chol_make(r, &h, &chol_shapes[c % NCHOL], &in);
        const int64_t n = in.n;
        double *b = ops_new(&h, (size_t)n * 8), *x0 = ops_new(&h, (size_t)n * 8), *nan0 = ops_new(&h, (size_t)n * 8);
        double *got = ops_new(&h, (size_t)n * 8), *want = ops_new(&h, (size_t)n * 8), *t = ops_new(&h, (size_t)n * 8);
        double *b_after = ops_new(&h, (size_t)n * 8);
        ops_fill(r, b, n, -1, 1, 1);
        ops_fill(r, x0, n, -1, 1, 1);
        for (int64_t j = 0; j < n; j++) {
            b[j] /= in.s[j] > 0 ? in.s[j] : 1.0;
            x0[j] *= in.s[j] > 0 ? in.s[j] : 1.0;
            nan0[j] = NAN;
        }
        chol_side dut, cpu = {.m = {NULL}};
        chol_side_factor(r->dut, &h, &in, low, &dut);
        if (r->cpu)
            chol_side_factor(r->cpu, &h, &in, 0, &cpu);
        for (int add = 0; add <= 1; add++) {
            const double *start = add ? x0 : nan0;
            int st = chol_side_solve(r->dut, &dut, n, b, start, add, got, b_after);
            double err = ops_err_bytes(b_after, b, n, 8) > 0 ? INFINITY : 0.0;
            if (r->cpu) {
                st |= chol_side_solve(r->cpu, &cpu, n, b, start, add, want, b_after);
            } else {
                memcpy(want, start, (size_t)n * 8);
                chol_ref_solve(in.L, in.s, n, b, want, add, t);
            }
            err = fmax(err, chol_err(got, want, add ? x0 : NULL, r->cpu ? cpu.s : in.s, n));
            char shape[128];
            chol_text(&in, add ? (low ? ", add, low" : ", add") : (low ? ", low" : ""), shape, sizeof shape);
            const double unit = low ? 0x1p-24 : OPS_U64;
            ops_report(r, "solve.chol_solve", shape, "f64", err, 4.0 * (double)(n + 4) * unit * in.cond, st);
        }
        ops_release(&dut.m);
        ops_release(&cpu.m);  // nothing in cpu mode
        ops_release(&h);
    }
}
