/*
 * llama_cuda.cu - the Llama ops on the GPU: RMSNorm, rotary embeddings,
 * SwiGLU and grouped-query key/value heads.
 *
 * The twins of rmsnorm_cpu.c, rope_cpu.c, gqa_cpu.c and the SwiGLU loops
 * of elementwise_cpu.c, with their per-element math from elem.h. RMSNorm
 * is shaped as layernorm_cuda.cu: a warp per row for the sums over
 * channels (a lane moving 16-byte packs where the rows allow, unless
 * TRIDENT_FUSED is 0), the deterministic two-pass column sums for dw. The rest are
 * grid-stride loops, one element (or pair, or key/value channel) per
 * thread.
 *
 * dw's first pass is LayerNorm's packed column sums (rmsnorm_dw_cuda): a
 * thread owns a 16-byte pack of channels, so a warp reads 512 contiguous
 * bytes of a row where a thread per channel reads 64 in bf16 (the 1B
 * Llama's 2048 channels x 16384 rows, twice a layer); TRIDENT_FUSED=0
 * keeps the kernel a channel a thread, the same bits.
 *
 * add_rmsnorm_fwd_cuda is the forward with the residual add before it
 * (Llama's x + attn_out, then the MLP's norm) in the same pass, as
 * layernorm_cuda.cu's add_layernorm_fwd_cuda is GPT-2's: the sum is
 * written once and read back from the L1 (8 bytes a bf16 element less).
 *
 * tests/t_llama_emu runs these kernels on the host against the CPU twins.
 */
#include "cuda_common.h"

#define RMS_ROWS_PER_BLOCK (TRI_THREADS / 32)

/* ---- RMSNorm --------------------------------------------------------------- */

/* The warp-per-row kernels take a row as C / VEC packs, as
 * layernorm_cuda.cu's do: pack k of row `row` at k0 + k with k0 = row *
 * (C / VEC), pack k of w at k. VEC is 16 bytes of elements where the rows
 * and pointers allow and TRIDENT_FUSED is on (rms_packs_cuda), else 1: a
 * channel a lane, lane l summing channels l, l + 32, ..., the kernels of
 * before to the bit. A pack changes which channels a lane sums, so the
 * order of a row's sum: within round-off of VEC 1, not its bits. */
static int rms_packs_cuda(ops_dtype dt, int C, const void *a, const void *b, const void *c,
                          const void *d)
{
    return fused_enabled_cuda() && packs_fit(dt, C, a, b, c, d);
}

/* With ADD (add_rmsnorm_fwd_cuda) the first pass also forms the residual:
 * resid = inp + addend, stored in DT and read back, so the sum of squares
 * sees the rounded sum as rmsnorm_fwd_cuda of resid would; the second
 * pass reads resid (the lane's own packs, just written, so resid may be
 * inp or addend). */
