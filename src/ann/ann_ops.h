// ann_ops.h: the operations the network needs from a backend (ann_cpu.c, ann_cuda.c define them;
// ds_backend.ann reaches them).
// provides: ann_fix, ann_ops, ann_cpu_gram_digits
#ifndef DS_ANN_OPS_H
#define DS_ANN_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "core/ctx.h"

// The fixed point of the output Gram's digits (core/exactsum.h; ann_gram.h): entry (i, j) of the Gram
// is held at scale s0·col[i]·col[j] (powers of two, so the product is exact) with low-digit factor lo.
typedef struct ann_fix {
    int64_t block;      // rows a block (ann_block_rows)
    double s0, lo;
    const double *col;  // [ld], backend memory
} ann_fix;

// The operations the algorithm needs beyond ds_backend, for each backend. Pointers are backend memory
// unless said otherwise; every call is queued on the backend's queue.
typedef struct ann_ops {
    // dst[i] = (X[idx[i], 0 .. n−1], 1, z[idx[i]]): rows of width n + 2 (idx: backend memory).
    int (*gather_fit_rows)(ds_ctx *ctx, const double *X, int64_t n, const double *z, const int64_t *idx,
                           int64_t count, double *dst);
    // The same rows from a chunk of local rows c0 .. c0+rows−1 (X: rows × n, z: rows):
    // dst[pos[i]] = (X[idx[i] − c0, 0 .. n−1], 1, z[idx[i] − c0]) for i < count, every idx[i] in the chunk
    // (idx, pos: backend memory). A streamed pass gathers a round's rows by these as its chunks pass.
    int (*gather_chunk_rows)(ds_ctx *ctx, const double *X, int64_t n, const double *z, int64_t c0,
                             const int64_t *idx, const int64_t *pos, int64_t count, double *dst);
    // A round's routing (ann_rows.c builds tab): e = k·S + j is row j of neuron k's sorted subset L. Its
    // owner is the rank r with lo[r] ≤ j < lo[r+1], lo = tab + k·(p+1), and its place in the exchange
    // layout [owner][neuron][row] is tab[nb·(p+1) + k·p + r] + j − lo[r]. tab[nb·(2p+1) + r] is
    // owner r's first global row. tab: nb·(2p+1) + p + 1 entries, backend memory.
    // req[place(e)] = L[e] − (first row of owner(e)): the owner-local row numbers, for e < nb·S.
    int (*route_requests)(ds_ctx *ctx, const int64_t *L, int64_t nb, int64_t S, int p, const int64_t *tab,
                          int64_t *req);
    // A[e] = recv[place(e)] for e < nb·S, rows of width doubles.
    int (*route_place)(ds_ctx *ctx, const double *recv, int64_t width, int64_t nb, int64_t S, int p,
                       const int64_t *tab, double *A);
    // Doubles of backend scratch that fit takes for nb neurons.
    int64_t (*fit_scratch)(int64_t nb, int64_t S, int64_t n);
    // Hidden fits of nb neurons, global indices k0 .. k0+nb−1. A: nb blocks of S rows of width n + 2
    // as gather_fit_rows makes them. The target is z (regression) or ±arctanh(ANN_TARGET) by
    // z == (k mod classes). W: nb × (n+1). S ≥ n+1: normal equations; else the minimum-norm
    // solution. A neuron whose system is singular or whose weights are not finite gets zero weights
    // and a 1 in failed[i] (backend memory, nb ints). scratch: fit_scratch(nb, S, n) doubles.
    // A batched backend splits the neurons at the multiples of ann_fit_group(S, n) (ann_types.h).
    int (*fit)(ds_ctx *ctx, const double *A, int64_t nb, int64_t S, int64_t n, int classes, int64_t k0,
               double *W, int *failed, double *scratch);
    // H (rows × ld, row-major) = [tanh(X·W[:, :n]ᵀ + W[:, n]ᵀ) | 1 | T], T = y (outputs 1) or the
    // one-hot of the labels y (outputs C); with y NULL only the first K + 1 columns are written.
    int (*forward)(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K,
                   const double *y, int64_t outputs, double *H, int64_t ld);
    // Doubles of backend scratch that gram_digits takes for a Gram of width ld in blocks of block rows.
    int64_t (*gram_scratch)(int64_t ld, int64_t block);
    // dig += the digits of the Gram of [H 1 T] (H = forward(X, rows, n, W, K, y, outputs) of width ld) of
    // each block of fx->block rows of X (rows × n from a block's first row; only the set's last block
    // may be short). dig: the packed upper triangle, ann_tri(ld) = tri entries (i ≤ j, row by row): the
    // high digits in [0, tri), the low ones in [tri, 2·tri), at fx's scales. A block's Gram is formed the
    // same way whatever rows come before or after it in X, so its digits are the same bits on any rank
    // and in any chunk; and digits add exactly.
    int (*gram_digits)(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K,
                       const double *y, int64_t outputs, int64_t ld, const ann_fix *fx, double *scratch,
                       double *dig);
    // S (ld × ld, row-major, full symmetric) = the sums that the digits dig (gram_digits' layout) stand for.
    int (*gram_join)(ds_ctx *ctx, const double *dig, int64_t ld, const ann_fix *fx, double *S);
    // P (rows × outputs) = H[:, :K+1] · V (V: (K+1) × outputs, row-major).
    int (*output)(ds_ctx *ctx, const double *H, int64_t rows, int64_t ld, int64_t K, const double *V,
                  int64_t outputs, double *P);
    // S = [HᵀH HᵀT; …] (ld × ld, row-major, full symmetric, K1 = K + 1 ≤ ld, T in columns K1 ..
    // K1 + outputs − 1). Solves (HᵀH + λI)·V = HᵀT into V (K1 × outputs, row-major) by Cholesky; when
    // that fails, by a symmetric eigendecomposition that drops eigenvalues below a relative cutoff.
    // S is overwritten. route receives "cholesky" or "eigen".
    int (*solve)(ds_ctx *ctx, double *S, int64_t ld, int64_t K1, int64_t outputs, double lambda, double *V,
                 char *route, size_t route_len);
} ann_ops;

// The CPU's gram_digits on the given number of threads (the op takes the rank's cores, as many as the
// blocks and the Grams' memory allow); for the tests: the digits do not depend on it.
int ann_cpu_gram_digits(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K,
                        const double *y, int64_t outputs, int64_t ld, const ann_fix *fx, int threads, double *dig);

#endif
