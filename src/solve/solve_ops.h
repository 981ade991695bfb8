// solve_ops.h: the operations SolveBak needs from a backend (solve_cpu.c, solve_cuda.c define them;
// ds_backend.solve reaches them). All pointers are backend memory. The Gram of [X y] is also the
// network's output-layer product (ann.c).
// provides: ds_step_args, ds_gram_args, ds_coarse_args, BS_PIVOT_TOL1, chol_pivot_info, chol_diag_cond, solve_ops
#ifndef DS_SOLVE_OPS_H
#define DS_SOLVE_OPS_H

#include <math.h>
#include <stdint.h>

#include "core/ctx.h"

// One block step of batched SolveBak, from the block's reduced gradient. All pointers are backend memory.
//   da_j  = g_j / diag_j            (0 where diag_j == 0: a zero column is skipped)
//   alpha = (da·g) / (daᵀ G_bb da)  with line_search and nb > 1, 0 when that denominator is 0;
//           else alpha = 1 (for one column the exact line search is 1: the Gauss–Seidel step)
//   coef  = alpha·da;  a += coef
// With binv (the block solve): da = binv·g, alpha = 1 (the exact line search along an exact block solve
// is 1); diag, gbb and line_search are not read.
typedef struct ds_step_args {
    const double *gbuf;  // [nb + 1]: the global X_bᵀe, then the global ‖e‖²
    const double *diag;  // [nb]: the block's global column norms²
    const double *gbb;   // [nb × ld]: the block's global Gram X_bᵀX_b, row-major
    int nb, ld;
    int line_search;
    double *a;        // [nb]: the block's coefficients, updated
    double *coef;     // [nb]: written, the step the next grad_update applies to e
    double *ee_slot;  // [1] or NULL: receives gbuf[nb]
    const double *binv;  // [nb × ld] or NULL: the block's pseudo-inverse (block_pinv), row-major
} ds_step_args;

// Sweeps of SolveBak on the Gram system (G = XᵀX, c = Xᵀy), which gives the residual form's iterates
// in exact arithmetic. g = c − G·a is maintained. Per block b (columns b0 .. b0+nb−1, nb ≤ batch):
//   da = g_b / diag_b (0 where diag is 0); num = da·g_b; den = daᵀ G_bb da;
//   alpha = line_search && nb > 1 ? (den > 0 ? num/den : 0) : 1;
//   a_b += alpha·da;  g −= alpha·G[:, b]·da;  ee −= 2·alpha·num − alpha²·den.
// batch 1 is the sequential algorithm.
// With binv (the block solve): da = binv_b·g_b and alpha = 1, the rest as above (line_search not read).
// With coarse (binv and cinv, cmat, wt given; k = ⌈n / batch⌉ blocks, P the n × k indicator of the
// blocks' nonzero columns, those with diag > 0), after every sweep, before ee_hist takes ee:
//   t = Pᵀg;  δ = cinv·t;  a += P·δ;  g −= wtᵀ·δ;  ee −= 2·δ·t − δᵀ·cmat·δ.
typedef struct ds_gram_args {
    const double *G;     // [n × n]: full symmetric, row-major
    const double *diag;  // [n]: the diagonal of G
    double *g;           // [n]: c − G·a, updated
    double *a;           // [n]: updated
    double *ee;          // [1]: ‖y − X·a‖², updated by the formula above
    double *ee_hist;     // [sweeps] or NULL: ee after each sweep
    int64_t n;
    int batch, line_search, sweeps;
    const double *binv;  // [k × batch × batch] or NULL: block b's pseudo-inverse at binv + b·batch², ld batch
    const double *cinv;  // [k × k] or NULL (no coarse correction): C's pseudo-inverse, full, row-major
    const double *cmat;  // [k × k]: C = PᵀGP, full, row-major
    const double *wt;    // [k × n]: (G·P)ᵀ, row c the sum of G's rows in block c
} ds_gram_args;

