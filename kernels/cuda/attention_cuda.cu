/*
 * attention_cuda.cu - fused causal self-attention, forward and backward,
 * without a T x T buffer: FlashAttention-2's algorithm in plain CUDA, on
 * the CUDA cores in fp32. The trainer runs it for fp32; attention_fwd_cuda
 * and attention_bwd_cuda send bf16 and fp16 to the tensor-core kernels of
 * attention_mma_cuda.cu (the kernels here take any dtype, and
 * tests/t_attention_emu checks them in all three).
 *
 * The twin of cpu/attention_cpu.c; cuda/attention_exact_cuda.cu keeps the
 * GEMM kernel that forms the probabilities, as the reference t_ops_cuda
 * compares this one with. In a build with cuDNN (--with-cudnn-frontend)
 * the whole sequence's 16-bit attention goes first to cuDNN's fused
 * kernels when TRIDENT_ATTENTION allows (attention_cudnn_cuda.cu); what
 * they do not take, and every row window, runs here. Q, K and V are read
 * in place from the (B,T,NH,3,hs) qkv tensor (row t of head h of sequence b at element
 * ((b*T + t)*NH + h)*3*hs, q then k then v) and O is written in place into
 * (B,T,NH*hs).
 *
 * Forward, one block per (batch, head, tile of ATT_FWD_WARPS x
 * ATT_FWD_ROWS = 16 query rows): the key tiles of ATT_KEYS = 32 up to the
 * tile's end of the diagonal go through shared memory; S = Q K^T * scale
 * in fp32, an online softmax (each row's running max m and sum l; when m
 * grows, l and the output so far are scaled by exp(m_old - m_new)), and O
 * accumulated in fp32 registers; at the end O / l is rounded once to the
 * dtype and lse = m + log l, (B,NH,T) floats, is all that is kept.
 *
 * Backward, two kernels, neither with atomics (the sums are split by
 * output, so every element is added by one thread in one order: invariant
 * 5 of doc/design.md):
 *  - per (batch, head, tile of 8 query rows), looping over key tiles up to
 *    the diagonal: D = rowsum(dO * O) (fp32; in bf16 and fp16 rowsum(P *
 *    dP) in a first sweep, as the CPU does; the tensor-core kernels, which
 *    run those dtypes, take D from the rounded O, within the tolerances:
 *    attention_mma_cuda.cu), written to a (B,NH,T) scratch, then
 *    P = exp(S - lse), dP = dO V^T, dS = P * (dP - D) * scale,
 *    dQ = sum dS K;
 *  - per (batch, head, tile of 8 keys), looping over query tiles from the
 *    diagonal down: the same P and dS, recomputed, dV = sum P^T dO and
 *    dK = sum dS^T Q.
 * Recomputing S and dP in both is FlashAttention-2's price for no atomics
 * on dQ. Memory beyond the outputs: the D scratch, B*NH*T floats.
 *
 * Threads: 4 warps per block. In the query-side kernels a warp owns a few
 * query rows and its 32 lanes the 32 keys of a tile: lane j computes S and
 * dP of its key against each of the warp's rows (the row read as a
 * shared-memory broadcast, the key from a row padded to HD + 1 floats so
 * the 32 lanes hit 32 banks); then for the products with V or K each lane
 * owns head dimensions d = lane + 32c and takes key j's probability from
 * lane j by a shuffle. The key-side kernel swaps the roles: a warp owns a
 * few keys, its lanes the 32 queries of a tile. Max and sum over a row are
 * the warp butterflies of cuda_common.h; each lane keeps a partial l,
 * rescaled alike, added across the warp at the end. hs is bucketed into a
 * template HD of 32, 64 or 128 (shared tiles and register arrays are
 * sized by HD, loops run to hs, tiles are zero past hs and past T), so
 * each block's static shared memory stays under the 48 KB default (41 KB
 * at HD = 128) and no opt-in is needed. hs > 128 is refused.
 *
 * Blocks: one 1-D grid of B*NH*tiles blocks (up to 2^31 - 1, so B*NH in
 * the thousands at T = 8192 and far beyond fit), the heavy tiles first
 * (the last query tiles, the first key tiles) so the short ones fill the
 * tail.
 *
 * Row windows (context parallelism, ops.h's ops_attention_rows_fwd/bwd):
 * the query-side kernels run over the window's rows [q0, q0 + Tq), the
 * key side over the keys [0, q0 + Tq) they read; out, dout, lse and D hold
 * the window's Tq rows, reached through offsets that start q0 rows early
 * (attention_tile_cuda.h), so every index stays the row's position in the
 * sequence and only bounds and offsets change. The window's backward adds
 * to dqkv (old value plus the sum, rounded once); the whole sequence's
 * (q0 = 0, Tq = T: the same arithmetic as before windows) stores.
 * tests/t_attention_emu checks windows on the host; t_ops_cuda has their
 * GPU checks, not yet run on a GPU.
 *
 * Precision, as the CPU: inputs widened to fp32 through elem.h's loads,
 * fp32 arithmetic, elem_expf for the probabilities, one rounding at each
 * store. The order of additions differs from the CPU's (tiles of 32 keys
 * against 256, the dot products in head-dimension order), so results
 * agree to fp32 reassociation, plus one ulp of a 16-bit output where that
 * tips a rounding.
 *
 * Speed: the products run on CUDA cores in fp32, one FMA per
 * shared-memory or shuffle read at best: about 10 TFLOP/s on an H100
 * (doc/gpu.md), where the 16-bit tensor-core kernels are many times
 * faster. t_ops_cuda compares it with the exact GPU kernel and both CPU
 * kernels; it passed on an H100.
 */
