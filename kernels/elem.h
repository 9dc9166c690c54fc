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

/* Host and device; on the host, always inlined, so loops over these
 * functions vectorize (a call in a loop body stops the vectorizer). */
#ifdef __CUDACC__
#define TRI_HD __host__ __device__
#else
#define TRI_HD __attribute__((always_inline))
#endif

#define TRI_LN_EPS 1e-5f
#define TRI_GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* ---- exp and tanh without library calls -----------------------------------
 * libm's expf and tanhf are calls the compiler cannot vectorize, and they
 * were a third of the attention forward and most of GELU's time. These are
 * straight-line float code (no branches, no table), so a loop over them
 * vectorizes, and host and device compute the same arithmetic: the same
 * bits but where nvcc fuses a*b + c into one rounding (it does by
 * default; the host build does not), a few ulp (tests/t_optim_emu
 * measures AdamW's and GELU's). */

static inline TRI_HD uint32_t elem_f32_bits(float f);
static inline TRI_HD float elem_bits_f32(uint32_t u);

/* e^x to about 1 ulp for x in [-87.3, 88]; below, 2^-126-ish (the caller
 * never needs less: softmax terms that small vanish against the rest);
 * above, e^88. NaN stays NaN. Cody-Waite reduction x = n ln2 + r with
 * |r| <= ln2/2, then a degree-6 Taylor polynomial of e^r (its truncation
 * error, r^7/7! < 1.5e-8, is under half an ulp), then 2^n built in the
 * exponent bits. */
static inline TRI_HD float elem_expf(float x)
{
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.0f ? 88.0f : x;
    const float round = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float shifted = x * 1.44269504088896341f + round;
    float n = shifted - round;
    float r = x - n * 0.693359375f;      /* ln 2, high bits (exact product) */
    r = r - n * -2.12194440054690583e-4f; /* ln 2, the rest */
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r * r + r + 1.0f;
    /* n's integer value sits in shifted's low mantissa bits */
    int32_t e = (int32_t)(elem_f32_bits(shifted) - 0x4b400000u);
    return p * elem_bits_f32((uint32_t)(e + 127) << 23);
}

/* tanh to a few ulp: an odd Taylor polynomial near 0, where 1 - 2/(e^2x+1)
 * would cancel, and that formula beyond; both evaluated, one kept. */
static inline TRI_HD float elem_tanhf(float x)
{
    float ax = x < 0.0f ? -x : x;
    float big_arg = ax > 9.0f ? 9.0f : ax; /* tanh(9) is 1 in fp32; NaN passes */
    float big = 1.0f - 2.0f / (elem_expf(2.0f * big_arg) + 1.0f);
    float x2 = x * x;
    float small = ax * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f
                  + x2 * (-17.0f / 315.0f + x2 * (62.0f / 2835.0f)))));
    float t = ax < 0.3f ? small : big;
    return x < 0.0f ? -t : t;
}

/* GELU, tanh approximation (GPT-2). */
static inline TRI_HD float elem_gelu(float x)
{
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + elem_tanhf(TRI_GELU_K * (x + cube)));
}

/* d gelu(x) / dx */
static inline TRI_HD float elem_gelu_grad(float x)
{
    float cube = 0.044715f * x * x * x;
    float t = elem_tanhf(TRI_GELU_K * (x + cube));
    float sech2 = 1.0f - t * t;
    float dinner = TRI_GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * sech2 * dinner;
}

/* ---- Llama: SiLU gate, RMSNorm, rotary embeddings ------------------------ */

/* sigmoid(x), through elem_expf so host and device agree. */
static inline TRI_HD float elem_sigmoid(float x)
{
    return 1.0f / (1.0f + elem_expf(-x));
}

/* SwiGLU's product: silu(gate) * up, silu(g) = g * sigmoid(g). */
static inline TRI_HD float elem_swiglu(float gate, float up)
{
    return gate * elem_sigmoid(gate) * up;
}

/* Its gradients: *dgate = dout * up * silu'(gate), *dup = dout * silu(gate),
 * with silu'(g) = s (1 + g (1 - s)), s = sigmoid(g). */
static inline TRI_HD void elem_swiglu_grad(float gate, float up, float dout,
                                           float *dgate, float *dup)
{
    float s = elem_sigmoid(gate);
    *dgate = dout * up * s * (1.0f + gate * (1.0f - s));
    *dup = dout * gate * s;
}

