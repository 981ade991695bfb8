// solvebak.h: SolveBak (arXiv 2104.12570), least squares X·a ≈ y by coordinate descent, distributed by
// row blocks. Two routes give the same iterates in exact arithmetic:
//   residual: per column block b, g = X_bᵀe reduced over ranks in one allreduce (with ‖e‖² folded in),
//             da = g / diag(X_bᵀX_b), an exact line search along q = X_b·da using the precomputed
//             block Gram (no second reduction), then e −= alpha·X_b·da on each rank;
//   gram:     G = XᵀX and c = Xᵀy in one pass over X and one allreduce, then the same sweeps on the
//             n × n system, on the device, replicated on every rank.
// And the direct method on the same system, cholesky: columns equilibrated (s_j = 1/‖X_j‖), the Cholesky
// factor of S·G·S and one solve, then one step of iterative refinement from the certificate pass, kept
// when it lowers the normal residual. A G that is not positive definite is exit 4. Where the backend
// offers it, G is summed in a lower precision instead (the CPU: single, twice the rate; CUDA: FP16 on the
// tensor cores, columns scaled by powers of two) and the refinement repeated until the steps reach
// double's rounding (LAPACK dsposv's scheme, in passes over X); when X leaves that precision's range,
// looks too ill-conditioned for it, or the steps do not shrink fast, G is formed again in double
// (solve_direct.c).
// provides: sb_opts, sb_result, solvebak_run, solvebak_run_rows, solvebak_stream_plan, solvebak_result_free,
//           SB_METHOD_*, SB_STREAM_GRAM_BYTES
#ifndef DS_SOLVEBAK_H
#define DS_SOLVEBAK_H

#include <stdint.h>

#include "core/ckpt.h"
#include "core/ctx.h"
#include "core/rows.h"
#include "solve/solve_ops.h"

// SOLVEBAK: SolveBak on the route solvebak_pick_method prefers (the default); AUTO: the method that
// suits the problem (solve_auto.c), which says why in sb_result.method_reason.
enum { SB_METHOD_SOLVEBAK, SB_METHOD_RESIDUAL, SB_METHOD_GRAM, SB_METHOD_CHOLESKY, SB_METHOD_QR, SB_METHOD_AUTO };

// The layout of solve's checkpoints (ds_ckpt.format): 2 since X's powers of two went by column.
#define SB_CK_FORMAT 2

typedef struct sb_opts {
    int batch;        // columns per block; 1 is the sequential algorithm
    int iters;        // most sweeps
    double tol;       // stop when the relative residual, or its change over a sweep, is ≤ tol (0: never)
    int line_search;  // 0: the seed's raw block update (may diverge on correlated columns)
    int method;       // SB_METHOD_*
    int progress;     // 1: a line on stderr per sweep once a run passes a few seconds
    int block_solve;  // SolveBak: the exact block solve (block Gauss–Seidel) in place of the diagonal step
    int coarse;       // with block_solve: a coarse correction on the block sums after every sweep
    ds_ckpt *ckpt;    // checkpoints and restart (solve_ckpt.c; the Gram route and cholesky), or NULL
    const int *x_exps;  // X in memory (not a file stream): NULL, or its column j divided by 2^x_exps[j],
    int y_exp;          // and y by 2^y_exp (data_load_lsq_ranged), which the checkpoints record
    int gram_double;  // cholesky: X'X in double even where the backend offers the single-precision Gram
                      // and its refinement (--gram-precision double)
    int gram_low;     // cholesky: the backend's single-precision Gram first even where the backend expects
                      // it not to pay (solve_ops' single_pays; --gram-precision low)
} sb_opts;

