// solve_work.h: what the parts of one solve share (solve_run.c runs them): the backend buffers, the
// SolveBak routes (solve_sweeps.c), the direct methods and the certificate (solve_direct.c), QR (solve_qr.c).
// Internal to src/solve.
// provides: sb_work, sb_loop, the sb_* functions below
#ifndef DS_SOLVE_WORK_H
#define DS_SOLVE_WORK_H

#include "core/rows.h"
#include "solve/solvebak.h"

// A checkpoint read back by --restart (solve_ckpt.c): its counters (SB_CK_*) and state, host memory.
// phase: 0 nothing (left) to resume; 1 inside the Gram pass of a streamed X; 2 after the Gram sum.
enum { SB_CK_PHASE, SB_CK_PARTS, SB_CK_SPANS, SB_CK_SWEEP, SB_CK_EE_PREV, SB_CK_D_PREV, SB_CK_YY, SB_CK_REL_PREV,
       SB_CK_LEN };
typedef struct sb_resume {
    int phase;
    double ck[SB_CK_LEN];
    double *state;
    const double *scales;  // in state: the powers of two its sums were divided by, X's columns (n) then y,
                           // and the largest magnitudes read before it, of X's columns and y (n + 1)
    int64_t *spans;  // phase 1: this rank's rows still to sum (rows.h spans), while they are read
    int nspans;
} sb_resume;

// Backend buffers of one solve, released together. With rows (a streamed input, solve_stream.c), X is
// read chunk by chunk from it: e holds a chunk's rows (the residual route: all the rank's rows), acc a
// chunk's partial sums before they are added.
typedef struct sb_work {
    double *e, *a, *diag, *grams, *gbuf, *coef, *hist, *sys, *g, *ee, *gout, *acc;
    ds_rows *rows;
    ds_ckpt *ckpt;  // sb_opts.ckpt
    const int *xe;  // sb_opts.x_exps and y_exp: X and y in memory as divided by powers of two (the
    int ye;         // checkpoints record them; a file stream's are its own, rows.h)
    sb_resume rs;
    double *qr[4];  // solve_qr.c's buffers
    double *bs[8];  // the block solve's buffers (solve_sweeps.c)
    int single;     // cholesky: this attempt's G is the backend's single-precision Gram (gram_single)
    int summed;     // cholesky: xtx and zeros hold Σ‖X_j‖² and the zero columns of this attempt's G (its
    double xtx;     // diagonal, which sb_chol_step reads): the certificates take them instead of reading
    int64_t zeros;  // the diagonal again
    int step_tail;   // the single-precision refinement: sb_check also brings gout[n + 1 .. n + 2] (step_size's
    double step[2];  // [max |Δa|, max |a|], queued before its pass) down into step, in the certificate's wait
    const char *fallback;  // cholesky: set (the same on every rank) when the single attempt is set aside
    char why[160];  // the reason behind fallback
    // The Gram matrix in double (G, or the block Grams with tiny_B > 0) and c (may be NULL) whose zero
    // diagonal entries sb_tiny_columns has yet to look at (NULL: none): sb_chol_step does, before its
    // factor overwrites G, else the certificate (sb_check), in the wait it has anyway
    const double *tiny_G, *tiny_c;
    int tiny_B;
} sb_work;

// What the host needs to decide after each sweep when it checks (tol > 0, progress or checkpoints).
typedef struct sb_loop {
    int checking;
    double yy;       // ‖y‖², global
    double rel_prev;
    double t0;       // wall clock at the start of the sweeps
} sb_loop;