#include "cuda_common.h"
#include "attention_tile_cuda.h"

#define ATT_KEYS 32     /* keys (query-side kernels) or queries (key side) per tile: one per lane */
#define ATT_WARPS 4
#define ATT_THREADS (ATT_WARPS * 32)
#define ATT_FWD_ROWS 4  /* query rows per warp, forward */
#define ATT_BWD_ROWS 2  /* query rows or keys per warp, backward (its tiles hold dO too) */
#define FULL_MASK 0xffffffffu

/* Rows [t0, t0 + n) of a (T, hs) matrix whose row t starts at element
 * base + t*ld of src, widened to fp32 into shared s (row stride sld),
 * HD columns, zero past hs and past T. Every thread of the block calls
 * it; consecutive threads read consecutive elements of a row. */
template <int HD>
static __device__ void load_rows(float *s, int sld, int n, const void *src,
                                 ops_dtype dt, int64_t base, int64_t ld,
                                 int t0, int T, int hs)
{
    for (int e = threadIdx.x; e < n * HD; e += blockDim.x) {
        int i = e / HD, d = e % HD, t = t0 + i;
        float x = 0.0f;
        if (t < T && d < hs)
            x = load_f32_cuda(src, dt, base + (int64_t)t * ld + d);
        s[i * sld + d] = x;
    }
}

/* a[r] = rows[r] . x over hs elements, for the R rows the warp owns
 * (shared, stride rld, the same address on every lane: a broadcast)
 * against this lane's x (shared, its own padded row), d in order. */
template <int R>
static __device__ __forceinline__ void dot_rows(float *a, const float *rows, int rld,
                                                const float *x, int hs)
{
#pragma unroll
    for (int r = 0; r < R; r++)
        a[r] = 0.0f;
    for (int d = 0; d < hs; d++) {
        float xd = x[d];
#pragma unroll
        for (int r = 0; r < R; r++)
            a[r] += rows[r * rld + d] * xd;
    }
}

/* acc[r][c] += sum over the tile's 32 lanes j of w[r] (lane j's) times
 * tile[j][lane + 32c]: P V, dS K, P^T dO or dS^T Q, j in order. */
template <int R, int HD>
static __device__ __forceinline__ void add_weighted_rows(float (*acc)[HD / 32], const float *w,
                                                         const float *tile, int tld)
{
    int lane = threadIdx.x % 32;
    for (int j = 0; j < ATT_KEYS; j++) {
        float t[HD / 32];
#pragma unroll
        for (int c = 0; c < HD / 32; c++)
            t[c] = tile[j * tld + lane + 32 * c];
#pragma unroll
        for (int r = 0; r < R; r++) {
            float wj = __shfl_sync(FULL_MASK, w[r], j);
#pragma unroll
            for (int c = 0; c < HD / 32; c++)
                acc[r][c] += wj * t[c];
        }
    }
}

