// bench.h: `dsolve bench`'s framework: the run (both backends open side by side), the case table's
// entry type, a row of results, and the helpers every case uses: sizes, memory checks, timing,
// input generation, result checks, the peer and the output (table, CSV, JSON, SVG).
// A case is one `bench_case` (bench_cases.c has matmul and add; bench_solve.c, bench_ann.c, bench_sort.c
// and bench_logreg.c one each); adding one is one entry in
// bench.c's table plus its declaration at the end of this file.
// provides: bench_ops, bench_run, bench_row, bench_case, bench_fn,
//           bench_time, bench_agree, bench_host_alloc, bench_fill, bench_parallel, bench_compare,
//           bench_repeat_plan, bench_peer, bench_parse_sizes, bench_rel_diff, bench_out_*
#ifndef DS_BENCH_H
#define DS_BENCH_H

#include <stdint.h>
#include <stdio.h>

#include "core/ctx.h"
#include "core/par.h"
#include "core/repeat.h"
#include "cli/opts.h"
#include "core/sysinfo.h"

// The operations a case times on either backend, on backend memory, queued on the backend's queue.
typedef struct bench_ops {
    // C (m × n) = A (m × k) · B (k × n), row-major, float when f32 else double.
    int (*gemm)(ds_ctx *ctx, int f32, int64_t m, int64_t n, int64_t k, const void *A, const void *B, void *C);
    // c = a + b over n elements.
    int (*add)(ds_ctx *ctx, int f32, int64_t n, const void *a, const void *b, void *c);
    // bytes from root's buf to every rank's buf (NCCL on CUDA, MPI on the CPU). Queued.
    int (*bcast)(ds_ctx *ctx, void *buf, size_t bytes, int root);
    // The references a device backend is measured against (NULL on the host backend): the seconds per
    // call of `reps` back-to-back GEMMs of the vendor library alone, and of `reps` device-to-device copies
    // of bytes (the copy ceiling), timed by the backend's marks 4 and 5.
    int (*gemm_alone)(ds_ctx *ctx, int f32, int64_t m, int64_t n, int64_t k, const void *A, const void *B, void *C,
                      int reps, double *seconds);
    int (*copy_alone)(ds_ctx *ctx, void *dst, const void *src, size_t bytes, int reps, double *seconds);
} bench_ops;

#define BENCH_MAX_SIZES 64

typedef struct bench_run {
    ds_args args;
    ds_ctx cpu;         // always open
    ds_ctx gpu;         // open when have_gpu
    int have_gpu;
    char gpu_note[256];  // why the run is CPU only ("" when a GPU runs)
    int f32, repeat, warmup, include_transfer, weak, corrupt, threads;
    double cpu_budget;  // seconds per call above which the CPU is not timed when a GPU runs
    const char *peer;   // the peer script, or NULL
    double cpu_rate_seen;  // the case's last measured CPU rate (work per second), 0 before one
    sys_nvml_gpu nvml;  // this rank's GPU for the sampler, or NULL
    int variant;        // the case's variant being run (bench_case.variant)
} bench_run;

typedef struct bench_row {
    int64_t size;         // the swept number (N, elements, rows)
    char shape[64];       // e.g. "2000x40000x2000", per rank for weak scaling
    double work;          // floating-point operations or bytes per call, all ranks together
    double cpu_s, gpu_s;  // medians (seconds), NaN when not run
    double ref_s, ref_rate;  // the GPU reference (cuBLAS alone, device copy) and its rate in the case's unit
    double bcast_s;       // distributing the replicated input (B of matmul), NaN when none
    double peer_s;        // the peer's time from the same run, NaN when not run
    double err, tol;      // normalised max error and its tolerance
    int64_t wrong;        // elements beyond tol (summed over ranks)
    char check[96];       // what was compared ("cuda vs cpu, all", "cpu vs loop, 8 rows")
    // filled by the framework:
    double cpu_rate, gpu_rate, speedup, of_ref, peer_ratio;
    double rss_peak, gpu_mem_peak, cpu_use, gpu_use, wall_s;  // bytes, bytes, %, %, seconds
} bench_row;

typedef struct bench_case {
    const char *name, *about;
    const char *unit;           // of the rates: "GFLOP/s" or "GB/s"
    const char *size_label;     // "N", "elements", "rows"
    const char *default_sizes;  // in --sizes syntax
    const char *ref_label;      // what ref_s measures ("" when the case has none)
    const char *dtype;          // the element type when the case fixes it, NULL when --dtype sets it
    const char *timing;         // how the GPU side is timed when not by device events around the call (NULL: by them)
    // Bytes of host and device memory per rank that one size needs; DS_ERR_INPUT with a message for
    // a size the case cannot run (e.g. fewer rows than ranks). Not collective.
    int (*need)(bench_run *b, int64_t size, double *host_bytes, double *dev_bytes, ds_msg *msg);
    // Runs one size and fills the row's case fields. Collective over both contexts.
    int (*run)(bench_run *b, int64_t size, bench_row *row);
    // NULL (one variant), or the name of the case's variant v (0, 1, ...) for this run, NULL past the last:
    // each size then gives a row per variant, run with b->variant set (solve: one per --method).
    const char *(*variant)(const bench_run *b, int v);
    // NULL, or whether the case can run here at all (its data present); 0 with why filled: `all` skips
    // the case with a note, and need() reports the same to a run that names it. Not collective.
    int (*available)(const bench_run *b, char *why, size_t len);
} bench_case;

