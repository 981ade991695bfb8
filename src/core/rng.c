// rng.c: splitmix64-style mixing of (seed, stream, index); passes as a hash, not a cryptographic one.
#include "core/rng.h"

#include <math.h>

static inline uint64_t rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t rng_stream_key(uint64_t seed, uint64_t stream)
{
    return rng_mix(seed * 0x9e3779b97f4a7c15ULL + stream * 0xd1b54a32d192ed03ULL + 0x632be59bd9b4e019ULL);
}

uint64_t rng_bits_keyed(uint64_t key, uint64_t i)
{
    return rng_mix(key + i * 0x9e3779b97f4a7c15ULL);
}

uint64_t rng_bits(uint64_t seed, uint64_t stream, uint64_t i)
{
    return rng_bits_keyed(rng_stream_key(seed, stream), i);
}

double rng_uniform(uint64_t seed, uint64_t stream, uint64_t i)
{
    return (double)(rng_bits(seed, stream, i) >> 11) * 0x1.0p-53;
}

double rng_normal(uint64_t seed, uint64_t stream, uint64_t i)
{
    double u1 = ((double)(rng_bits(seed, stream, 2 * i) >> 11) + 0.5) * 0x1.0p-53;
    double u2 = rng_uniform(seed, stream, 2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
