// qr_ops.h: the operations of --method qr (TSQR, solve_qr.c) that a backend provides (qr_cpu.c,
// qr_cuda.c; solve_ops.qr reaches them). An R factor here is (n+1) × (n+1), column-major (R_ij at
// R[i + j·(n+1)]), upper triangular with exact zeros below the diagonal, and its rows signed so that
// R_ii ≥ 0: for A of full column rank it is then unique, so two backends' factors can be compared.
// A zero row stands where the rows ran out (fewer rows than n+1). All pointers are backend memory.
// provides: qr_ops, QR_RANK_TOL, qr_bcast, qr_trace
#ifndef DS_QR_OPS_H
#define DS_QR_OPS_H

#include <stdint.h>

#include "core/ctx.h"

// The rank test of --method qr: column j of X is taken for a combination of earlier ones when
// |R_jj| ≤ QR_RANK_TOL·‖X_j‖. Since |R_jj| ≥ σ_min(X) and ‖X_j‖ ≤ σ_max(X), every X of condition
// number up to 1/QR_RANK_TOL = 1e13 passes; an exact dependency leaves |R_jj| at rounding level,
// 1e-16 to 7e-16 of ‖X_j‖ (measured with LAPACK dgeqrf on 2 000 × 100 to 20 000 × 1 000: a copied column,
// a copy scaled by 3, the sum of two columns), against 3e-11 to 5e-11 for the full-rank condition-1e12
// matrices of the same sizes.
#define QR_RANK_TOL 1e-13

typedef struct qr_ops {
    // Doubles of backend memory that local_r needs as work for a block of rows × cols (X's shape).
    int64_t (*local_work)(const ds_ctx *ctx, int64_t rows, int64_t cols);

    // R (n1 × n1, n1 = X->cols + 1) of the local rows of A = [X | y] (X->rows × n1; f32 X widened to
    // double). work: local_work(X->rows, X->cols) doubles, overwritten. Any stable QR will do (the
    // backends differ: Householder on the CPU, a preconditioned Cholesky QR on CUDA); rows = 0 gives
    // R = 0. May wait for the device.
    int (*local_r)(ds_ctx *ctx, const ds_mat *X, const double *y, double *work, double *R);

    // Optional (NULL where a backend has none): R of A = [X | y] over every rank's rows at once, by
    // collectives instead of the tree, into R on every rank; *done = 0 when it declines or its check
    // fails, alike on every rank (the caller then runs local_r and the tree). Collective: every rank
    // calls it, after agreeing. work: local_work(X->rows, X->cols) doubles.
    int (*global_r)(ds_ctx *ctx, const ds_mat *X, const double *y, double *work, double *R, int *done);

    // out = R of the 2·n1 × n1 matrix [R0; R1] (the TSQR tree's step); out may alias R0 or R1.
    // Deterministic: the same inputs give the same bits. Queued.
    int (*stack_r)(ds_ctx *ctx, const double *R0, const double *R1, int64_t n1, double *out);

    // a[0 .. n) = R[0:n, 0:n]⁻¹ · R[0:n, n] (the least-squares solution from the factor of [X | y]).
    // R's leading n × n block must be nonsingular. Queued.
    int (*solve)(ds_ctx *ctx, const double *R, int64_t n, double *a);

    // out[j] = Σ_{i ≤ j} R_ij² for j < n1: the squared column norms of A (‖X_j‖², then ‖y‖²). Queued.
    int (*col_norms)(ds_ctx *ctx, const double *R, int64_t n1, double *out);
} qr_ops;

// Rank 0's n doubles of backend memory to every rank, bit for bit: the others contribute zeros to a sum
// (x + 0 is x exactly). Collective; the ranks agree first. solve_qr.c.
int qr_bcast(ds_ctx *ctx, double *buf, int64_t n);

// With DSOLVE_TRACE set (a diagnostic): waits for the work queued on ctx and prints to stderr, per
// rank, the seconds since the previous call with what (the phase that ended). The waits change the
// overlap of the phases they separate, so the solve's own times are not comparable under it.
void qr_trace(ds_ctx *ctx, const char *what);

#endif
