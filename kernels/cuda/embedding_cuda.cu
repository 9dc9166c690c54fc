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
 * independent dout rows, with one store at the end.
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

void embedding_bwd_cuda(float *dwte, const int32_t *tokens, const void *dout,
                        ops_dtype dt, int v0, int Vl, int N, int C)
{
    if (N <= 0 || C <= 0 || Vl <= 0)
        return;
    cudaStream_t s = stream_cuda();
    size_t sort_bytes = 0;
    TRI_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(
        (void *)NULL, sort_bytes, (const int32_t *)NULL, (int32_t *)NULL,
        (const int32_t *)NULL, (int32_t *)NULL, N, 0, 32, s));
    size_t part = align256((size_t)N * sizeof(int32_t));
    char *ws = (char *)scratch_cuda(SCRATCH_CUDA_SORT, 3 * part + sort_bytes);
    int32_t *iota = (int32_t *)ws;
    int32_t *keys = (int32_t *)(ws + part);
    int32_t *pos = (int32_t *)(ws + 2 * part);
    void *sort_tmp = ws + 3 * part;
    iota_kernel<<<grid_for(N, TRI_THREADS), TRI_THREADS, 0, s>>>(iota, N);
    TRI_CHECK_LAUNCH(iota_kernel);
    // stable: equal tokens keep their positions in increasing order
    TRI_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, tokens,
                                                   keys, iota, pos, N, 0, 32, s));
    dim3 grid((unsigned)N, (unsigned)((C + TRI_THREADS - 1) / TRI_THREADS));
    embedding_bwd_run_kernel<<<grid, TRI_THREADS, 0, s>>>(dwte, keys, pos, dout,
                                                         dt, v0, Vl, N, C);
    TRI_CHECK_LAUNCH(embedding_bwd_run_kernel);
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
