/*
 * gemm_bf16_avx2.c - trident's bf16 GEMM (gemm_bf16_pairs.h) on AVX2 and
 * FMA, for CPUs without bf16 arithmetic.
 *
 * A k-pair widens to fp32 in two integer operations (the low bf16 shifted
 * up 16 bits, the high one masked), and each lane then takes the pair's
 * two products with two FMAs, high first, as vdpbf16ps adds them. The
 * micro-tile is 4 rows x 2 vectors (16 columns): 8 accumulators, the two
 * widened halves of 2 slivers of B and a broadcast pair of A fit the 16
 * ymm registers. Operands stay bf16 in memory, half the bytes of the
 * widened copies the fp32 path makes.
 *
 * Compiled for AVX2 + FMA whatever the build's flags; gemm_cpu.c calls it
 * only where gemm_bf16_cpu.c says the CPU has them.
 *
 * Not collective.
 */
#include "gemm_bf16.h"

#if TRI_GEMM_BF16_X86

#include <immintrin.h>

/* everything below, the included loops too, compiled for this ISA */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx2,fma")
#endif

#define BF16_VW 8
#define BF16_MR 4
#define BF16_NV 2

typedef __m256 bf16_acc;
typedef struct { __m256 lo, hi; } bf16_bvec;
typedef bf16_bvec bf16_apair;

static inline bf16_acc acc_zero(void) { return _mm256_setzero_ps(); }
static inline bf16_acc acc_load(const float *c) { return _mm256_loadu_ps(c); }
static inline void acc_store(float *c, bf16_acc v) { _mm256_storeu_ps(c, v); }
static inline bf16_acc acc_add(bf16_acc a, bf16_acc b) { return _mm256_add_ps(a, b); }

/* 8 pair words as the fp32 of their low and of their high halves */
static inline bf16_bvec widen_pairs(__m256i v)
{
    bf16_bvec w;
    w.lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    w.hi = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
    return w;
}

static inline bf16_bvec bvec_load(const uint32_t *b)
{
    return widen_pairs(_mm256_loadu_si256((const __m256i *)b));
}

/* the pair broadcast straight from memory (a load, no integer moves) */
static inline bf16_apair apair_bcast(const uint32_t *a)
{
    return widen_pairs(_mm256_castps_si256(_mm256_broadcast_ss((const float *)a)));
}

static inline bf16_acc acc_dot(bf16_acc c, bf16_apair a, bf16_bvec b)
{
    c = _mm256_fmadd_ps(a.hi, b.hi, c);
    return _mm256_fmadd_ps(a.lo, b.lo, c);
}

#define BF16_GEMM_FN gemm_bf16_avx2
#include "gemm_bf16_pairs.h"

#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
