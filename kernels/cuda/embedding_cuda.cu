/*
 * embedding_cuda.cu - token and position embeddings, vocab-parallel aware.
 *
 * The twin of embedding_cpu.c. A rank holding vocabulary rows [v0, v0+Vl)
 * looks up only the tokens it owns and writes zero rows for the others, so
 * summing over the tensor-parallel ranks gives the full lookup.
 *
 * The token backward pass scatter-adds rows of dout into dwte rows that
 * repeated tokens share. Float atomics would make the sum's order, and so
 * its bits, change from run to run; instead the positions are sorted by
 * token with CUB's radix sort, which is stable, and one block per distinct
 * token adds that token's dout rows in position order, starting from the
 * current dwte row, one channel per thread. That is exactly the order of
 * embedding_bwd_cpu (dst += src for i = 0, 1, ... per channel), so in fp32
 * the result is the CPU's, bit for bit, and the same on every run. A
 * frequent token costs its thread a loop over its occurrences, reading
 * independent dout rows, with one store at the end. Under TRIDENT_FUSED
 * (fused_cuda.cu; the default) the loop loads RUN_BATCH of them before
 * it adds the first, and the sort keys are the shard's rows, so the
 * radix sort covers only the bits of Vl; the sums, and so the bits, are
 * unchanged (embedding_bwd_serial_cuda is the kernel before).
 *
 * The position backward pass sums over the batch, b = 0, 1, ..., per
 * (t, c) element: one thread each, in the CPU's order.
 */
#include "cuda_common.h"

#include <cub/device/device_radix_sort.cuh>

/* out[i, c] = wte[tokens[i] - v0, c] when this shard owns the token, else
 * 0; the element bits are copied, not converted. */
static __global__ void embedding_fwd_kernel(void *out, const int32_t *tokens,
                                            const void *wte, int two_byte,
                                            int v0, int Vl, int N, int C)
{
    int64_t total = (int64_t)N * C;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = k / C, c = k % C;
        int64_t r = (int64_t)tokens[i] - v0;
        int own = r >= 0 && r < Vl;
        if (two_byte)
            ((uint16_t *)out)[k] = own ? ((const uint16_t *)wte)[r * C + c] : 0;
        else
            ((uint32_t *)out)[k] = own ? ((const uint32_t *)wte)[r * C + c] : 0u;
    }
}

void embedding_fwd_cuda(void *out, const int32_t *tokens, const void *wte,
                        ops_dtype dt, int v0, int Vl, int N, int C)
{
    // out is (N,C), tokens (N), wte (Vl,C)
    int64_t total = (int64_t)N * C;
    if (total <= 0)
        return;
    embedding_fwd_kernel<<<grid_for(total, TRI_THREADS), TRI_THREADS, 0,
                           stream_cuda()>>>(out, tokens, wte, esize_cuda(dt) == 2,
                                            v0, Vl, N, C);
    TRI_CHECK_LAUNCH(embedding_fwd_kernel);
}

static __global__ void iota_kernel(int32_t *x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x)
        x[i] = i;
}

/* Block (p, channel block): if sorted position p starts a run of equal
 * tokens that this shard owns, adds the run's dout rows, in position
 * order, into that token's dwte row. keys are the sorted tokens, pos the
 * positions they came from. */
static __global__ void embedding_bwd_run_kernel(float *dwte, const int32_t *keys,
                                                const int32_t *pos,
                                                const void *dout, ops_dtype dt,
                                                int v0, int Vl, int N, int C)
{
    int p = blockIdx.x;
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    int32_t key = keys[p];
    if (c >= C || (p > 0 && keys[p - 1] == key))
        return;
    int64_t r = (int64_t)key - v0;
    if (r < 0 || r >= Vl)
        return;
    float acc = dwte[r * C + c];
    for (int q = p; q < N && keys[q] == key; q++)
        acc += load_f32_cuda(dout, dt, (int64_t)pos[q] * C + c);
    dwte[r * C + c] = acc;
}

