/*
 * tensor_cpu.c - zero, copy and cast host memory.
 *
 * Big buffers (weights, optimizer state, activations) are filled in
 * parallel in fixed 1 MiB chunks: on a multi-socket node that places pages
 * near the threads that will use them (first touch), and a single thread
 * cannot saturate memory bandwidth anyway. Casts round through elem.h, so
 * they are bit-identical to the GPU's.
 */
#include "cpu.h"

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

void cast_cpu(void *dst, ops_dtype ddt, const void *src, ops_dtype sdt,
              int64_t n)
{
    if (ddt == sdt) {
        copy_cpu(dst, src, (size_t)n * ops_dtype_size(ddt));
        return;
    }
    /* Every pair goes through fp32, which holds bf16 and fp16 exactly, so
     * bf16 <-> fp16 rounds once, like a direct conversion would. */
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        store_f32_cpu(dst, ddt, i, load_f32_cpu(src, sdt, i));
}
