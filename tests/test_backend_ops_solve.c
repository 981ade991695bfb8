// test_backend_ops_solve.c: test_backend_ops's cases of the solve_ops that read X (solve/solve_ops.h):
// block_grams, grad_update and gram, on row blocks of f32 and f64 X (each rank its own rows, none on the
// last rank in some shapes), against the CPU backend (gpu mode) or the loops here. Sums
// of k products are held to 2·k·u relative to the sum of their absolute values (u: double's unit
// roundoff; f32 rows are widened before they are multiplied): the bound of any summation order.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "solve/solve_ops.h"

// Row blocks: m rows per rank (m + rank; none on the last rank when empty) × n columns. 4099 rows take
// the CUDA Gram's split over row chunks, 130 columns its two tiles.
typedef struct xshape {
    int64_t m, n;
    int empty;
} xshape;

static const xshape xshapes[] = {{1, 1, 0}, {17, 3, 0}, {130, 17, 1}, {1001, 130, 0}, {4099, 130, 1}, {3, 1001, 0}};
enum { NX = sizeof xshapes / sizeof xshapes[0] };

// This rank's X of shape s: rows × n, entries uniform in [−½, ½), float-rounded when f32.
typedef struct xblock {
    int64_t m, rows, n;  // m: the shape's rows (ranks hold m + rank)
    int empty;
    ops_arr X;
} xblock;

static void xblock_make(ops_run *r, ops_mem *h, const xshape *s, int f32, xblock *x)
{
    x->m = ops_dim(r, s->m);
    x->n = ops_dim(r, s->n);
    x->empty = s->empty;
    x->rows = ops_rows(r, x->m, s->empty);
    ops_arr_make(r, h, x->rows * x->n, f32, -0.5, 0.5, 1, &x->X);
}

static void xblock_text(const ops_run *r, const xblock *x, const char *extra, char *buf, size_t len)
{
    char empty[32] = "";
    if (x->empty)
        snprintf(empty, sizeof empty, ", rank %d none", r->nranks - 1);
    snprintf(buf, len, "%lld+r x %lld%s%s", (long long)x->m, (long long)x->n, empty, extra);
}

// 2·k·u for sums of k products over the rows of any rank (at most m + p − 1 of them).
static double rows_tol(const ops_run *r, const xblock *x, int64_t extra)
{
    return 2.0 * (double)(x->m + r->nranks + extra) * OPS_U64;
}

static ds_mat mat_on(ops_mem *m, const xblock *x)
{
    return (ds_mat){ops_put(m, x->X.raw, ops_arr_bytes(&x->X)), x->rows, x->n, x->X.f32};
}

// ---------------------------------------------------------------------------------------------------
// block_grams

static int64_t nblocks(int64_t n, int batch)
{
    return (n + batch - 1) / batch;
}

static int block_grams_on(ds_ctx *c, const xblock *x, int batch, double *out)
{
    ops_mem m = {c};
    const int64_t len = nblocks(x->n, batch) * batch * batch;
    ds_mat A = mat_on(&m, x);
    double *o = ops_new(&m, (size_t)len * sizeof(double));
    int rc = ops_ran(c, c->be->solve->block_grams(c, &A, batch, o), "solve.block_grams");
    ops_get(&m, out, o, (size_t)len * sizeof(double));
    ops_release(&m);
    return rc;
}

static void block_grams_ref(const xblock *x, int batch, double *out)
{
    const double *X = x->X.d;
    for (int64_t b0 = 0, b = 0; b0 < x->n; b0 += batch, b++) {
        const int64_t nb = x->n - b0 < batch ? x->n - b0 : batch;
        double *o = out + b * batch * batch;
        for (int64_t i = 0; i < nb; i++)
            for (int64_t j = 0; j < nb; j++) {
                double s = 0.0;
                for (int64_t k = 0; k < x->rows; k++)
                    s += X[k * x->n + b0 + i] * X[k * x->n + b0 + j];
                o[i * batch + j] = s;
            }
    }
}

