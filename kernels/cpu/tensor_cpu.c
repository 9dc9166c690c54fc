/*
 * tensor_cpu.c - zero, copy and cast host memory; the scratch buffers.
 *
 * Big buffers (weights, optimizer state, activations) are filled in
 * parallel in fixed 1 MiB chunks: on a multi-socket node that places pages
 * near the threads that will use them (first touch), and a single thread
 * cannot saturate memory bandwidth anyway. Casts round through elem.h, so
 * they are bit-identical to the GPU's. A cast row is one loop per dtype
 * pair, not a switch per element, so that the compiler can vectorise the
 * widening casts: gemm_cpu widens whole bf16 and fp16 panels through them.
 */
#include "cpu.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES ((size_t)1 << 20)

void zero_cpu(void *p, size_t bytes)
{
    int64_t chunks = (int64_t)((bytes + CHUNK_BYTES - 1) / CHUNK_BYTES);
    #pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        size_t off = (size_t)c * CHUNK_BYTES;
        size_t len = bytes - off < CHUNK_BYTES ? bytes - off : CHUNK_BYTES;
        memset((char *)p + off, 0, len);
    }
}

void copy_cpu(void *dst, const void *src, size_t bytes)
{
    if (dst == src)
        return;
    int64_t chunks = (int64_t)((bytes + CHUNK_BYTES - 1) / CHUNK_BYTES);
    #pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        size_t off = (size_t)c * CHUNK_BYTES;
        size_t len = bytes - off < CHUNK_BYTES ? bytes - off : CHUNK_BYTES;
        memcpy((char *)dst + off, (const char *)src + off, len);
    }
}

void copy_rows_cpu(void *dst, const void *src, int64_t rows, size_t row_bytes,
                   size_t src_stride)
{
    for (int64_t r = 0; r < rows; r++)
        memcpy((char *)dst + (size_t)r * row_bytes, (const char *)src + (size_t)r * src_stride,
               row_bytes);
}

/* Branch-free twins of elem.h's conversions, bit for bit the same (checked
 * over all 2^32 floats and 2^16 halves when they were written, and on a
 * sample by t_ops_precision): with selects instead of early returns the
 * compiler vectorizes the loops below, 5-10x faster than calling elem.h
 * per element. */
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

/* x86-64's baseline is SSE2, whose 4-lane integer compares and selects
 * leave the fp16 loops near 1 ns per element; an AVX2 clone, picked at load
 * time where the CPU has it, runs them 2-3x faster. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CAST_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CAST_CLONES
#endif

/* dst(n) = src(n) converted, one loop per dtype pair. */
CAST_CLONES void cast_span_cpu(void *dst, ops_dtype ddt, const void *src, ops_dtype sdt,
                               int64_t n)
{
    if (ddt == sdt) {
        memcpy(dst, src, (size_t)n * ops_dtype_size(ddt));
    } else if (ddt == OPS_F32 && sdt == OPS_BF16) {
        float *d = dst;
        const uint16_t *s = src;
        #pragma omp simd
        for (int64_t i = 0; i < n; i++)
            d[i] = elem_bf16_to_f32(s[i]);
    } else if (ddt == OPS_F32 && sdt == OPS_F16) {
        float *d = dst;
        const uint16_t *s = src;
        #pragma omp simd
        for (int64_t i = 0; i < n; i++)
            d[i] = f16_to_f32_vec(s[i]);
    } else if (ddt == OPS_BF16 && sdt == OPS_F32) {
        uint16_t *d = dst;
        const float *s = src;
        #pragma omp simd
        for (int64_t i = 0; i < n; i++)
            d[i] = f32_to_bf16_vec(s[i]);
    } else if (ddt == OPS_F16 && sdt == OPS_F32) {
        uint16_t *d = dst;
        const float *s = src;
        #pragma omp simd
        for (int64_t i = 0; i < n; i++)
            d[i] = f32_to_f16_vec(s[i]);
    } else {
        /* bf16 <-> fp16 through fp32, which holds both exactly, so it
         * rounds once, like a direct conversion would */
        for (int64_t i = 0; i < n; i++)
            store_f32_cpu(dst, ddt, i, load_f32_cpu(src, sdt, i));
    }
}

void cast_cpu(void *dst, ops_dtype ddt, const void *src, ops_dtype sdt,
              int64_t n)
{
    if (ddt == sdt) {
        copy_cpu(dst, src, (size_t)n * ops_dtype_size(ddt));
        return;
    }
    /* chunks of 64 Ki elements, so that threads share out big casts */
    const int64_t chunk = 65536;
    int64_t chunks = (n + chunk - 1) / chunk;
    size_t ds = ops_dtype_size(ddt), ss = ops_dtype_size(sdt);
    #pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t i0 = c * chunk, len = n - i0 < chunk ? n - i0 : chunk;
        cast_span_cpu((char *)dst + (size_t)i0 * ds, ddt,
                 (const char *)src + (size_t)i0 * ss, sdt, len);
    }
}

void cast_2d_cpu(void *dst, ops_dtype ddt, int64_t ldd, const void *src,
                 ops_dtype sdt, int64_t lds, int rows, int cols)
{
    size_t ds = ops_dtype_size(ddt), ss = ops_dtype_size(sdt);
    #pragma omp parallel for schedule(static) if ((int64_t)rows * cols > 65536)
    for (int r = 0; r < rows; r++)
        cast_span_cpu((char *)dst + (size_t)r * ldd * ds, ddt,
                 (const char *)src + (size_t)r * lds * ss, sdt, cols);
}

static struct {
    void *p;
    size_t bytes;
} scratch[SCRATCH_SLOTS];

void *scratch_cpu(scratch_slot slot, size_t bytes)
{
    if (bytes <= scratch[slot].bytes)
        return scratch[slot].p;
    /* grow by a quarter more than asked, so a slowly rising size (the last
     * block of a GEMM, say) does not reallocate every time */
    size_t want = bytes + bytes / 4;
    want = (want + 63) & ~(size_t)63;
    free(scratch[slot].p);
    scratch[slot].p = aligned_alloc(64, want);
    scratch[slot].bytes = scratch[slot].p ? want : 0;
    if (!scratch[slot].p) {
        char msg[128];
        snprintf(msg, sizeof msg, "out of memory for %zu bytes of CPU "
                 "scratch (slot %d)", want, (int)slot);
        ops_fatal(msg, __FILE__, __LINE__);
    }
    return scratch[slot].p;
}

void widen_rows_cpu(float *dst, int ldd, const void *src, ops_dtype dt, int64_t lds, int rows,
                    int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(int64_t)r * ldd + c] = load_f32_cpu(src, dt, r * lds + c);
}

void narrow_rows_cpu(void *dst, ops_dtype dt, int64_t ldd, const float *src, int lds, int rows,
                     int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            store_f32_cpu(dst, dt, r * ldd + c, src[(int64_t)r * lds + c]);
}

float *thread_share_cpu(float *buf, int64_t floats)
{
    return buf + (int64_t)omp_get_thread_num() * floats;
}