template <ops_dtype DT, int VEC, bool ADD>
static __global__ void rmsnorm_fwd_kernel(void *out, float *rstd, const void *inp,
                                          const void *w, int N, int C, float eps,
                                          void *resid, const void *addend)
{
    int row = blockIdx.x * RMS_ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N)
        return; /* the whole warp leaves: the shuffles below stay full */
    int packs = C / VEC;
    int64_t k0 = (int64_t)row * packs;
    float ss = 0.0f;
    for (int k = lane; k < packs; k += 32) {
        float x[VEC];
        load_pack_added<DT, VEC, ADD>(x, inp, addend, resid, k0 + k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            ss += x[e] * x[e];
    }
    if (ADD)
        inp = resid;
    float r = elem_rms_rstd(warp_allreduce(ss, SumOp()), C, eps);
    for (int k = lane; k < packs; k += 32) {
        float x[VEC], wk[VEC];
        load_pack<DT, VEC>(x, inp, k0 + k);
        load_pack<DT, VEC>(wk, w, k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            x[e] = x[e] * r * wk[e];
        store_pack<DT, VEC>(out, k0 + k, x);
    }
    if (lane == 0)
        rstd[row] = r;
}

void rmsnorm_fwd_cuda(void *out, float *rstd, const void *inp, const void *w,
                      ops_dtype dt, int N, int C, float eps)
{
    if (N <= 0)
        return;
    unsigned blocks = (unsigned)((N + RMS_ROWS_PER_BLOCK - 1) / RMS_ROWS_PER_BLOCK);
#define RMS_FWD(DT, VEC)                                                      \
    rmsnorm_fwd_kernel<DT, VEC, false><<<blocks, TRI_THREADS, 0, stream_cuda()>>>( \
        out, rstd, inp, w, N, C, eps, NULL, NULL)
    DISPATCH_PACKED(dt, rms_packs_cuda(dt, C, out, inp, w, NULL), RMS_FWD);
#undef RMS_FWD
    TRI_CHECK_LAUNCH(rmsnorm_fwd_kernel);
}

void add_rmsnorm_fwd_cuda(void *resid, void *out, float *rstd, const void *a, const void *b,
                          const void *w, ops_dtype dt, int N, int C, float eps)
{
    if (N <= 0)
        return;
    unsigned blocks = (unsigned)((N + RMS_ROWS_PER_BLOCK - 1) / RMS_ROWS_PER_BLOCK);
#define RMS_ADD_FWD(DT, VEC)                                                  \
    rmsnorm_fwd_kernel<DT, VEC, true><<<blocks, TRI_THREADS, 0, stream_cuda()>>>( \
        out, rstd, a, w, N, C, eps, resid, b)
    DISPATCH_PACKED(dt, rms_packs_cuda(dt, C, out, a, w, b) && aligned16(resid), RMS_ADD_FWD);
#undef RMS_ADD_FWD
    TRI_CHECK_LAUNCH(rmsnorm_fwd_kernel);
}

/* dinp (N,C) += elem_rms_dinp of each element, after the row's dot of
 * w dout x; one warp per row. */
template <ops_dtype DT, int VEC>
static __global__ void rmsnorm_dinp_kernel(void *dinp, const void *dout, const void *inp,
                                           const void *w, const float *rstd, int N, int C)
{
    int row = blockIdx.x * RMS_ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N)
        return;
    int packs = C / VEC;
    int64_t k0 = (int64_t)row * packs;
    float dot = 0.0f;
    for (int k = lane; k < packs; k += 32) {
        float wk[VEC], g[VEC], x[VEC];
        load_pack<DT, VEC>(wk, w, k);
        load_pack<DT, VEC>(g, dout, k0 + k);
        load_pack<DT, VEC>(x, inp, k0 + k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            dot += wk[e] * g[e] * x[e];
    }
    dot = warp_allreduce(dot, SumOp()) / (float)C;
    for (int k = lane; k < packs; k += 32) {
        float wk[VEC], g[VEC], x[VEC], d[VEC];
        load_pack<DT, VEC>(wk, w, k);
        load_pack<DT, VEC>(g, dout, k0 + k);
        load_pack<DT, VEC>(x, inp, k0 + k);
        load_pack<DT, VEC>(d, dinp, k0 + k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            d[e] += elem_rms_dinp(wk[e] * g[e], x[e], rstd[row], dot);
        store_pack<DT, VEC>(dinp, k0 + k, d);
    }
}

/* pw[r*C + c] = sum over the rows of chunk r (in order) of x * rstd * dout,
 * for channel c. Grid (channel blocks, chunks). */
static __global__ void rmsnorm_dw_partial_kernel(float *pw, const void *dout,
                                                 const void *inp, const float *rstd,
                                                 ops_dtype dt, int N, int C, int rpc)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    int i0 = blockIdx.y * rpc;
    int i1 = i0 + rpc < N ? i0 + rpc : N;
    float sw = 0.0f;
    for (int i = i0; i < i1; i++) {
        int64_t at = (int64_t)i * C + c;
        sw += load_f32_cuda(inp, dt, at) * rstd[i] * load_f32_cuda(dout, dt, at);
    }
    pw[(int64_t)blockIdx.y * C + c] = sw;
}

/* The packed twin of rmsnorm_dw_partial_kernel, as layernorm_dwdb_pack_kernel
 * is LayerNorm's: a thread owns VEC channels (pack k of each row) and the
 * dtype is a constant. Each channel's sum is the same expression over the
 * same rows in the same order: the same bits. Grid (pack blocks, chunks). */
template <ops_dtype DT, int VEC>
static __global__ void rmsnorm_dw_pack_kernel(float *pw, const void *dout,
                                              const void *inp, const float *rstd,
                                              int N, int C, int rpc)
{
    float *const partial[1] = { pw };
    colsum_pack_pass<VEC, 1>(partial, C, N, rpc, [&](int i, int k, float (&sw)[1][VEC]) {
        float x[VEC], g[VEC];
        load_pack<DT, VEC>(x, inp, (int64_t)i * (C / VEC) + k);
        load_pack<DT, VEC>(g, dout, (int64_t)i * (C / VEC) + k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            sw[0][e] += x[e] * rstd[i] * g[e];
    });
}

void rmsnorm_dw_cuda(float *dw, const void *dout, const void *inp, const float *rstd,
                     ops_dtype dt, int N, int C, int packed)
{
    if (N <= 0 || C <= 0)
        return;
    cudaStream_t s = stream_cuda();
    int rpc;
    int chunks = colsum_chunks(N, &rpc);
    float *pw = (float *)scratch_cuda(SCRATCH_CUDA_REDUCE, (size_t)chunks * C * sizeof(float));
    if (packed) {
        int vec = packs_fit(dt, C, dout, inp) ? pack_elems(dt) : 1;
        unsigned threads = colsum_threads(C / vec);
        dim3 grid((unsigned)((C / vec + threads - 1) / threads), chunks);
#define RMS_DW(DT, VEC)                                                       \
        rmsnorm_dw_pack_kernel<DT, VEC><<<grid, threads, 0, s>>>(pw, dout, inp, rstd, N, C, rpc)
        DISPATCH_PACKED(dt, vec > 1, RMS_DW);
#undef RMS_DW
        TRI_CHECK_LAUNCH(rmsnorm_dw_pack_kernel);
    } else {
        dim3 grid((C + TRI_THREADS - 1) / TRI_THREADS, chunks);
        rmsnorm_dw_partial_kernel<<<grid, TRI_THREADS, 0, s>>>(pw, dout, inp, rstd, dt, N, C,
                                                               rpc);
        TRI_CHECK_LAUNCH(rmsnorm_dw_partial_kernel);
    }
    colsum_finish_cuda(dw, pw, chunks, C);
}

void rmsnorm_bwd_cuda(void *dinp, float *dw, const void *dout, const void *inp,
                      const void *w, const float *rstd, ops_dtype dt, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    unsigned blocks = (unsigned)((N + RMS_ROWS_PER_BLOCK - 1) / RMS_ROWS_PER_BLOCK);
#define RMS_DINP(DT, VEC)                                                     \
    rmsnorm_dinp_kernel<DT, VEC><<<blocks, TRI_THREADS, 0, stream_cuda()>>>(  \
        dinp, dout, inp, w, rstd, N, C)
    DISPATCH_PACKED(dt, rms_packs_cuda(dt, C, dinp, dout, inp, w), RMS_DINP);
#undef RMS_DINP
    TRI_CHECK_LAUNCH(rmsnorm_dinp_kernel);
    /* dw: the packed column sums, or under TRIDENT_FUSED=0 the kernel a
     * channel a thread that they replaced (the same bits) */
    rmsnorm_dw_cuda(dw, dout, inp, rstd, dt, N, C, fused_enabled_cuda());
}

/* ---- rotary embeddings ------------------------------------------------------ */

/* One thread per (row, head, pair); row t of a sequence sits at position
 * t0 + t. */
static __global__ void rope_kernel(void *x, ops_dtype dt, int64_t pairs, int T, int t0, int H,
                                   int hs, double theta, int inverse)
{
    int half = hs / 2;
    GRID_STRIDE(p, pairs) {
        int i = (int)(p % half);
        int64_t nh = p / half;
        int t = t0 + (int)((nh / H) % T);
        float c, s;
        elem_rope_cos_sin(t, i, hs, theta, &c, &s);
        if (inverse)
            s = -s;
        int64_t at = nh * hs + i;
        float a = load_f32_cuda(x, dt, at), b = load_f32_cuda(x, dt, at + half);
        elem_rope_rotate(&a, &b, c, s);
        store_f32_cuda(x, dt, at, a);
        store_f32_cuda(x, dt, at + half, b);
    }
}

void rope_cuda(void *x, ops_dtype dt, int B, int T, int t0, int H, int hs, double theta,
               int inverse)
{
    int64_t pairs = (int64_t)B * T * H * (hs / 2);
    if (pairs > 0)
        LAUNCH(rope_kernel, pairs, x, dt, pairs, T, t0, H, hs, theta, inverse);
}

/* ---- SwiGLU ------------------------------------------------------------------ */

static __global__ void swiglu_fwd_kernel(void *out, const void *gate, const void *up,
                                         ops_dtype dt, int64_t n)
{
    GRID_STRIDE(i, n)
        store_f32_cuda(out, dt, i, elem_swiglu(load_f32_cuda(gate, dt, i),
                                               load_f32_cuda(up, dt, i)));
}

void swiglu_fwd_cuda(void *out, const void *gate, const void *up, ops_dtype dt,
                     int64_t n)
{
    if (n > 0)
        LAUNCH(swiglu_fwd_kernel, n, out, gate, up, dt, n);
}

static __global__ void swiglu_bwd_kernel(void *dgate, void *dup, const void *dout,
                                         const void *gate, const void *up,
                                         ops_dtype dt, int64_t n)
{
    GRID_STRIDE(i, n) {
        float dg, du;
        elem_swiglu_grad(load_f32_cuda(gate, dt, i), load_f32_cuda(up, dt, i),
                         load_f32_cuda(dout, dt, i), &dg, &du);
        store_f32_cuda(dgate, dt, i, dg);
        store_f32_cuda(dup, dt, i, du);
    }
}

void swiglu_bwd_cuda(void *dgate, void *dup, const void *dout, const void *gate,
                     const void *up, ops_dtype dt, int64_t n)
{
    if (n > 0)
        LAUNCH(swiglu_bwd_kernel, n, dgate, dup, dout, gate, up, dt, n);
}

/* ---- grouped-query key/value heads ------------------------------------------ */

/* One thread per element of q: (n, h, c). */
static __global__ void gqa_expand_kernel(void *qkv, const void *q, const void *k,
                                         const void *v, ops_dtype dt, int64_t total,
                                         int NH, int NKV, int hs)
{
    int group = NH / NKV;
    GRID_STRIDE(e, total) {
        int c = (int)(e % hs);
        int64_t nh = e / hs;
        int h = (int)(nh % NH);
        int64_t n = nh / NH;
        int64_t o = nh * 3 * hs + c, ki = (n * NKV + h / group) * hs + c;
        store_f32_cuda(qkv, dt, o, load_f32_cuda(q, dt, e));
        store_f32_cuda(qkv, dt, o + hs, load_f32_cuda(k, dt, ki));
        store_f32_cuda(qkv, dt, o + 2 * hs, load_f32_cuda(v, dt, ki));
    }
}

void gqa_expand_cuda(void *qkv, const void *q, const void *k, const void *v,
                     ops_dtype dt, int N, int NH, int NKV, int hs)
{
    int64_t total = (int64_t)N * NH * hs;
    if (total > 0)
        LAUNCH(gqa_expand_kernel, total, qkv, q, k, v, dt, total, NH, NKV, hs);
}

static __global__ void gqa_reduce_q_kernel(void *dq, const void *dqkv, ops_dtype dt,
                                           int64_t total, int hs)
{
    GRID_STRIDE(e, total) {
        int64_t nh = e / hs;
        store_f32_cuda(dq, dt, e, load_f32_cuda(dqkv, dt, nh * 3 * hs + e % hs));
    }
}

/* One thread per key/value element (n, g, c); sums its group in order. */
static __global__ void gqa_reduce_kv_kernel(void *dk, void *dv, const void *dqkv,
                                            ops_dtype dt, int64_t total, int NH,
                                            int NKV, int hs)
{
    int group = NH / NKV;
    GRID_STRIDE(e, total) {
        int c = (int)(e % hs);
        int64_t ng = e / hs;
        int g = (int)(ng % NKV);
        int64_t n = ng / NKV;
        float sk = 0.0f, sv = 0.0f;
        for (int j = 0; j < group; j++) {
            int64_t o = (n * NH + g * group + j) * 3 * hs + c;
            sk += load_f32_cuda(dqkv, dt, o + hs);
            sv += load_f32_cuda(dqkv, dt, o + 2 * hs);
        }
        store_f32_cuda(dk, dt, e, sk);
        store_f32_cuda(dv, dt, e, sv);
    }
}

void gqa_reduce_cuda(void *dq, void *dk, void *dv, const void *dqkv, ops_dtype dt,
                     int N, int NH, int NKV, int hs)
{
    int64_t nq = (int64_t)N * NH * hs, nkv = (int64_t)N * NKV * hs;
    if (nq > 0)
        LAUNCH(gqa_reduce_q_kernel, nq, dq, dqkv, dt, nq, hs);
    if (nkv > 0)
        LAUNCH(gqa_reduce_kv_kernel, nkv, dk, dv, dqkv, dt, nkv, NH, NKV, hs);
}