// The coarse correction of the block solve on the residual route (sb_residual_sweeps), from the reduced
// t = Pᵀg (g = Xᵀe; P the n × k indicator of the column blocks' nonzero columns, Z = X·P):
//   δ = cinv·t;  a_i += δ_{i / batch} where diag_i > 0 (i < n: a zero column keeps its coefficient);
//   g_i −= Σ_c wt[c·ldw + i]·δ_c (i < gn);
//   ee −= 2·δ·t − δᵀ·cmat·δ  (the change of ‖e‖² when e −= Z·δ; it is δ·t when cmat·δ = t, and stays
//                              exact where the pseudo-inverse skipped a dependent block);
//   delta = δ (for e −= Z·δ, which grad_update applies).
typedef struct ds_coarse_args {
    const double *cinv;  // [k × k]: C's pseudo-inverse (block_pinv), full, row-major
    const double *cmat;  // [k × k]: C = ZᵀZ = PᵀGP, full, row-major
    const double *wt;    // [k × ldw]: (G·P)ᵀ, of which columns 0 .. gn−1 are read
    const double *t;     // [k]
    const double *diag;  // [n]: the column norms² (which columns P holds)
    double *g;           // [gn]
    double *a;           // [n]
    double *ee;          // [1]
    double *delta;       // [k]: written
    int64_t n, gn, ldw, k;
    int batch;
} ds_coarse_args;

#define CHOL_PIVOT_TOL 16.0

// The block solve's pivot tolerance over nb (block_pinv): a column whose pivot in the Cholesky factor of
// the equilibrated block (unit diagonal) is not above BS_PIVOT_TOL1·nb = CHOL_PIVOT_TOL·nb·ε, what
// --method cholesky calls dependent, is skipped.
#define BS_PIVOT_TOL1 (CHOL_PIVOT_TOL * 2.220446049250313e-16)

// The first j ≥ 1 whose pivot d[j−1]² (d: the factor's diagonal, n entries, host) is not above
// CHOL_PIVOT_TOL·n·ε, else 0; both backends' chol_factor apply it.
static inline int chol_pivot_info(const double *d, int64_t n)
{
    const double tol = CHOL_PIVOT_TOL * (double)n * 2.220446049250313e-16;
    for (int64_t j = 0; j < n; j++)
        if (!(d[j] * d[j] > tol))
            return (int)(j + 1);
    return 0;
}

// An estimate of cond(X·S) from the equilibrated factor's diagonal d (n entries, host): max |d| / min |d|,
// a lower bound that follows the small pivots (--method auto reads it).
static inline double chol_diag_cond(const double *d, int64_t n)
{
    double lo = INFINITY, hi = 0;
    for (int64_t j = 0; j < n; j++) {
        lo = fmin(lo, fabs(d[j]));
        hi = fmax(hi, fabs(d[j]));
    }
    return n > 0 && lo > 0 ? hi / lo : n > 0 ? INFINITY : 1.0;
}

