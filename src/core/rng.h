// rng.h: counter-based random numbers: value i of stream s under seed k is a pure function of
// (k, s, i), so any rank can generate any row, and a file's contents do not depend on the rank count.
// provides: rng_bits, rng_stream_key, rng_bits_keyed, rng_uniform, rng_normal
#ifndef DS_RNG_H
#define DS_RNG_H

#include <stdint.h>

uint64_t rng_bits(uint64_t seed, uint64_t stream, uint64_t i);
// rng_bits(seed, stream, i) == rng_bits_keyed(rng_stream_key(seed, stream), i): a long run of one
// stream mixes its key once.
uint64_t rng_stream_key(uint64_t seed, uint64_t stream);
uint64_t rng_bits_keyed(uint64_t key, uint64_t i);
double rng_uniform(uint64_t seed, uint64_t stream, uint64_t i);  // [0, 1), 53 bits
double rng_normal(uint64_t seed, uint64_t stream, uint64_t i);   // standard normal (Box–Muller)

#endif