/* The sort both kernels share: keys (N) = tokens in increasing order, pos
 * (N) = the position each came from; stable, so equal tokens keep their
 * positions in increasing order. With `shard_keys` the keys are the row
 * in this shard, tok - v0, and Vl for a token another shard owns (sorted
 * last, skipped), so the radix sort needs only the bits of Vl (17 for a
 * 128k vocabulary, 3 passes of 8 bits, not 4); otherwise the tokens
 * themselves over 32 bits, as before TRIDENT_FUSED. */
static void sort_tokens(int32_t **keys, int32_t **pos, const int32_t *tokens, int v0, int Vl,
                        int N, int shard_keys);

void embedding_bwd_serial_cuda(float *dwte, const int32_t *tokens, const void *dout,
                               ops_dtype dt, int v0, int Vl, int N, int C)
{
    if (N <= 0 || C <= 0 || Vl <= 0)
        return;
    int32_t *keys, *pos;
    sort_tokens(&keys, &pos, tokens, v0, Vl, N, 0);
    dim3 grid((unsigned)N, (unsigned)((C + TRI_THREADS - 1) / TRI_THREADS));
    embedding_bwd_run_kernel<<<grid, TRI_THREADS, 0, stream_cuda()>>>(dwte, keys, pos, dout,
                                                                     dt, v0, Vl, N, C);
    TRI_CHECK_LAUNCH(embedding_bwd_run_kernel);
}

/* rows this shard owns; their keys lie in [0, Vl), and Vl marks the others */
static __global__ void shard_keys_kernel(int32_t *keys, int32_t *pos, const int32_t *tokens,
                                         int v0, int Vl, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x) {
        int64_t r = (int64_t)tokens[i] - v0;
        keys[i] = r >= 0 && r < Vl ? (int32_t)r : Vl;
        pos[i] = i;
    }
}

/* Bits that hold every value in [0, v]. */
static int bits_for(int v)
{
    int b = 1;
    while (b < 31 && (v >> b) != 0)
        b++;
    return b;
}

static void sort_tokens(int32_t **keys, int32_t **pos, const int32_t *tokens, int v0, int Vl,
                        int N, int shard_keys)
{
    cudaStream_t s = stream_cuda();
    int end_bit = shard_keys ? bits_for(Vl) : 32;
    size_t sort_bytes = 0;
    TRI_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(
        (void *)NULL, sort_bytes, (const int32_t *)NULL, (int32_t *)NULL,
        (const int32_t *)NULL, (int32_t *)NULL, N, 0, end_bit, s));
    size_t part = align256((size_t)N * sizeof(int32_t));
    char *ws = (char *)scratch_cuda(SCRATCH_CUDA_SORT, 4 * part + sort_bytes);
    int32_t *in_keys = (int32_t *)ws;
    int32_t *in_pos = (int32_t *)(ws + part);
    *keys = (int32_t *)(ws + 2 * part);
    *pos = (int32_t *)(ws + 3 * part);
    void *sort_tmp = ws + 4 * part;
    if (shard_keys) {
        shard_keys_kernel<<<grid_for(N, TRI_THREADS), TRI_THREADS, 0, s>>>(in_keys, in_pos,
                                                                          tokens, v0, Vl, N);
        TRI_CHECK_LAUNCH(shard_keys_kernel);
    } else {
        iota_kernel<<<grid_for(N, TRI_THREADS), TRI_THREADS, 0, s>>>(in_pos, N);
        TRI_CHECK_LAUNCH(iota_kernel);
        in_keys = (int32_t *)tokens;
    }
    TRI_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes,
                                                   (const int32_t *)in_keys, *keys, in_pos,
                                                   *pos, N, 0, end_bit, s));
}

/* Rows of a run a thread reads before it adds the first: RUN_BATCH loads
 * of dout in flight instead of one, which is what a frequent token's run
 * costs (its thread walks all of the token's rows: hundreds for " the"
 * in 16k tokens of text, all of them when every token is equal). */
#define RUN_BATCH 16

/* embedding_bwd_run_kernel with the shard's row keys (Vl: not ours) and
 * the run's rows read RUN_BATCH at a time: keys, then positions, then the
 * dout elements, each batch's loads independent of one another; they are
 * added in position order, one at a time, so the sum and its bits are
 * the serial kernel's and the CPU's. */