// Each block's nb × nb corner (the rest of a tail block is unspecified) as a Gram matrix.
void case_solve_block_grams(ops_run *r)
{
    for (int s = 0; s < NX; s++)
        for (int f32 = 0; f32 <= 1; f32++) {
            ops_mem h = {NULL};
            xblock x;
            xblock_make(r, &h, &xshapes[s], f32, &x);
            const int batches[] = {1, 3, 17, (int)x.n, (int)x.n + 5};
            for (int b = 0; b < 5; b++) {
                const int batch = batches[b];
                if (batch == 1 && x.n > 200)
                    continue;  // a thousand 1 × 1 blocks say nothing more than 130
                const int64_t len = nblocks(x.n, batch) * batch * batch;
                double *got = ops_new(&h, (size_t)len * 8), *want = ops_new(&h, (size_t)len * 8);
                int st = block_grams_on(r->dut, &x, batch, got);
                if (r->cpu)
                    st |= block_grams_on(r->cpu, &x, batch, want);
                else
                    block_grams_ref(&x, batch, want);
                double err = 0.0;
                for (int64_t b0 = 0, k = 0; b0 < x.n; b0 += batch, k++) {
                    const int64_t nb = x.n - b0 < batch ? x.n - b0 : batch;
                    err = fmax(err, ops_err_gram(got + k * batch * batch, want + k * batch * batch, nb, batch));
                }
                char extra[32], shape[96];
                snprintf(extra, sizeof extra, ", batch %d", batch);
                xblock_text(r, &x, extra, shape, sizeof shape);
                ops_report(r, "solve.block_grams", shape, ops_dtype_name(f32), err, rows_tol(r, &x, 0), st);
            }
            ops_release(&h);
        }
}

// ---------------------------------------------------------------------------------------------------
// grad_update

typedef struct gu_args {
    int64_t up0, upn, gr0, grn;
} gu_args;

static int grad_update_on(ds_ctx *c, const xblock *x, const double *e0, const double *coef, const gu_args *a,
                          double *e, double *gout)
{
    ops_mem m = {c};
    ds_mat A = mat_on(&m, x);
    double *ed = ops_put(&m, e0, (size_t)x->rows * 8), *cd = ops_put(&m, coef, (size_t)a->upn * 8);
    double *gd = ops_new(&m, (size_t)(a->grn + 1) * 8);
    int rc = ops_ran(c, c->be->solve->grad_update(c, &A, ed, a->up0, a->upn, cd, a->gr0, a->grn, gd),
                     "solve.grad_update");
    ops_get(&m, e, ed, (size_t)x->rows * 8);
    ops_get(&m, gout, gd, (size_t)(a->grn + 1) * 8);
    ops_release(&m);
    return rc;
}

// The update and the products of the contract (want), with each entry's scale: for e, |e0| + |X|·|coef|;
// for gout, |X|ᵀ·(that scale); for eᵀe, Σ (that scale)².
static void grad_update_ref(const xblock *x, const double *e0, const double *coef, const gu_args *a, double *e,
                            double *gout, double *se, double *sg)
{
    const double *X = x->X.d;
    const int64_t n = x->n;
    double ee = 0.0, see = 0.0;
    for (int64_t i = 0; i < x->rows; i++) {
        double v = e0[i], s = fabs(e0[i]);
        for (int64_t j = 0; j < a->upn; j++) {
            v -= X[i * n + a->up0 + j] * coef[j];
            s += fabs(X[i * n + a->up0 + j] * coef[j]);
        }
        e[i] = v, se[i] = s;
        ee += v * v, see += s * s;
    }
    for (int64_t j = 0; j < a->grn; j++) {
        double v = 0.0, s = 0.0;
        for (int64_t i = 0; i < x->rows; i++) {
            v += X[i * n + a->gr0 + j] * e[i];
            s += fabs(X[i * n + a->gr0 + j]) * se[i];
        }
        gout[j] = v, sg[j] = s;
    }
    gout[a->grn] = ee, sg[a->grn] = see;
}

