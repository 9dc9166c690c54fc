/*
 * attention_mma_cuda.cu - fused causal self-attention in bf16 and fp16 on
 * the tensor cores: FlashAttention-2's algorithm, its products as warp
 * mma.sync instructions (cuda_common.h's mma_16816).
 *
 * attention_cuda.cu sends 16-bit dtypes here and keeps fp32 on its CUDA
 * core kernels. The arguments, the (B,T,NH,3,hs) qkv layout read in place,
 * the outputs, the lse and the D scratch are attention_cuda.cu's, and so
 * is the algorithm: an online softmax over key tiles forward; backward, a
 * query-side kernel (D, then dQ) and a key-side kernel (dK, dV), each
 * output summed by one thread in one order: no atomics, the same bits
 * every run.
 *
 * Tiles. A block is 4 warps; a warp owns 16 rows (an mma's M): 16 query
 * rows forward and in the dQ kernel, 16 keys in the dK/dV kernel, so a
 * block owns 64. The other side streams through shared memory in tiles of
 * 64 rows (32 when hs > 64, to bound the registers), stored as the dtype's
 * 16-bit words, HD + 8 to a row (16-byte aligned rows whose fragment loads
 * hit 32 different banks), zero past hs and past T. Streamed by cp.async
 * into two buffers: the next tile's copies fly while the block computes
 * on this one, one barrier a tile (TRIDENT_ATTENTION_ASYNC=0: one buffer,
 * loaded between two barriers, as before cp.async). The block's own rows
 * pass through the last buffer on their way to registers, so two buffers
 * cost 20 to 37 KB a block (HD 32 to 128), under the 48 KB of static
 * shared memory; the registers, not these, decide the blocks an SM
 * holds (doc/gpu.md). A warp keeps its own
 * 16 rows (Q and dO, or K and V) as A fragments in registers, and its
 * accumulators (O, dQ, dK, dV: 16 x HD in fp32) there too. The second
 * products' B fragments (the tile as stored) come by a transposing
 * ldmatrix, one instruction for a fragment's two registers where 16-bit
 * shared loads took 4 (but in the dK/dV kernel at HD 128).
 *
 * Per tile a warp computes S = Q K^T (or S^T = K Q^T) and, backward,
 * dP = dO V^T (dP^T = V dO^T) as 16 x 64 fp32 accumulators; the mask,
 * the softmax and dS = P (dP - D) scale are elementwise in fp32 on those
 * registers (a row's max and sum across the 4 lanes that hold it); then P
 * or dS, rounded to the dtype, is already laid out as the A fragment of
 * the next product (O += P V, dQ += dS K, dV += P^T dO, dK += dS^T Q).
 *
 * Precision: products of 16-bit inputs summed in fp32; the softmax, its
 * statistics (m, l, lse, D) and the elementwise steps in fp32 with
 * elem_expf, as the CPU. P and dS are rounded to the dtype before their
 * second product, as FlashAttention does and as the exact GPU kernel
 * (attention_exact_cuda.cu) does for its GEMMs: the size of the output's
 * own rounding, within the 16-bit tolerances t_ops_cuda and t_gpu hold
 * every kernel to. D = rowsum(dO * O) from the stored (rounded) output,
 * in the dQ kernel's prologue, as FlashAttention-2: the dQ kernel then
 * makes one pass over the keys, 3 products per key tile (S, dP, dQ)
 * rather than the 5 of two passes, so the backward's 7 per tile pair
 * rather than 9. The rounded O moves D by about 2^-9 (bf16) of |dO||O|;
 * t_attention_emu measured dQ's normwise error against the double
 * reference within 1.7x of the exact D's (bf16 4.5e-3 against 2.6e-3 at
 * hs 128, 1.56e-2 against 1.63e-2 in its worst case, a one-row window;
 * fp16 within 4%; tolerances 2e-2 and 4e-3), not the bad cancellation
 * once feared. TRIDENT_ATTENTION_D=sweep
 * keeps the former way: rowsum(P * dP) from a first sweep of the dQ
 * kernel over the keys, as attention_cuda.cu's kernels do.
 *
 * Row windows (context parallelism) as attention_cuda.cu's: the query
 * side over the window's rows, the key side over the keys they read, the
 * window's backward adding to dqkv.
 *
 * tests/t_attention_emu runs these kernels on the host (each CUDA thread a
 * fiber, the mma computed from the fragments as the PTX manual lays them
 * out, cp.async's copies deferred to the wait) against a double
 * reference, with the tiles streamed both ways; tests/t_ops_cuda checks
 * them on a GPU against the CPU's and the exact GPU kernel. Not yet run
 * on a GPU: cp.async, and what it is worth.
 */
#include "cuda_common.h"
#include "attention_tile_cuda.h"