/* Row t of a (T, hs) matrix at base + t*ld, from this warp's registers
 * acc (dimension lane + 32c) times mul, rounded once to dt; t < T. With
 * add, the row's old value is added first (a window's gradients). */
template <int HD>
static __device__ void store_row(void *dst, ops_dtype dt, int64_t base, int64_t ld, int t,
                                 const float *acc, float mul, int hs, int add = 0)
{
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int c = 0; c < HD / 32; c++) {
        int d = lane + 32 * c;
        int64_t at = base + (int64_t)t * ld + d;
        if (d < hs)
            store_f32_cuda(dst, dt, at, add ? load_f32_cuda(dst, dt, at) + acc[c] * mul
                                            : acc[c] * mul);
    }
}

/* ---- forward ------------------------------------------------------------- */

template <int HD>
static __global__ void __launch_bounds__(ATT_THREADS)
attention_fwd_kernel(void *out, float *lse, const void *qkv, ops_dtype dt,
                     int BH, int NH, int T, int first, int Tq, int hs, float scale)
{
    constexpr int R = ATT_FWD_ROWS, BR = ATT_WARPS * R, C = HD / 32;
    __shared__ float qs[BR][HD];
    __shared__ float ks[ATT_KEYS][HD + 1]; /* padded: lane j reads row j */
    __shared__ float vs[ATT_KEYS][HD];     /* read across a row: no padding needed */
    const Tile tl = tile_of_block(BH, NH, T, first, Tq, hs, BR, R, 1);
    const int lane = tl.lane, row0 = tl.row0, q0 = tl.t0, kend = tl.end, qend = tl.qend;
    load_rows<HD>(&qs[0][0], HD, BR, qkv, dt, tl.qkv, tl.ld, q0, qend, hs);
    float m[R], l[R], o[R][C], p[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < C; c++)
            o[r][c] = 0.0f;
    }
    for (int c0 = 0; c0 < kend; c0 += ATT_KEYS) {
        __syncthreads(); /* the previous tile is read (and qs is loaded) */
        load_rows<HD>(&ks[0][0], HD + 1, ATT_KEYS, qkv, dt, tl.qkv + hs, tl.ld, c0, qend, hs);
        load_rows<HD>(&vs[0][0], HD, ATT_KEYS, qkv, dt, tl.qkv + 2 * hs, tl.ld, c0, qend, hs);
        __syncthreads();
        float s[R]; /* q_r . k_j for this lane's key j */
        dot_rows<R>(s, &qs[row0][0], HD, &ks[lane][0], hs);
        int j = c0 + lane;
#pragma unroll
        for (int r = 0; r < R; r++) {
            /* a row past the window (the ragged last tile) attends as
             * its last row, so its numbers stay finite; it is not stored */
            int t = min(q0 + row0 + r, qend - 1);
            int valid = j <= t;
            float x = valid ? s[r] * scale : -INFINITY;
            float mx = warp_allreduce(x, MaxOp());
            float mnew = mx > m[r] ? mx : m[r];
            /* key 0 is in every row, so the first tile makes m finite;
             * alpha = 0 there, as the CPU's first tile */
            float alpha = m[r] == -INFINITY ? 0.0f : elem_expf(m[r] - mnew);
            p[r] = valid ? elem_expf(x - mnew) : 0.0f;
            l[r] = l[r] * alpha + p[r];
            m[r] = mnew;
#pragma unroll
            for (int c = 0; c < C; c++)
                o[r][c] *= alpha;
        }
        add_weighted_rows<R, HD>(o, p, &vs[0][0], HD);
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        float sum = warp_allreduce(l[r], SumOp());
        int t = q0 + row0 + r;
        if (t >= qend)
            continue;
        store_row<HD>(out, dt, tl.out, tl.ldo, t, o[r], 1.0f / sum, hs);
        if (lane == 0)
            lse[tl.lse + t] = m[r] + logf(sum);
    }
}

/* ---- backward ------------------------------------------------------------ */

/* P and dS of one tile pair as the key-side and query-side kernels both
 * need them: p = exp(s * scale - lse) where valid, else 0, and
 * ds = p * (dp - D) * scale. */
static __device__ __forceinline__ void probs_and_ds(float *p, float *ds, float s, float dp,
                                                    float lse, float D, int valid, float scale)
{
    *p = valid ? elem_expf(s * scale - lse) : 0.0f;
    *ds = *p * (dp - D) * scale;
}

