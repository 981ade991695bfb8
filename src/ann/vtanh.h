// vtanh.h: tanh of a neuron layer's pre-activations in vectorisable loops (the CPU backend's H of
// `dsolve ann`): exp by a degree-13 polynomial on a reduced argument, compiled for AVX-512, AVX2 and the
// baseline, chosen at load time. Absolute error within 4e-16 of tanh; NaN stays NaN.
// provides: ds_tanh_affine, ds_tanh_shift
#ifndef DS_VTANH_H
#define DS_VTANH_H

#include <stdint.h>

// h[k] = tanh(wt[n·K + k] + Σ_{c<n} x[c]·wt[c·K + k]), k < K: wt is the layer's weights input-major,
// the bias row last ((n + 1) × K).
void ds_tanh_affine(const double *x, int64_t n, const double *wt, int64_t K, double *h);

// h[k] = tanh(h[k] + b[k]), k < K.
void ds_tanh_shift(double *h, const double *b, int64_t K);

#endif