#define MMA_WARPS 4
#define MMA_THREADS (MMA_WARPS * 32)
#define MMA_BLOCK_ROWS (MMA_WARPS * 16) /* a warp's 16 rows, 4 warps */
#define MMA_FULL 0xffffffffu

/* Rows of the streamed tiles: 64, or 32 at HD = 128 (registers). Two
 * tiles hold a block's own rows (the stage, below). */
#define MMA_TILE(HD) ((HD) > 64 ? 32 : 64)
static_assert(2 * MMA_TILE(128) >= MMA_BLOCK_ROWS, "two tiles hold the block's rows");

/* Rows [t0, t0 + n) of a (T, hs) matrix of 16-bit elements whose row t
 * starts at element base + t*ld of src (t0 < T), into shared s (row
 * stride HD + 8), HD columns, zero past hs and past T. Every thread of
 * the block calls it. In 16-byte pieces when hs fills the bucket and the
 * rows are 16-byte aligned (every real model's), else element by
 * element. ASYNC: the 16-byte pieces by cp.async, to be waited for
 * (stream_next); the element path stays synchronous. */
template <int HD, bool ASYNC = false>
static __device__ void load_tile16(uint16_t *s, int n, const uint16_t *src, int64_t base,
                                   int64_t ld, int t0, int T, int hs)
{
    constexpr int LD = HD + 8;
    bool whole = hs == HD && ld % 8 == 0 && (uintptr_t)(src + base) % 16 == 0;
    if (whole) {
        for (int e = threadIdx.x; e < n * HD / 8; e += blockDim.x) {
            int i = e / (HD / 8), d = e % (HD / 8) * 8, t = t0 + i;
            if (ASYNC) { /* past T: zeros, from row t0's valid address */
                cp_async<16>(s + i * LD + d, src + base + (int64_t)(t < T ? t : t0) * ld + d,
                             t < T);
                continue;
            }
            uint4 v = make_uint4(0, 0, 0, 0);
            if (t < T)
                v = *(const uint4 *)(src + base + (int64_t)t * ld + d);
            *(uint4 *)(s + i * LD + d) = v;
        }
        return;
    }
    for (int e = threadIdx.x; e < n * HD; e += blockDim.x) {
        int i = e / HD, d = e % HD, t = t0 + i;
        s[i * LD + d] = t < T && d < hs ? src[base + (int64_t)t * ld + d] : (uint16_t)0;
    }
}

/* dst := src[i], or 0 past n (n > 0): one fp32 of a row's statistics
 * (lse, D); with ASYNC by cp.async, as load_tile16. */
template <bool ASYNC>
static __device__ __forceinline__ void load_stat(float *dst, const float *src, int i, int n)
{
    if (ASYNC)
        cp_async<4>(dst, src + (i < n ? i : n - 1), i < n);
    else
        *dst = i < n ? src[i] : 0.0f;
}

/* ---- the streamed tiles ---------------------------------------------------
 * The tiles a kernel streams through shared memory (K and V forward and in
 * the dQ kernel; Q, dO and their lse and D in the dK/dV kernel): tile j of
 * a sweep is what fetch(b, j) loads into buffer b. ASYNC (the default;
 * TRIDENT_ATTENTION_ASYNC=0 turns it off): two buffers, tile j + 1's
 * copies started into one while the block computes tile j from the other,
 * so a tile's load latency hides behind the previous tile's products, and
 * one barrier a tile. Else one buffer, loaded while the block waits
 * between two barriers (the kernels before cp.async). The last buffer is
 * also the stage of the block's own rows (own_rows_fragments), which are
 * in registers before it first takes a tile: 2 tiles (K and V, or Q and
 * dO) of at least 32 rows hold the 64 rows. */
#define MMA_BUFFERS(ASYNC) ((ASYNC) ? 2 : 1)

/* Before the loop over a sweep's tiles, every thread: with ASYNC, starts
 * tile 0's copies into buffer 0. Ahead of the kernel's own rows' loads,
 * they overlap; before a second sweep, after a barrier (buffer 0 may hold
 * the first sweep's last tile, still being read). */
template <bool ASYNC, typename Fetch>
static __device__ __forceinline__ void stream_start(Fetch fetch)
{
    if (ASYNC) {
        fetch(0, 0);
        cp_async_commit();
    }
}

/* At the top of tile j's iteration, every thread, for every tile (also
 * those its warp skips): makes tile j ready in shared memory and returns
 * its buffer; more: a tile j + 1 follows. ASYNC: this thread's copies of
 * tile j have landed after the wait, and every thread's are visible after
 * the barrier, which also says that tile j - 1 is read: tile j + 1's
 * copies may start into its buffer. */
template <bool ASYNC, typename Fetch>
static __device__ __forceinline__ int stream_next(int j, bool more, Fetch fetch)
{
    if (!ASYNC) {
        __syncthreads(); /* the previous tile is read */
        fetch(0, j);
        __syncthreads();
        return 0;
    }
    cp_async_wait<0>();
    __syncthreads();
    if (more)
        fetch((j + 1) % 2, j + 1);
    cp_async_commit(); /* an empty group after the last tile: harmless */
    return j % 2;
}

