/*
 * elem.h - per-element math, written once for host and device.
 *
 * The CPU backend and the CUDA kernels both call these functions, so the
 * CPU unit tests check the arithmetic the GPU runs. Everything here is
 * `static inline TRI_HD` and uses only float/double/integer operations
 * that mean the same on both sides.
 */
#ifndef TRI_KERNELS_ELEM_H
#define TRI_KERNELS_ELEM_H

#include <stdint.h>
#include <math.h>

#ifdef __CUDACC__
#define TRI_HD __host__ __device__
#else
#define TRI_HD
#endif

#define TRI_LN_EPS 1e-5f
#define TRI_GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* GELU, tanh approximation (GPT-2). */
static inline TRI_HD float elem_gelu(float x)
{
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(TRI_GELU_K * (x + cube)));
}

/* d gelu(x) / dx */
static inline TRI_HD float elem_gelu_grad(float x)
{
    float cube = 0.044715f * x * x * x;
    float t = tanhf(TRI_GELU_K * (x + cube));
    float sech2 = 1.0f - t * t;
    float dinner = TRI_GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * sech2 * dinner;
}

/* One AdamW step on one element; returns the new weight and updates *m, *v.
 * g is already unscaled and clipped. bc1 = 1 - beta1^t, bc2 = 1 - beta2^t. */
static inline TRI_HD float elem_adamw(float w, float g, float *m, float *v,
                                      float lr, float beta1, float beta2,
                                      float eps, float wd, float bc1, float bc2)
{
    *m = beta1 * *m + (1.0f - beta1) * g;
    *v = beta2 * *v + (1.0f - beta2) * g * g;
    float mhat = *m / bc1;
    float vhat = *v / bc2;
    return w - lr * (mhat / (sqrtf(vhat) + eps) + wd * w);
}

/* ---- casts: bit-exact round-to-nearest-even, same on host and device ---- */

static inline TRI_HD uint32_t elem_f32_bits(float f)
{
    union { float f; uint32_t u; } c;
    c.f = f;
    return c.u;
}

static inline TRI_HD float elem_bits_f32(uint32_t u)
{
    union { float f; uint32_t u; } c;
    c.u = u;
    return c.f;
}

static inline TRI_HD uint16_t elem_f32_to_bf16(float f)
{
    uint32_t u = elem_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a quiet NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)((u + rounding) >> 16);
}

static inline TRI_HD float elem_bf16_to_f32(uint16_t h)
{
    return elem_bits_f32((uint32_t)h << 16);
}

/* IEEE binary16 with its real range: |f| >= 65520 rounds to inf, values
 * below 2^-24 / 2 flush to zero, and 2^-24..2^-14 become subnormals. That is
 * the behaviour fp16 loss scaling exists for, so the CPU keeps it too. */
static inline TRI_HD uint16_t elem_f32_to_f16(float f)
{
    uint32_t u = elem_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);            /* NaN */
    if (absu >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);            /* overflow -> inf */
    if (absu < 0x38800000u) {                         /* subnormal or zero */
        if (absu < 0x33000000u)
            return (uint16_t)sign;                    /* < 2^-25: zero */
        uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
        /* value = mant * 2^(e-150) and the subnormal unit is 2^-24 */
        int shift = 126 - (int)(absu >> 23);
        uint32_t q = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = absu + 0xfffu + ((absu >> 13) & 1u);  /* round to 10 bits */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline TRI_HD float elem_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1fu)
        return elem_bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in fp32 */
        float v = (float)mant * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return elem_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline TRI_HD int elem_isfinite(float f)
{
    return (elem_f32_bits(f) & 0x7f800000u) != 0x7f800000u;
}

#endif
