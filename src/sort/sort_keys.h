// sort_keys.h: the key types of `dsolve sort` and the bijection of each onto unsigned integers whose
// unsigned order is the sort order (one radix path and one merge serve all types). Usable from C and
// CUDA (host and device). Floats: the total order -inf < ... < -0.0 < +0.0 < ... < +inf < NaN; a NaN's
// sign bit is dropped (a -NaN is stored back as +NaN with the same payload); NaNs order by payload.
// Descending: the complement, so descending is exactly the reverse order (NaNs first).
// provides: sort_dtype, SORT_NTYPES, sk_map32, sk_unmap32, sk_map64, sk_unmap64, sk_hash
#ifndef DS_SORT_KEYS_H
#define DS_SORT_KEYS_H

#include <stdint.h>

// Same numbering as h5io_key_type.
enum sort_dtype { SORT_I32, SORT_I64, SORT_U32, SORT_U64, SORT_F32, SORT_F64, SORT_NTYPES };

#ifdef __CUDACC__
#define SK_FN __host__ __device__ static inline
#else
#define SK_FN static inline
#endif

SK_FN uint32_t sk_map32(uint32_t x, int dtype, int desc)
{
    if (dtype == SORT_I32) {
        x ^= 0x80000000u;
    } else if (dtype == SORT_F32) {
        if ((x & 0x7fffffffu) > 0x7f800000u)
            x &= 0x7fffffffu;
        x = (x & 0x80000000u) ? ~x : (x | 0x80000000u);
    }
    return desc ? ~x : x;
}

SK_FN uint32_t sk_unmap32(uint32_t u, int dtype, int desc)
{
    if (desc)
        u = ~u;
    if (dtype == SORT_I32)
        return u ^ 0x80000000u;
    if (dtype == SORT_F32)
        return (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
    return u;
}

SK_FN uint64_t sk_map64(uint64_t x, int dtype, int desc)
{
    const uint64_t top = 0x8000000000000000ull;
    if (dtype == SORT_I64) {
        x ^= top;
    } else if (dtype == SORT_F64) {
        if ((x & ~top) > 0x7ff0000000000000ull)
            x &= ~top;
        x = (x & top) ? ~x : (x | top);
    }
    return desc ? ~x : x;
}

SK_FN uint64_t sk_unmap64(uint64_t u, int dtype, int desc)
{
    const uint64_t top = 0x8000000000000000ull;
    if (desc)
        u = ~u;
    if (dtype == SORT_I64)
        return u ^ top;
    if (dtype == SORT_F64)
        return (u & top) ? (u & ~top) : ~u;
    return u;
}

// The order-independent checksum adds sk_hash of every mapped key (mod 2^64).
SK_FN uint64_t sk_hash(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