/* D, then dQ, for a tile of query rows. exact_d: D = rowsum(P * dP) from
 * a first sweep over the key tiles (bf16, fp16), else rowsum(dO * O).
 * add: dQ is added to dqkv (a window's), else stored. */
template <int HD>
static __global__ void __launch_bounds__(ATT_THREADS)
attention_dq_kernel(void *dqkv, float *Dsum, const void *dout, const void *qkv,
                    const void *out, const float *lse, ops_dtype dt, int BH, int NH,
                    int T, int first, int Tq, int hs, float scale, int exact_d, int add)
{
    constexpr int R = ATT_BWD_ROWS, BR = ATT_WARPS * R, C = HD / 32;
    __shared__ float qs[BR][HD], gs[BR][HD]; /* q and dO of the tile's rows */
    __shared__ float ks[ATT_KEYS][HD + 1], vs[ATT_KEYS][HD + 1];
    const Tile tl = tile_of_block(BH, NH, T, first, Tq, hs, BR, R, 1);
    const int lane = tl.lane, row0 = tl.row0, q0 = tl.t0, kend = tl.end, qend = tl.qend;
    load_rows<HD>(&qs[0][0], HD, BR, qkv, dt, tl.qkv, tl.ld, q0, qend, hs);
    load_rows<HD>(&gs[0][0], HD, BR, dout, dt, tl.out, tl.ldo, q0, qend, hs);
    __syncthreads();
    float li[R], D[R], dq[R][C];
    int t[R]; /* a row past the window computes as its last and is not stored */
#pragma unroll
    for (int r = 0; r < R; r++) {
        t[r] = min(q0 + row0 + r, qend - 1);
        li[r] = lse[tl.lse + t[r]];
        float part = 0.0f;
#pragma unroll
        for (int c = 0; c < C; c++) {
            int d = lane + 32 * c;
            if (!exact_d && d < hs)
                part += gs[row0 + r][d]
                        * load_f32_cuda(out, dt, tl.out + (int64_t)t[r] * tl.ldo + d);
            dq[r][c] = 0.0f;
        }
        D[r] = exact_d ? 0.0f : warp_allreduce(part, SumOp());
    }
    /* sweep 0 (exact_d only) sums rowsum(P * dP) into D, sweep 1 dQ */
    for (int sweep = exact_d ? 0 : 1; sweep < 2; sweep++) {
        for (int c0 = 0; c0 < kend; c0 += ATT_KEYS) {
            __syncthreads(); /* the previous tile is read */
            load_rows<HD>(&ks[0][0], HD + 1, ATT_KEYS, qkv, dt, tl.qkv + hs, tl.ld, c0, qend, hs);
            load_rows<HD>(&vs[0][0], HD + 1, ATT_KEYS, qkv, dt, tl.qkv + 2 * hs, tl.ld, c0, qend,
                          hs);
            __syncthreads();
            float s[R], dp[R], p[R], ds[R];
            dot_rows<R>(s, &qs[row0][0], HD, &ks[lane][0], hs);
            dot_rows<R>(dp, &gs[row0][0], HD, &vs[lane][0], hs);
#pragma unroll
            for (int r = 0; r < R; r++) {
                probs_and_ds(&p[r], &ds[r], s[r], dp[r], li[r], D[r], c0 + lane <= t[r], scale);
                if (sweep == 0)
                    D[r] += p[r] * dp[r]; /* this lane's share */
            }
            if (sweep == 1)
                add_weighted_rows<R, HD>(dq, ds, &ks[0][0], HD + 1);
        }
        if (sweep == 0) {
#pragma unroll
            for (int r = 0; r < R; r++)
                D[r] = warp_allreduce(D[r], SumOp());
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (q0 + row0 + r >= qend)
            continue;
        store_row<HD>(dqkv, dt, tl.qkv, tl.ld, t[r], dq[r], 1.0f, hs, add);
        if (lane == 0)
            Dsum[tl.lse + t[r]] = D[r];
    }
}

/* dK and dV for a tile of keys, from the window's query tiles at and
 * below the diagonal; D from attention_dq_kernel. add: as there. */
template <int HD>
static __global__ void __launch_bounds__(ATT_THREADS)
attention_dkdv_kernel(void *dqkv, const float *Dsum, const void *dout, const void *qkv,
                      const float *lse, ops_dtype dt, int BH, int NH, int T, int first,
                      int Tq, int hs, float scale, int add)
{
    constexpr int R = ATT_BWD_ROWS, BK = ATT_WARPS * R, C = HD / 32;
    __shared__ float ks[BK][HD], vs[BK][HD]; /* k and v of the tile's keys */
    __shared__ float qs[ATT_KEYS][HD + 1], gs[ATT_KEYS][HD + 1]; /* q, dO of 32 queries */
    __shared__ float ls[ATT_KEYS], Ds[ATT_KEYS];
    const Tile tl = tile_of_block(BH, NH, T, first, Tq, hs, BK, R, 0);
    const int lane = tl.lane, row0 = tl.row0, k0 = tl.t0, qend = tl.qend;
    load_rows<HD>(&ks[0][0], HD, BK, qkv, dt, tl.qkv + hs, tl.ld, k0, qend, hs);
    load_rows<HD>(&vs[0][0], HD, BK, qkv, dt, tl.qkv + 2 * hs, tl.ld, k0, qend, hs);
    float dk[R][C], dv[R][C];
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int c = 0; c < C; c++)
            dk[r][c] = dv[r][c] = 0.0f;
    }
    /* from the query tile holding key k0 (or the window's first query):
     * earlier queries see none of these keys */
    for (int i0 = max(k0 / ATT_KEYS * ATT_KEYS, first); i0 < qend; i0 += ATT_KEYS) {
        __syncthreads(); /* the previous tile is read (and ks, vs are loaded) */
        load_rows<HD>(&qs[0][0], HD + 1, ATT_KEYS, qkv, dt, tl.qkv, tl.ld, i0, qend, hs);
        load_rows<HD>(&gs[0][0], HD + 1, ATT_KEYS, dout, dt, tl.out, tl.ldo, i0, qend, hs);
        if (threadIdx.x < ATT_KEYS) {
            int i = i0 + threadIdx.x;
            ls[threadIdx.x] = i < qend ? lse[tl.lse + i] : 0.0f;
            Ds[threadIdx.x] = i < qend ? Dsum[tl.lse + i] : 0.0f;
        }
        __syncthreads();
        int i = i0 + lane; /* this lane's query */
        float s[R], dp[R], p[R], ds[R];
        dot_rows<R>(s, &ks[row0][0], HD, &qs[lane][0], hs);
        dot_rows<R>(dp, &vs[row0][0], HD, &gs[lane][0], hs);
#pragma unroll
        for (int r = 0; r < R; r++)
            probs_and_ds(&p[r], &ds[r], s[r], dp[r], ls[lane], Ds[lane],
                         i < qend && i >= k0 + row0 + r, scale);
        add_weighted_rows<R, HD>(dv, p, &gs[0][0], HD + 1);
        add_weighted_rows<R, HD>(dk, ds, &qs[0][0], HD + 1);
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        int j = k0 + row0 + r;
        if (j >= qend)
            continue;
        store_row<HD>(dqkv, dt, tl.qkv + hs, tl.ld, j, dk[r], 1.0f, hs, add);
        store_row<HD>(dqkv, dt, tl.qkv + 2 * hs, tl.ld, j, dv[r], 1.0f, hs, add);
    }
}