/* Keys [c0, c0 + KT) of the block's head (qkv's K and V columns, src):
 * K into the first tile of buffer b of tiles, V into its second (the
 * forward and the dQ kernel). */
template <int HD, bool ASYNC>
static __device__ __forceinline__ void load_kv(uint16_t *tiles, int b, int c0, const uint16_t *src,
                                               const Tile &tl, int hs)
{
    constexpr int KT = MMA_TILE(HD), TILE = KT * (HD + 8);
    load_tile16<HD, ASYNC>(tiles + 2 * b * TILE, KT, src, tl.qkv + hs, tl.ld, c0, tl.qend, hs);
    load_tile16<HD, ASYNC>(tiles + (2 * b + 1) * TILE, KT, src, tl.qkv + 2 * hs, tl.ld, c0,
                           tl.qend, hs);
}

/* ---- fragments (layouts: cuda_common.h's mma_16816) ---------------------- */

/* a := rows m0..m0+15, columns k0..k0+15 of the tile s (stride LD). */
template <int LD>
static __device__ __forceinline__ void frag_a(uint32_t a[4], const uint16_t *s, int m0,
                                              int k0, int lane)
{
    const uint16_t *p = s + (m0 + lane / 4) * LD + k0 + 2 * (lane % 4);
    a[0] = load_16x2(p);
    a[1] = load_16x2(p + 8 * LD);
    a[2] = load_16x2(p + 8);
    a[3] = load_16x2(p + 8 * LD + 8);
}

/* b[k][n] := s[n0 + n][k0 + k]: the tile's rows are b's columns (K in
 * Q K^T, Q in K Q^T, V in dO V^T). */
template <int LD>
static __device__ __forceinline__ void frag_b_rows(uint32_t b[2], const uint16_t *s, int n0,
                                                   int k0, int lane)
{
    const uint16_t *p = s + (n0 + lane / 4) * LD + k0 + 2 * (lane % 4);
    b[0] = load_16x2(p);
    b[1] = load_16x2(p + 8);
}

/* b[k][n] := s[k0 + k][n0 + n]: the tile as stored (V in P V, K in dS K,
 * dO in P^T dO, Q in dS^T Q). With LDM one transposing ldmatrix: lanes
 * 0-15 give rows k0..k0+15 at column n0 (rows 0-7 are b[0]'s, 8-15
 * b[1]'s); else four 16-bit loads. */
template <int LD, bool LDM>
static __device__ __forceinline__ void frag_b_cols(uint32_t b[2], const uint16_t *s, int k0,
                                                   int n0, int lane)
{
    if (LDM) {
        ldmatrix_x2_trans(b, s + (k0 + lane % 16) * LD + n0);
        return;
    }
    const uint16_t *p = s + (k0 + 2 * (lane % 4)) * LD + n0 + lane / 4;
    b[0] = (uint32_t)p[0] | (uint32_t)p[LD] << 16;
    b[1] = (uint32_t)p[8 * LD] | (uint32_t)p[9 * LD] << 16;
}

/* The A fragment of a 16 x 16 block of accumulators, lo its columns 0-7
 * and hi 8-15, rounded to the dtype: an accumulator's layout is half of
 * an A fragment's. */
template <bool BF16>
static __device__ __forceinline__ void frag_a_of(uint32_t a[4], const float lo[4],
                                                 const float hi[4])
{
    a[0] = pack_16x2<BF16>(lo[0], lo[1]);
    a[1] = pack_16x2<BF16>(lo[2], lo[3]);
    a[2] = pack_16x2<BF16>(hi[0], hi[1]);
    a[3] = pack_16x2<BF16>(hi[2], hi[3]);
}

/* acc[n] += a_k b for the n-th 8 columns of a tile s (stride LD) as
 * stored, over the 16-row block k0: the second products. LDM: the B
 * fragments by ldmatrix (frag_b_cols). */
template <int LD, int NO, bool BF16, bool LDM = true>
static __device__ __forceinline__ void add_product(float (*acc)[4], const uint32_t a[4],
                                                   const uint16_t *s, int k0, int lane)
{
#pragma unroll
    for (int n = 0; n < NO; n++) {
        uint32_t b[2];
        frag_b_cols<LD, LDM>(b, s, k0, n * 8, lane);
        mma_16816<BF16>(acc[n], a, b);
    }
}

/* out[n] := a (16 x HD, NK fragments) times the tile s's rows as
 * columns (NS of 8): S = Q K^T and its kin. */
