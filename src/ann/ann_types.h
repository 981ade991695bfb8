// ann_types.h: the network's options, model and metrics, shared by the algorithm (ann.c), its hidden layer and
// row exchange (ann_hidden.c, ann_rows.c) and the model file (ann_io.c).
// provides: ann_opts, ann_model, ann_metrics, ANN_TARGET, ANN_RIDGE_REL, ANN_EIGEN_CUT, ANN_FIT_GROUP, ann_fit_group
#ifndef DS_ANN_TYPES_H
#define DS_ANN_TYPES_H

#include <stdint.h>

#define ANN_TARGET 0.98  // hidden targets live in [−0.98, 0.98] before arctanh

struct ds_ckpt;  // core/ckpt.h
struct ann_stream;  // ann_stream.h

typedef struct ann_opts {
    int64_t neurons;       // K
    int64_t subset;        // rows a neuron is fitted on; 0: rows / neurons (at least 1)
    double ridge;          // λ of the output layer; < 0: auto (ANN_RIDGE_REL · trace(HᵀH) / (K+1))
    uint64_t seed;         // draws the subsets
    int classes;           // 0: regression on y; C > 0: y holds labels 0 .. C−1, C one-vs-rest outputs
    int64_t budget_bytes;  // bound on the backend memory of one exchange round or one H chunk; 0: default
    int64_t hidden_bytes;  // streamed: bound on a round of hidden fits (each round is a pass over X); 0: budget_bytes
    struct ds_ckpt *ckpt;  // --checkpoint and --restart (ann_ckpt.h), or NULL
    struct ann_stream *stream;  // X streamed by a row source (ann_stream.h), or NULL: in backend memory
} ann_opts;

#define ANN_RIDGE_REL 1e-10
#define ANN_EIGEN_CUT 1e-15  // eigenvalues below ANN_EIGEN_CUT · K1 · the largest are dropped
// The hidden neurons go to ranks, rounds and batched fits in groups (global indices g·G ..): a batched
// library call picks its kernel by its batch count too, so a neuron's weights have the same bits on any
// number of ranks and any memory budget only if every call holds the same group. G = ann_fit_group(S, n):
// ANN_FIT_GROUP, halved while the group's fit rows (S of n + 2 doubles a neuron) pass ANN_FIT_GROUP_BYTES;
// a function of the problem alone. (A budget that holds fewer than G neurons a round cuts the groups.)
#define ANN_FIT_GROUP 128
#define ANN_FIT_GROUP_BYTES (64.0 * 1024 * 1024)

static inline int64_t ann_fit_group(int64_t S, int64_t n)
{
    const double neuron = (double)S * (double)(n + 2) * 8.0;
    int64_t g = ANN_FIT_GROUP;
    while (g > 1 && (double)g * neuron > ANN_FIT_GROUP_BYTES)
        g /= 2;
    return g;
}

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

typedef struct ann_metrics {
    int64_t rows;
    double r, rmse, r2;  // Pearson r, root mean square error, R² (regression; NaN with classes)
    double accuracy;     // fraction of rows whose largest output is their label (NaN for regression)
} ann_metrics;

#endif
