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
 * its rows [t0, end) (queries or keys), the element offsets of its head
 * (q's row 0 in qkv, ld apart; row 0 of its columns in out or dout, ldo
 * apart; row 0 of its lse and D), and this warp's first row, row0, within
 * the tile. The block index runs through every head of one tile before
 * the next tile, heavy tiles first.
 *
 * Row windows (context parallelism): the queries are rows [first, qend)
 * of the T-token sequence (the whole sequence: 0 and T), the keys
 * [0, qend). out, dout, lse and D hold only the window's Tq = qend - first
 * rows, so their offsets start `first` rows early: every index a kernel
 * forms is by the row's position t in the sequence, and a window changes
 * no arithmetic but these offsets and bounds. A query-side block (forward,
 * dQ) tiles the window's queries, the last tile first; a key-side block
 * (dK, dV) tiles the keys [0, qend), the first first. */
struct Tile {
    int bh, t0, end, lane, row0;
    int first, qend;
    int64_t qkv, out, lse, ld, ldo;
};

static __device__ Tile tile_of_block(int BH, int NH, int T, int first, int Tq, int hs,
                                     int rows, int rows_per_warp, int query_side)
{
    Tile tl;
    tl.first = first;
    tl.qend = first + Tq;
    int t_begin = query_side ? first : 0;
    int tiles = (tl.qend - t_begin + rows - 1) / rows;
    int k = (int)(blockIdx.x / (unsigned)BH);
    tl.bh = (int)(blockIdx.x % (unsigned)BH);
    tl.t0 = t_begin + (query_side ? tiles - 1 - k : k) * rows;
    tl.end = min(tl.qend, tl.t0 + rows);
    tl.lane = threadIdx.x % 32;
    tl.row0 = threadIdx.x / 32 * rows_per_warp;
    int b = tl.bh / NH, h = tl.bh % NH;
    tl.ld = 3 * (int64_t)NH * hs;
    tl.ldo = (int64_t)NH * hs;
    tl.qkv = (int64_t)b * T * tl.ld + (int64_t)h * 3 * hs;
    tl.out = ((int64_t)b * Tq - first) * tl.ldo + (int64_t)h * hs;
    tl.lse = (int64_t)tl.bh * Tq - first;
    return tl;
}

#endif