// ---------------------------------------------------------------------------------------------------
// Helpers (bench.c)

// One call of the timed operation on ctx's backend.
typedef int (*bench_fn)(ds_ctx *ctx, void *arg);

// The repeats of a case's timed operation (core/repeat.h): --warmup untimed calls (none when reps is
// 0), reps timed ones, one time per call and the slowest rank's, the ranks agreeing after every call
// by bench_agree.
repeat_plan bench_repeat_plan(bench_run *b, int reps);

// bench_repeat_plan(b, --repeat) with each call timed between marks 0 and 1 of ctx's backend (device
// events on CUDA). The median goes to *median. Collective.
int bench_time(bench_run *b, ds_ctx *ctx, bench_fn fn, void *arg, double *median);

// ctx_agree over the run: a failure on ctx (either backend) is agreed on by every rank, and its
// message lands in both contexts. Collective.
int bench_agree(bench_run *b, ds_ctx *ctx, int status);

// Whether to time the CPU on a call of `work` units: always without a GPU; with one, when the call is
// predicted (from the case's last measured CPU rate, else from guess_rate per second) to take at most
// --cpu-budget seconds. Depends on global figures only, so every rank decides alike.
int bench_cpu_wanted(const bench_run *b, double work, double guess_rate);

// malloc with a message naming the size on failure.
int bench_host_alloc(bench_run *b, void **ptr, double bytes);

// x[i] = uniform in [−½, ½) for i < n, the value of global index offset + i of stream (so inputs do
// not depend on the rank count). Spread over the run's threads.
void bench_fill(bench_run *b, void *x, int64_t n, int f32, uint64_t stream, int64_t offset);

// par_for (core/par.h) with parts of at least 2^16 elements: fn(arg, part, lo, hi) for parts 0 .. P−1
// covering [0, n), P ≤ min(threads, PAR_MAX_THREADS). Returns P.
int bench_parallel(int threads, int64_t n, par_fn fn, void *arg);

// max |got − want| / scale over n elements, and how many exceed tol · scale (NaN counts).
void bench_compare(const void *got, const void *want, int64_t n, int f32, double scale, double tol, double *err,
                   int64_t *wrong);

// Rank 0 runs `python3 PEER ARGS` (when --peer was given) and reads "seconds" from its last JSON
// line; NaN, with a note on stderr, when the peer could not run. Not collective.
double bench_peer(bench_run *b, const char *args);
// The same with another script of the peer's folder (e.g. "torch_peers.py" beside seed_peers.py), reading
// the last JSON line that contains match (any when NULL); NaN, with a note, when there is no such script.
double bench_peer_other(bench_run *b, const char *script, const char *args, const char *match);

// ‖x − y‖₂ / ‖y‖₂ over n elements (‖x − y‖₂ when y is 0); sums over the ranks of comm when comm is not
// MPI_COMM_NULL (then collective).
double bench_rel_diff(const double *x, const double *y, int64_t n, MPI_Comm comm);

// "10,100,1e3:1e9:x10,5:20:+5" into sizes (ascending order as given); DS_ERR_USAGE on bad syntax.
int bench_parse_sizes(const char *text, int64_t *sizes, int *count, ds_msg *msg);

// ---------------------------------------------------------------------------------------------------
// Output (bench_out.c). A case's results: its rows and the verdict.

typedef struct bench_result {
    const bench_case *c;
    bench_row *rows;
    int nrows;
    double crossover;  // smallest size from which the GPU is faster, NaN when never or not measured
    int failed;        // rows whose check failed
} bench_result;

// The element type of case c's rows: its own, else --dtype's.
const char *bench_dtype(const bench_run *b, const bench_case *c);
void bench_out_header(const bench_run *b, const bench_case *c, FILE *f);
void bench_out_row(const bench_run *b, const bench_case *c, const bench_row *r, FILE *f);
void bench_out_footer(const bench_run *b, const bench_result *res, FILE *f);
void bench_out_csv(const bench_run *b, const bench_result *res, int nres, FILE *f);
void bench_out_json(const bench_run *b, const bench_result *res, int nres, FILE *f);
double bench_crossover(const bench_row *rows, int n);
// path, or path with "-CASE" before its extension when several cases share one --plot.
int bench_out_svg(const bench_run *b, const bench_result *res, const char *path, int several, ds_msg *msg);

// The cases.
extern const bench_case bench_case_matmul, bench_case_add, bench_case_solve, bench_case_ann, bench_case_sort,
    bench_case_logreg;

#endif
