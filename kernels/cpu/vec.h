/*
 * vec.h - fixed-width float vectors for the CPU reductions (row max, row
 * sums, the norms' row statistics), through GCC/clang vector extensions.
 *
 * A reduction in a plain loop either stays scalar (the compiler may not
 * reassociate it, and each add then waits for the last) or, with
 * reassociation allowed, depends on the vector width of the machine.
 * Sixteen explicit lanes give one order of operations everywhere, folded
 * lane 0 first, and each target_clones variant runs them in what the CPU
 * has, so the results are the same bits on every CPU.
 *
 * The sixteen lanes are two 8-lane halves (one AVX2 register each, two
 * SSE ones, half an AVX-512 one) rather than one 64-byte vector: GCC 12
 * lowers a 64-byte vector for AVX2 through the stack, which made a
 * LayerNorm row twice as slow as plain SSE.
 *
 * Not collective.
 */
#ifndef TRI_KERNELS_CPU_VEC_H
#define TRI_KERNELS_CPU_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu.h"

#define TRI_VEC_INLINE static inline __attribute__((always_inline))

typedef float vec8 __attribute__((vector_size(32)));
typedef int32_t vec8i __attribute__((vector_size(32)));
typedef uint32_t vec8u __attribute__((vector_size(32)));
typedef uint16_t vec8u16 __attribute__((vector_size(16)));

/* lanes 0-7 in lo, 8-15 in hi */
typedef struct {
    vec8 lo, hi;
} vec16;

TRI_VEC_INLINE vec16 vec16_set(float x)
{
    vec8 v = {x, x, x, x, x, x, x, x};
    return (vec16){v, v};
}

TRI_VEC_INLINE vec16 vec16_load(const float *p)
{
    vec16 v;
    memcpy(&v.lo, p, sizeof v.lo);
    memcpy(&v.hi, p + 8, sizeof v.hi);
    return v;
}

TRI_VEC_INLINE void vec16_store(float *p, vec16 x)
{
    memcpy(p, &x.lo, sizeof x.lo);
    memcpy(p + 8, &x.hi, sizeof x.hi);
}

TRI_VEC_INLINE vec16 vec16_add(vec16 a, vec16 b)
{
    return (vec16){a.lo + b.lo, a.hi + b.hi};
}

TRI_VEC_INLINE vec16 vec16_sub(vec16 a, vec16 b)
{
    return (vec16){a.lo - b.lo, a.hi - b.hi};
}

TRI_VEC_INLINE vec16 vec16_mul(vec16 a, vec16 b)
{
    return (vec16){a.lo * b.lo, a.hi * b.hi};
}

TRI_VEC_INLINE float vec16_lane(vec16 v, int k)
{
    return k < 8 ? v.lo[k] : v.hi[k - 8];
}

/* bf16 is fp32's top half: widening is a shift, exact */
TRI_VEC_INLINE vec8 vec8_load_bf16(const uint16_t *p)
{
    vec8u16 h;
    memcpy(&h, p, sizeof h);
    return (vec8)(__builtin_convertvector(h, vec8i) << 16);
}

TRI_VEC_INLINE vec16 vec16_load_bf16(const uint16_t *p)
{
    return (vec16){vec8_load_bf16(p), vec8_load_bf16(p + 8)};
}

/* cast_vec.h's f32_to_bf16_vec in each lane: round to nearest even, NaN
 * kept quiet */
TRI_VEC_INLINE void vec8_store_bf16(uint16_t *p, vec8 x)
{
    vec8u u = (vec8u)x;
    vec8u rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    vec8u quiet = (u >> 16) | 0x40u;
    vec8u is_nan = (vec8u)((u & 0x7fffffffu) > 0x7f800000u);
    vec8u16 h = __builtin_convertvector((quiet & is_nan) | (rounded & ~is_nan),
                                        vec8u16);
    memcpy(p, &h, sizeof h);
}

/* the 16 lanes' sum, lane 0 first */
TRI_VEC_INLINE float vec16_sum_lanes(vec16 acc)
{
    float s = 0.0f;
    for (int k = 0; k < 8; k++)
        s += acc.lo[k];
    for (int k = 0; k < 8; k++)
        s += acc.hi[k];
    return s;
}

/* Lane-wise max; a NaN in x is ignored (softmax propagates it through the
 * exponentials instead). */
TRI_VEC_INLINE vec8 vec8_max(vec8 acc, vec8 x)
{
    vec8i gt = x > acc;
    return (vec8)(((vec8i)x & gt) | ((vec8i)acc & ~gt));
}

/* max of x[0..n), 16 lanes then across them */
TRI_VEC_INLINE float vec_row_max(const float *x, int n)
{
    vec16 acc = vec16_set(-INFINITY);
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        vec16 v = vec16_load(x + j);
        acc.lo = vec8_max(acc.lo, v.lo);
        acc.hi = vec8_max(acc.hi, v.hi);
    }
    float m = acc.lo[0];
    for (int k = 1; k < 8; k++)
        m = acc.lo[k] > m ? acc.lo[k] : m;
    for (int k = 0; k < 8; k++)
        m = acc.hi[k] > m ? acc.hi[k] : m;
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

/* sum of x[0..n) in 16 lanes, then the lanes in order */
TRI_VEC_INLINE float vec_row_sum(const float *x, int n)
{
    vec16 acc = vec16_set(0.0f);
    int j = 0;
    for (; j + 16 <= n; j += 16)
        acc = vec16_add(acc, vec16_load(x + j));
    float s = vec16_sum_lanes(acc);
    for (; j < n; j++)
        s += x[j];
    return s;
}

/* p[i .. i+16) widened: with dt a constant at the call site, fp32 and
 * bf16 are plain vector loads. */
TRI_VEC_INLINE vec16 load16_f32_cpu(const void *p, ops_dtype dt, int64_t i)
{
    if (dt == OPS_F32)
        return vec16_load((const float *)p + i);
    if (dt == OPS_BF16)
        return vec16_load_bf16((const uint16_t *)p + i);
    vec16 v;
    for (int k = 0; k < 8; k++) {
        v.lo[k] = load_f32_cpu(p, dt, i + k);
        v.hi[k] = load_f32_cpu(p, dt, i + 8 + k);
    }
    return v;
}

/* p[i .. i+16) = x, rounded to dt as store_f32_cpu rounds */
TRI_VEC_INLINE void store16_f32_cpu(void *p, ops_dtype dt, int64_t i, vec16 x)
{
    if (dt == OPS_F32) {
        vec16_store((float *)p + i, x);
    } else if (dt == OPS_BF16) {
        vec8_store_bf16((uint16_t *)p + i, x.lo);
        vec8_store_bf16((uint16_t *)p + i + 8, x.hi);
    } else {
        for (int k = 0; k < 8; k++) {
            store_f32_cpu(p, dt, i + k, x.lo[k]);
            store_f32_cpu(p, dt, i + 8 + k, x.hi[k]);
        }
    }
}

#endif
