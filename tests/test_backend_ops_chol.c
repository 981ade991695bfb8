// test_backend_ops_chol.c: test_backend_ops's cases of --method cholesky's operations (solve/solve_ops.h):
// the equilibrated Cholesky factor and the solves with it (on a GPU, for an FP16 G, possibly the inverse
// route's), against the CPU backend (gpu mode) or the loops here.
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_ops.h"
#include "solve/solve_ops.h"

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
// (by construction, not from the loops here): what the solve's duplicate-column check needs. well: σ =
// the mean itself, which keeps κ₂ near 10 (κ₁, printed, some hundreds at 1 000 columns): an FP16 G's
// case, which the low solves take at any n.
typedef struct chol_shape {
    int64_t n;
    int zero;
    int bad;  // 0: none; 1: column 1; 2: the middle; 3: the third last (past a first block of 1000+); 4: a copy
    int well;
} chol_shape;

static const chol_shape chol_shapes[] = {
    {1, 0, 0, 0},    {3, 0, 0, 0},  {17, 0, 0, 0},  {130, 0, 0, 0},  {1000, 0, 0, 0},
    {1, 1, 0, 0},    {17, 2, 0, 0}, {130, 1, 0, 0}, {17, 0, 1, 0},   {130, 0, 2, 0},
    {1000, 0, 3, 0}, {17, 0, 4, 0}, {130, 0, 4, 0}, {130, 0, 0, 1},  {1000, 0, 0, 1}};
enum { NCHOL = sizeof chol_shapes / sizeof chol_shapes[0] };

// One case's input and its reference (the loops here): s, the factor of S·G·S (lower triangle), info
// as LAPACK's, and LAPACK dpocon's estimate of κ₁(S·G·S) (= κ_∞: it is symmetric; 0 when info > 0).
typedef struct chol_in {
    int64_t n, bad;  // bad: the replaced column, or −1
    int zero, copy;  // copy: bad is a copy (bad 4)
    double *G, *s, *L, cond;
    int info;
} chol_in;

static void chol_spd(ops_run *r, ops_mem *h, int64_t n, double sigma, double *G)
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
        G[i * n + i] += sigma * mean;
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
    chol_spd(r, h, n, cs->well ? 1.0 : 1e-2, in->G);
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
    in->info = cs->bad == 4 ? (int)b + 1 : ops_chol_factor(in->L, n);
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
        if (info_err > 0) {
            fprintf(stderr, "  rank %d: solve.chol_factor %s: info %d, want %d (the reference's %d)\n", r->rank,
                    shape, got.info, want.info, in.info);
            for (int64_t j = in.bad > 0 ? in.bad - 1 : 0; in.bad >= 0 && j < n && j <= in.bad + 2; j++) {
                double v = NAN;  // what the factor left on the diagonal around the failing column
                ops_get(&got.m, &v, got.F + j * n + j, 8);
                fprintf(stderr, "    factor's diagonal at %lld: %.17g\n", (long long)j, v);
            }
        }
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
// Then with the device's factor from chol_factor's low (in float where the backend does so, or the
// inverse route's) for n ≤ 17 (cond up to about 1e3) and the well shapes, within the same bound in
// float's unit.
void case_solve_chol_solve(ops_run *r)
{
    for (int c = 0; c < 2 * NCHOL; c++) {
        const chol_shape *cs = &chol_shapes[c % NCHOL];
        const int low = c >= NCHOL;  // the shapes, not each rank's G, choose: every rank takes the same cases
        if (cs->bad || (low && cs->n > 17 && !cs->well))
            continue;
        ops_mem h = {NULL};
        chol_in in;
        chol_make(r, &h, cs, &in);
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
