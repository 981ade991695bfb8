// test_backend_ops_ann.c: test_backend_ops's cases of the hidden layer's ann_ops (ann/ann.h): the row
// gathering and routing (exact) and the hidden fits, against the CPU backend (gpu mode) or the loops
// here. The output layer's are in test_backend_ops_ann_output.c.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ann/ann.h"
#include "backend_ops.h"

// ---------------------------------------------------------------------------------------------------
// gather_fit_rows

static int gather_fit_on(ds_ctx *c, const double *X, const double *z, int64_t rows, int64_t n, const int64_t *idx,
                         int64_t count, double *out)
{
    ops_mem m = {c};
    const size_t ob = (size_t)(count * (n + 2)) * 8;
    const double *Xd = ops_put(&m, X, (size_t)(rows * n) * 8), *zd = ops_put(&m, z, (size_t)rows * 8);
    const int64_t *id = ops_put(&m, idx, (size_t)count * 8);
    double *d = ops_new(&m, ob);
    int rc = ops_ran(c, c->be->ann->gather_fit_rows(c, Xd, n, zd, id, count, d), "ann.gather_fit_rows");
    ops_get(&m, out, d, ob);
    ops_release(&m);
    return rc;
}

// dst[i] = (X[idx[i]], 1, z[idx[i]]), exact. Shapes: inputs n, rows, rows gathered.
void case_ann_gather_fit_rows(ops_run *r)
{
    const int64_t shapes[][3] = {{1, 1, 0}, {1, 1, 3}, {3, 17, 17}, {17, 130, 1001}, {40, 1001, 130}};
    for (int s = 0; s < 5; s++) {
        const int64_t n = ops_dim(r, shapes[s][0]), rows = ops_dim(r, shapes[s][1]);
        const int64_t count = shapes[s][2] ? ops_dim(r, shapes[s][2]) : 0, w = n + 2;
        ops_mem h = {NULL};
        double *X = ops_new(&h, (size_t)(rows * n) * 8), *z = ops_new(&h, (size_t)rows * 8),
               *u = ops_new(&h, (size_t)count * 8);
        int64_t *idx = ops_new(&h, (size_t)count * 8);
        double *got = ops_new(&h, (size_t)(count * w) * 8), *want = ops_new(&h, (size_t)(count * w) * 8);
        ops_fill(r, X, rows * n, -1, 1, 1);
        ops_fill(r, z, rows, -1, 1, 1);
        ops_fill(r, u, count, 0, 1, 1);
        for (int64_t i = 0; i < count; i++)
            idx[i] = (int64_t)(u[i] * (double)rows);
        int st = gather_fit_on(r->dut, X, z, rows, n, idx, count, got);
        if (r->cpu) {
            st |= gather_fit_on(r->cpu, X, z, rows, n, idx, count, want);
        } else {
            for (int64_t i = 0; i < count; i++) {
                memcpy(want + i * w, X + idx[i] * n, (size_t)n * 8);
                want[i * w + n] = 1.0;
                want[i * w + n + 1] = z[idx[i]];
            }
        }
        char shape[96];
        snprintf(shape, sizeof shape, "%lld of %lld rows x %lld", (long long)count, (long long)rows, (long long)n);
        ops_report(r, "ann.gather_fit_rows", shape, "f64", ops_err_bytes(got, want, count * w, 8), 0, st);
        ops_release(&h);
    }
}

// ---------------------------------------------------------------------------------------------------
// The routing of a round (ann.h): nb neurons' sorted subsets L of S rows of [0, m), owned by p ranks
// of equal shares, and its table.

