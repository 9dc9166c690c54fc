/*
 * attention_tile_cuda.h - which rows of which head a block of the fused
 * attention kernels owns: shared by the fp32 kernels (attention_cuda.cu)
 * and the tensor-core ones (attention_mma_cuda.cu). Device code only,
 * included after cuda_common.h (or tests/cuda_emu's stand-in for it),
 * which it does not include itself, so that the host emulation of the
 * kernels (tests/t_attention_emu) can put its own first.
 */
#ifndef TRI_KERNELS_CUDA_ATTENTION_TILE_CUDA_H
#define TRI_KERNELS_CUDA_ATTENTION_TILE_CUDA_H

/* What a block computes: head bh (of B*NH) of the (batch, head) pairs,
 * its rows [t0, t0 + rows) (queries or keys), the element offsets of its
 * head (q's row 0 in qkv, ld apart; row 0 of its columns in out or dout,
 * ldo apart), and this warp's first row, row0, within the tile. The
 * block index runs through every head of one tile before the next tile,
 * heavy tiles first: reverse takes the last tile first. */
struct Tile {
    int bh, t0, end, lane, row0;
    int64_t qkv, out, ld, ldo;
};

static __device__ Tile tile_of_block(int BH, int NH, int T, int hs, int rows,
                                     int rows_per_warp, int reverse)
{
    Tile tl;
    int tiles = (T + rows - 1) / rows;
    int k = (int)(blockIdx.x / (unsigned)BH);
    tl.bh = (int)(blockIdx.x % (unsigned)BH);
    tl.t0 = (reverse ? tiles - 1 - k : k) * rows;
    tl.end = min(T, tl.t0 + rows);
    tl.lane = threadIdx.x % 32;
    tl.row0 = threadIdx.x / 32 * rows_per_warp;
    int b = tl.bh / NH, h = tl.bh % NH;
    tl.ld = 3 * (int64_t)NH * hs;
    tl.ldo = (int64_t)NH * hs;
    tl.qkv = (int64_t)b * T * tl.ld + (int64_t)h * 3 * hs;
    tl.out = (int64_t)b * T * tl.ldo + (int64_t)h * hs;
    return tl;
}

#endif