/* RMSNorm's 1 / sqrt(mean(x^2) + eps) from a row's sum of squares. */
static inline TRI_HD float elem_rms_rstd(float sumsq, int C, float eps)
{
    return 1.0f / sqrtf(sumsq / (float)C + eps);
}

/* d x_j of y = x r w: r (w_j dy_j - x_j r^2 dot / C), where dot is the
 * row's sum of w dy x. */
static inline TRI_HD float elem_rms_dinp(float wdy, float x, float r,
                                         float dot_over_c)
{
    return r * (wdy - x * r * r * dot_over_c);
}

/* The rotary angle of channel pair i (0 <= i < hs/2) at position t, in
 * HuggingFace's layout: inv_freq = theta^(-2i/hs), angle = t inv_freq.
 * Computed in double so that position 8191 still has every bit of fp32
 * in its sine and cosine. */
static inline TRI_HD void elem_rope_cos_sin(int t, int i, int hs, double theta,
                                            float *c, float *s)
{
    double angle = (double)t * pow(theta, -2.0 * (double)i / (double)hs);
    *c = (float)cos(angle);
    *s = (float)sin(angle);
}

/* Rotates the pair (x1, x2) = (x[i], x[i + hs/2]) by the angle (cos c, sin
 * s): rotate_half's y = x cos + rotate_half(x) sin. The backward is the
 * same rotation with -s. */
static inline TRI_HD void elem_rope_rotate(float *x1, float *x2, float c, float s)
{
    float a = *x1, b = *x2;
    *x1 = a * c - b * s;
    *x2 = b * c + a * s;
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

/* ---- probe data ----------------------------------------------------------
 * A value in [-1, 1) that looks random, for element i of matrix `which`:
 * the GEMM peak probes fill their matrices with these. Periodic fills
 * (i % 7) toggle fewer bits in the multipliers, and a GPU's tensor cores
 * draw less power on them and hold a higher clock: such a probe read about
 * 8-10% above a GEMM on real data (issue 34). The mixer is a 32-bit
 * integer hash (xor-shift-multiply rounds); 24 of its bits make the
 * value, which is then exact in fp32. */
static inline TRI_HD float elem_probe_value(uint64_t i, uint32_t which)
{
    uint32_t x = (uint32_t)i ^ ((uint32_t)(i >> 32) * 0x9e3779b9u) ^ (which * 0x85ebca6bu);
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return (float)(x >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

/* ---- mixture-of-experts routing (moe_cpu.c, moe_cuda.cu) ------------------
 * One token's or one sort's bookkeeping, the same code on both sides so
 * that the CPU tests check the GPU's routing. */

/* The k largest of z[0..E) into ids, in decreasing order; a strict > keeps
 * the lower index on a tie, so equal logits route alike everywhere. */
static inline TRI_HD void elem_moe_top_k(int32_t *ids, const float *z, int E, int k)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++)
                taken |= ids[i] == e;
            if (!taken && (best < 0 || z[e] > z[best]))
                best = e;
        }
        ids[j] = best;
    }
}

/* The cut and the running sums of a counting sort's offsets: offsets[1..E]
 * hold the pairs each expert got; each is cut to capacity when capacity
 * > 0, then offsets[0..E] become the running sums from offsets[0] = 0, so
 * expert e's rows are [offsets[e], offsets[e+1]). Returns the number of
 * pairs the cut dropped. */
static inline TRI_HD int32_t elem_moe_cut(int32_t *offsets, int E, int capacity)
{
    offsets[0] = 0;
    int32_t dropped = 0;
    for (int e = 0; e < E; e++) {
        if (capacity > 0 && offsets[e + 1] > capacity) {
            dropped += offsets[e + 1] - capacity;
            offsets[e + 1] = capacity;
        }
        offsets[e + 1] += offsets[e];
    }
    return dropped;
}

/* offsets[0..E] of a counting sort of the pairs' expert ids, each expert
 * cut to capacity when capacity > 0 (elem_moe_cut). Returns the number of
 * pairs the cut dropped. */
static inline TRI_HD int32_t elem_moe_offsets(int32_t *offsets, const int32_t *ids,
                                              int64_t pairs, int E, int capacity)
{
    for (int e = 0; e <= E; e++)
        offsets[e] = 0;
    for (int64_t p = 0; p < pairs; p++)
        offsets[ids[p] + 1]++;
    return elem_moe_cut(offsets, E, capacity);
}

#endif