template <int LD, int NS, int NK, bool BF16>
static __device__ __forceinline__ void scores(float (*out)[4], const uint32_t (*a)[4],
                                              const uint16_t *s, int lane)
{
#pragma unroll
    for (int n = 0; n < NS; n++) {
        out[n][0] = out[n][1] = out[n][2] = out[n][3] = 0.0f;
#pragma unroll
        for (int k = 0; k < NK; k++) {
            uint32_t b[2];
            frag_b_rows<LD>(b, s, n * 8, k * 16, lane);
            mma_16816<BF16>(out[n], a[k], b);
        }
    }
}

/* op over the 4 lanes that hold one accumulator row. */
template <typename Op>
static __device__ __forceinline__ float quad_allreduce(float v, Op op)
{
    v = op(v, __shfl_xor_sync(MMA_FULL, v, 1));
    return op(v, __shfl_xor_sync(MMA_FULL, v, 2));
}

/* Rows row0..row0+15 of a (T, hs) tile of dst (element base + t*ld + d)
 * from a warp's accumulators acc (NO blocks of 8 columns) times mul[0]
 * (row g) and mul[1] (row g + 8), rounded once to dt; rows past T and
 * columns past hs are not stored. With add, the old value is added first
 * (a window's gradients). */
template <int NO>
static __device__ void store_rows16(void *dst, ops_dtype dt, int64_t base, int64_t ld,
                                    int row0, int T, int hs, const float (*acc)[4],
                                    const float mul[2], int lane, int add = 0)
{
#pragma unroll
    for (int half = 0; half < 2; half++) {
        int t = row0 + lane / 4 + 8 * half;
        if (t >= T)
            continue;
#pragma unroll
        for (int n = 0; n < NO; n++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int d = n * 8 + 2 * (lane % 4) + e;
                int64_t at = base + (int64_t)t * ld + d;
                float x = acc[n][2 * half + e] * mul[half];
                if (d < hs)
                    store_f32_cuda(dst, dt, at, add ? load_f32_cuda(dst, dt, at) + x : x);
            }
        }
    }
}

/* The block's own 64 rows of a (T, hs) matrix (element base + t*ld of
 * src) as this warp's A fragments of its 16 rows, through the shared
 * stage: Q or dO (query side), K or V (key side). Every thread of the
 * block calls it; the stage is free again when it returns. */
template <int HD>
static __device__ void own_rows_fragments(uint32_t (*a)[4], uint16_t *stage, const uint16_t *src,
                                          int64_t base, int64_t ld, const Tile &tl, int T, int hs)
{
    load_tile16<HD>(stage, MMA_BLOCK_ROWS, src, base, ld, tl.t0, T, hs);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < HD / 16; k++)
        frag_a<HD + 8>(a[k], stage, tl.row0, k * 16, tl.lane);
    __syncthreads(); /* every warp has its fragments: the stage is free */
}

/* This lane's two accumulator rows of a query-side warp, g and g + 8 (one
 * past the window computes as its last row, so its numbers stay finite,
 * and is not stored), and the warp's last row. */
struct WarpRows {
    int row[2], last;
};

static __device__ WarpRows warp_rows(const Tile &tl)
{
    int r0 = tl.t0 + tl.row0, end = tl.qend - 1;
    WarpRows w;
    w.row[0] = min(r0 + tl.lane / 4, end);
    w.row[1] = min(r0 + tl.lane / 4 + 8, end);
    w.last = min(r0 + 15, end);
    return w;
}

/* ---- forward ------------------------------------------------------------- */

template <int HD, bool BF16, bool ASYNC>
static __global__ void __launch_bounds__(MMA_THREADS)
attention_mma_fwd_kernel(void *out, float *lse, const void *qkv, int BH, int NH, int T,
                         int first, int Tq, int hs, float scale)
{
    constexpr int LD = HD + 8, KT = MMA_TILE(HD), NS = KT / 8, NO = HD / 8, NK = HD / 16;
    constexpr int NB = MMA_BUFFERS(ASYNC), TILE = KT * LD;
    /* buffer b: K at tiles + 2b TILE, V after it; the last: Q's stage */
    __shared__ __align__(16) uint16_t tiles[NB * 2 * TILE];
    const ops_dtype dt = BF16 ? OPS_BF16 : OPS_F16;
    const uint16_t *src = (const uint16_t *)qkv;
    const Tile tl = tile_of_block(BH, NH, T, first, Tq, hs, MMA_BLOCK_ROWS, 16, 1);
    const int lane = tl.lane, r0 = tl.t0 + tl.row0, qend = tl.qend;
    const WarpRows w = warp_rows(tl);
    const int *row = w.row;
    const int last = w.last;
    auto fetch = [&](int b, int j) { load_kv<HD, ASYNC>(tiles, b, j * KT, src, tl, hs); };
    stream_start<ASYNC>(fetch);
    uint32_t qa[NK][4];
    own_rows_fragments<HD>(qa, tiles + (NB - 1) * 2 * TILE, src, tl.qkv, tl.ld, tl, qend, hs);
    float m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.0f, 0.0f }, o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    for (int j = 0, c0 = 0; c0 < tl.end; j++, c0 += KT) {
        const int b = stream_next<ASYNC>(j, c0 + KT < tl.end, fetch);
        if (c0 > last)
            continue; /* every key after every row of the warp */
        const uint16_t *ks = tiles + 2 * b * TILE, *vs = ks + TILE;
        float s[NS][4];
        scores<LD, NS, NK, BF16>(s, qa, ks, lane);
        /* mask and scale; the tile's max of each row. Key 0 is in the
         * first tile, so m is finite from there on (alpha = 0 then). */
        float mt[2] = { -INFINITY, -INFINITY };
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int j = c0 + n * 8 + 2 * (lane % 4) + (e & 1);
                s[n][e] = j <= row[e / 2] ? s[n][e] * scale : -INFINITY;
                mt[e / 2] = s[n][e] > mt[e / 2] ? s[n][e] : mt[e / 2];
            }
        float alpha[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float mnew = quad_allreduce(mt[i], MaxOp());
            mnew = mnew > m[i] ? mnew : m[i];
            alpha[i] = m[i] == -INFINITY ? 0.0f : elem_expf(m[i] - mnew);
            m[i] = mnew;
            l[i] *= alpha[i];
        }
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = s[n][e] == -INFINITY ? 0.0f : elem_expf(s[n][e] - m[e / 2]);
                s[n][e] = p;
                l[e / 2] += p;
            }
