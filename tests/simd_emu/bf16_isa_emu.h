/*
 * bf16_isa_emu.h - the ISA layer of gemm_bf16_pairs.h in plain C, in the
 * shape of the AVX-512 one (gemm_bf16_avx512.c): 16 fp32 lanes, a 6 x 4
 * vector micro-tile, each k-pair word holding element 2p in its low half.
 *
 * acc_dot follows vdpbf16ps's definition in Intel's manual: lane i adds the
 * product of the high bf16 halves, then that of the low halves, each
 * exact in fp32 and rounded once as it is added (fmaf). So t_gemm_bf16 can
 * run the AVX-512 kernel's loops, tiles and packing on a host without
 * AVX-512, and compare them bit for bit with the plain loop.
 */
#ifndef TRI_TESTS_BF16_ISA_EMU_H
#define TRI_TESTS_BF16_ISA_EMU_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define BF16_VW 16
#define BF16_MR 6
#define BF16_NV 4

typedef struct { float v[BF16_VW]; } bf16_acc;
typedef struct { uint32_t w[BF16_VW]; } bf16_bvec;
typedef struct { uint32_t w; } bf16_apair;

static inline float emu_bf16(uint32_t half) /* the bf16 in the low 16 bits */
{
    uint32_t bits = half << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline bf16_acc acc_zero(void)
{
    bf16_acc z;
    memset(&z, 0, sizeof z);
    return z;
}

static inline bf16_acc acc_load(const float *c)
{
    bf16_acc a;
    memcpy(a.v, c, sizeof a.v);
    return a;
}

static inline void acc_store(float *c, bf16_acc a) { memcpy(c, a.v, sizeof a.v); }

static inline bf16_acc acc_add(bf16_acc a, bf16_acc b)
{
    for (int i = 0; i < BF16_VW; i++)
        a.v[i] += b.v[i];
    return a;
}

static inline bf16_bvec bvec_load(const uint32_t *b)
{
    bf16_bvec v;
    memcpy(v.w, b, sizeof v.w);
    return v;
}

static inline bf16_apair apair_bcast(const uint32_t *a)
{
    bf16_apair p = { *a };
    return p;
}

/* BF16_EMU_FAULT, when the includer defines it, is an expression that
 * swaps the halves of A's pair while true: the fault t_gemm_bf16 must
 * catch. */
static inline bf16_acc acc_dot(bf16_acc c, bf16_apair a, bf16_bvec b)
{
#ifdef BF16_EMU_FAULT
    if (BF16_EMU_FAULT)
        a.w = a.w << 16 | a.w >> 16;
#endif
    for (int i = 0; i < BF16_VW; i++) {
        c.v[i] = fmaf(emu_bf16(a.w >> 16), emu_bf16(b.w[i] >> 16), c.v[i]);
        c.v[i] = fmaf(emu_bf16(a.w & 0xffff), emu_bf16(b.w[i] & 0xffff), c.v[i]);
    }
    return c;
}

#endif