// solve_ckpt.c: checkpoints. A checkpoint holds either the Gram pass of a streamed X in progress (phase 1:
// each rank's partial [G | c | yy] and the rows it had yet to read) or the summed system and the Gram
// route's sweep state (phase 2: [G | c | yy], a, g, ‖e‖², the history). sb_ckpt_begin: ckpt_start, and
// with --restart the checkpoint read into w->rs (collective). sb_ckpt_pass_start: a phase-1 restart's
// rows to read (w->rows->spans) and starting sum (*have_sum: sum holds it), on the same ranks each
// rank's own, else rank 0 holds them all summed. sb_ckpt_pass: at a chunk boundary of the Gram pass
// (every rank, as often: collective), sum the local partial over the `consumed` rows of the pass so far.
// sb_ckpt_sweep: at the top of sweep s with the loop's values (ee_prev, d_prev, yy, rel_prev).
// sb_ckpt_resume_system: phase 2 in place of the Gram setup. Each returns DS_STOPPED after a
// checkpoint that a signal asked for.
int sb_ckpt_begin(ds_ctx *ctx, const sb_opts *o, int64_t n, int64_t rows_global, sb_work *w);
int sb_ckpt_pass_start(ds_ctx *ctx, sb_work *w, int64_t len, double *sum, int *have_sum);
int sb_ckpt_pass(ds_ctx *ctx, sb_work *w, int64_t len, const double *sum, int have_sum, int64_t consumed);
int sb_ckpt_sweep(ds_ctx *ctx, sb_work *w, int64_t n, int iters, int s, const double loop[4]);
int sb_ckpt_resume_system(ds_ctx *ctx, sb_work *w, int64_t n, int iters);
void sb_ckpt_end(sb_work *w);

int sb_alloc(ds_ctx *ctx, double **p, int64_t count);
void sb_work_free(ds_ctx *ctx, sb_work *w);

// Fault injection for the tests of failure handling: DSOLVE_INJECT_FAILURE=RANK:PHASE (PHASE one of
// setup, sweep, check) makes that rank fail there, as a device or library failure would; RANK:hang
// makes it stop making progress in the setup (for the watchdog).
int sb_injected(const ds_ctx *ctx, const char *phase, ds_msg *msg);
// Reads one double of backend memory.
int sb_read(ds_ctx *ctx, const double *src, double *dst);

// solve_sweeps.c: the routes. gram setup also forms the system the direct methods factor: w->sys =
// [G | c | yy] reduced over ranks, w->diag its diagonal, w->g = c, w->a = 0, w->ee = w->hist[0] = yy.
int sb_alloc_all(ds_ctx *ctx, const ds_mat *X, const sb_opts *o, int gram, sb_work *w);
int sb_residual_setup(ds_ctx *ctx, const ds_mat *X, const double *y, int B, sb_work *w);
int sb_residual_sweeps(ds_ctx *ctx, const ds_mat *X, const sb_opts *o, int B, sb_work *w, sb_loop *L,
                       sb_result *res);
int sb_gram_setup(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w);
// diag (host, n entries: ‖X_j‖² as summed) against G's rows (row j, or its block's Gram row with B > 0) and
// c (may be NULL): a zero ‖X_j‖² whose products are not zero is an underflowed column, a numerical failure
// naming it. Downloads a row only for a zero entry. Not collective: its caller agrees.
int sb_tiny_columns(ds_ctx *ctx, const double *diag, int64_t n, int B, const double *G, const double *c);

// Leaves G (block Grams of B columns when B > 0; NULL: nothing) and c to sb_tiny_columns in the next wait
// that has the diagonal on the host (sb_chol_step or sb_check).
static inline void sb_tiny_later(sb_work *w, const double *G, const double *c, int B)
{
    w->tiny_G = G;
    w->tiny_c = c;
    w->tiny_B = B;
}
int sb_gram_sweeps(ds_ctx *ctx, int64_t n, const sb_opts *o, sb_work *w, sb_loop *L, sb_result *res);

// The block solve takes batches, and the coarse correction block counts, of at most this: a C of 1 000
// blocks (batch 1 on 1 000 columns) took 0.25 s of setup on an H200, out of shared memory; one of 10,
// microseconds.
#define SB_BS_MAX 2048

