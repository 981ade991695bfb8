// qr_kernels.h: the extern "C" launchers of --method qr's kernels (kernels/solve/qr.cu). Each queues its
// work on the given stream and returns cudaGetLastError() after the launch; none synchronizes. Only
// src/solve/qr_cuda.c and qr.cu include this header. All pointers are device memory; matrices are
// column-major unless a comment says otherwise.
// provides: ds_k_qr_cols, ds_k_qr_take_r, ds_k_qr_stack, ds_k_qr_col_norms, ds_k_qr_fold, ds_k_qr_signs,
//           ds_k_qr_split_lu, ds_k_qr_clamp, ds_k_qr_trsm_leaf, QR_TRSM_LEAF, ds_k_qr_div, ds_k_qr_square
#ifndef DS_QR_KERNELS_H
#define DS_QR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

// A (m × (n+1), ld lda) = [X | y]: X (m × n, row-major; float when f32, else double) widened and
// transposed, y (m) its last column.
cudaError_t ds_k_qr_cols(const void *X, int f32, const double *y, int64_t m, int64_t n, double *A, int64_t lda,
                         cudaStream_t stream);

// R (n1 × n1, ld n1) = the upper triangle of the first min(rows, n1) rows of A (ld lda), zeros
// elsewhere, each row negated where its diagonal entry is negative (qr_ops.h's sign convention).
cudaError_t ds_k_qr_take_r(const double *A, int64_t lda, int64_t rows, int64_t n1, double *R, cudaStream_t stream);

// S (2·n1 × n1, ld 2·n1) = [R0; R1] (both n1 × n1, ld n1).
cudaError_t ds_k_qr_stack(const double *R0, const double *R1, int64_t n1, double *S, cudaStream_t stream);

// out[j] = Σ_{i ≤ j} R_ij² (R: n1 × n1, ld n1), summed in a fixed order.
cudaError_t ds_k_qr_col_norms(const double *R, int64_t n1, double *out, cudaStream_t stream);

// Two CountSketches of the rows of [X | y] (X as for ds_k_qr_cols): B1 has 2·b rows of n+1 entries,
// row r at B1 + r·ld (ld ≥ n+1). In sketch c (0, 1), rows b·k .. b·k+b−1 of [X | y] are rotated by an
// offset drawn for (c, k) and added, with signs drawn for (c, row), into rows c·b .. c·b+b−1: a row of
// the sketch is a signed sum of one row from each block of b, so two rows meet in both sketches
// only with probability 1/b². The draws are a fixed function of seed (the same bits every run).
cudaError_t ds_k_qr_fold(const void *X, int f32, const double *y, int64_t m, int64_t n, int64_t b, int64_t ld,
                         uint64_t seed, double *B1, cudaStream_t stream);

// S[k] = ±1 for k < count, drawn from seed.
cudaError_t ds_k_qr_signs(double *S, int64_t count, uint64_t seed, cudaStream_t stream);

// After getrf of B (rows × n1, ld ldb, rows ≥ n1): U (n1 × n1, ld ldu) = its upper triangle with zeros
// below, and B's top n1 × n1 block made unit lower triangular (ones on the diagonal, zeros above), so
// that B holds L.
cudaError_t ds_k_qr_split_lu(double *B, int64_t ldb, int64_t n1, double *U, int64_t ldu, cudaStream_t stream);

// R (n1 × n1 upper, ld ldr): each diagonal entry raised to at least DBL_EPSILON times its column's norm
// in magnitude (sign kept, + for 0), or set to 1 in a zero column, so that R is nonsingular.
cudaError_t ds_k_qr_clamp(double *R, int64_t ldr, int64_t n1, cudaStream_t stream);

// The leaves of the blocked triangular solve: B (w × m, ld ldb) = R⁻ᵀ·B for R (w × w upper, ld ldr),
// w ≤ QR_TRSM_LEAF, column by column by forward substitution (each column backward stable, as TRSM's).
#define QR_TRSM_LEAF 32
cudaError_t ds_k_qr_trsm_leaf(const double *R, int64_t ldr, int w, double *B, int64_t ldb, int64_t m,
                              cudaStream_t stream);

// v[i] /= *d for i < m.
cudaError_t ds_k_qr_div(double *v, int64_t m, const double *d, cudaStream_t stream);

// G1 ((n+1) × (n+1), ld ld) = [[G, c], [cᵀ, yy]] from solve_ops.gram's out = [G (n × n) | c | yy].
cudaError_t ds_k_qr_square(const double *out, int64_t n, double *G1, int64_t ld, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
