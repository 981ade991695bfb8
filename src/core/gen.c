// gen.c: generation of the seed's least-squares problem (see gen.h for the distribution).
#include "core/gen.h"

#include <math.h>
#include <stddef.h>

#include "core/par.h"
#include "core/rng.h"

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
        double dot = 0.0, sum = 0.0;
        for (int64_t j = 0; j < n; j++) {
            double x = wu * (rng_uniform(p->seed, STREAM_X, i * (uint64_t)n + (uint64_t)j) - 0.5) + common;
            if (x_f32) {
                float xf = (float)x;
                ((float *)X)[r * n + j] = xf;
                x = xf;
            } else {
                ((double *)X)[r * n + j] = x;
            }
            dot += a_true ? x * a_true[j] : 0.0;
            sum += x;
        }
        y[r] = (p->kind == GEN_ANN ? 0.5 * sin(sum) : dot) + (p->noise > 0 ? p->noise * rng_normal(p->seed, STREAM_NOISE, i) : 0.0);
    }
}

typedef struct gen_part {
    const gen_lsq *p;
    const double *a_true;
    int64_t row0;
    int x_f32;
    void *X;
    double *y;
} gen_part;

static void gen_part_run(void *arg, int part, int64_t lo, int64_t hi)
{
    const gen_part *g = arg;
    const size_t row_bytes = (size_t)g->p->cols * (g->x_f32 ? 4 : 8);
    gen_lsq_rows(g->p, g->a_true, g->row0 + lo, hi - lo, g->x_f32, (char *)g->X + (size_t)lo * row_bytes, g->y + lo);
}

void gen_lsq_rows_parallel(const gen_lsq *p, const double *a_true, int64_t row0, int64_t nrows, int x_f32,
                           void *X, double *y, int threads)
{
    gen_part g = {p, a_true, row0, x_f32, X, y};
    par_for(threads, nrows, 4, gen_part_run, &g);
}
