// gen.c: generation of the seed's least-squares problem (see gen.h for the distribution).
#include "gen.h"

#include <math.h>

#include "rng.h"

enum { STREAM_X = 1, STREAM_A = 2, STREAM_ROW = 3, STREAM_NOISE = 4 };

void gen_a_true(const gen_lsq *p, double *a)
{
    for (int64_t j = 0; j < p->cols; j++)
        a[j] = rng_uniform(p->seed, STREAM_A, (uint64_t)j) - 0.5;
}

void gen_lsq_rows(const gen_lsq *p, const double *a_true, int64_t row0, int64_t nrows, int x_f32,
                  void *X, double *y)
{
    const double wu = sqrt(1.0 - p->corr), wz = sqrt(p->corr);
    const int64_t n = p->cols;
    for (int64_t r = 0; r < nrows; r++) {
        const uint64_t i = (uint64_t)(row0 + r);
        const double common = p->corr > 0 ? wz * (rng_uniform(p->seed, STREAM_ROW, i) - 0.5) : 0.0;
        double dot = 0.0;
        for (int64_t j = 0; j < n; j++) {
            double x = wu * (rng_uniform(p->seed, STREAM_X, i * (uint64_t)n + (uint64_t)j) - 0.5) + common;
            if (x_f32) {
                float xf = (float)x;
                ((float *)X)[r * n + j] = xf;
                x = xf;
            } else {
                ((double *)X)[r * n + j] = x;
            }
            dot += x * a_true[j];
        }
        y[r] = dot + (p->noise > 0 ? p->noise * rng_normal(p->seed, STREAM_NOISE, i) : 0.0);
    }
}
