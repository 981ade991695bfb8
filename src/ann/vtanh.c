// vtanh.c: see vtanh.h. The loops run over fixed blocks of VT_BLOCK values so that the compiler
// vectorises them; target_clones builds them for AVX-512, AVX2 and the baseline. Compiled with
// -fno-trapping-math (CMakeLists.txt): the selects of vt_tanh become vector blends only without it.
// provides: ds_tanh_affine, ds_tanh_shift
#include "ann/vtanh.h"

#include <string.h>

enum { VT_BLOCK = 64 };

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(VT_NO_CLONES)
#define VT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VT_CLONES
#endif

// tanh(z) = sign(z)·(1 − e)/(1 + e), e = exp(−2|z|), |z| capped at 20 (tanh(20) rounds to 1). exp(x) for
// x in [−40, 0]: x = k·ln2 + r, |r| ≤ ln2/2, k found by the 1.5·2^52 rounding trick, e^r by its Taylor
// polynomial to r^13 (truncation below 1e-17), 2^k built in the exponent bits.
static inline double vt_tanh(double z)
{
    const double shift = 0x1.8p52, inv_ln2 = 0x1.71547652b82fep0, ln2_hi = 0x1.62e42fefa39efp-1,
                 ln2_lo = 0x1.abc9e3b39803fp-56;
    double a = __builtin_fabs(z);
    a = a < 20.0 ? a : 20.0;
    const double x = -2.0 * a, kd = x * inv_ln2 + shift, kf = kd - shift;
    const double r = (x - kf * ln2_hi) - kf * ln2_lo;
    double p = 1.0 / 6227020800.0;  // 1/13!
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    uint64_t kb, sb;
    memcpy(&kb, &kd, 8);
    const double s0 = shift;
    memcpy(&sb, &s0, 8);
    const uint64_t eb = (kb - sb + 1023u) << 52;  // k in [−58, 0]: a normal power of two
    double scale;
    memcpy(&scale, &eb, 8);
    const double e = p * scale, t = (1.0 - e) / (1.0 + e);
    return z != z ? z : __builtin_copysign(t, z);
}

// h[k] = tanh(z[k]), k < VT_BLOCK (a separate loop over unaliased arrays, so that it vectorises).
static inline __attribute__((always_inline)) void vt_tanh_block(const double *restrict z, double *restrict h)
{
    for (int k = 0; k < VT_BLOCK; k++)
        h[k] = vt_tanh(z[k]);
}

VT_CLONES void ds_tanh_affine(const double *x, int64_t n, const double *wt, int64_t K, double *h)
{
    for (int64_t k0 = 0; k0 < K; k0 += VT_BLOCK) {
        const int64_t nb = K - k0 < VT_BLOCK ? K - k0 : VT_BLOCK;
        double z[VT_BLOCK];
        if (nb == VT_BLOCK) {
            const double *b = wt + n * K + k0;
            for (int k = 0; k < VT_BLOCK; k++)
                z[k] = b[k];
            for (int64_t c = 0; c < n; c++) {
                const double xc = x[c], *w = wt + c * K + k0;
                for (int k = 0; k < VT_BLOCK; k++)
                    z[k] += xc * w[k];
            }
            vt_tanh_block(z, h + k0);
        } else {
            for (int64_t k = 0; k < nb; k++) {
                double s = wt[n * K + k0 + k];
                for (int64_t c = 0; c < n; c++)
                    s += x[c] * wt[c * K + k0 + k];
                z[k] = s;
            }
            for (int64_t k = 0; k < nb; k++)
                h[k0 + k] = vt_tanh(z[k]);
        }
    }
}

VT_CLONES void ds_tanh_shift(double *h, const double *b, int64_t K)
{
    int64_t k0 = 0;
    for (; k0 + VT_BLOCK <= K; k0 += VT_BLOCK)
        for (int k = 0; k < VT_BLOCK; k++)
            h[k0 + k] = vt_tanh(h[k0 + k] + b[k0 + k]);
    for (; k0 < K; k0++)
        h[k0] = vt_tanh(h[k0] + b[k0]);
}