typedef struct route {
    int64_t nb, S, m;
    int p;
    int64_t *L, *tab, tab_len;
} route;

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void route_make(ops_run *r, ops_mem *h, int64_t nb, int64_t S, int p, int64_t m, route *rt)
{
    *rt = (route){nb, S, m, p};
    rt->tab_len = nb * (2 * p + 1) + p + 1;
    rt->L = ops_new(h, (size_t)(nb * S) * 8);
    rt->tab = ops_new(h, (size_t)rt->tab_len * 8);
    int64_t *pool = ops_new(h, (size_t)m * 8);
    const uint64_t s = ops_stream(r);
    for (int64_t k = 0; k < nb; k++) {  // a partial Fisher–Yates shuffle: S distinct rows
        for (int64_t i = 0; i < m; i++)
            pool[i] = i;
        for (int64_t j = 0; j < S; j++) {
            const int64_t t = j + (int64_t)(ops_bits(r, s, OPS_SHARED, k * S + j) % (uint64_t)(m - j));
            const int64_t v = pool[t];
            pool[t] = pool[j], pool[j] = v;
        }
        memcpy(rt->L + k * S, pool, (size_t)S * 8);
        qsort(rt->L + k * S, (size_t)S, 8, cmp_i64);
    }
    int64_t *at = rt->tab + nb * (p + 1), *start = at + nb * p;
    for (int q = 0; q <= p; q++)
        start[q] = (int64_t)q * m / p;
    for (int64_t k = 0; k < nb; k++) {
        int64_t *lo = rt->tab + k * (p + 1);
        for (int q = 0; q < p; q++) {
            lo[q] = 0;
            while (lo[q] < S && rt->L[k * S + lo[q]] < start[q])
                lo[q]++;
        }
        lo[p] = S;
    }
    int64_t offset = 0;  // the exchange layout: [owner][neuron][row]
    for (int q = 0; q < p; q++)
        for (int64_t k = 0; k < nb; k++) {
            const int64_t *lo = rt->tab + k * (p + 1);
            at[k * p + q] = offset;
            offset += lo[q + 1] - lo[q];
        }
}

// Where entry e = k·S + j of L travels: its place in the exchange layout, and its owner.
static int64_t route_place_of(const route *rt, int64_t e, int *owner)
{
    const int64_t k = e / rt->S, j = e % rt->S, *lo = rt->tab + k * (rt->p + 1);
    int q = 0;
    while (j >= lo[q + 1])
        q++;
    *owner = q;
    return rt->tab[rt->nb * (rt->p + 1) + k * rt->p + q] + j - lo[q];
}

static const int64_t route_shapes[][4] = {  // neurons nb, rows S, owners p, rows m
    {1, 1, 1, 1}, {3, 17, 3, 130}, {5, 130, 4, 1001}, {2, 17, 7, 20}};

static void route_text(const route *rt, int64_t width, char *buf, size_t len)
{
    snprintf(buf, len, "%lld neurons x %lld rows of %lld, %d owners%s", (long long)rt->nb, (long long)rt->S,
             (long long)rt->m, rt->p, width ? ", width" : "");
    if (width)
        snprintf(buf + strlen(buf), len - strlen(buf), " %lld", (long long)width);
}

static int route_requests_on(ds_ctx *c, const route *rt, int64_t *out)
{
    ops_mem m = {c};
    const int64_t *L = ops_put(&m, rt->L, (size_t)(rt->nb * rt->S) * 8),
                  *tab = ops_put(&m, rt->tab, (size_t)rt->tab_len * 8);
    int64_t *req = ops_new(&m, (size_t)(rt->nb * rt->S) * 8);
    int rc = ops_ran(c, c->be->ann->route_requests(c, L, rt->nb, rt->S, rt->p, tab, req), "ann.route_requests");
    ops_get(&m, out, req, (size_t)(rt->nb * rt->S) * 8);
    ops_release(&m);
    return rc;
}

// req[place(e)] = L[e] − (first row of owner(e)), exact.
void case_ann_route_requests(ops_run *r)
{
    for (int s = 0; s < 4; s++) {
        ops_mem h = {NULL};
        route rt;
        route_make(r, &h, route_shapes[s][0], route_shapes[s][1], (int)route_shapes[s][2], route_shapes[s][3], &rt);
        const int64_t len = rt.nb * rt.S;
        int64_t *got = ops_new(&h, (size_t)len * 8), *want = ops_new(&h, (size_t)len * 8);
        const int64_t *start = rt.tab + rt.nb * (2 * rt.p + 1);
        int st = route_requests_on(r->dut, &rt, got);
        if (r->cpu) {
            st |= route_requests_on(r->cpu, &rt, want);
        } else {
            for (int64_t e = 0; e < len; e++) {
                int q;
                const int64_t at = route_place_of(&rt, e, &q);
                want[at] = rt.L[e] - start[q];
            }
        }
        char shape[96];
        route_text(&rt, 0, shape, sizeof shape);
        ops_report(r, "ann.route_requests", shape, "i64", ops_err_bytes(got, want, len, 8), 0, st);
        ops_release(&h);
    }
}

