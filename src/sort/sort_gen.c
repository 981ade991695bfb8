// sort_gen.c: benchmark keys for `dsolve sort --gen`: key i of a distribution is a pure function of
// (seed, i) (rng.h), so the keys do not depend on the rank count; generated on threads.
// provides: sort_gen_keys
#include <math.h>
#include <string.h>

#include "core/par.h"
#include "core/rng.h"
#include "sort/sort.h"

enum { STREAM_KEYS = 31, ZIPF_VALUES = 1 << 20, STAGGER_BLOCKS = 64 };

typedef struct gen_job {
    int dtype, dist;
    uint64_t seed;
    int64_t n_global, i0, n;
    void *out;
} gen_job;

// A value in [0, 1) for the distributions that are shaped before the type: ordered, reversed, few
// distinct, staggered (64 blocks of the index range, each in its own band: the classic benchmark).
static double shape(int dist, uint64_t seed, int64_t N, int64_t i)
{
    double u = rng_uniform(seed, STREAM_KEYS, (uint64_t)i);
    switch (dist) {
    case DIST_SORTED: return (double)i / (double)N;
    case DIST_REVERSE: return (double)(N - 1 - i) / (double)N;
    case DIST_FEW: return (double)(rng_bits(seed, STREAM_KEYS, (uint64_t)i) % 16) / 16.0;
    case DIST_STAGGER: {
        int64_t b = (int64_t)((double)i / (double)N * STAGGER_BLOCKS), half = STAGGER_BLOCKS / 2;
        int64_t band = b < half ? 2 * b + 1 : 2 * (b - half);
        return ((double)band + u) / STAGGER_BLOCKS;
    }
    default: return u;
    }
}

// Key i as the native type.
static void gen_one(const gen_job *j, int64_t i, void *dst)
{
    const int t = j->dtype;
    const int is_float = t == SORT_F32 || t == SORT_F64;
    uint64_t bits = rng_bits(j->seed, STREAM_KEYS, (uint64_t)i);
    double x;      // float value, or an integer value for the integer types
    int raw = 0;   // 1: the integer types take bits as they are
    switch (j->dist) {
    case DIST_UNIFORM: raw = !is_float; x = 2.0 * rng_uniform(j->seed, STREAM_KEYS, (uint64_t)i) - 1.0; break;
    case DIST_EQUAL: x = is_float ? 0.5 : 42; break;
    case DIST_ZIPF: x = floor(pow((double)ZIPF_VALUES, rng_uniform(j->seed, STREAM_KEYS, (uint64_t)i))) - 1; break;
    case DIST_GAUSS: x = rng_normal(j->seed, STREAM_KEYS, (uint64_t)i) * (is_float ? 1.0 : (t == SORT_I32 || t == SORT_U32 ? 1e8 : 1e17)); break;
    default: {
        double u = shape(j->dist, j->seed, j->n_global, i);
        // integers: the whole range of the type; floats: [-1, 1)
        double lo = t == SORT_I32 ? -2147483648.0 : t == SORT_I64 ? -9223372036854775808.0 : 0.0;
        double span = t == SORT_I32 || t == SORT_U32 ? 4294967296.0 : 18446744073709551616.0;
        x = is_float ? 2.0 * u - 1.0 : lo + u * span;
    }
    }
    if (t == SORT_U32 && !raw && j->dist == DIST_GAUSS)
        x += 2147483648.0;
    if (t == SORT_U64 && !raw && j->dist == DIST_GAUSS)
        x += 9223372036854775808.0;
    switch (t) {
    case SORT_I32: *(int32_t *)dst = raw ? (int32_t)(uint32_t)bits : (int32_t)fmax(fmin(x, 2147483647.0), -2147483648.0); break;
    case SORT_U32: *(uint32_t *)dst = raw ? (uint32_t)bits : (uint32_t)fmax(fmin(x, 4294967295.0), 0.0); break;
    case SORT_I64: *(int64_t *)dst = raw ? (int64_t)bits : x >= 9223372036854775807.0 ? INT64_MAX : (int64_t)fmax(x, -9223372036854775808.0); break;
    case SORT_U64: *(uint64_t *)dst = raw ? bits : x >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)fmax(x, 0.0); break;
    case SORT_F32: *(float *)dst = (float)x; break;
    default: *(double *)dst = x;
    }
}

static void gen_part(void *arg, int part, int64_t lo, int64_t hi)
{
    const gen_job *j = arg;
    const int size = sort_dtype_size(j->dtype);
    for (int64_t k = lo; k < hi; k++)
        gen_one(j, j->i0 + k, (char *)j->out + k * size);
}

void sort_gen_keys(int dtype, int dist, uint64_t seed, int64_t n_global, int64_t i0, int64_t n, void *out, int threads)
{
    gen_job job = {dtype, dist, seed, n_global, i0, n, out};
    par_for(n < 65536 ? 1 : threads, n, 1, gen_part, &job);
}
