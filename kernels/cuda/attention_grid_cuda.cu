/*
 * attention_grid_cuda.cu - the launch grid and template bucket that the
 * fused attention's two sets of kernels share: the fp32 ones
 * (attention_cuda.cu) and the tensor-core ones (attention_mma_cuda.cu),
 * which attention_cuda.cu dispatches to. Their own file, below both, so
 * that neither calls back into the other (tests/t_deps.sh proves kernels/
 * has no call circle).
 *
 * Not collective.
 */
#include "cuda_common.h"

/* The 1-D grid of B*NH tiles of `rows` rows each; fatal past CUDA's limit
 * or for a head size the kernels have no bucket for. */
unsigned attention_grid_cuda(const char *fn, int B, int NH, int T, int hs, int rows)
{
    if (hs > ATTENTION_MAX_HS_CUDA)
        ops_fatalf(__FILE__, __LINE__, "%s: head size %d: the CUDA attention supports "
                   "head sizes up to %d", fn, hs, ATTENTION_MAX_HS_CUDA);
    int64_t blocks = (int64_t)B * NH * ((T + rows - 1) / rows);
    if (blocks > INT32_MAX)
        ops_fatalf(__FILE__, __LINE__, "%s: B*NH = %lld heads of T = %d need %lld blocks, "
                   "over CUDA's 2^31 - 1", fn, (long long)B * NH, T, (long long)blocks);
    return (unsigned)blocks;
}

int attention_head_bucket_cuda(int hs)
{
    return hs <= 32 ? 32 : hs <= 64 ? 64 : 128;
}
