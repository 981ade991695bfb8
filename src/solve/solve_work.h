// solve_work.h: what the parts of one solve share (solve_run.c runs them): the backend buffers, the
// SolveBak routes (solve_sweeps.c), the direct methods and the certificate (solve_direct.c), QR (solve_qr.c).
// Internal to src/solve.
// provides: sb_work, sb_loop, the sb_* functions below
#ifndef DS_SOLVE_WORK_H
#define DS_SOLVE_WORK_H

#include "solve/solvebak.h"

// Backend buffers of one solve, released together.
typedef struct sb_work {
    double *e, *a, *diag, *grams, *gbuf, *coef, *hist, *sys, *g, *ee, *gout;
    double *qr[4];  // solve_qr.c's buffers
    double *bs[8];  // the block solve's buffers (solve_sweeps.c)
} sb_work;

// What the host needs to decide after each sweep when it checks (tol > 0 or progress).
typedef struct sb_loop {
    int checking;
    double yy;       // ‖y‖², global
    double rel_prev;
    double t0;       // wall clock at the start of the sweeps
} sb_loop;

int sb_alloc(ds_ctx *ctx, double **p, int64_t count);
void sb_work_free(ds_ctx *ctx, sb_work *w);

// Fault injection for the tests of failure handling: DSOLVE_INJECT_FAILURE=RANK:PHASE (PHASE one of
// setup, sweep, check) makes that rank fail there, as a device or library failure would.
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
int sb_gram_sweeps(ds_ctx *ctx, int64_t n, const sb_opts *o, sb_work *w, sb_loop *L, sb_result *res);

// solve_direct.c: the Cholesky step (after sb_gram_setup), the certificate and the refinement.
int sb_chol_step(ds_ctx *ctx, int64_t n, sb_work *w, sb_result *res);
int sb_check(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res);
int sb_chol_refine_timed(ds_ctx *ctx, const ds_mat *X, const double *y, sb_work *w, sb_result *res);

#endif
