// ann.h (kernels): the extern "C" launchers of the network's kernels (kernels/ann.cu). Each queues its
// work on stream and returns cudaGetLastError(); none synchronizes. All pointers are device memory.
// provides: ds_k_ann_gather_fit, ds_k_ann_gather_chunk, ds_k_ann_route_requests, ds_k_ann_route_place, ds_k_ann_targets,
//           ds_k_ann_ptrs, ds_k_ann_check_fits, ds_k_ann_activate, ds_k_ann_split, ds_k_ann_join,
//           ds_k_ann_solve_in,
//           ds_k_ann_scale_eigen, ds_k_ann_transpose
#ifndef DS_KERNELS_ANN_H
#define DS_KERNELS_ANN_H

#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst[i] = (X[idx[i], 0 .. n−1], 1, z[idx[i]]), rows of width n + 2.
cudaError_t ds_k_ann_gather_fit(const double *X, int64_t n, const double *z, const int64_t *idx, int64_t count,
                                double *dst, cudaStream_t stream);
// dst[pos[i]] = (X[idx[i] − c0, 0 .. n−1], 1, z[idx[i] − c0]): a chunk's share of a round's rows.
cudaError_t ds_k_ann_gather_chunk(const double *X, int64_t n, const double *z, int64_t c0, const int64_t *idx,
                                  const int64_t *pos, int64_t count, double *dst, cudaStream_t stream);

// The routing of a round's rows (ann_ops.route_requests and route_place in src/ann.h state tab's layout):
// req[place(e)] = L[e] − start[owner(e)], and A[e] = recv[place(e)] (rows of width doubles), e < nb·S.
cudaError_t ds_k_ann_route_requests(const int64_t *L, int64_t nb, int64_t S, int p, const int64_t *tab, int64_t *req,
                                    cudaStream_t stream);
cudaError_t ds_k_ann_route_place(const double *recv, int64_t width, int64_t nb, int64_t S, int p, const int64_t *tab,
                                 double *A, cudaStream_t stream);

// t[i·S + s] = the target of neuron k0 + i on row s of its block of A (rows of width n + 2, z last):
// z itself, or with classes ±atanh(target) by z == (k0 + i) mod classes.
cudaError_t ds_k_ann_targets(const double *A, int64_t nb, int64_t S, int64_t n, int classes, int64_t k0,
                             double target, double *t, cudaStream_t stream);

// p[i] = base + i·stride for i < count (the pointer arrays of batched routines).
cudaError_t ds_k_ann_ptrs(double **p, double *base, int64_t stride, int64_t count, cudaStream_t stream);

// For each of nb neurons: failed[i] = info[i] != 0 or any of W[i·n1 .. +n1) not finite; then W's row
// is zeroed when failed.
cudaError_t ds_k_ann_check_fits(const int *info, double *W, int64_t nb, int64_t n1, int *failed, cudaStream_t stream);

// H[i, k] = tanh(H[i, k] + W[k·(n+1) + n]) for k < K; H[i, K] = 1; with y non-NULL, the target
// columns H[i, K+1 ..]: y[i] (outputs 1) or the one-hot of the label y[i] (outputs C). H: rows × ld.
cudaError_t ds_k_ann_activate(double *H, int64_t rows, int64_t ld, const double *W, int64_t n, int64_t K,
                              const double *y, int64_t outputs, cudaStream_t stream);

// dig += the digits (core/exactsum.h) of the upper triangle of P (ld × ld row-major: cuBLAS's column-major
// lower), entry (i, j) at scale s0·col[i]·col[j] with low factor lo; dig: the packed triangle's high
// digits, then its low ones (ann_ops.gram_digits' layout).
cudaError_t ds_k_ann_split(const double *P, int64_t ld, const double *col, double s0, double lo, double *dig,
                           cudaStream_t stream);
// S (ld × ld row-major, full) = the sums the digits dig stand for (ds_k_ann_split's layout and scales).
cudaError_t ds_k_ann_join(const double *dig, int64_t ld, const double *col, double s0, double lo, double *S,
                          cudaStream_t stream);

// From S (ld × ld, row-major, symmetric): A = S[:K1, :K1] + λI (K1 × K1) and B (column-major K1 × C,
// ld K1) with B[i + c·K1] = S[i·ld + K1 + c].
cudaError_t ds_k_ann_solve_in(const double *S, int64_t ld, int64_t K1, int64_t C, double lambda, double *A,
                              double *B, cudaStream_t stream);

// Q[i + c·K1] = e[i] > cut ? Q[i + c·K1] / e[i] : 0 with cut = e[K1−1]·K1·rel (e ascending).
cudaError_t ds_k_ann_scale_eigen(double *Q, const double *e, int64_t K1, int64_t C, double rel, cudaStream_t stream);

// V[i·C + c] = B[i + c·K1]: column-major K1 × C to row-major.
cudaError_t ds_k_ann_transpose(const double *B, int64_t K1, int64_t C, double *V, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
