/*
 * immintrin.h (test stand-in) - the seven AVX-512 intrinsics that
 * kernels/cpu/gemm_bf16_avx512.c uses, in plain C, so that t_gemm_bf16 can
 * compile that file as it is and run it on a host without AVX-512. The
 * test puts this directory first on the include path and defines
 * TRI_SIMD_EMU, which drops the file's target pragma.
 *
 * The types are GCC vector types of the real ones' sizes, so the file's
 * casts between them reinterpret bits as they do with the real header.
 * Each function follows the pseudo-code of Intel's Intrinsics Guide; for
 * _mm512_dpbf16_ps (VDPBF16PS): lane j of the result is src[j], plus the
 * product of the odd bf16 halves of a and b (elements 2j+1), plus that of
 * the even halves (2j), each product exact in fp32 and rounded once as it
 * is added (fmaf). Denormals are not flushed (the real instruction
 * flushes them; the test's values have none).
 *
 * tri_simd_emu_fault, while set, swaps the halves of every pair of a: the
 * fault the test must see.
 */
#ifndef TRI_TESTS_SIMD_EMU_IMMINTRIN_H
#define TRI_TESTS_SIMD_EMU_IMMINTRIN_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float __m512 __attribute__((vector_size(64)));
typedef long long __m512i __attribute__((vector_size(64)));
typedef short __m512bh __attribute__((vector_size(64)));

static int tri_simd_emu_fault;

static inline __m512 _mm512_setzero_ps(void)
{
    __m512 z;
    memset(&z, 0, sizeof z);
    return z;
}

static inline __m512 _mm512_loadu_ps(const void *p)
{
    __m512 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void _mm512_storeu_ps(void *p, __m512 v) { memcpy(p, &v, sizeof v); }

static inline __m512 _mm512_add_ps(__m512 a, __m512 b)
{
    float x[16], y[16];
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
    for (int j = 0; j < 16; j++)
        x[j] += y[j];
    memcpy(&a, x, sizeof x);
    return a;
}

static inline __m512i _mm512_loadu_si512(const void *p)
{
    __m512i v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __m512i _mm512_set1_epi32(int x)
{
    int32_t w[16];
    for (int j = 0; j < 16; j++)
        w[j] = x;
    __m512i v;
    memcpy(&v, w, sizeof v);
    return v;
}

static inline float tri_simd_emu_bf16(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline __m512 _mm512_dpbf16_ps(__m512 src, __m512bh a, __m512bh b)
{
    float d[16];
    uint16_t x[32], y[32];
    memcpy(d, &src, sizeof d);
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
    for (int j = 0; j < 16; j++) {
        uint16_t odd = x[2 * j + 1], even = x[2 * j];
        if (tri_simd_emu_fault) {
            odd = x[2 * j];
            even = x[2 * j + 1];
        }
        d[j] = fmaf(tri_simd_emu_bf16(odd), tri_simd_emu_bf16(y[2 * j + 1]), d[j]);
        d[j] = fmaf(tri_simd_emu_bf16(even), tri_simd_emu_bf16(y[2 * j]), d[j]);
    }
    memcpy(&src, d, sizeof d);
    return src;
}

#endif
