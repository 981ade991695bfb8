// test_backend_ops.c: every computing operation of every backend table, in the manner of ggml's
// test-backend-ops: a table of cases, one per operation (the core ops of ds_backend, then solve, ann,
// sort, logreg and bench), each run on fresh random inputs of odd shapes (1, 3, 17, 130, 1000 and more,
// jittered by the seed; some with no rows on the last rank) and on f32 and f64 where the op takes both.
// A line per run: "op  shape  dtype  err  tol  OK|FAILED" (err: the largest normalised error over the
// ranks, its scale stated with each case; exact ops compare bits and report the share that differ,
// tol 0), then "N passed, N failed"; the exit status is 1 when one failed.
//   test_backend_ops gpu [OP]: every device backend of the registry against the CPU backend (where the
//     CPU backend does not implement a path, as the native-key sort steps, against the loops here);
//     exits 77 (skipped) when no device backend has a device on every rank.
//   test_backend_ops cpu [OP]: the CPU backend against plain loops written in these files.
// OP runs only the cases whose name contains it. The seed is printed; DSOLVE_TEST_SEED replays it.
// This file holds the frame (backend_ops.h) and the table; the cases are in test_backend_ops_core.c,
// _solve.c, _solve_steps.c, _solve_blocks.c, _solve_coarse.c, _qr.c, _ann.c, _ann_output.c, _sort.c,
// _sort_runs.c, _logreg.c, _logreg_steps.c and _bench.c.
#include <string.h>

#include "backend_ops.h"
#include "core/rng.h"
#include "harness.h"

// ---------------------------------------------------------------------------------------------------
// Inputs

uint64_t ops_stream(ops_run *r)
{
    return r->stream++;
}

double ops_uniform(const ops_run *r, uint64_t s, int who, int64_t i)
{
    return rng_uniform(r->seed, s * 4099 + (uint64_t)(who + 1), (uint64_t)i);
}

uint64_t ops_bits(const ops_run *r, uint64_t s, int who, int64_t i)
{
    return rng_bits(r->seed, s * 4099 + (uint64_t)(who + 1), (uint64_t)i);
}

void ops_fill(ops_run *r, double *v, int64_t n, double lo, double hi, int mine)
{
    const uint64_t s = ops_stream(r);
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * ops_uniform(r, s, mine ? r->rank : OPS_SHARED, i);
}

int64_t ops_dim(ops_run *r, int64_t base)
{
    const uint64_t s = ops_stream(r);
    return base + (int64_t)(ops_uniform(r, s, OPS_SHARED, 0) * (double)(base / 4 + 1));
}

int64_t ops_rows(const ops_run *r, int64_t m, int empty)
{
    return empty && r->rank == r->nranks - 1 ? 0 : m + r->rank;
}

const char *ops_dtype_name(int f32)
{
    return f32 ? "f32" : "f64";
}

void ops_shape_n(char *buf, size_t len, int64_t n, const char *extra)
{
    snprintf(buf, len, "n %lld%s", (long long)n, extra);
}

// ---------------------------------------------------------------------------------------------------
// Memory

static void ops_die(const ds_ctx *c, const char *what, size_t bytes)
{
    fprintf(stderr, "test_backend_ops: %s of %zu bytes on %s failed: %s\n", what, bytes, c ? c->be->name : "the host",
            c ? c->msg.text : "out of memory");
    MPI_Abort(MPI_COMM_WORLD, 1);
}

void *ops_new(ops_mem *m, size_t bytes)
{
    void *p = NULL;
    if (m->n == OPS_MEM_MAX)
        ops_die(m->c, "an allocation past OPS_MEM_MAX", bytes);
    if (!m->c)
        p = calloc(bytes > 8 ? bytes : 8, 1);
    else if (m->c->be->alloc(m->c, &p, bytes > 8 ? bytes : 8) != DS_OK)
        p = NULL;
    if (!p)
        ops_die(m->c, "alloc", bytes);
    m->p[m->n++] = p;
    return p;
}

void *ops_put(ops_mem *m, const void *host, size_t bytes)
{
    void *p = ops_new(m, bytes);
    if (bytes && !m->c)
        memcpy(p, host, bytes);
    else if (bytes && m->c->be->upload(m->c, p, host, bytes) != DS_OK)
        ops_die(m->c, "upload", bytes);
    return p;
}

void ops_upload(ds_ctx *c, void *dst, const void *host, size_t bytes)
{
    if (bytes && c->be->upload(c, dst, host, bytes) != DS_OK)
        ops_die(c, "upload", bytes);
}