static int route_place_on(ds_ctx *c, const route *rt, const double *recv, int64_t width, double *out)
{
    ops_mem m = {c};
    const size_t bytes = (size_t)(rt->nb * rt->S * width) * 8;
    const double *rv = ops_put(&m, recv, bytes);
    const int64_t *tab = ops_put(&m, rt->tab, (size_t)rt->tab_len * 8);
    double *A = ops_new(&m, bytes);
    int rc = ops_ran(c, c->be->ann->route_place(c, rv, width, rt->nb, rt->S, rt->p, tab, A), "ann.route_place");
    ops_get(&m, out, A, bytes);
    ops_release(&m);
    return rc;
}

// A[e] = recv[place(e)], rows of width doubles, exact.
void case_ann_route_place(ops_run *r)
{
    for (int s = 0; s < 4; s++) {
        ops_mem h = {NULL};
        route rt;
        route_make(r, &h, route_shapes[s][0], route_shapes[s][1], (int)route_shapes[s][2], route_shapes[s][3], &rt);
        const int64_t width = 2 + s * 5, len = rt.nb * rt.S * width;
        double *recv = ops_new(&h, (size_t)len * 8), *got = ops_new(&h, (size_t)len * 8),
               *want = ops_new(&h, (size_t)len * 8);
        ops_fill(r, recv, len, -1, 1, 1);
        int st = route_place_on(r->dut, &rt, recv, width, got);
        if (r->cpu) {
            st |= route_place_on(r->cpu, &rt, recv, width, want);
        } else {
            for (int64_t e = 0; e < rt.nb * rt.S; e++) {
                int q;
                memcpy(want + e * width, recv + route_place_of(&rt, e, &q) * width, (size_t)width * 8);
            }
        }
        char shape[96];
        route_text(&rt, width, shape, sizeof shape);
        ops_report(r, "ann.route_place", shape, "f64", ops_err_bytes(got, want, len, 8), 0, st);
        ops_release(&h);
    }
}

// ---------------------------------------------------------------------------------------------------
// fit

typedef struct fit_in {
    int64_t nb, S, n, k0;
    int classes;
    double *A;  // nb blocks of S rows (x, 1, z)
} fit_in;

static int fit_on(ds_ctx *c, const fit_in *in, double *W, int *failed)
{
    ops_mem m = {c};
    const ann_ops *ops = c->be->ann;
    const int64_t w = in->n + 2;
    const double *A = ops_put(&m, in->A, (size_t)(in->nb * in->S * w) * 8);
    double *Wd = ops_new(&m, (size_t)(in->nb * (in->n + 1)) * 8);
    int *fd = ops_new(&m, (size_t)in->nb * sizeof(int));
    double *scratch = ops_new(&m, (size_t)ops->fit_scratch(in->nb, in->S, in->n) * 8);
    int rc = ops_ran(c, ops->fit(c, A, in->nb, in->S, in->n, in->classes, in->k0, Wd, fd, scratch), "ann.fit");
    ops_get(&m, W, Wd, (size_t)(in->nb * (in->n + 1)) * 8);
    ops_get(&m, failed, fd, (size_t)in->nb * sizeof(int));
    ops_release(&m);
    return rc;
}