static __global__ void embedding_bwd_batched_kernel(float *dwte, const int32_t *keys,
                                                    const int32_t *pos, const void *dout,
                                                    ops_dtype dt, int Vl, int N, int C)
{
    int p = blockIdx.x;
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    int32_t key = keys[p];
    if (c >= C || key >= Vl || (p > 0 && keys[p - 1] == key))
        return;
    float acc = dwte[(int64_t)key * C + c];
    for (int q = p;; q += RUN_BATCH) {
        int32_t kq[RUN_BATCH], pq[RUN_BATCH];
        float v[RUN_BATCH];
#pragma unroll
        for (int u = 0; u < RUN_BATCH; u++)
            kq[u] = q + u < N ? keys[q + u] : -1;
        int n = 0; /* the run's rows in this batch: a prefix */
#pragma unroll
        for (int u = 0; u < RUN_BATCH; u++)
            n = n == u && kq[u] == key ? u + 1 : n;
#pragma unroll
        for (int u = 0; u < RUN_BATCH; u++)
            if (u < n)
                pq[u] = pos[q + u];
#pragma unroll
        for (int u = 0; u < RUN_BATCH; u++)
            if (u < n)
                v[u] = load_f32_cuda(dout, dt, (int64_t)pq[u] * C + c);
#pragma unroll
        for (int u = 0; u < RUN_BATCH; u++)
            if (u < n)
                acc += v[u];
        if (n < RUN_BATCH)
            break;
    }
    dwte[(int64_t)key * C + c] = acc;
}

void embedding_bwd_cuda(float *dwte, const int32_t *tokens, const void *dout,
                        ops_dtype dt, int v0, int Vl, int N, int C)
{
    if (!fused_enabled_cuda()) {
        embedding_bwd_serial_cuda(dwte, tokens, dout, dt, v0, Vl, N, C);
        return;
    }
    if (N <= 0 || C <= 0 || Vl <= 0)
        return;
    int32_t *keys, *pos;
    sort_tokens(&keys, &pos, tokens, v0, Vl, N, 1);
    dim3 grid((unsigned)N, (unsigned)((C + TRI_THREADS - 1) / TRI_THREADS));
    embedding_bwd_batched_kernel<<<grid, TRI_THREADS, 0, stream_cuda()>>>(dwte, keys, pos,
                                                                         dout, dt, Vl, N, C);
    TRI_CHECK_LAUNCH(embedding_bwd_batched_kernel);
}

static __global__ void position_fwd_kernel(void *out, const void *wpe,
                                           ops_dtype dt, int64_t total,
                                           int64_t tc)
{
    // out (B,T,C) += wpe (T,C): element k of out meets element k % (T*C)
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x)
        store_f32_cuda(out, dt, k, load_f32_cuda(out, dt, k) + load_f32_cuda(wpe, dt, k % tc));
}

void position_fwd_cuda(void *out, const void *wpe, ops_dtype dt, int B, int T,
                       int C)
{
    int64_t tc = (int64_t)T * C, total = (int64_t)B * tc;
    if (total <= 0)
        return;
    position_fwd_kernel<<<grid_for(total, TRI_THREADS), TRI_THREADS, 0,
                          stream_cuda()>>>(out, wpe, dt, total, tc);
    TRI_CHECK_LAUNCH(position_fwd_kernel);
}

static __global__ void position_bwd_kernel(float *dwpe, const void *dout,
                                           ops_dtype dt, int B, int64_t tc)
{
    // each (t, c) element sums the batch in order b = 0, 1, ...
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < tc;
         k += (int64_t)gridDim.x * blockDim.x) {
        float acc = dwpe[k];
        for (int b = 0; b < B; b++)
            acc += load_f32_cuda(dout, dt, b * tc + k);
        dwpe[k] = acc;
    }
}

void position_bwd_cuda(float *dwpe, const void *dout, ops_dtype dt, int B,
                       int T, int C)
{
    int64_t tc = (int64_t)T * C;
    if (tc <= 0 || B <= 0)
        return;
    position_bwd_kernel<<<grid_for(tc, TRI_THREADS), TRI_THREADS, 0,
                          stream_cuda()>>>(dwpe, dout, dt, B, tc);
    TRI_CHECK_LAUNCH(position_bwd_kernel);
}
