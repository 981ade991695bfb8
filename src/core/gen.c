// gen.c: generation of the seed's least-squares problem (see gen.h for the distribution).
#include "core/gen.h"

#include <math.h>
#include <pthread.h>

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
    int64_t row0, nrows;
    int x_f32;
    void *X;
    double *y;
} gen_part;

static void *gen_part_run(void *arg)
{
    gen_part *g = arg;
    gen_lsq_rows(g->p, g->a_true, g->row0, g->nrows, g->x_f32, g->X, g->y);
    return NULL;
}

void gen_lsq_rows_parallel(const gen_lsq *p, const double *a_true, int64_t row0, int64_t nrows, int x_f32,
                           void *X, double *y, int threads)
{
    enum { MAX_THREADS = 64 };
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    if (threads <= 1 || nrows < 4 * threads) {
        gen_lsq_rows(p, a_true, row0, nrows, x_f32, X, y);
        return;
    }
    pthread_t tid[MAX_THREADS];
    gen_part part[MAX_THREADS];
    const size_t row_bytes = (size_t)p->cols * (x_f32 ? 4 : 8);
    int started = 0;
    for (int t = 0; t < threads; t++) {
        int64_t a = nrows * t / threads, b = nrows * (t + 1) / threads;
        part[t] = (gen_part){p, a_true, row0 + a, b - a, x_f32, (char *)X + (size_t)a * row_bytes, y + a};
        if (pthread_create(&tid[t], NULL, gen_part_run, &part[t]) != 0)
            gen_part_run(&part[t]);  // no thread to be had: do this part here
        else
            tid[started++] = tid[t];
    }
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
}