void ops_get(ops_mem *m, void *host, const void *src, size_t bytes)
{
    if (bytes && !m->c)
        memcpy(host, src, bytes);
    else if (bytes && m->c->be->download(m->c, host, src, bytes) != DS_OK)
        ops_die(m->c, "download", bytes);
}

void ops_release(ops_mem *m)
{
    for (int i = m->n - 1; i >= 0; i--) {
        if (m->c)
            m->c->be->free(m->c, m->p[i]);
        else
            free(m->p[i]);
    }
    m->n = 0;
}

void ops_arr_make(ops_run *r, ops_mem *host, int64_t n, int f32, double lo, double hi, int mine, ops_arr *a)
{
    a->n = n;
    a->f32 = f32;
    a->d = ops_new(host, (size_t)n * sizeof(double));
    a->raw = f32 ? ops_new(host, (size_t)n * sizeof(float)) : a->d;
    ops_fill(r, a->d, n, lo, hi, mine);
    for (int64_t i = 0; f32 && i < n; i++) {
        ((float *)a->raw)[i] = (float)a->d[i];
        a->d[i] = ((float *)a->raw)[i];
    }
}

size_t ops_arr_bytes(const ops_arr *a)
{
    return (size_t)a->n * (a->f32 ? sizeof(float) : sizeof(double));
}

// ---------------------------------------------------------------------------------------------------
// Errors and verdicts

int ops_ran(ds_ctx *c, int rc, const char *op)
{
    if (rc != DS_OK) {
        fprintf(stderr, "rank %d: %s on %s: %s\n", c->rank, op, c->be->name, c->msg.text);
        c->msg.text[0] = '\0';  // so that the next failure shows its own message
    }
    return rc;
}

// The error of one entry: 0 when equal (infinities and NaNs included), else |got − want|, infinite
// where one side is NaN.
static double entry_err(double got, double want)
{
    if (got == want || (isnan(got) && isnan(want)))
        return 0.0;
    const double d = fabs(got - want);
    return isnan(d) ? INFINITY : d;
}

// The worst entry of the errors computed since the last verdict, which a FAILED line shows (stderr).
static struct {
    double err;
    char text[200];
} worst_;

static void note_worst(double e, int64_t i, int64_t j, double got, double want, double scale)
{
    if (!(e > worst_.err))
        return;
    worst_.err = e;
    char at[48];
    snprintf(at, sizeof at, j < 0 ? "%lld" : "(%lld, %lld)", (long long)i, (long long)j);
    snprintf(worst_.text, sizeof worst_.text, "worst at %s: got %.17g, want %.17g, scale %.3g", at, got, want, scale);
}

double ops_err(const double *got, const double *want, int64_t n, double scale)
{
    double e = 0.0;
    scale = scale > 0 ? scale : 1.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = entry_err(got[i], want[i]) / scale;
        note_worst(d, i, -1, got[i], want[i], scale);
        e = fmax(e, d);
    }
    return e;
}

double ops_err_rel(const double *got, const double *want, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s = fmax(s, fabs(want[i]));
    return ops_err(got, want, n, s);
}

double ops_err_each(const double *got, const double *want, const double *scale, int64_t n)
{
    double e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = entry_err(got[i], want[i]);
        if (d > 0) {
            const double di = scale[i] > 0 ? d / scale[i] : INFINITY;
            note_worst(di, i, -1, got[i], want[i], scale[i]);
            e = fmax(e, di);
        }
    }
    return e;
}

double ops_err_gram(const double *got, const double *want, int64_t n, int64_t ld)
{
    double e = 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            const double d = entry_err(got[i * ld + j], want[i * ld + j]);
            const double s = sqrt(fabs(want[i * ld + i]) * fabs(want[j * ld + j]));
            if (d > 0) {
                const double dij = s > 0 ? d / s : INFINITY;
                note_worst(dij, i, j, got[i * ld + j], want[i * ld + j], s);
                e = fmax(e, dij);
            }
        }
    return e;
}

double ops_err_bytes(const void *got, const void *want, int64_t n, int size)
{
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * size, (const char *)want + i * size, (size_t)size) != 0)
            first = first < 0 ? i : first, bad++;
    const double e = n > 0 ? (double)bad / (double)n : 0.0;
    if (bad > 0 && e > worst_.err) {
        uint64_t g = 0, w = 0;
        memcpy(&g, (const char *)got + first * size, (size_t)(size < 8 ? size : 8));
        memcpy(&w, (const char *)want + first * size, (size_t)(size < 8 ? size : 8));
        worst_.err = e;
        snprintf(worst_.text, sizeof worst_.text, "%lld of %lld differ, the first at %lld: got 0x%llx, want 0x%llx",
                 (long long)bad, (long long)n, (long long)first, (unsigned long long)g, (unsigned long long)w);
    }
    return e;
}

