/*
 * multi_cuda.cu - the tables the multi-tensor kernels read: AdamW over
 * every parameter and the gradient norm's sum of squares in one launch
 * each, instead of one or two launches per tensor (issue 34: about 150
 * tensors a GPT-2 step, each launch a few microseconds of a GPU idling
 * between small kernels).
 *
 * A table is the caller's records (pointers, dtypes, sizes of each
 * tensor) followed by the chunks of all the tensors, built on the host
 * and copied to a scratch slot of its own. The parameters' pointers do not
 * change between steps, so the copy (a host wait) happens on the first
 * step only: later calls compare the new table with the one kept and
 * reuse the device copy.
 */
#include "cuda_common.h"

#include <stdlib.h>
#include <string.h>

/* The host copy of the table each slot holds on the device. */
static struct {
    void *host;
    size_t bytes;
    void *dev;
} kept[SCRATCH_CUDA_SLOTS];

static int64_t chunk_count(const int64_t *n, int count)
{
    int64_t c = 0;
    for (int i = 0; i < count; i++)
        c += (n[i] + MULTI_CHUNK - 1) / MULTI_CHUNK;
    return c;
}

static void chunks_fill(multi_chunk *out, const int64_t *n, int count)
{
    int64_t c = 0;
    for (int i = 0; i < count; i++)
        for (int64_t s = 0; s < n[i]; s += MULTI_CHUNK) {
            int64_t left = n[i] - s;
            out[c++] = (multi_chunk){ s, i, (int32_t)(left < MULTI_CHUNK ? left : MULTI_CHUNK) };
        }
}

multi_table multi_table_cuda(scratch_slot_cuda slot, const void *records,
                             size_t record_size, const int64_t *n, int count)
{
    int64_t nchunks = chunk_count(n, count);
    if (nchunks > INT32_MAX)
        ops_fatalf(__FILE__, __LINE__, "multi-tensor table: %lld chunks, more than a grid holds",
                   (long long)nchunks);
    size_t head = align256(record_size * (size_t)count);
    size_t bytes = head + sizeof(multi_chunk) * (size_t)nchunks;
    char *host = (char *)calloc(1, bytes > 0 ? bytes : 1);
    if (!host)
        ops_fatalf(__FILE__, __LINE__, "multi-tensor table: out of host memory (%zu bytes)", bytes);
    memcpy(host, records, record_size * (size_t)count);
    chunks_fill((multi_chunk *)(host + head), n, count);

    char *dev = (char *)scratch_cuda(slot, bytes);
    if (kept[slot].dev == dev && kept[slot].bytes == bytes
        && memcmp(kept[slot].host, host, bytes) == 0) {
        free(host);
    } else {
        copy_cuda(dev, OPS_CUDA, host, OPS_CPU, bytes);
        free(kept[slot].host);
        kept[slot].host = host;
        kept[slot].bytes = bytes;
        kept[slot].dev = dev;
    }
    return (multi_table){ dev, (const multi_chunk *)(dev + head), nchunks };
}

void multi_tables_forget_cuda(void)
{
    for (int i = 0; i < SCRATCH_CUDA_SLOTS; i++) {
        free(kept[i].host);
        kept[i].host = NULL;
        kept[i].bytes = 0;
        kept[i].dev = NULL;
    }
}
