// backend_ops.h: the frame of test_backend_ops (test_backend_ops.c), shared by its case files
// (test_backend_ops_*.c): the run, random inputs, buffers in backend or host memory, errors and the
// verdict line, the sort cases' keys and logreg's open, and the cases (a function per operation).
// provides: ops_run, ops_mem, ops_arr, OPS_U64, ops_unit, ops_dtype_name, ops_shape_n, ops_stream,
//           ops_uniform, ops_bits, ops_fill, ops_dim, ops_rows,
//           ops_new, ops_put, ops_upload, ops_get, ops_release, ops_arr_make, ops_arr_bytes, ops_ran, ops_err,
//           ops_err_rel, ops_err_each, ops_err_gram, ops_err_bytes, ops_report, ops_skip, ops_chol_factor, ops_chol_solve,
//           ops_abs_product, ops_kind, ops_key_get, ops_key_set, ops_order_key, ops_kind_name, ops_kinds,
//           ops_kind_reference, ops_keys_make, ops_keys_sort, ops_sort_plan, ops_lr_open, the case functions
#ifndef DS_TEST_BACKEND_OPS_H
#define DS_TEST_BACKEND_OPS_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ctx.h"

// One mode's run over one backend under test.
typedef struct ops_run {
    ds_ctx *dut;  // the backend under test
    ds_ctx *cpu;  // gpu mode: the CPU backend, the reference; cpu mode: NULL (the loops here are)
    uint64_t seed, stream;  // inputs: value i of stream s is a function of (seed, s, i, rank or shared)
    int rank, nranks;
    int passed, failed, skipped;
} ops_run;

// Allocations of one case on one side, released together: backend memory of c, or host memory (c NULL).
enum { OPS_MEM_MAX = 40 };
typedef struct ops_mem {
    ds_ctx *c;
    int n;
    void *p[OPS_MEM_MAX];
} ops_mem;

// n values as a backend takes them (float when f32, else double) and as doubles (the same values).
typedef struct ops_arr {
    int64_t n;
    int f32;
    double *d;  // host
    void *raw;  // host, float or double
} ops_arr;

// ---------------------------------------------------------------------------------------------------
// Inputs. Every rank draws the same streams in the same order (so ranks stay in step); a stream's
// values are shared by the ranks or, with mine, the rank's own.

enum { OPS_SHARED = -1 };
uint64_t ops_stream(ops_run *r);
// Value i of stream s in [0, 1) for rank who (OPS_SHARED: the same on every rank).
double ops_uniform(const ops_run *r, uint64_t s, int who, int64_t i);
uint64_t ops_bits(const ops_run *r, uint64_t s, int who, int64_t i);
// v[i] uniform in [lo, hi) from a fresh stream, the rank's own when mine.
void ops_fill(ops_run *r, double *v, int64_t n, double lo, double hi, int mine);
// The unit roundoff of double, and of float (f32) or double; the type's name in the lines.
#define OPS_U64 (DBL_EPSILON / 2)
static inline double ops_unit(int f32)
{
    return f32 ? FLT_EPSILON / 2 : DBL_EPSILON / 2;
}
const char *ops_dtype_name(int f32);
// "n N" and extra, the shape of a case over n elements.
void ops_shape_n(char *buf, size_t len, int64_t n, const char *extra);
// base, or up to a quarter more (drawn from the seed, the same on every rank).
int64_t ops_dim(ops_run *r, int64_t base);
// This rank's rows of a row-distributed shape: m + rank, or 0 on the last rank when empty.
int64_t ops_rows(const ops_run *r, int64_t m, int empty);

// ---------------------------------------------------------------------------------------------------
// Memory. Failures of alloc, upload and download end the run (MPI_Abort): they are not the ops' own.

void *ops_new(ops_mem *m, size_t bytes);  // zeroed in host memory; at least 8 bytes
void *ops_put(ops_mem *m, const void *host, size_t bytes);
void ops_upload(ds_ctx *c, void *dst, const void *host, size_t bytes);  // into memory c owns elsewhere
void ops_get(ops_mem *m, void *host, const void *src, size_t bytes);
void ops_release(ops_mem *m);
void ops_arr_make(ops_run *r, ops_mem *host, int64_t n, int f32, double lo, double hi, int mine, ops_arr *a);
size_t ops_arr_bytes(const ops_arr *a);

// ---------------------------------------------------------------------------------------------------
// Errors and verdicts

// rc, after printing ctx's message with the rank and op when it is a failure.
int ops_ran(ds_ctx *c, int rc, const char *op);
// max |got − want| / scale (scale ≤ 0 counts as 1); a NaN where want has none is an infinite error.
double ops_err(const double *got, const double *want, int64_t n, double scale);
// ops_err with scale max |want|.
double ops_err_rel(const double *got, const double *want, int64_t n);
// max |got_i − want_i| / scale_i (scale_i ≤ 0: |got_i − want_i| must be 0).
double ops_err_each(const double *got, const double *want, const double *scale, int64_t n);
// For a Gram matrix (n × n, leading dimension ld): |got_ij − want_ij| / √(want_ii·want_jj), the bound
// of a sum of products by Cauchy–Schwarz.
double ops_err_gram(const double *got, const double *want, int64_t n, int64_t ld);
// The share of n elements of size bytes that differ (exact ops; 0 for n = 0).
double ops_err_bytes(const void *got, const void *want, int64_t n, int size);
// Collective: the case's line, "op shape dtype err tol OK|FAILED", with the largest err over the ranks;
// FAILED when it exceeds tol or some rank's status is not DS_OK.
void ops_report(ops_run *r, const char *op, const char *shape, const char *dtype, double err, double tol, int status);
// A line saying why op is not run in this mode.
void ops_skip(ops_run *r, const char *op, const char *why);