/* ---- launches ------------------------------------------------------------ */

template <int HD>
static void fwd_launch(void *out, float *lse, const void *qkv, ops_dtype dt,
                       int B, int T, int first, int Tq, int NH, int hs)
{
    unsigned grid = attention_grid_cuda("attention_fwd_cuda", B, NH, Tq, hs,
                                   ATT_WARPS * ATT_FWD_ROWS);
    attention_fwd_kernel<HD><<<grid, ATT_THREADS, 0, stream_cuda()>>>(
        out, lse, qkv, dt, B * NH, NH, T, first, Tq, hs, 1.0f / sqrtf((float)hs));
    TRI_CHECK_LAUNCH(attention_fwd_kernel);
}

/* The query side's grid covers the window's Tq rows, the key side's the
 * first + Tq keys they read. */
template <int HD>
static void bwd_launch(void *dqkv, const void *dout, const void *qkv, const void *out,
                       const float *lse, ops_dtype dt, int B, int T, int first, int Tq,
                       int NH, int hs, int add)
{
    int rows = ATT_WARPS * ATT_BWD_ROWS;
    unsigned qgrid = attention_grid_cuda("attention_bwd_cuda", B, NH, Tq, hs, rows);
    unsigned kgrid = attention_grid_cuda("attention_bwd_cuda", B, NH, first + Tq, hs, rows);
    float scale = 1.0f / sqrtf((float)hs);
    float *D = (float *)scratch_cuda(SCRATCH_CUDA_ATTENTION_D,
                                     (size_t)B * NH * Tq * sizeof(float));
    cudaStream_t s = stream_cuda();
    attention_dq_kernel<HD><<<qgrid, ATT_THREADS, 0, s>>>(
        dqkv, D, dout, qkv, out, lse, dt, B * NH, NH, T, first, Tq, hs, scale,
        dt != OPS_F32, add);
    TRI_CHECK_LAUNCH(attention_dq_kernel);
    attention_dkdv_kernel<HD><<<kgrid, ATT_THREADS, 0, s>>>(
        dqkv, D, dout, qkv, lse, dt, B * NH, NH, T, first, Tq, hs, scale, add);
    TRI_CHECK_LAUNCH(attention_dkdv_kernel);
}

