// gen.h: the seed's least-squares problem, generated row by row from a counter-based generator, so
// rows are the same whichever rank makes them.
//   X_ij = √(1−ρ)·(u_ij − ½) + √ρ·(z_i − ½),  u, z uniform in [0, 1)  (ρ = 0: uniform in [−½, ½))
//   a_true_j uniform in [−½, ½);  y_i = Σ_j X_ij·a_true_j + σ·N(0, 1), X_ij as stored (float32 or 64)
// The network's problem (kind GEN_ANN, the seed's): the same X, and y_i = sin(Σ_j X_ij)/2 + σ·N(0, 1).
// provides: gen_lsq, gen_a_true, gen_lsq_rows, gen_lsq_rows_parallel
#ifndef DS_GEN_H
#define DS_GEN_H

#include <stdint.h>

enum { GEN_LSQ = 0, GEN_ANN = 1 };

typedef struct gen_lsq {
    int kind;  // GEN_LSQ or GEN_ANN
    int64_t rows, cols;
    uint64_t seed;
    double noise;  // σ
    double corr;   // ρ in [0, 1): pairwise correlation of the columns
} gen_lsq;

void gen_a_true(const gen_lsq *p, double *a);

// Rows row0 .. row0+nrows−1: X (nrows × cols, row-major, float when x_f32) and y. a_true may be NULL
// for GEN_ANN.
void gen_lsq_rows(const gen_lsq *p, const double *a_true, int64_t row0, int64_t nrows, int x_f32,
                  void *X, double *y);

// The same, spread over up to threads POSIX threads by rows (identical output).
void gen_lsq_rows_parallel(const gen_lsq *p, const double *a_true, int64_t row0, int64_t nrows, int x_f32,
                           void *X, double *y, int threads);

#endif
