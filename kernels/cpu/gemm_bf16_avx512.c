/*
 * gemm_bf16_avx512.c - trident's bf16 GEMM (gemm_bf16_pairs.h) on
 * AVX512_BF16: each vdpbf16ps adds two bf16 products into each of 16 fp32
 * lanes, twice the multiply-adds of an fp32 FMA of the same width.
 *
 * The micro-tile is 6 rows x 4 vectors (64 columns): 24 accumulators, 4
 * slivers of B and one broadcast pair of A in the 32 zmm registers, 10
 * loads for 24 vdpbf16ps (GCC 12 -O2 compiles the k loop to exactly
 * that, 4 vmovdqu64, 6 vpbroadcastd, 24 vdpbf16ps and the loop's add,
 * compare and branch, with nothing spilled: objdump -d of the object
 * shows it). On an Intel Sapphire Rapids (2 cores, 2026-11-27) it ran a
 * GPT-2 small step's GEMMs at 183 GFLOP/s, 80% of vdpbf16ps's own rate
 * there (one every two cycles, half the FMA's FLOP/s: so auto does not
 * pick it on such a CPU, see gemm_cpu.c); on AMD Zen 4, where the
 * instruction does twice the FMA's work, it is the bf16 path. Compiled for
 * AVX512_BF16 whatever the build's flags; gemm_cpu.c calls it only where
 * gemm_bf16_cpu.c says the CPU has the instructions.
 *
 * t_gemm_bf16 also compiles this very file against
 * tests/simd_emu/immintrin.h, the seven intrinsics it uses written in plain
 * C from Intel's definitions (TRI_SIMD_EMU: no target pragma, smaller
 * blocks), and runs it against the plain loop on any host; on a CPU with
 * AVX512_BF16 it runs the real instructions too.
 *
 * Not collective.
 */
#include "gemm_bf16.h"

#if TRI_GEMM_BF16_X86

#include <immintrin.h>

/* everything below, the included loops too, compiled for this ISA (but
 * for the host's own when t_gemm_bf16 emulates the intrinsics) */
#if defined(__clang__) && !defined(TRI_SIMD_EMU)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))), apply_to = function)
#elif !defined(TRI_SIMD_EMU)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#endif

#define BF16_VW 16
#define BF16_MR 6
#define BF16_NV 4

typedef __m512 bf16_acc;
typedef __m512bh bf16_bvec;
typedef __m512bh bf16_apair;

static inline bf16_acc acc_zero(void) { return _mm512_setzero_ps(); }
static inline bf16_acc acc_load(const float *c) { return _mm512_loadu_ps(c); }
static inline void acc_store(float *c, bf16_acc v) { _mm512_storeu_ps(c, v); }
static inline bf16_acc acc_add(bf16_acc a, bf16_acc b) { return _mm512_add_ps(a, b); }

static inline bf16_bvec bvec_load(const uint32_t *b)
{
    return (bf16_bvec)_mm512_loadu_si512(b);
}

static inline bf16_apair apair_bcast(const uint32_t *a)
{
    return (bf16_apair)_mm512_set1_epi32((int)*a);
}

/* lane i: c += a.hi * b[i].hi + a.lo * b[i].lo (vdpbf16ps) */
static inline bf16_acc acc_dot(bf16_acc c, bf16_apair a, bf16_bvec b)
{
    return _mm512_dpbf16_ps(c, a, b);
}

/* 96 pairs a panel: a sliver of B (96 x 64 words, 24 KiB) stays in a
 * 32 KiB L1 while the slivers of A stream past it (the default 128 pairs
 * would fill it) */
#ifndef BF16_KC
#define BF16_KC 192
#endif
#ifndef BF16_GEMM_FN
#define BF16_GEMM_FN gemm_bf16_avx512
#endif
#include "gemm_bf16_pairs.h"

#if defined(__clang__) && !defined(TRI_SIMD_EMU)
#pragma clang attribute pop
#endif
#endif