// Reference helpers: G = L·Lᵀ in place (G n × n row-major, L in the lower triangle); returns info as
// LAPACK's: 0, or j when the pivot of column j − 1 is not positive.
int ops_chol_factor(double *G, int64_t n);
// Solves G·x = b for nrhs right-hand sides (G n × n row-major SPD, overwritten by
// its Cholesky factor; b n × nrhs row-major, overwritten by x); 0 when a pivot is not positive.
int ops_chol_solve(double *G, int64_t n, double *b, int64_t nrhs);
// S (m × n) = |A|·|B| for A m × k (lda) and B k × n (ldb), row-major: the scale of each entry of A·B.
void ops_abs_product(const double *A, int64_t lda, const double *B, int64_t ldb, int64_t m, int64_t n, int64_t k,
                     double *S);

// ---------------------------------------------------------------------------------------------------
// Sort keys (test_backend_ops_sort.c), for the sort cases.

// A key kind: mapped keys of width w (dtype −1), or native keys of dtype sorted in direction desc.
typedef struct ops_kind {
    int w, dtype, desc;
} ops_kind;

struct sort_plan;
enum { OPS_SORT_NSIZES = 5, OPS_MAX_KINDS = 8 };
extern const int64_t ops_sort_sizes[OPS_SORT_NSIZES];  // key counts of the sort cases: 0, 1, 17, 1001, 130001
uint64_t ops_key_get(const void *k, int w, int64_t i);
void ops_key_set(void *k, int w, int64_t i, uint64_t v);
// The order key of entry i: sk_map of a native key of dtype (desc), or a mapped key itself (dtype < 0).
uint64_t ops_order_key(const void *k, int w, int dtype, int desc, int64_t i);
const char *ops_kind_name(const ops_kind *k);
// The kinds a case runs (at most OPS_MAX_KINDS): mapped of both widths, and where the backend under
// test takes them native keys of every type (both directions).
int ops_kinds(const ops_run *r, ops_kind *out);
// The reference for a kind: the CPU backend for mapped keys in gpu mode, else NULL (the loops).
ds_ctx *ops_kind_reference(const ops_run *r, const ops_kind *k);
// n keys of kind k: random bits, or with few a handful of values (ties); native floats are finite
// multiples of ½ with ±inf, +0.0 and a positive NaN among them.
void ops_keys_make(ops_run *r, void *keys, int64_t n, const ops_kind *k, int few);
// Stable sort of keys (and vals when given) by order key: the reference.
void ops_keys_sort(void *keys, int64_t *vals, int64_t n, const ops_kind *k);
// A plan of kind k over n keys of backend memory (buffers and scratch for the steps).
int ops_sort_plan(ds_ctx *c, const ops_kind *k, const void *keys, int64_t n, struct sort_plan *p);

// logreg (test_backend_ops_logreg.c): lr_ops's open with a work of rows_max rows (1 for the vector steps).
struct lr_work;
int ops_lr_open(ds_ctx *c, struct lr_work *w, int64_t rows_max, int64_t cols, int64_t K, int model, int f32);

// ---------------------------------------------------------------------------------------------------
// The cases: one per operation, each over its shapes and types.

void case_fill(ops_run *r);
void case_gather(ops_run *r);
void case_copy(ops_run *r);
void case_alloc(ops_run *r);
void case_axpy(ops_run *r);
void case_stage(ops_run *r);
void case_stage_2d(ops_run *r);
void case_allreduce_sum(ops_run *r);
void case_alltoallv(ops_run *r);

void case_solve_block_grams(ops_run *r);
void case_solve_grad_update(ops_run *r);
void case_solve_block_step(ops_run *r);
void case_solve_gram(ops_run *r);
void case_solve_gram_single(ops_run *r);
void case_solve_gram_sweeps(ops_run *r);
void case_solve_chol_factor(ops_run *r);
void case_solve_chol_solve(ops_run *r);
void case_solve_block_pinv(ops_run *r);
void case_solve_block_sums(ops_run *r);
void case_solve_coarse_products(ops_run *r);
void case_solve_coarse_step(ops_run *r);
void case_solve_block_solve_step(ops_run *r);
void case_solve_gram_sweeps_bs(ops_run *r);

void case_qr_local_r(ops_run *r);
void case_qr_stack_r(ops_run *r);
void case_qr_solve(ops_run *r);
void case_qr_col_norms(ops_run *r);

void case_ann_gather_fit_rows(ops_run *r);
void case_ann_route_requests(ops_run *r);
void case_ann_route_place(ops_run *r);
void case_ann_fit(ops_run *r);
void case_ann_forward(ops_run *r);
void case_ann_gram_digits(ops_run *r);
void case_ann_output(ops_run *r);
void case_ann_solve(ops_run *r);

void case_sort_map(ops_run *r);
void case_sort_special(ops_run *r);
void case_sort_radix(ops_run *r);
void case_sort_iota(ops_run *r);
void case_sort_gather(ops_run *r);
void case_sort_fetch(ops_run *r);
void case_sort_sample(ops_run *r);
void case_sort_bounds(ops_run *r);
void case_sort_merge(ops_run *r);
void case_sort_check(ops_run *r);

void case_lr_pass(ops_run *r);
void case_lr_finish(ops_run *r);
void case_lr_gd(ops_run *r);
void case_lr_nesterov(ops_run *r);
void case_lr_lbfgs_dir(ops_run *r);
void case_lr_axpy(ops_run *r);
void case_lr_lbfgs_accept(ops_run *r);

void case_bench_gemm(ops_run *r);
void case_bench_add(ops_run *r);
void case_bench_bcast(ops_run *r);

#endif
