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

static int64_t scratch_growths;

int64_t scratch_cpu_growths(void)
{
    return scratch_growths;
}

void *scratch_cpu(scratch_slot slot, size_t bytes)
{
    if (bytes <= scratch[slot].bytes)
        return scratch[slot].p;
    /* grow by a quarter more than asked, so a slowly rising size (the last
     * block of a GEMM, say) does not reallocate every time */
    size_t want = bytes + bytes / 4;
    want = (want + 63) & ~(size_t)63;
    scratch_growths++;
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

/* Row by row through cast_span_cpu, whose loops are vectorized (and
 * cloned for AVX2): dt varies at run time here, and a per-element switch
 * on it kept these copies scalar. */
void widen_rows_cpu(float *dst, int ldd, const void *src, ops_dtype dt, int64_t lds, int rows,
                    int cols)
{
    size_t es = ops_dtype_size(dt);
    for (int r = 0; r < rows; r++)
        cast_span_cpu(dst + (int64_t)r * ldd, OPS_F32, (const char *)src + (size_t)(r * lds) * es,
                      dt, cols);
}

void narrow_rows_cpu(void *dst, ops_dtype dt, int64_t ldd, const float *src, int lds, int rows,
                     int cols)
{
    size_t es = ops_dtype_size(dt);
    for (int r = 0; r < rows; r++)
        cast_span_cpu((char *)dst + (size_t)(r * ldd) * es, dt, src + (int64_t)r * lds, OPS_F32,
                      cols);
}

float *thread_share_cpu(float *buf, int64_t floats)
{
    return buf + (int64_t)omp_get_thread_num() * floats;
}