typedef struct sb_result {
    double *a;             // [n], host memory, every rank
    const char *method;    // "residual", "gram", "cholesky" or "qr"
    char method_reason[240];  // --method auto: why it took method, else empty
    double cond_estimate;  // cholesky (and auto): an estimate of cond(X) from the factor, else 0
    int line_search, block_solve, coarse;  // SolveBak's step as it ran (auto's choice, a batch of every
                                           // column): the raw update's line search, the block solve and
                                           // its coarse correction; all 0 for cholesky and qr
    const char *stop_reason;  // "max_sweeps", "converged", "stalled", "diverged"; "solved" (cholesky)
    int sweeps;
    int64_t zero_columns;
    double *history;       // [sweeps + 1]: relative residual before the first and after each sweep
    double history_floor;  // > 0: the running estimates (gram) are known only down to it; entries at it
                           // mean "≤ floor" (the last entry, from the check pass, is exact)
    double rel_residual;   // ‖y − X·a‖ / ‖y‖, from a fresh pass over X
    double normal_residual;  // ‖Xᵀ(y − X·a)‖ / (‖X‖_F·‖y‖)
    double setup_seconds;  // block Grams (residual) or G = XᵀX (gram), with their allreduce
    double sweep_seconds;
    double solve_seconds;  // setup + sweeps (+ refinement)
    double check_seconds;  // the final residual pass
    double tried_seconds;  // auto: the method tried first and set aside (wall clock; in solve_seconds)
    int refined;           // cholesky: the refinement steps kept (each lowered the normal residual)
    double refine_seconds; // cholesky: the refinement (a solve and a certificate pass a step); in solve_seconds
    const char *gram_precision;  // cholesky: "single" or "fp16" (X'X in that precision, then refined) or "double"
    char gram_fallback[160];     // cholesky: why the single-precision X'X was set aside for double, else empty
    double fallback_seconds;     // cholesky: the single-precision attempt set aside (wall clock; in solve_seconds)
    int passes;                  // cholesky: passes over X (X'X, the certificate, one a refinement step)
    double qr_local_seconds;    // qr: the ranks' own R factors (the slowest rank), in setup_seconds
    double qr_combine_seconds;  // qr: the rest of setup_seconds, combining the ranks' R
    double bytes;          // bytes of X the solve read from memory (for the bandwidth figure)
    int streamed;          // 1: X was read chunk by chunk from its source (solvebak_run_rows)
    int64_t chunk_rows;    // streamed: rows a chunk
    double bytes_moved;    // streamed: bytes of X and y read from the source, all ranks
    double stream_seconds; // streamed: wall time of the passes over the source, slowest rank
    char stream_note[120]; // streamed: what the route reads a sweep, when it reads X more than once; else empty
} sb_result;

// X: the rank's row block in backend memory; y: its rows of y (backend memory, double).
// n_rows_global is the sum of X->rows over ranks. Collective. DS_ERR_NUMERIC when the iteration
// produced NaN or Inf (result still filled).
int solvebak_run(ds_ctx *ctx, const ds_mat *X, const double *y, int64_t n_rows_global,
                 const sb_opts *opts, sb_result *res);
void solvebak_result_free(sb_result *res);

// solvebak_run for one method (not AUTO): what --method auto (solve_auto.c) runs.
int sb_run_method(ds_ctx *ctx, const ds_mat *X, const double *y, int64_t n_rows_global, const sb_opts *opts,
                  sb_result *res);

// Streamed solves (solve_stream.c), for an X that does not fit the memory a rank may use.
// X'X beyond this does not stream on the Gram route (nor does it fit comfortably in memory:
// solvebak_pick_method); the residual route never forms it.
#define SB_STREAM_GRAM_BYTES 4e9
// Whether this rank's rows × cols (f32 or double) fit caps->backend with the working buffers of a
// solve: *chunk_rows 0 when they do (solve in memory), else the chunk rows for solvebak_run_rows.
// DS_ERR_USAGE, naming the cap (cap_name: the option that set caps->backend) and the minimum, when the
// caps leave no room for two chunks of ROWS_MIN_CHUNK rows, or the method does not stream (X'X beyond
// SB_STREAM_GRAM_BYTES but for residual; residual with the coarse correction). Not collective.
int solvebak_stream_plan(const ds_ctx *ctx, const rows_caps *caps, const char *cap_name, int64_t rows,
                         int64_t cols, int f32, const sb_opts *o, int64_t *chunk_rows, ds_msg *msg);
// solvebak_run with X and y read from rows, pass by pass: the Gram route (SolveBak's default and gram),
// cholesky, qr (each chunk's R folded into the rank's), auto (cholesky, then qr when X is ill
// conditioned: one more pass) and residual (e resident, a pass over two blocks' columns per block: X
// about twice a sweep; with the coarse correction DS_ERR_USAGE). Collective.
int solvebak_run_rows(ds_ctx *ctx, ds_rows *rows, int64_t n_rows_global, const sb_opts *opts, sb_result *res);

// The route SolveBak would take for this shape on this backend, with rows_per_rank the same on every rank.
int solvebak_pick_method(const ds_ctx *ctx, int64_t rows_per_rank, int64_t cols, int f32, const sb_opts *opts);

#endif
