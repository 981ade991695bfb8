// solve_kernels.h: the extern "C" launchers of SolveBak's kernels (kernels/solve/*.cu). Each queues its
// work on the given stream and returns cudaGetLastError() after the launch; none synchronizes. Only
// src/solve/solve_cuda.c, src/solve/gram_cuda.c and the .cu files include this header. All pointers are
// device memory.
// provides: ds_k_grad_update, ds_k_grad_update_scratch, ds_k_grad_once_parts, ds_k_grad_once,
//           ds_k_block_step, ds_k_gram_sweeps, ds_k_gram_sweeps_scratch, ds_k_block_pinv_plan,
//           ds_k_block_pinv, ds_k_block_sums, ds_k_coarse_step, ds_k_block_solve_step, ds_k_gram_sweeps_bs, ds_k_gram_reduce,
//           ds_k_gram_reduce_shifted, ds_k_gram_reduce_aug_half, ds_k_half_scales, ds_k_half_rows, ds_k_chol_scale, ds_k_scale_vec,
//           ds_k_step_size, ds_k_trsv_inverse_len, ds_k_trsv_work_len, ds_k_trsv_work_init, ds_k_trsv_prepare, ds_k_chol_trsv
#ifndef DS_SOLVE_KERNELS_H
#define DS_SOLVE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

// residual.cu and gram_sweeps.cu ---------------------------------------------------------------

// Doubles of scratch that ds_k_grad_update needs for these sizes on a device with nsm multiprocessors.
size_t ds_k_grad_update_scratch(int64_t rows, int64_t up_n, int64_t gr_n, int nsm);

// The residual route's fused pass over X (rows × cols, row-major; float when f32, else double):
//   e −= X[:, up0 .. up0+up_n) · coef;  gout[0 .. gr_n) = X[:, gr0 .. gr0+gr_n)ᵀ e;  gout[gr_n] = eᵀe.
// scratch holds ds_k_grad_update_scratch(...) doubles. Deterministic: the same inputs give the same
// bits on the same device. A wide slab both updated and read (up = gr) is read once from memory
// (residual_once.cu) as plan says: DS_CERT_AUTO (rows in registers for f64: a row a warp up to 1 024
// columns, a row a CTA up to 4 096; else row chunks), DS_CERT_CHUNKS (row chunks), DS_CERT_TWO_PASS (read
// twice, the earlier plan; kept for comparison), DS_CERT_CTA (the same as AUTO since 2026-11-26).
enum { DS_CERT_AUTO = 0, DS_CERT_CHUNKS = 1, DS_CERT_TWO_PASS = 2, DS_CERT_CTA = 3 };
cudaError_t ds_k_grad_update(const void *X, int f32, int64_t rows, int64_t cols, double *e,
                             int64_t up0, int64_t up_n, const double *coef, int64_t gr0, int64_t gr_n,
                             double *gout, double *scratch, int nsm, int plan, cudaStream_t stream);

// residual_once.cu, for ds_k_grad_update: partial rows (of nc + 1 doubles) that the single-read pass over
// rows × nc takes under plan (0: it does not apply), and the pass itself, into partial.
int64_t ds_k_grad_once_parts(int64_t rows, int64_t nc, int f32, int nsm, int plan);
cudaError_t ds_k_grad_once(const void *X, int f32, int64_t rows, int64_t cols, double *e, int64_t c0, int64_t nc,
                           const double *coef, double *partial, int64_t parts, int plan, cudaStream_t stream);

// One block step of batched SolveBak (solve_ops.h, ds_step_args), in one CTA.
cudaError_t ds_k_block_step(const double *gbuf, const double *diag, const double *gbb, int nb, int ld,
                            int line_search, double *a, double *coef, double *ee_slot,
                            cudaStream_t stream);

// Doubles of scratch that ds_k_gram_sweeps needs.
size_t ds_k_gram_sweeps_scratch(int64_t n, int batch);

// Sweeps of SolveBak on the Gram system (solve_ops.h, ds_gram_args), all in one kernel launch.
// scratch holds ds_k_gram_sweeps_scratch(n, batch) doubles. cluster: the batches' thread-block cluster of
// that many CTAs (2, 4, 8 or 16; an experiment's pin), 0 the largest the device runs. tx: that kernel
// exchanges by st.async on mbarriers (1, dsolve's default) or by a cluster barrier a step (0).
cudaError_t ds_k_gram_sweeps(const double *G, const double *diag, double *g, double *a, double *ee,
                             double *ee_hist, int64_t n, int batch, int line_search, int sweeps,
                             double *scratch, int cluster, int tx, cudaStream_t stream);

// block_solve.cu and gram_sweeps_bs.cu: the block solve ------------------------------------------------

// Doubles of scratch that ds_k_block_pinv needs for these sizes on the current device: 0 when each
// block's working copy fits in shared memory, else ⌈n / batch⌉·batch².
cudaError_t ds_k_block_pinv_plan(int64_t n, int batch, size_t *scratch_doubles);

// The blocks' pseudo-inverses (solve_ops.h, block_pinv), one CTA per block; the pivot tolerance is
// tol1·nb. scratch: ds_k_block_pinv_plan's doubles (may be NULL when that is 0).
cudaError_t ds_k_block_pinv(const double *A, int64_t n, int batch, int64_t astride, int64_t lda, double tol1,
                            double *out, double *scratch, cudaStream_t stream);