void ops_report(ops_run *r, const char *op, const char *shape, const char *dtype, double err, double tol, int status)
{
    double in[2] = {isnan(err) ? INFINITY : err, status != DS_OK}, out[2];
    MPI_Allreduce(in, out, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const int ok = out[1] == 0 && out[0] <= tol;
    if (ok)
        r->passed++;
    else
        r->failed++;
    if (r->rank == 0) {
        printf("%-26s %-52s %-7s %9.2e %8.1e  %s%s\n", op, shape, dtype, out[0], tol, ok ? "OK" : "FAILED",
               out[1] != 0 ? " (the op failed)" : "");
        fflush(stdout);
    }
    if (!ok && in[0] > tol && worst_.text[0])
        fprintf(stderr, "  rank %d: %s %s: %s\n", r->rank, op, shape, worst_.text);
    worst_.err = 0.0;
    worst_.text[0] = '\0';
}

void ops_skip(ops_run *r, const char *op, const char *why)
{
    r->skipped++;
    if (r->rank == 0)
        printf("%-26s skipped: %s\n", op, why);
}

int ops_chol_factor(double *G, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {  // G = L·Lᵀ, L in the lower triangle
        double d = G[j * n + j];
        for (int64_t k = 0; k < j; k++)
            d -= G[j * n + k] * G[j * n + k];
        if (!(d > 0))
            return (int)j + 1;
        G[j * n + j] = sqrt(d);
        for (int64_t i = j + 1; i < n; i++) {
            double v = G[i * n + j];
            for (int64_t k = 0; k < j; k++)
                v -= G[i * n + k] * G[j * n + k];
            G[i * n + j] = v / G[j * n + j];
        }
    }
    return 0;
}

int ops_chol_solve(double *G, int64_t n, double *b, int64_t nrhs)
{
    if (ops_chol_factor(G, n) != 0)
        return 0;
    for (int64_t c = 0; c < nrhs; c++) {
        for (int64_t i = 0; i < n; i++) {  // L·z = b
            double v = b[i * nrhs + c];
            for (int64_t k = 0; k < i; k++)
                v -= G[i * n + k] * b[k * nrhs + c];
            b[i * nrhs + c] = v / G[i * n + i];
        }
        for (int64_t i = n - 1; i >= 0; i--) {  // Lᵀ·x = z
            double v = b[i * nrhs + c];
            for (int64_t k = i + 1; k < n; k++)
                v -= G[k * n + i] * b[k * nrhs + c];
            b[i * nrhs + c] = v / G[i * n + i];
        }
    }
    return 1;
}

void ops_abs_product(const double *A, int64_t lda, const double *B, int64_t ldb, int64_t m, int64_t n, int64_t k,
                     double *S)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t l = 0; l < k; l++)
                s += fabs(A[i * lda + l]) * fabs(B[l * ldb + j]);
            S[i * n + j] = s;
        }
}

// ---------------------------------------------------------------------------------------------------
// The table and the run

typedef struct ops_case {
    const char *op;  // what the OP argument matches
    void (*run)(ops_run *r);
} ops_case;

static const ops_case cases[] = {
    {"fill", case_fill},
    {"gather", case_gather},
    {"copy", case_copy},
    {"alloc", case_alloc},
    {"axpy", case_axpy},
    {"stage", case_stage},
    {"stage_2d", case_stage_2d},
    {"allreduce_sum", case_allreduce_sum},
    {"alltoallv", case_alltoallv},
    {"solve.block_grams", case_solve_block_grams},
    {"solve.grad_update", case_solve_grad_update},
    {"solve.block_step", case_solve_block_step},
    {"solve.gram", case_solve_gram},
    {"solve.gram_single", case_solve_gram_single},
    {"solve.gram_sweeps", case_solve_gram_sweeps},
    {"solve.chol_factor", case_solve_chol_factor},
    {"solve.chol_solve", case_solve_chol_solve},
    {"solve.block_pinv", case_solve_block_pinv},
    {"solve.block_sums", case_solve_block_sums},
    {"solve.coarse_products", case_solve_coarse_products},
    {"solve.coarse_step", case_solve_coarse_step},
    {"solve.block_step block solve", case_solve_block_solve_step},
    {"solve.gram_sweeps block solve", case_solve_gram_sweeps_bs},
    {"qr.local_r", case_qr_local_r},
    {"qr.stack_r", case_qr_stack_r},
    {"qr.solve", case_qr_solve},
    {"qr.col_norms", case_qr_col_norms},
    {"ann.gather_fit_rows", case_ann_gather_fit_rows},
    {"ann.route_requests", case_ann_route_requests},
    {"ann.route_place", case_ann_route_place},
    {"ann.fit", case_ann_fit},
    {"ann.forward", case_ann_forward},
    {"ann.gram_digits", case_ann_gram_digits},
    {"ann.output", case_ann_output},
    {"ann.solve", case_ann_solve},
    {"sort.map", case_sort_map},
    {"sort.special", case_sort_special},
    {"sort.radix", case_sort_radix},
    {"sort.iota", case_sort_iota},
    {"sort.gather", case_sort_gather},
    {"sort.fetch", case_sort_fetch},
    {"sort.sample", case_sort_sample},
    {"sort.bounds", case_sort_bounds},
    {"sort.merge", case_sort_merge},
    {"sort.check", case_sort_check},
    {"logreg.pass", case_lr_pass},
    {"logreg.finish", case_lr_finish},
    {"logreg.gd", case_lr_gd},
    {"logreg.nesterov", case_lr_nesterov},
    {"logreg.lbfgs_dir", case_lr_lbfgs_dir},
    {"logreg.axpy", case_lr_axpy},
    {"logreg.lbfgs_accept", case_lr_lbfgs_accept},
    {"bench.gemm", case_bench_gemm},
    {"bench.add", case_bench_add},
    {"bench.bcast", case_bench_bcast},
};