#pragma unroll
        for (int n = 0; n < NO; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[n][e] *= alpha[e / 2];
#pragma unroll
        for (int k = 0; k < KT / 16; k++) {
            uint32_t pa[4];
            frag_a_of<BF16>(pa, s[2 * k], s[2 * k + 1]);
            add_product<LD, NO, BF16>(o, pa, vs, k * 16, lane);
        }
    }
    float inv[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] = quad_allreduce(l[i], SumOp());
        inv[i] = 1.0f / l[i];
        int t = r0 + lane / 4 + 8 * i;
        if (t < qend && lane % 4 == 0)
            lse[tl.lse + t] = m[i] + logf(l[i]);
    }
    store_rows16<NO>(out, dt, tl.out, tl.ldo, r0, qend, hs, o, inv, lane);
}

/* ---- backward ------------------------------------------------------------ */

/* D = rowsum(dO * O) of this lane's two rows g and g + 8, from the
 * warp's A fragments of dO and O (register r of k-block k holds columns
 * k*16 + 2*(lane%4) + {0, 1}, + 8 in r = 2, 3; rows g in r = 0, 2 and
 * g + 8 in r = 1, 3): each lane's share in a fixed order, then the 4
 * lanes of the row. */
template <int NK, bool BF16>
static __device__ void rowsum_of_products(float D[2], const uint32_t (*ga)[4],
                                          const uint32_t (*oa)[4])
{
    D[0] = D[1] = 0.0f;
#pragma unroll
    for (int k = 0; k < NK; k++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            float g0, g1, o0, o1;
            unpack_16x2<BF16>(ga[k][r], &g0, &g1);
            unpack_16x2<BF16>(oa[k][r], &o0, &o1);
            D[r % 2] += g0 * o0 + g1 * o1;
        }
    D[0] = quad_allreduce(D[0], SumOp());
    D[1] = quad_allreduce(D[1], SumOp());
}

/* D, then dQ = dS K, for a block's 64 query rows; add: dQ is added to
 * dqkv (a window's). D = rowsum(dO * O) from the stored output (16-bit
 * products, exact in fp32, summed in fp32), as FlashAttention-2; with
 * d_sweep, rowsum(P * dP) from a first sweep over the key tiles instead
 * (the same quantity before O's rounding; TRIDENT_ATTENTION_D=sweep). */