// out[i·ld_row + c·ld_col] = Σ_{j in block c} A[i, j] (solve_ops.h, block_sums); A rows × cols,
// row-major, float when f32, else double. A warp per (row, block).
cudaError_t ds_k_block_sums(const void *A, int f32, int64_t rows, int64_t cols, int batch, double *out,
                            int64_t ld_row, int64_t ld_col, int nsm, cudaStream_t stream);

// The coarse step (solve_ops.h, ds_coarse_args; k ≤ 2048), in one CTA.
cudaError_t ds_k_coarse_step(const double *cinv, const double *cmat, const double *wt, int64_t ldw,
                             const double *t, const double *diag, double *g, int64_t gn, double *a, int64_t n,
                             int batch, double *ee, double *delta, int64_t k, cudaStream_t stream);

// The block-solve step of the residual route (solve_ops.h, ds_step_args with binv), in one CTA.
cudaError_t ds_k_block_solve_step(const double *gbuf, const double *binv, int nb, int ld, double *a,
                                  double *coef, double *ee_slot, cudaStream_t stream);

// Sweeps of the block solve on the Gram system, with the coarse correction when cinv is given
// (solve_ops.h, ds_gram_args with binv), all in one launch of one CTA.
cudaError_t ds_k_gram_sweeps_bs(const double *G, const double *diag, const double *binv, double *g, double *a,
                                double *ee, double *ee_hist, int64_t n, int batch, int sweeps, const double *cinv,
                                const double *cmat, const double *wt, cudaStream_t stream);

// gram.cu ----------------------------------------------------------------------------------------

// G (n × n, row-major, full symmetric) = Σ_p P_p over ks partial products, each n × n column-major
// (ld n, consecutive partials n² apart) and valid wherever row ≤ column.
cudaError_t ds_k_gram_reduce(const double *P, int ks, int64_t n, double *G, cudaStream_t stream);
// The same from partials ldp × ldp (ldp ≥ n, consecutive partials ldp² apart) in which G's rows and
// columns from split on are stored ldp − n further on (gram_cuda.c's uniform tiles).
cudaError_t ds_k_gram_reduce_shifted(const double *P, int ks, int64_t n, int64_t ldp, int64_t split, double *G,
                                     cudaStream_t stream);
// out = [G (n × n, row-major, full symmetric) | c (n)] = Σ_p P_p in double over ks float partials, each the
// (n + 1) × (n + 1) Gram of [X y] scaled by ds_k_half_scales' S, column-major with leading dimension ld,
// consecutive partials part apart, valid wherever row ≤ column; entry (i, j) times 2^(E_i + E_j).
cudaError_t ds_k_gram_reduce_aug_half(const float *P, int ks, int64_t n, int64_t ld, int64_t part, const int *E,
                                      double *out, cudaStream_t stream);
// The column scales of [X y] (X: m × n, float with f32, else double) for its FP16 rounding, from a sample
// of 1 024 rows spread over X: S[j] = 2^−E[j] takes the sample's largest |value| of column j into
// [2^−6, 2^−5) (E = 0 for a column the sample saw as zero or not finite), j < ld (E = 0 beyond n). M: n + 1
// doubles of scratch.
cudaError_t ds_k_half_scales(const void *X, int f32, const double *y, int64_t m, int64_t n, int64_t ld,
                             unsigned long long *M, int *E, double *S, cudaStream_t stream);
// A (rows × ld halves, row-major; ld even): row r < nr is S ∘ [X[r0 + r, :] y[r0 + r] 0 …] rounded to FP16
// (an infinity where a value leaves its range), rows nr .. rows − 1 zero.
cudaError_t ds_k_half_rows(const void *X, int f32, const double *y, int64_t n, int64_t r0, int64_t nr, int64_t rows,
                           int64_t ld, const double *S, void *A, cudaStream_t stream);

// chol.cu ----------------------------------------------------------------------------------------

// s[j] = 1/√G_jj (0 where G_jj ≤ 0), then G ← S·G·S with a unit diagonal for a zero column (G: n × n).
cudaError_t ds_k_chol_scale(double *G, int64_t n, double *s, cudaStream_t stream);

// out = [max_j |a_j − b_j|, max_j |a_j|] (one CTA).
cudaError_t ds_k_step_size(const double *a, const double *b, int64_t n, double *out, cudaStream_t stream);

// x[j] = s[j]·b[j], or x[j] += s[j]·b[j] with add (x may not alias b unless add is 0 and x == b).
cudaError_t ds_k_scale_vec(const double *s, const double *b, double *x, int64_t n, int add, cudaStream_t stream);

// chol_trsv.cu ------------------------------------------------------------------------------------

// Doubles of what ds_k_trsv_prepare makes, and of the solves' work, for order n.
size_t ds_k_trsv_inverse_len(int64_t n);
size_t ds_k_trsv_work_len(int64_t n);
// work (ds_k_trsv_work_len doubles) in the state the solves expect and leave it in; once, when allocated.
cudaError_t ds_k_trsv_work_init(double *work, int64_t n, cudaStream_t stream);
// After potrf (F: n × n column-major, its factor L in the lower triangle): F's upper triangle ← Lᵀ, and D
// (ds_k_trsv_inverse_len doubles) ← the inverses of L's diagonal blocks and their products with the
// blocks beside them.
cudaError_t ds_k_trsv_prepare(double *F, int64_t n, double *D, cudaStream_t stream);
// x = S·t (x += S·t with add) where L·z = S·b and Lᵀ·t = z: two launches (x may not alias b).
cudaError_t ds_k_chol_trsv(const double *F, int64_t n, const double *D, const double *s, const double *b, double *x,
                           int add, double *work, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