// One update: e and gout against want, then the same call again on the backend under test, which must
// give the same bits (the reductions are deterministic).
static void grad_update_one(ops_run *r, const xblock *x, const gu_args *a)
{
    const int64_t rows = x->rows, gl = a->grn + 1;
    ops_mem mem = {NULL}, *h = &mem;
    double *e0 = ops_new(h, (size_t)rows * 8), *coef = ops_new(h, (size_t)a->upn * 8);
    double *e = ops_new(h, (size_t)rows * 8), *g = ops_new(h, (size_t)gl * 8), *e2 = ops_new(h, (size_t)rows * 8);
    double *g2 = ops_new(h, (size_t)gl * 8), *we = ops_new(h, (size_t)rows * 8), *wg = ops_new(h, (size_t)gl * 8);
    double *se = ops_new(h, (size_t)rows * 8), *sg = ops_new(h, (size_t)gl * 8);
    ops_fill(r, e0, rows, -1, 1, 1);
    ops_fill(r, coef, a->upn, -1, 1, 0);
    grad_update_ref(x, e0, coef, a, we, wg, se, sg);
    int st = grad_update_on(r->dut, x, e0, coef, a, e, g);
    if (r->cpu)
        st |= grad_update_on(r->cpu, x, e0, coef, a, we, wg);
    const int st2 = grad_update_on(r->dut, x, e0, coef, a, e2, g2);
    char extra[64], shape[128];
    snprintf(extra, sizeof extra, ", up %lld+%lld gr %lld+%lld", (long long)a->up0, (long long)a->upn,
             (long long)a->gr0, (long long)a->grn);
    xblock_text(r, x, extra, shape, sizeof shape);
    const double err = fmax(ops_err_each(e, we, se, rows), ops_err_each(g, wg, sg, gl));
    ops_report(r, "solve.grad_update", shape, ops_dtype_name(x->X.f32), err, 2 * rows_tol(r, x, a->upn + 1), st);
    const double again = fmax(ops_err_bytes(e2, e, rows, 8), ops_err_bytes(g2, g, gl, 8));
    ops_report(r, "solve.grad_update again", shape, ops_dtype_name(x->X.f32), again, 0, st2);
    ops_release(h);
}

void case_solve_grad_update(ops_run *r)
{
    // and more rows than one wave of the GPU's single-read pass takes (its CTAs loop over row chunks), and
    // rows wider than a warp holds (a row a CTA: 16 and 32 doubles a thread, ops_dim adding up to a quarter
    // to n; at 4 000 columns its warps once read e[i] after thread 0 had updated it, a race that corrupted
    // g on 150 000 rows on an H100, too rare to be seen on these rows)
    static const xshape more[] = {{9001, 300, 1}, {2003, 1500, 0}, {3001, 3100, 0}};
    for (int s = 0; s < NX + 3; s++)
        for (int f32 = 0; f32 <= 1; f32++) {
            ops_mem h = {NULL};
            xblock x;
            xblock_make(r, &h, s < NX ? &xshapes[s] : &more[s - NX], f32, &x);
            const int64_t n = x.n;
            const gu_args args[] = {
                {0, 0, 0, n < 32 ? n : 32},        // the first gradient: no update
                {n / 3, n / 3, n / 2, n - n / 2},  // a block's update, the next block's gradient
                {0, 1, n - 1, 1},
                {0, n, 0, n},
            };
            for (int a = 0; a < 4; a++)
                grad_update_one(r, &x, &args[a]);
            ops_release(&h);
        }
}

// ---------------------------------------------------------------------------------------------------
// gram

