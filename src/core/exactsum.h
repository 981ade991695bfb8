// exactsum.h: sums of doubles whose bits do not depend on how the terms are grouped (over ranks, blocks,
// threads): each term is split into two integer-valued "digits" of a fixed point shared by all terms,
// and the digits are added as doubles. Every digit and every partial sum of digits is an integer below
// 2^53, so each addition is exact and the sums are the same bits in any order, through MPI or NCCL's
// ordinary double allreduce. Header only; the functions are also device functions under nvcc.
//
// A component whose terms t_u (u < terms) satisfy Σ_u |t_u| ≤ bound is held as d0·q + d1·q/lo with
// q = 2^e / 2^52 (2^e > bound, exactsum_scale) and lo = 2^(52 − h) (2^h ≥ terms, exactsum_lo):
//   d0 = rint(t/q): |Σ d0| ≤ bound/q + terms/2 < 2^53;   r = t − d0·q is exact, |r| ≤ q/2;
//   d1 = rint(r·lo/q): |d1| ≤ 2^(51 − h), so |Σ d1| ≤ 2^51.
// Error of the sum: ≤ terms · q/(2·lo) ≤ 2^(e − 105 + 2h), i.e. relative to the bound at most
// 4·terms²·2^-105, which is below the worst case of the plain double sum (terms · 2^-53 · bound) for any
// terms < 2^50, and in practice some 2^-70 of the bound: the result is the correctly rounded sum of the
// terms to far below a double's precision. NaN or Inf terms make the sum NaN (they survive rint).
// provides: exactsum_scale, exactsum_lo, exactsum_split, exactsum_join
#ifndef DS_EXACTSUM_H
#define DS_EXACTSUM_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DS_EXACT_FN __host__ __device__ static inline
#else
#define DS_EXACT_FN static inline
#endif

// 1/q for terms whose absolute values add up to at most bound: a power of two with bound/q < 2^52.
// Bounds that are 0, tiny or not finite get a scale that keeps q and 1/q finite (their terms are 0, or
// the sum is NaN anyway).
DS_EXACT_FN double exactsum_scale(double bound)
{
    int e = 0;
    (void)frexp(bound, &e);  // bound < 2^e
    e = isfinite(bound) && bound > 0 ? e : -900;
    e = e < -900 ? -900 : e > 900 ? 900 : e;
    return ldexp(1.0, 52 - e);
}

// lo for at most terms terms: 2^(52 − h) with 2^h ≥ terms (h ≥ 1).
DS_EXACT_FN double exactsum_lo(int64_t terms)
{
    int h = 1;
    while (h < 52 && ((int64_t)1 << h) < terms)
        h++;
    return ldexp(1.0, 52 - h);
}

// The digits of t at scale s = 1/q: *d0 += rint(t·s), *d1 += rint(r·s·lo).
DS_EXACT_FN void exactsum_split(double t, double s, double lo, double *d0, double *d1)
{
    const double hi = rint(t * s);
    const double r = t - hi / s;  // exact: hi/s is a multiple of q and |r| ≤ min(|t|, q/2)
    *d0 += hi;
    *d1 += rint(r * s * lo);
}

// The sum the digit sums d0, d1 stand for at scale s (one rounding).
DS_EXACT_FN double exactsum_join(double d0, double d1, double s, double lo)
{
    return d0 / s + d1 / (s * lo);
}

#undef DS_EXACT_FN

#endif
