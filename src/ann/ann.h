// ann.h: the network trained by least squares (Bakas et al., SERRA 2023): one tanh hidden layer,
// y ≈ Σ_k v_k·tanh([x 1]·w_k) + v_0. Each hidden neuron k is a least-squares fit [X_s 1]·w_k = t_s on
// its own random subset s of the rows (t = arctanh of y mapped into (−1, 1); with classes, the
// one-vs-rest target ±0.98 of class k mod C); then the output layer solves (HᵀH + λI)·V = HᵀT.
// Distribution: rows are blocked across ranks; neurons are sharded across ranks, each rank fetching
// the rows its neurons need from their owners in one exchange; HᵀH and HᵀT are summed in one allreduce.
// provides: ann_opts, ann_model, ann_times, ann_metrics, ann_train, ann_predict, ann_model_free, ann_ops,
//           ann_ops_cpu, ann_ops_cuda, ANN_TARGET, ANN_RIDGE_REL, ANN_EIGEN_CUT
#ifndef DS_ANN_H
#define DS_ANN_H

#include <stdint.h>

#include "core/ctx.h"
#include "core/data.h"

#define ANN_TARGET 0.98  // hidden targets live in [−0.98, 0.98] before arctanh

typedef struct ann_opts {
    int64_t neurons;       // K
    int64_t subset;        // rows a neuron is fitted on; 0: rows / neurons (at least 1)
    double ridge;          // λ of the output layer; < 0: auto (ANN_RIDGE_REL · trace(HᵀH) / (K+1))
    uint64_t seed;         // draws the subsets
    int classes;           // 0: regression on y; C > 0: y holds labels 0 .. C−1, C one-vs-rest outputs
    int64_t budget_bytes;  // bound on the backend memory of one exchange round or one H chunk; 0: default
} ann_opts;

#define ANN_RIDGE_REL 1e-10
#define ANN_EIGEN_CUT 1e-15  // eigenvalues below ANN_EIGEN_CUT · K1 · the largest are dropped

typedef struct ann_model {
    int64_t n, neurons, outputs;  // inputs, K, C (1 for regression)
    int classes;                  // 0: regression
    double *W;                    // [K × (n+1)], host: row k is (w_k, b_k)
    double *V;                    // [(K+1) × outputs], host: row K is the output bias
    double y_scale, y_shift;      // hidden targets: arctanh(y_scale·y + y_shift)
    double ridge;                 // the λ the solve used
    char route[48];               // how the output layer was solved
    int64_t failed;               // neurons whose fit failed (zeroed)
    int64_t subset;
    uint64_t seed;
} ann_model;

typedef struct ann_times {
    double fit;     // subsets, row exchange, hidden fits, all-gather of W
    double hidden;  // H = tanh([X 1]·Wᵀ) and its Gram, with the allreduce
    double solve;   // the output layer
    double total;
} ann_times;

typedef struct ann_metrics {
    int64_t rows;
    double r, rmse, r2;  // Pearson r, root mean square error, R² (regression; NaN with classes)
    double accuracy;     // fraction of rows whose largest output is their label (NaN for regression)
} ann_metrics;

// Trains on d (labels as doubles in d->y when o->classes > 0). Collective; m is filled on every rank
// and holds allocations (ann_model_free) even when training fails.
// DS_ERR_INPUT for a constant y or labels out of range, DS_ERR_USAGE for neurons > rows or a subset
// larger than the rows.
int ann_train(ds_ctx *ctx, const ds_data *d, const ann_opts *o, ann_model *m, ann_times *t);

// Outputs for the rank's rows of d into P (host, d->X.rows × m->outputs, row-major); P may be NULL.
// With has_y, met receives the metrics over all ranks' rows. Collective.
int ann_predict(ds_ctx *ctx, const ann_model *m, const ds_data *d, int has_y, double *P, ann_metrics *met);

void ann_model_free(ann_model *m);

// The operations the algorithm needs beyond ds_backend, for each backend. Pointers are backend memory
// unless said otherwise; every call is queued on the backend's queue.
typedef struct ann_ops {
    // dst[i] = (X[idx[i], 0 .. n−1], 1, z[idx[i]]): rows of width n + 2 (idx: backend memory).
    int (*gather_fit_rows)(ds_ctx *ctx, const double *X, int64_t n, const double *z, const int64_t *idx,
                           int64_t count, double *dst);
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
    int (*fit)(ds_ctx *ctx, const double *A, int64_t nb, int64_t S, int64_t n, int classes, int64_t k0,
               double *W, int *failed, double *scratch);
    // H (rows × ld, row-major) = [tanh(X·W[:, :n]ᵀ + W[:, n]ᵀ) | 1 | T], T = y (outputs 1) or the
    // one-hot of the labels y (outputs C); with y NULL only the first K + 1 columns are written.
    int (*forward)(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K,
                   const double *y, int64_t outputs, double *H, int64_t ld);
    // Optional (NULL: output_gram forms H in chunks by forward and sums be->gram's): acc[0 .. ld·ld),
    // zero on entry, = HᵀH (full symmetric) for H = forward(X, rows, n, W, K, y, outputs) of width ld,
    // without storing H. acc's other entries are left alone.
    int (*forward_gram)(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K,
                        const double *y, int64_t outputs, int64_t ld, double *acc);
    // P (rows × outputs) = H[:, :K+1] · V (V: (K+1) × outputs, row-major).
    int (*output)(ds_ctx *ctx, const double *H, int64_t rows, int64_t ld, int64_t K, const double *V,
                  int64_t outputs, double *P);
    // dst[i] += src[i].
    int (*add)(ds_ctx *ctx, double *dst, const double *src, int64_t count);
    // S = [HᵀH HᵀT; …] (ld × ld, row-major, full symmetric, K1 = K + 1 ≤ ld, T in columns K1 ..
    // K1 + outputs − 1). Solves (HᵀH + λI)·V = HᵀT into V (K1 × outputs, row-major) by Cholesky; when
    // that fails, by a symmetric eigendecomposition that drops eigenvalues below a relative cutoff.
    // S is overwritten. route receives "cholesky" or "eigen".
    int (*solve)(ds_ctx *ctx, double *S, int64_t ld, int64_t K1, int64_t outputs, double lambda, double *V,
                 char *route, size_t route_len);
} ann_ops;

// The CPU's forward_gram with its thread count and tile (rows) given (the op chooses them from the
// rank's cores and the Grams' memory); for the tests.
int ann_cpu_gram(ds_ctx *ctx, const double *X, int64_t rows, int64_t n, const double *W, int64_t K, const double *y,
                 int64_t outputs, int64_t ld, int threads, int64_t tile, double *acc);

#endif
