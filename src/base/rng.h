/*
 * rng.h - counter-based random numbers: a value is a pure function of
 * (key, counter), with no state to carry between ranks or steps.
 *
 * This is what makes initialisation layout-independent (doc/design.md,
 * invariant 1): element i of parameter "h.3.mlp.fc.w" gets the same number
 * whichever rank owns it, because key = rng_key(seed, "h.3.mlp.fc.w") and
 * counter = i, its index in the full logical tensor.
 */
#ifndef TRI_SRC_RNG_H
#define TRI_SRC_RNG_H

#include <math.h>
#include <stdint.h>

/* splitmix64's finalizer on x in place: a bijective 64-bit mixer with full
 * avalanche. A macro so that it applies lane-wise to GCC vectors of
 * uint64_t as well (the checkpoint checksum's AVX2 path). */
#define RNG_MIX64_INPLACE(x)              \
    do {                                  \
        (x) ^= (x) >> 30;                 \
        (x) *= 0xbf58476d1ce4e5b9ULL;     \
        (x) ^= (x) >> 27;                 \
        (x) *= 0x94d049bb133111ebULL;     \
        (x) ^= (x) >> 31;                 \
    } while (0)

static inline uint64_t rng_mix64(uint64_t x)
{
    RNG_MIX64_INPLACE(x);
    return x;
}

/* A key from a seed and a name (FNV-1a of the name, mixed with the seed). */
static inline uint64_t rng_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    return rng_mix64(h ^ rng_mix64(seed + 0x9e3779b97f4a7c15ULL));
}

static inline uint64_t rng_u64(uint64_t key, uint64_t counter)
{
    return rng_mix64(key ^ rng_mix64(counter * 0x9e3779b97f4a7c15ULL + 1));
}

/* Uniform in (0, 1): never 0, so log() is safe. */
static inline double rng_uniform(uint64_t key, uint64_t counter)
{
    return ((double)(rng_u64(key, counter) >> 11) + 0.5) * 0x1.0p-53;
}

/* Standard normal for element i (Box-Muller on counters 2i and 2i+1). */
static inline double rng_normal(uint64_t key, uint64_t i)
{
    double u1 = rng_uniform(key, 2 * i);
    double u2 = rng_uniform(key, 2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