// One neuron by the normal equations (S ≥ n + 1) or the minimum-norm solution, by ops_chol_solve.
static int fit_one_ref(const double *A, int64_t S, int64_t n, const double *t, double *w)
{
    const int64_t n1 = n + 1, lda = n + 2, g = S >= n1 ? n1 : S;
    double *G = calloc((size_t)(g * g), 8), *u = calloc((size_t)(S > n1 ? S : n1), 8);
    for (int64_t i = 0; i < g; i++)
        for (int64_t j = 0; j < g; j++)
            for (int64_t k = 0; k < (S >= n1 ? S : n1); k++)
                G[i * g + j] += S >= n1 ? A[k * lda + i] * A[k * lda + j] : A[i * lda + k] * A[j * lda + k];
    for (int64_t i = 0; i < g; i++)
        for (int64_t k = 0; S >= n1 && k < S; k++)
            u[i] += A[k * lda + i] * t[k];
    if (S < n1)
        memcpy(u, t, (size_t)S * 8);
    int ok = ops_chol_solve(G, g, u, 1);
    for (int64_t j = 0; j < n1; j++) {
        double v = 0.0;
        for (int64_t k = 0; S < n1 && k < S; k++)
            v += A[k * lda + j] * u[k];
        w[j] = S >= n1 ? u[j] : v;
        ok = ok && isfinite(w[j]);
    }
    if (!ok)
        memset(w, 0, (size_t)n1 * 8);
    free(G), free(u);
    return ok;
}

static void fit_ref(const fit_in *in, double *W, int *failed)
{
    const int64_t w = in->n + 2;
    const double hi = atanh(ANN_TARGET);
    double *t = malloc((size_t)in->S * 8);
    for (int64_t i = 0; i < in->nb; i++) {
        const double *Ai = in->A + i * in->S * w;
        for (int64_t s = 0; s < in->S; s++) {
            const double z = Ai[s * w + in->n + 1];
            t[s] = in->classes ? (z == (double)((in->k0 + i) % in->classes) ? hi : -hi) : z;
        }
        failed[i] = !fit_one_ref(Ai, in->S, in->n, t, W + i * (in->n + 1));
    }
    free(t);
}

// W against max |W| (tol 1e-10: solutions of systems of condition about 10), the failed flags exact.
// Neuron 1 of every round of 3 or more has an all-zero block: its system is singular and it fails.
void case_ann_fit(ops_run *r)
{
    const int64_t cases[][4] = {  // n, S, nb, classes
        {1, 1, 1, 0}, {3, 17, 3, 0}, {17, 130, 5, 3}, {17, 9, 4, 0}, {40, 101, 2, 0}, {6, 5, 3, 2}};
    for (int c = 0; c < 6; c++) {
        ops_mem h = {NULL};
        fit_in in = {cases[c][2], cases[c][1], cases[c][0], 7, (int)cases[c][3]};
        const int64_t w = in.n + 2, wl = in.nb * (in.n + 1);
        in.A = ops_new(&h, (size_t)(in.nb * in.S * w) * 8);
        ops_fill(r, in.A, in.nb * in.S * w, -0.5, 0.5, 1);
        for (int64_t e = 0; e < in.nb * in.S; e++) {
            double *row = in.A + e * w;
            row[in.n] = 1.0;
            row[in.n + 1] = in.classes ? floor((row[in.n + 1] + 0.5) * in.classes) : 3.0 * row[in.n + 1];
            if (in.nb >= 3 && e / in.S == 1)
                memset(row, 0, (size_t)w * 8);
        }
        double *W = ops_new(&h, (size_t)wl * 8), *wW = ops_new(&h, (size_t)wl * 8);
        int *f = ops_new(&h, (size_t)in.nb * sizeof(int)), *wf = ops_new(&h, (size_t)in.nb * sizeof(int));
        int st = fit_on(r->dut, &in, W, f);
        if (r->cpu)
            st |= fit_on(r->cpu, &in, wW, wf);
        else
            fit_ref(&in, wW, wf);
        double err = ops_err_rel(W, wW, wl);
        if (ops_err_bytes(f, wf, in.nb, sizeof(int)) > 0)  // the failed flags
            err = INFINITY;
        char shape[96];
        snprintf(shape, sizeof shape, "%lld neurons, %lld rows x %lld%s%s", (long long)in.nb, (long long)in.S,
                 (long long)in.n, in.S > in.n ? "" : " (min norm)", in.nb >= 3 ? ", one singular" : "");
        if (in.classes)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), ", %d classes", in.classes);
        ops_report(r, "ann.fit", shape, "f64", err, 1e-10, st);
        ops_release(&h);
    }
}