// solve_blocks.c: the block solve (sb_opts.block_solve, with sb_opts.coarse). Its buffers in w->bs, present
// only when it runs (which is how the setup and the sweeps know): the blocks' pseudo-inverses; with the
// coarse correction Z = X·P (residual route, local rows × k), [Wt | C] (Wt = (G·P)ᵀ, k × n on the Gram
// route, its first batch columns on the residual route; C = PᵀGP, k × k), C's pseudo-inverse and δ.
enum { SB_BS_BINV, SB_BS_Z, SB_BS_WC, SB_BS_CINV, SB_BS_DELTA };
// 0: off; 1: the block solve; 2: with the coarse correction.
int sb_blocks_wanted(const sb_opts *o, int64_t n);
// From sb_alloc_all: the buffers above, or none (DS_ERR_USAGE past the sizes it takes).
int sb_blocks_alloc(ds_ctx *ctx, const ds_mat *X, const sb_opts *o, int gram, sb_work *w);
// After the route's setup, before its sweeps (a no-op without the block solve). Collective; a failure
// returns at once, for the caller to agree on.
int sb_blocks_setup(ds_ctx *ctx, const ds_mat *X, const sb_opts *o, int gram, sb_work *w);
// The residual route's coarse correction at block 0 (sb_residual_sweeps): the pass for t = Zᵀe
// (apply 0) or e −= Z·δ (apply 1), and the step between them.
int sb_coarse_pass(ds_ctx *ctx, const ds_mat *X, int B, sb_work *w, int apply);
int sb_coarse_step(ds_ctx *ctx, int64_t n, int B, sb_work *w);

// solve_stream.c: the passes over a streamed input (w->rows): w->sys = the local [G | c | yy] (with the
// rescaling by powers of two that data_load_lsq_ranged does, agreed over the ranks), and w->gout = the
// local [Xᵀe | ‖e‖²] for e = y − X·a. The residual route's: sb_grams_stream, w->grams = the local block
// Grams and w->e = y for the rank's rows (w->e holds them all; rescaled as sb_gram_stream); sb_step_stream,
// grad_update's fused pass over the rank's rows (e = w->e, coef = w->coef, gout = w->gbuf) reading only the
// columns of the two blocks (a column window).
int sb_gram_stream(ds_ctx *ctx, int64_t n, sb_work *w);
int sb_grams_stream(ds_ctx *ctx, int64_t n, int B, sb_work *w);
int sb_check_stream(ds_ctx *ctx, int64_t n, sb_work *w);
int sb_step_stream(ds_ctx *ctx, int64_t n, sb_work *w, int64_t up0, int64_t upn, int64_t gr0, int64_t grn);
// qr's pass: w->qr[1] = the R (n1 × n1) of the rank's streamed rows, each chunk's R (qr_ops.local_r, work
// in w->qr[0], chunk-sized) folded into it as the chunks pass (qr_ops.stack_r); read again, divided by
// powers of two, when the values lie beyond 2^±DATA_RANGE_EXP. Collective: every rank returns the same.
int sb_qr_stream(ds_ctx *ctx, int64_t n1, sb_work *w);
// The run of one method, from X and y in backend memory, or (rows not NULL) streamed from rows, X then
// giving only the chunks' shape (rows: the chunk rows).
int sb_run_core(ds_ctx *ctx, const ds_mat *X, const double *y, ds_rows *rows, int64_t n_rows_global,
                const sb_opts *opts, sb_result *res);

// solve_direct.c: the Cholesky step (after sb_gram_setup), the certificate and the refinement; sb_norm2,
// ‖x‖₂ of n entries without overflow or underflow in the squares (x scaled by its largest magnitude).
int sb_chol_step(ds_ctx *ctx, int64_t n, sb_work *w, sb_result *res);
double sb_norm2(const double *x, int64_t n);
int sb_check(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res);
int sb_chol_refine_timed(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res);

// solve_qr.c: --method qr (TSQR), in place of the setup and the sweeps. sb_qr_factor: the R factor of
// [X | y] over all ranks, the same bits on every rank (collective; buffers in w->qr). sb_qr_solve: the
// rank test (DS_ERR_NUMERIC naming the column), w->a, w->diag = ‖X_j‖², w->hist[0] = ‖y‖² and
// w->hist[1] = the residual² from R, one "sweep", stop reason "solved".
int sb_qr_factor(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w);
int sb_qr_solve(ds_ctx *ctx, int64_t n, sb_work *w, sb_result *res);

// solve_auto.c: --method auto.
int sb_auto_run(ds_ctx *ctx, const ds_mat *X, const double *y, ds_rows *rows, int64_t n_rows_global,
                const sb_opts *opts, sb_result *res);

#endif