void attention_rows_fwd_cuda(void *out, float *lse, const void *qkv, ops_dtype dt,
                             int B, int T, int q0, int Tq, int NH, int hs)
{
    if (B <= 0 || Tq <= 0 || NH <= 0)
        return;
#if TRI_HAVE_CUDNN
    /* the whole sequence: cuDNN's fused attention where chosen and taken */
    if (q0 == 0 && Tq == T && ops_attention_route_get() == OPS_ATTENTION_CUDNN
        && attention_cudnn_fwd_cuda(out, lse, qkv, dt, B, T, NH, hs))
        return;
#endif
    if (dt != OPS_F32) {
        attention_mma_fwd_cuda(out, lse, qkv, dt, B, T, q0, Tq, NH, hs);
        return;
    }
    switch (attention_head_bucket_cuda(hs)) {
    case 32: fwd_launch<32>(out, lse, qkv, dt, B, T, q0, Tq, NH, hs); break;
    case 64: fwd_launch<64>(out, lse, qkv, dt, B, T, q0, Tq, NH, hs); break;
    default: fwd_launch<128>(out, lse, qkv, dt, B, T, q0, Tq, NH, hs); break;
    }
}

void attention_rows_bwd_cuda(void *dqkv, const void *dout, const void *qkv,
                             const void *out, const float *lse, ops_dtype dt,
                             int B, int T, int q0, int Tq, int NH, int hs, int accumulate)
{
    if (B <= 0 || Tq <= 0 || NH <= 0)
        return;
#if TRI_HAVE_CUDNN
    if (q0 == 0 && Tq == T && !accumulate && ops_attention_route_get() == OPS_ATTENTION_CUDNN
        && attention_cudnn_bwd_cuda(dqkv, dout, qkv, out, lse, dt, B, T, NH, hs))
        return;
#endif
    if (dt != OPS_F32) {
        attention_mma_bwd_cuda(dqkv, dout, qkv, out, lse, dt, B, T, q0, Tq, NH, hs, accumulate);
        return;
    }
    int add = accumulate;
    switch (attention_head_bucket_cuda(hs)) {
    case 32: bwd_launch<32>(dqkv, dout, qkv, out, lse, dt, B, T, q0, Tq, NH, hs, add); break;
    case 64: bwd_launch<64>(dqkv, dout, qkv, out, lse, dt, B, T, q0, Tq, NH, hs, add); break;
    default: bwd_launch<128>(dqkv, dout, qkv, out, lse, dt, B, T, q0, Tq, NH, hs, add); break;
    }
}

void attention_fwd_cuda(void *out, float *lse, const void *qkv, ops_dtype dt,
                        int B, int T, int NH, int hs)
{
    attention_rows_fwd_cuda(out, lse, qkv, dt, B, T, 0, T, NH, hs);
}

void attention_bwd_cuda(void *dqkv, const void *dout, const void *qkv,
                        const void *out, const float *lse, ops_dtype dt,
                        int B, int T, int NH, int hs)
{
    attention_rows_bwd_cuda(dqkv, dout, qkv, out, lse, dt, B, T, 0, T, NH, hs, 0);
}