typedef struct solve_ops {
    // out[b·batch² ...] = X_bᵀX_b for each column block b (columns b·batch .. min(n, (b+1)·batch) − 1),
    // an nb × nb block stored row-major with leading dimension batch. Local rows only (a partial sum).
    int (*block_grams)(ds_ctx *ctx, const ds_mat *X, int batch, double *out);

    // The fused pass of the residual form, over the local rows:
    //   e −= X[:, up_col0 .. up_col0+up_n−1] · coef            (skipped when up_n == 0)
    //   gout[0 .. gr_n−1] = X[:, gr_col0 .. gr_col0+gr_n−1]ᵀ · e   (after the update)
    //   gout[gr_n] = eᵀe                                           (after the update)
    // gout is overwritten with these local partial sums. up_n and gr_n may be anything up to n.
    int (*grad_update)(ds_ctx *ctx, const ds_mat *X, double *e, int64_t up_col0, int64_t up_n,
                       const double *coef, int64_t gr_col0, int64_t gr_n, double *gout);

    int (*block_step)(ds_ctx *ctx, const ds_step_args *args);

    // out = [G (n × n, full, row-major) | c (n) | yy (1)] with G = XᵀX, c = Xᵀy, yy = yᵀy over the
    // local rows (a partial sum); y is double.
    int (*gram)(ds_ctx *ctx, const ds_mat *X, const double *y, double *out);

    // gram, with G and c summed in a lower precision from X and y rounded to it (yy in double): the Gram
    // that --method cholesky factors first and then refines to double's accuracy in passes over X
    // (solve_direct.c). The CPU's: float (SSYRK); CUDA's: FP16 on the tensor cores, each column
    // scaled by a power of two. single_name is what the result calls it (gram_precision), single_unit
    // the unit roundoff of X's rounding, single_cond_max the estimate of cond(X) beyond which the
    // refinement would be too slow to try, and single_range the bounds within which every ‖X_j‖² must
    // lie for the attempt (float's range with room on the CPU; on CUDA, whose columns are scaled, any
    // normal double: a value out of FP16's range makes it infinite, a column the rounding lost, zero).
    int (*gram_single)(ds_ctx *ctx, const ds_mat *X, const double *y, double *out);
    const char *single_name;
    double single_unit;
    double single_cond_max;
    double single_range[2];
    // Whether the single attempt is expected to pay for its extra passes over X at this many rows a rank
    // and n columns (--gram-precision auto); NULL: always.
    int (*single_pays)(int64_t rows, int64_t n);

    int (*gram_sweeps)(ds_ctx *ctx, const ds_gram_args *args);

    // The block solve's pseudo-inverses. For each block b < ⌈n / batch⌉ (nb = min(batch, n − b·batch)
    // columns): A_b, nb × nb at A + b·astride with leading dimension lda, symmetric (its lower triangle is
    // read). s_j = 1/√A_jj (0 where A_jj ≤ 0), H = S·A_b·S, its Cholesky factor with column j skipped
    // (its row and column of H dropped) where s_j = 0 or its pivot is not above BS_PIVOT_TOL1·nb; then
    // out_b = S·H_K⁻¹·S on the kept columns K and 0 in a skipped column's row and column: an nb × nb
    // block, full, row-major, at out + b·batch² with leading dimension batch (the rest of the batch²
    // slab is not written). A zero column, or a copy of a column before it in the block, gets
    // da_j = 0 from out_b·g, never NaN. Queued (out must not overlap A).
    int (*block_pinv)(ds_ctx *ctx, const double *A, int64_t n, int batch, int64_t astride, int64_t lda,
                      double *out);

    // out[i·ld_row + c·ld_col] = Σ_{j in block c} A[i, j] for every row i and block c < ⌈cols / batch⌉
    // of A (rows × cols, row-major, float or double): the row sums of A over each block's columns
    // (A·P). Local rows, queued.
    int (*block_sums)(ds_ctx *ctx, const ds_mat *A, int batch, double *out, int64_t ld_row, int64_t ld_col);

    // out = [Zᵀ·X[:, 0 .. nw−1] (k × nw) | ZᵀZ (k × k)], row-major, over the local rows (partial sums);
    // Z: X->rows × k, row-major, double. Queued.
    int (*coarse_products)(ds_ctx *ctx, const ds_mat *X, const double *Z, int64_t k, int64_t nw, double *out);

    // ds_coarse_args, in one step on the device (one CTA on CUDA). Queued.
    int (*coarse_step)(ds_ctx *ctx, const ds_coarse_args *args);

    // The Cholesky factor of the equilibrated Gram (--method cholesky). G: n × n, full symmetric,
    // row-major, overwritten. s[j] = 1/√G_jj (0 for a zero column, whose row and column of the scaled
    // matrix become e_j); G ← S·G·S, then its Cholesky factor in place (the part that chol_solve reads
    // is the backend's own). *info (host): 0, or j ≥ 1 for the first pivot of S·G·S (the square of the
    // factor's j-th diagonal entry) that is not above CHOL_PIVOT_TOL·n·ε, LAPACK dpstrf's rank tolerance
    // for a unit diagonal: X rank deficient (an exact copy of a column leaves a rounding-sized pivot,
    // positive as often as not), or too ill-conditioned for the normal equations. With low (G summed in a
    // lower precision: the single-precision attempt) the backend may factor in float (CUDA does: 20 %
    // faster at n = 1 000), whose pivots stay at float's rounding where double's would not: the caller's
    // cond limit sets such a factor aside. *cond (host): chol_diag_cond of the factor where info is 0.
    // Waits.
    int (*chol_factor)(ds_ctx *ctx, double *G, int64_t n, double *s, int low, int *info, double *cond);

    // out[0] = max_j |a_j − b_j|, out[1] = max_j |a_j| (out: 2 doubles of the backend's memory): the size
    // of a refinement step and of the answer, for the single-precision refinement's one wait a step. Queued.
    int (*step_size)(ds_ctx *ctx, const double *a, const double *b, int64_t n, double *out);

    // x = S·(S·G·S)⁻¹·S·b from chol_factor's F and s (b, x: [n]; b is not changed, x may not alias b);
    // with add, x += that instead. Queued.
    int (*chol_solve)(ds_ctx *ctx, const double *F, const double *s, int64_t n, const double *b, double *x,
                      int add);

    const struct qr_ops *qr;  // --method qr (qr_ops.h)
} solve_ops;

#endif