template <int HD, bool BF16, bool ASYNC>
static __global__ void __launch_bounds__(MMA_THREADS)
attention_mma_dq_kernel(void *dqkv, float *Dsum, const void *dout, const void *qkv,
                        const void *out, const float *lse, int BH, int NH, int T, int first,
                        int Tq, int hs, float scale, int add, int d_sweep)
{
    constexpr int LD = HD + 8, KT = MMA_TILE(HD), NS = KT / 8, NO = HD / 8, NK = HD / 16;
    constexpr int NB = MMA_BUFFERS(ASYNC), TILE = KT * LD;
    /* buffer b: K at tiles + 2b TILE, V after it; the last: the stage of
     * Q, dO, then O */
    __shared__ __align__(16) uint16_t tiles[NB * 2 * TILE];
    uint16_t *stage = tiles + (NB - 1) * 2 * TILE;
    const ops_dtype dt = BF16 ? OPS_BF16 : OPS_F16;
    const uint16_t *src = (const uint16_t *)qkv;
    const Tile tl = tile_of_block(BH, NH, T, first, Tq, hs, MMA_BLOCK_ROWS, 16, 1);
    const int lane = tl.lane, r0 = tl.t0 + tl.row0, qend = tl.qend;
    const WarpRows w = warp_rows(tl);
    const int *row = w.row;
    const int last = w.last;
    auto fetch = [&](int b, int j) { load_kv<HD, ASYNC>(tiles, b, j * KT, src, tl, hs); };
    stream_start<ASYNC>(fetch);
    uint32_t qa[NK][4], ga[NK][4];
    own_rows_fragments<HD>(qa, stage, src, tl.qkv, tl.ld, tl, qend, hs);
    own_rows_fragments<HD>(ga, stage, (const uint16_t *)dout, tl.out, tl.ldo, tl, qend, hs);
    const float li[2] = { lse[tl.lse + row[0]], lse[tl.lse + row[1]] };
    float D[2] = { 0.0f, 0.0f }, dq[NO][4];
    if (!d_sweep) { /* the same for every thread: the barriers are the block's */
        uint32_t oa[NK][4];
        own_rows_fragments<HD>(oa, stage, (const uint16_t *)out, tl.out, tl.ldo, tl, qend, hs);
        rowsum_of_products<NK, BF16>(D, ga, oa);
    }
#pragma unroll
    for (int n = 0; n < NO; n++)
        dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    for (int sweep = d_sweep ? 0 : 1; sweep < 2; sweep++) {
        if (sweep == 1 && d_sweep && ASYNC) { /* the second sweep's start */
            __syncthreads();
            stream_start<ASYNC>(fetch);
        }
        for (int j = 0, c0 = 0; c0 < tl.end; j++, c0 += KT) {
            const int b = stream_next<ASYNC>(j, c0 + KT < tl.end, fetch);
            if (c0 > last)
                continue;
            const uint16_t *ks = tiles + 2 * b * TILE, *vs = ks + TILE;
            float s[NS][4], dp[NS][4];
            scores<LD, NS, NK, BF16>(s, qa, ks, lane);
            scores<LD, NS, NK, BF16>(dp, ga, vs, lane);
#pragma unroll
            for (int n = 0; n < NS; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int i = e / 2, j = c0 + n * 8 + 2 * (lane % 4) + (e & 1);
                    float p = j <= row[i] ? elem_expf(s[n][e] * scale - li[i]) : 0.0f;
                    if (sweep == 0)
                        D[i] += p * dp[n][e]; /* this lane's share */
                    else
                        s[n][e] = p * (dp[n][e] - D[i]) * scale; /* dS */
                }
            if (sweep == 0)
                continue;
#pragma unroll
            for (int k = 0; k < KT / 16; k++) {
                uint32_t da[4];
                frag_a_of<BF16>(da, s[2 * k], s[2 * k + 1]);
                add_product<LD, NO, BF16>(dq, da, ks, k * 16, lane);
            }
        }
        if (sweep == 0) {
            D[0] = quad_allreduce(D[0], SumOp());
            D[1] = quad_allreduce(D[1], SumOp());
        }
    }
    const float one[2] = { 1.0f, 1.0f };
    store_rows16<NO>(dqkv, dt, tl.qkv, tl.ld, r0, qend, hs, dq, one, lane, add);
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int t = r0 + lane / 4 + 8 * i;
        if (t < qend && lane % 4 == 0)
            Dsum[tl.lse + t] = D[i];
    }
}

/* dK = dS^T Q and dV = P^T dO for a block's 64 keys, from the window's
 * query tiles at and below the diagonal; D from attention_mma_dq_kernel;
 * add: as there. */