static int gram_on(ds_ctx *c, const xblock *x, const double *y, double *out)
{
    ops_mem m = {c};
    const int64_t n = x->n, len = n * n + n + 1;
    ds_mat A = mat_on(&m, x);
    const double *yd = ops_put(&m, y, (size_t)x->rows * 8);
    double *o = ops_new(&m, (size_t)len * 8);
    const int single = getenv("DSOLVE_TEST_GRAM_SINGLE") != NULL;  // case_solve_gram_single
    int rc = ops_ran(c, (single ? c->be->solve->gram_single : c->be->solve->gram)(c, &A, yd, o),
                     single ? "solve.gram_single" : "solve.gram");
    ops_get(&m, out, o, (size_t)len * 8);
    ops_release(&m);
    return rc;
}

static void gram_ref(const xblock *x, const double *y, double *out)
{
    const int64_t n = x->n;
    const double *X = x->X.d;
    for (int64_t i = 0; i <= n; i++)  // column n is y
        for (int64_t j = i; j <= n; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < x->rows; k++)
                s += (i < n ? X[k * n + i] : y[k]) * (j < n ? X[k * n + j] : y[k]);
            if (i < n && j < n)
                out[i * n + j] = out[j * n + i] = s;
            else if (i < n)
                out[n * n + i] = s;
            else
                out[n * n + n] = s;
        }
}

// [G | c | yy] as the (n+1) × (n+1) Gram of [X y].
static void gram_full(const double *out, int64_t n, double *full)
{
    for (int64_t i = 0; i < n; i++) {
        memcpy(full + i * (n + 1), out + i * n, (size_t)n * 8);
        full[i * (n + 1) + n] = full[n * (n + 1) + i] = out[n * n + i];
    }
    full[n * (n + 1) + n] = out[n * n + n];
}

// G, c and yy together as the Gram of [X y]; on the GPU, X of 2 000 columns takes cuBLAS's DSYRK plan (the
// tiles below that width, and with DSOLVE_GRAM_KSPLIT set: "ragged").
void case_solve_gram(ops_run *r)
{
    static const xshape wide = {257, 2000, 0};
    for (int s = 0; s <= NX; s++)
        for (int f32 = 0; f32 <= 1; f32++) {
            ops_mem h = {NULL};
            xblock x;
            xblock_make(r, &h, s < NX ? &xshapes[s] : &wide, f32, &x);
            const int64_t n = x.n, len = n * n + n + 1, n1 = n + 1;
            double *y = ops_new(&h, (size_t)x.rows * 8), *got = ops_new(&h, (size_t)len * 8);
            double *want = ops_new(&h, (size_t)len * 8), *fg = ops_new(&h, (size_t)(n1 * n1) * 8);
            double *fw = ops_new(&h, (size_t)(n1 * n1) * 8);
            ops_fill(r, y, x.rows, -1, 1, 1);
            int st = gram_on(r->dut, &x, y, got);
            if (r->cpu)
                st |= gram_on(r->cpu, &x, y, want);
            else
                gram_ref(&x, y, want);
            gram_full(got, n, fg);
            gram_full(want, n, fw);
            char shape[96];
            xblock_text(r, &x, "", shape, sizeof shape);
            ops_report(r, "solve.gram", shape, ops_dtype_name(f32), ops_err_gram(fg, fw, n1, n1), rows_tol(r, &x, 0), st);
            if (!f32) {  // the tiled product's GEMM groups at once (CUDA): the same bits as one after another
                double *alt = ops_new(&h, (size_t)len * 8);
                setenv("DSOLVE_GRAM_TILE", "32", 1);  // several groups also for n = 130
                setenv("DSOLVE_GRAM_CONCURRENT", "0", 1);
                st = gram_on(r->dut, &x, y, got);
                unsetenv("DSOLVE_GRAM_CONCURRENT");  // the default: side streams
                st |= gram_on(r->dut, &x, y, alt);
                unsetenv("DSOLVE_GRAM_TILE");
                ops_report(r, "solve.gram concurrent", shape, "f64", memcmp(got, alt, (size_t)len * 8) ? 1.0 : 0.0, 0.0,
                           st);
                // the narrower last tile (the default overlaps it with the one before it), with a shorter
                // last row chunk
                setenv("DSOLVE_GRAM_UNIFORM", "0", 1);
                setenv("DSOLVE_GRAM_TILE", "32", 1);
                setenv("DSOLVE_GRAM_KSPLIT", "3", 1);
                st = gram_on(r->dut, &x, y, alt);
                unsetenv("DSOLVE_GRAM_KSPLIT");
                unsetenv("DSOLVE_GRAM_TILE");
                unsetenv("DSOLVE_GRAM_UNIFORM");
                gram_full(alt, n, fg);
                ops_report(r, "solve.gram ragged", shape, "f64", ops_err_gram(fg, fw, n1, n1), rows_tol(r, &x, 0), st);
            }
            ops_release(&h);
        }
}

