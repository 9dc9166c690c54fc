/*
 * cast_vec.h - branch-free twins of elem.h's fp32 <-> bf16/fp16
 * conversions, for the CPU loops that convert arrays (ops_cast, the AdamW
 * sweep that refreshes the compute copy).
 *
 * Not collective.
 */
#ifndef TRI_KERNELS_CPU_CAST_VEC_H
#define TRI_KERNELS_CPU_CAST_VEC_H

#include <stdint.h>

#include "../elem.h"

/* Bit for bit elem.h's conversions (checked over all 2^32 floats and 2^16
 * halves when they were written, and on a sample by t_ops_precision):
 * with selects instead of early returns the compiler vectorizes the loops
 * that call them, 5-10x faster than calling elem.h per element. */
static inline uint16_t f32_to_bf16_vec(float f)
{
    uint32_t u = elem_f32_bits(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

static inline float f16_to_f32_vec(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t normal = sign | ((exp + 112u) << 23) | (mant << 13);
    uint32_t special = sign | 0x7f800000u | (mant << 13);
    /* zero or subnormal: mant * 2^-24, exact */
    uint32_t sub = sign | elem_f32_bits((float)(int32_t)mant *
                                        5.9604644775390625e-8f);
    /* all-ones masks rather than ?: chains, which GCC keeps as branches */
    uint32_t is_special = 0u - (uint32_t)(exp == 0x1fu);
    uint32_t is_sub = 0u - (uint32_t)(exp == 0);
    return elem_bits_f32((special & is_special) | (sub & is_sub) |
                         (normal & ~(is_special | is_sub)));
}

static inline uint16_t f32_to_f16_vec(float f)
{
    uint32_t u = elem_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    /* normal: round the mantissa to 10 bits, to nearest even, and rebias */
    uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13;
    /* subnormal: adding 0.5, whose ulp is fp16's subnormal unit 2^-24,
     * makes the FPU round to a multiple of it, to nearest even */
    uint32_t sub = elem_f32_bits(elem_bits_f32(a) + 0.5f) - 0x3f000000u;
    uint32_t is_nan = 0u - (uint32_t)(a > 0x7f800000u);
    uint32_t is_inf = (0u - (uint32_t)(a >= 0x477ff000u)) & ~is_nan;
    uint32_t is_sub = 0u - (uint32_t)(a < 0x38800000u);
    uint32_t is_normal = ~(is_nan | is_inf | is_sub);
    uint32_t o = (0x7e00u & is_nan) | (0x7c00u & is_inf) | (sub & is_sub) |
                 (normal & is_normal);
    return (uint16_t)(sign | o);
}

#endif