template <int HD, bool BF16, bool ASYNC>
static __global__ void __launch_bounds__(MMA_THREADS)
attention_mma_dkdv_kernel(void *dqkv, const float *Dsum, const void *dout, const void *qkv,
                          const float *lse, int BH, int NH, int T, int first, int Tq, int hs,
                          float scale, int add)
{
    constexpr int LD = HD + 8, QT = MMA_TILE(HD), NS = QT / 8, NO = HD / 8, NK = HD / 16;
    constexpr int NB = MMA_BUFFERS(ASYNC), TILE = QT * LD;
    /* ldmatrix but at HD 128, where it made ptxas spill (20 bytes at 255
     * registers, sm_90); the 16-bit loads did not */
    constexpr bool LDM = HD <= 64;
    /* buffer b: Q of QT queries at tiles + 2b TILE, their dO after it,
     * their lse and D in stats[b]; the last: the stage of K, then V */
    __shared__ __align__(16) uint16_t tiles[NB * 2 * TILE];
    __shared__ __align__(16) float stats[NB][2][QT];
    const ops_dtype dt = BF16 ? OPS_BF16 : OPS_F16;
    const uint16_t *src = (const uint16_t *)qkv, *g16 = (const uint16_t *)dout;
    const Tile tl = tile_of_block(BH, NH, T, first, Tq, hs, MMA_BLOCK_ROWS, 16, 0);
    const int lane = tl.lane, k0 = tl.t0 + tl.row0; /* the warp's first key */
    const int key[2] = { k0 + lane / 4, k0 + lane / 4 + 8 }, qend = tl.qend;
    /* from the query tile holding the block's first key (or the window's
     * first query): earlier queries see none of its keys */
    const int i_first = max(tl.t0 / QT * QT, first);
    auto fetch = [&](int b, int j) { /* queries [i0, i0 + QT) */
        int i0 = i_first + j * QT, c = (int)threadIdx.x;
        load_tile16<HD, ASYNC>(tiles + 2 * b * TILE, QT, src, tl.qkv, tl.ld, i0, qend, hs);
        load_tile16<HD, ASYNC>(tiles + (2 * b + 1) * TILE, QT, g16, tl.out, tl.ldo, i0, qend,
                               hs);
        if (c < QT) {
            load_stat<ASYNC>(&stats[b][0][c], lse + tl.lse, i0 + c, qend);
            load_stat<ASYNC>(&stats[b][1][c], Dsum + tl.lse, i0 + c, qend);
        }
    };
    stream_start<ASYNC>(fetch);
    uint32_t ka[NK][4], va[NK][4];
    uint16_t *stage = tiles + (NB - 1) * 2 * TILE;
    own_rows_fragments<HD>(ka, stage, src, tl.qkv + hs, tl.ld, tl, qend, hs);
    own_rows_fragments<HD>(va, stage, src, tl.qkv + 2 * hs, tl.ld, tl, qend, hs);
    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dk[n][e] = dv[n][e] = 0.0f;
    for (int j = 0, i0 = i_first; i0 < qend; j++, i0 += QT) {
        const int b = stream_next<ASYNC>(j, i0 + QT < qend, fetch);
        if (i0 + QT - 1 < k0)
            continue; /* every query before every key of the warp */
        const uint16_t *qs = tiles + 2 * b * TILE, *gs = qs + TILE;
        const float *ls = stats[b][0], *Ds = stats[b][1];
        float st[NS][4], dpt[NS][4]; /* S^T and dP^T: keys x queries */
        scores<LD, NS, NK, BF16>(st, ka, qs, lane);
        scores<LD, NS, NK, BF16>(dpt, va, gs, lane);
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int c = n * 8 + 2 * (lane % 4) + (e & 1), q = i0 + c;
                float p = q < qend && q >= key[e / 2] ? elem_expf(st[n][e] * scale - ls[c]) : 0.0f;
                st[n][e] = p;
                dpt[n][e] = p * (dpt[n][e] - Ds[c]) * scale; /* dS^T */
            }
#pragma unroll
        for (int k = 0; k < QT / 16; k++) {
            uint32_t a[4];
            frag_a_of<BF16>(a, st[2 * k], st[2 * k + 1]);
            add_product<LD, NO, BF16, LDM>(dv, a, gs, k * 16, lane);
            frag_a_of<BF16>(a, dpt[2 * k], dpt[2 * k + 1]);
            add_product<LD, NO, BF16, LDM>(dk, a, qs, k * 16, lane);
        }
    }
    const float one[2] = { 1.0f, 1.0f };
    store_rows16<NO>(dqkv, dt, tl.qkv + hs, tl.ld, k0, qend, hs, dk, one, lane, add);
    store_rows16<NO>(dqkv, dt, tl.qkv + 2 * hs, tl.ld, k0, qend, hs, dv, one, lane, add);
}

/* ---- launches ------------------------------------------------------------ */

template <int HD, bool BF16, bool ASYNC>
static void mma_fwd(void *out, float *lse, const void *qkv, int B, int T, int first, int Tq,
                    int NH, int hs)
{
    unsigned grid = attention_grid_cuda("attention_fwd_cuda", B, NH, Tq, hs, MMA_BLOCK_ROWS);
    attention_mma_fwd_kernel<HD, BF16, ASYNC><<<grid, MMA_THREADS, 0, stream_cuda()>>>(
        out, lse, qkv, B * NH, NH, T, first, Tq, hs, 1.0f / sqrtf((float)hs));
    TRI_CHECK_LAUNCH(attention_mma_fwd_kernel);
}

/* Whether the dQ kernel forms D by its first sweep over the keys
 * (TRIDENT_ATTENTION_D=sweep, the kernel before D came from the stored
 * output) rather than from dO and O (unset or "out"): a switch to measure
 * the two on a GPU (switches.h). */
static int d_by_sweep(void)
{
    return ops_switch_is(OPS_SWITCH_ATTENTION_D, "sweep");
}

/* Whether the kernels stream their tiles by cp.async into two buffers
 * (unset, empty or TRIDENT_ATTENTION_ASYNC=1) or load each into one
 * buffer while the block waits (0, the kernels before cp.async): a switch
 * to measure the two on a GPU and to fall back (switches.h). */