// gram_single, where a backend has it: [G | c] summed in float from X and y rounded to the backend's
// precision (float on the CPU, FP16 with power-of-two column scales on CUDA), within the bound of the exact Gram 2·(2u + (m + ranks)·u_float)
// of √(G_ii·G_jj) (u: single_unit, the rounding of X and y; u_float: the sums), and yy in double (gram's bound).
void case_solve_gram_single(ops_run *r)
{
    ds_ctx *c = r->dut->be->solve->gram_single ? r->dut : r->cpu && r->cpu->be->solve->gram_single ? r->cpu : NULL;
    if (!c)
        return;
    setenv("DSOLVE_TEST_GRAM_SINGLE", "1", 1);
    for (int s = 0; s < NX; s++)
        for (int f32 = 0; f32 <= 1; f32++) {
            ops_mem h = {NULL};
            xblock x;
            xblock_make(r, &h, &xshapes[s], f32, &x);
            const int64_t n = x.n, len = n * n + n + 1, n1 = n + 1;
            double *y = ops_new(&h, (size_t)x.rows * 8), *got = ops_new(&h, (size_t)len * 8);
            double *want = ops_new(&h, (size_t)len * 8), *fg = ops_new(&h, (size_t)(n1 * n1) * 8);
            double *fw = ops_new(&h, (size_t)(n1 * n1) * 8);
            ops_fill(r, y, x.rows, -1, 1, 1);
            int st = gram_on(c, &x, y, got);
            gram_ref(&x, y, want);
            gram_full(got, n, fg);
            gram_full(want, n, fw);
            char shape[96];
            xblock_text(r, &x, c == r->dut ? "" : " (on the CPU)", shape, sizeof shape);
            const double tol = 2.0 * (2.0 * c->be->solve->single_unit + (double)(x.m + r->nranks) * (FLT_EPSILON / 2));
            ops_report(r, "solve.gram_single", shape, ops_dtype_name(f32), ops_err_gram(fg, fw, n1, n1), tol, st);
            setenv("DSOLVE_HALF_GROUPS", "5", 1);  // CUDA: several groups (5 where a chunk keeps 64 rows), tiles of
            setenv("DSOLVE_HALF_KSPLIT", "3", 1);  // 32 (several for n = 130), 3 chunks a group
            setenv("DSOLVE_HALF_TILE", "32", 1);
            double *alt = ops_new(&h, (size_t)len * 8);
            const int st2 = gram_on(c, &x, y, alt);
            unsetenv("DSOLVE_HALF_TILE");
            unsetenv("DSOLVE_HALF_KSPLIT");
            unsetenv("DSOLVE_HALF_GROUPS");
            gram_full(alt, n, fg);
            ops_report(r, "solve.gram_single groups", shape, ops_dtype_name(f32), ops_err_gram(fg, fw, n1, n1), tol,
                       st2);
            const double yy = fabs(got[len - 1] - want[len - 1]) / fmax(want[len - 1], DBL_MIN);
            ops_report(r, "solve.gram_single yy", shape, "f64", yy, rows_tol(r, &x, 0), st);
            ops_release(&h);
        }
    unsetenv("DSOLVE_TEST_GRAM_SINGLE");
}