// The cases whose name holds filter (all when NULL) on r's backends. Returns the seconds taken.
static double run_cases(ops_run *r, const char *filter)
{
    const double t0 = MPI_Wtime();
    if (r->rank == 0) {
        printf("# %s (%s) against %s, %d ranks\n", r->dut->be->name, r->dut->device_name,
               r->cpu ? "the cpu backend" : "the loops of test_backend_ops", r->nranks);
        printf("# %-24s %-52s %-7s %9s %8s  %s\n", "op", "shape", "type", "err", "tol", "verdict");
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!filter || strstr(cases[i].op, filter))
            cases[i].run(r);
    return MPI_Wtime() - t0;
}

// Every device backend that has a device on every rank, against cpu. Returns how many ran.
static int run_gpu(ops_run *base, ds_ctx *cpu, const char *filter)
{
    int ran = 0;
    for (int i = 0; i < ds_nbackends; i++) {
        const ds_backend *be = ds_backends[i];
        if (!be->device_count)
            continue;
        if (!test_devices_for_all(be)) {
            if (base->rank == 0)
                printf("# %s: skipped: not every rank has a device of its own\n", be->name);
            continue;
        }
        ds_ctx dut;
        int rc = ctx_open(&dut, MPI_COMM_WORLD, be->name);
        CHECK(rc == DS_OK, "%s context: %s", be->name, dut.msg.text);
        if (rc == DS_OK) {
            base->dut = &dut;
            base->cpu = cpu;
            const double s = run_cases(base, filter);
            if (base->rank == 0)
                printf("# %s: %.1f s\n", be->name, s);
            ran++;
        }
        ctx_close(&dut);
    }
    return ran;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    ops_run r = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.nranks);
    const char *mode = argc > 1 ? argv[1] : "cpu", *filter = argc > 2 ? argv[2] : NULL;
    if (strcmp(mode, "cpu") != 0 && strcmp(mode, "gpu") != 0) {
        if (r.rank == 0)
            fprintf(stderr, "usage: test_backend_ops cpu|gpu [OP]\n");
        MPI_Finalize();
        return 2;
    }
    const int gpu = strcmp(mode, "gpu") == 0;
    const char *name = gpu ? "test_backend_ops gpu" : "test_backend_ops cpu";
    ds_ctx cpu;
    int rc = test_open_pair(name, &cpu, NULL);
    r.seed = test_seed(name);
    int ran = 0;
    if (rc == 0 && gpu) {
        ran = run_gpu(&r, &cpu, filter);
    } else if (rc == 0) {
        r.dut = &cpu;
        const double s = run_cases(&r, filter);
        if (r.rank == 0)
            printf("# cpu: %.1f s\n", s);
        ran = 1;
    }
    ctx_close(&cpu);
    int status = 77;
    if (ran || rc != 0) {
        int bad = test_failures_;
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (r.rank == 0)
            printf("%s: %d passed, %d failed (%d skipped)\n", name, r.passed, r.failed + bad, r.skipped);
        status = r.failed + bad > 0 || r.passed == 0 ? 1 : 0;
    } else if (r.rank == 0) {
        printf("%s: skipped: no device backend has a device on every rank\n", name);
    }
    MPI_Finalize();
    return status;
}