static int tiles_async(void)
{
    return ops_switch_is(OPS_SWITCH_ATTENTION_ASYNC, "1");
}

/* The query side's grid covers the window's Tq rows, the key side's the
 * first + Tq keys they read. */
template <int HD, bool BF16, bool ASYNC>
static void mma_bwd(void *dqkv, const void *dout, const void *qkv, const void *out,
                    const float *lse, int B, int T, int first, int Tq, int NH, int hs, int add)
{
    const char *fn = "attention_bwd_cuda";
    unsigned qgrid = attention_grid_cuda(fn, B, NH, Tq, hs, MMA_BLOCK_ROWS);
    unsigned kgrid = attention_grid_cuda(fn, B, NH, first + Tq, hs, MMA_BLOCK_ROWS);
    float scale = 1.0f / sqrtf((float)hs);
    float *D = (float *)scratch_cuda(SCRATCH_CUDA_ATTENTION_D,
                                     (size_t)B * NH * Tq * sizeof(float));
    cudaStream_t s = stream_cuda();
    attention_mma_dq_kernel<HD, BF16, ASYNC><<<qgrid, MMA_THREADS, 0, s>>>(
        dqkv, D, dout, qkv, out, lse, B * NH, NH, T, first, Tq, hs, scale, add, d_by_sweep());
    TRI_CHECK_LAUNCH(attention_mma_dq_kernel);
    attention_mma_dkdv_kernel<HD, BF16, ASYNC><<<kgrid, MMA_THREADS, 0, s>>>(
        dqkv, D, dout, qkv, lse, B * NH, NH, T, first, Tq, hs, scale, add);
    TRI_CHECK_LAUNCH(attention_mma_dkdv_kernel);
}

template <bool BF16, bool ASYNC>
static void mma_fwd_dtype(void *out, float *lse, const void *qkv, int B, int T, int first,
                          int Tq, int NH, int hs)
{
    switch (attention_head_bucket_cuda(hs)) {
    case 32: mma_fwd<32, BF16, ASYNC>(out, lse, qkv, B, T, first, Tq, NH, hs); break;
    case 64: mma_fwd<64, BF16, ASYNC>(out, lse, qkv, B, T, first, Tq, NH, hs); break;
    default: mma_fwd<128, BF16, ASYNC>(out, lse, qkv, B, T, first, Tq, NH, hs); break;
    }
}

template <bool BF16, bool ASYNC>
static void mma_bwd_dtype(void *dqkv, const void *dout, const void *qkv, const void *out,
                          const float *lse, int B, int T, int first, int Tq, int NH, int hs,
                          int add)
{
    switch (attention_head_bucket_cuda(hs)) {
    case 32:
        mma_bwd<32, BF16, ASYNC>(dqkv, dout, qkv, out, lse, B, T, first, Tq, NH, hs, add);
        break;
    case 64:
        mma_bwd<64, BF16, ASYNC>(dqkv, dout, qkv, out, lse, B, T, first, Tq, NH, hs, add);
        break;
    default:
        mma_bwd<128, BF16, ASYNC>(dqkv, dout, qkv, out, lse, B, T, first, Tq, NH, hs, add);
        break;
    }
}

void attention_mma_fwd_cuda(void *out, float *lse, const void *qkv, ops_dtype dt,
                            int B, int T, int q0, int Tq, int NH, int hs)
{
    int async = tiles_async();
    if (dt == OPS_BF16 && async)
        mma_fwd_dtype<true, true>(out, lse, qkv, B, T, q0, Tq, NH, hs);
    else if (dt == OPS_BF16)
        mma_fwd_dtype<true, false>(out, lse, qkv, B, T, q0, Tq, NH, hs);
    else if (async)
        mma_fwd_dtype<false, true>(out, lse, qkv, B, T, q0, Tq, NH, hs);
    else
        mma_fwd_dtype<false, false>(out, lse, qkv, B, T, q0, Tq, NH, hs);
}

void attention_mma_bwd_cuda(void *dqkv, const void *dout, const void *qkv, const void *out,
                            const float *lse, ops_dtype dt, int B, int T, int q0, int Tq,
                            int NH, int hs, int accumulate)
{
    int async = tiles_async(), acc = accumulate;
    if (dt == OPS_BF16 && async)
        mma_bwd_dtype<true, true>(dqkv, dout, qkv, out, lse, B, T, q0, Tq, NH, hs, acc);
    else if (dt == OPS_BF16)
        mma_bwd_dtype<true, false>(dqkv, dout, qkv, out, lse, B, T, q0, Tq, NH, hs, acc);
    else if (async)
        mma_bwd_dtype<false, true>(dqkv, dout, qkv, out, lse, B, T, q0, Tq, NH, hs, acc);
    else
        mma_bwd_dtype<false, false>(dqkv, dout, qkv, out, lse, B, T, q0, Tq, NH, hs, acc);
}
