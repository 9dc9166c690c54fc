/*
 * t_llama_emu.cpp - Llama's CUDA kernels (kernels/cuda/llama_cuda.cu) run
 * on the host under tests/cuda_emu (each CUDA thread a fiber), against
 * their CPU twins linked from the build's kernels/libkernels.a:
 *
 * - RMSNorm's dw, the kernel a 16-byte pack a thread (what runs unless
 *   TRIDENT_FUSED is 0) and the kernel a channel a thread it replaced,
 *   bit for bit against the CPU's formula (rmsnorm_cpu.c's x * rstd *
 *   dout, each channel's rows in order) summed chunk by chunk as the GPU
 *   chunks the rows (matmul_cuda.cu's colsum_chunks and finish kernel);
 *   with one chunk (N <= 32), bit for bit against rmsnorm_bwd_cpu itself.
 *   Packs in fp32 and bf16, several blocks of packs, C not a multiple of
 *   the pack and a buffer one element off alignment (the element path of
 *   both kernels), up to 10 chunks.
 * - RMSNorm's forward (out, rstd), a channel a lane (TRIDENT_FUSED=0's)
 *   and a 16-byte pack a lane, also with the residual add before it
 *   (add_rmsnorm_fwd_cuda: against add_cpu then rmsnorm_fwd_cpu, the sum
 *   bit for bit, also written over its first operand), and dinp (+=,
 *   both sides reading the CPU's rstd) against rmsnorm_fwd_cpu and
 *   rmsnorm_bwd_cpu. Normwise
 *   tolerances (max |emu - cpu| over max |cpu|): the GPU sums a row's
 *   squares and dots over 32 lanes and a butterfly, the CPU over 16 lanes,
 *   so fp32 differs by reassociation (1e-5), a bf16 output by at most one
 *   ulp where that tips a rounding (2^-7).
 * - Rotary embeddings from position 0 and from 3000 (a context-parallel
 *   rank's chunk), forward and inverse; SwiGLU forward and backward; the
 *   grouped-query expand and reduce (groups of 3, 1 and 6): the same
 *   elem.h arithmetic in the same order on the same host, so bit for bit
 *   against rope_cpu, swiglu_*_cpu and gqa_*_cpu.
 *
 * In fp32 and bf16, C not a multiple of 32, several blocks (the
 * warp-per-row kernels 4 rows a block, the grid-stride ones 3 blocks so
 * that a thread takes several elements), in both turn orders. Blocks are
 * 128 threads here (TRI_THREADS below; 256 on the GPU, which the kernels
 * read through it or blockDim). What the emulation does not run: the
 * hardware's own scheduling and nvcc's fused multiply-adds (cuda_emu/
 * cuda_common.h), and the real shapes' speed: tests/t_ops_cuda has the 1B
 * Llama's on a GPU.
 */
#include "fibers.h"
#include "uniform.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include "kernels/cpu/cpu.h"
}

EmuDim gridDim = { 1, 1 }; /* the grid-stride kernels' (set per launch) */

/* the GPU's blocks are TRI_THREADS threads; the emulator's EMU_THREADS */
#define TRI_THREADS 128
static_assert(TRI_THREADS == EMU_THREADS, "the emulated block is TRI_THREADS threads");

#include "packs.inc"
#include "colsum_kernels.inc"
#include "llama_kernels.inc"

static int n_tests;

static const char *dtype_name(ops_dtype dt)
{
    return dt == OPS_F32 ? "fp32" : dt == OPS_BF16 ? "bf16" : "fp16";
}

static const char *order_name(EmuOrder order)
{
    return order == EMU_FORWARD ? "forward" : "backward";
}

/* n elements of dtype dt from element `shift` of a 16-byte aligned
 * allocation, random in [lo, hi) */
struct Buf {
    ops_dtype dt;
    int64_t n;
    char *base;
    void *p;
    Buf(ops_dtype dt_, int64_t n_, float lo, float hi, int shift = 0) : dt(dt_), n(n_)
    {
        size_t es = dt == OPS_F32 ? 4 : 2;
        base = (char *)aligned_alloc(16, ((size_t)(n + shift) * es + 15) / 16 * 16);
        p = base + shift * es;
        for (int64_t i = 0; i < n; i++)
            store_f32_cuda(p, dt, i, uniform(lo, hi));
    }
    Buf(const Buf &b) : Buf(b.dt, b.n, 0.0f, 0.0f)
    {
        memcpy(p, b.p, bytes());
    }
    Buf &operator=(const Buf &) = delete;
    ~Buf() { free(base); }
    size_t bytes() const { return (size_t)n * (dt == OPS_F32 ? 4 : 2); }
    float at(int64_t i) const { return load_f32_cuda(p, dt, i); }
    bool same(const Buf &b) const { return memcmp(p, b.p, bytes()) == 0; }
};

/* max |got - want| over max |want| */
static double normwise(const Buf &got, const Buf &want)
{
    double diff = 0.0, scale = 0.0;
    for (int64_t i = 0; i < want.n; i++) {
        double d = fabs((double)got.at(i) - want.at(i));
        if (!(d <= diff))
            diff = d; /* NaN sticks */
        scale = fabs(want.at(i)) > scale ? fabs(want.at(i)) : scale;
    }
    return diff / (scale > 0.0 ? scale : 1.0);
}

static double tolerance(ops_dtype dt)
{
    return dt == OPS_F32 ? 1e-5 : 0x1p-7;
}

/* A grid-stride kernel on `blocks` blocks. */
static void launch_grid(unsigned blocks, const std::function<void()> &kernel)
{
    gridDim.x = blocks;
    launch(blocks, kernel);
    gridDim.x = 1;
}

/* ---- RMSNorm's dw: the column sums ---- */

/* A column sums' pass-1 kernel over the chunks of rows: each chunk a
 * blockIdx.y (the emulator's launch is one row of blocks), `units`
 * columns or packs of columns a thread. */
static void launch_chunks(int chunks, int units, const std::function<void()> &kernel)
{
    for (int y = 0; y < chunks; y++) {
        blockIdx.y = (unsigned)y;
        launch((unsigned)((units + EMU_THREADS - 1) / EMU_THREADS), kernel);
    }
    blockIdx.y = 0;
}

/* RMSNorm's dw over N rows of C channels of dtype DT from element
 * `shift` of 16-byte aligned buffers, in `order`: the kernel a channel a
 * thread, the packed kernel with its pack (where C and the pointers
 * allow, as rmsnorm_dw_cuda picks) and a channel at a time, each with
 * colsum_finish_kernel, bit for bit against the CPU's sums chunk by chunk
 * (and, with one chunk, against rmsnorm_bwd_cpu's dw). */
template <ops_dtype DT>
static bool check_dw(int N, int C, int shift, EmuOrder order)
{
    const int VEC = DT == OPS_F32 ? 4 : 8;
    Buf inp(DT, (int64_t)N * C, -2.0f, 3.0f, shift), dout(DT, (int64_t)N * C, -1.0f, 1.0f, shift);
    std::vector<float> rstd(N), start(C);
    for (float &r : rstd)
        r = uniform(0.5f, 2.0f);
    for (float &v : start)
        v = uniform(-1.0f, 1.0f);
    int rpc, chunks = colsum_chunks(N, &rpc);
    emu_order = order;

    std::vector<float> want(start);
    for (int c = 0; c < C; c++) {
        float total = 0.0f;
        for (int r = 0; r < chunks; r++) {
            float sw = 0.0f;
            for (int i = r * rpc; i < N && i < (r + 1) * rpc; i++)
                sw += inp.at((int64_t)i * C + c) * rstd[i] * dout.at((int64_t)i * C + c);
            total += sw;
        }
        want[c] += total;
    }
    bool twin = chunks == 1, twin_same = true;
    if (twin) { /* the CPU twin itself: one chunk is its row order */
        Buf dinp(DT, (int64_t)N * C, 0.0f, 0.0f), w(DT, C, 0.5f, 1.5f);
        std::vector<float> cpu(start);
        rmsnorm_bwd_cpu(dinp.p, cpu.data(), dout.p, inp.p, w.p, rstd.data(), DT, N, C);
        twin_same = cpu == want;
    }

    bool fits = ((uintptr_t)inp.p & 15) == 0 && ((uintptr_t)dout.p & 15) == 0 && C % VEC == 0;
    std::vector<float> pw((size_t)chunks * C);
    int same = 0, kernels = 0;
    for (int kind = 0; kind < 3; kind++) { /* a channel a thread, a pack, a channel packed */
        if (kind == 1 && !fits)
            continue;
        std::fill(pw.begin(), pw.end(), NAN);
        if (kind == 0)
            launch_chunks(chunks, C, [&] {
                rmsnorm_dw_partial_kernel(pw.data(), dout.p, inp.p, rstd.data(), DT, N, C, rpc);
            });
        else if (kind == 1)
            launch_chunks(chunks, C / VEC, [&] {
                rmsnorm_dw_pack_kernel<DT, VEC>(pw.data(), dout.p, inp.p, rstd.data(), N, C,
                                                rpc);
            });
        else
            launch_chunks(chunks, C, [&] {
                rmsnorm_dw_pack_kernel<DT, 1>(pw.data(), dout.p, inp.p, rstd.data(), N, C, rpc);
            });
        std::vector<float> got(start);
        launch((unsigned)((C + EMU_THREADS - 1) / EMU_THREADS),
               [&] { colsum_finish_kernel(got.data(), pw.data(), chunks, C); });
        same += got == want;
        kernels++;
    }
    bool ok = same == kernels && twin_same;
    printf("%s %d - rmsnorm dw, %s, %s order: N %d (%d chunks of %d), C %d from element %d "
           "(%s): %d of %d kernels bit-identical to the CPU's sums chunk by chunk%s\n",
           ok ? "ok" : "not ok", ++n_tests, dtype_name(DT), order_name(order), N, chunks, rpc,
           C, shift, fits ? "16-byte packs" : "no pack fits", same, kernels,
           !twin ? "" : twin_same ? ", which are rmsnorm_bwd_cpu's bits"
                                  : ", which are NOT rmsnorm_bwd_cpu's bits");
    return ok;
}

static bool check_all_dw()
{
    bool ok = true;
    for (EmuOrder order : { EMU_FORWARD, EMU_BACKWARD }) {
        ok &= check_dw<OPS_BF16>(9, 24, 0, order);     /* one chunk, 3 packs: the CPU's bits */
        ok &= check_dw<OPS_F32>(37, 100, 0, order);    /* 2 chunks, 25 fp32 packs */
        ok &= check_dw<OPS_BF16>(37, 100, 0, order);   /* C % 8 != 0: no pack */
        ok &= check_dw<OPS_BF16>(70, 96, 1, order);    /* unaligned: no pack */
        ok &= check_dw<OPS_BF16>(300, 1040, 0, order); /* 10 chunks, 130 packs: 2 blocks */
        ok &= check_dw<OPS_F32>(40, 1028, 0, order);   /* 257 fp32 packs: 3 blocks */
    }
    return ok;
}

/* ---- RMSNorm's forward and dinp: warp-per-row sums ---- */

/* out, rstd against rmsnorm_fwd_cpu; then dinp (+=) against
 * rmsnorm_bwd_cpu, both reading the CPU's rstd: the kernels a channel a
 * lane (VEC 1, TRIDENT_FUSED=0's) and, where C is a whole number of
 * packs, a 16-byte pack a lane */
template <ops_dtype DT>
static bool check_rmsnorm(int N, int C, EmuOrder order)
{
    const int VEC = DT == OPS_F32 ? 4 : 8;
    const float eps = 1e-5f;
    int64_t n = (int64_t)N * C;
    Buf inp(DT, n, -2.0f, 3.0f), w(DT, C, 0.5f, 1.5f), dout(DT, n, -1.0f, 1.0f);
    Buf out_cpu(DT, n, 0.0f, 0.0f), rstd_cpu(OPS_F32, N, 0.0f, 0.0f);
    Buf dinp_start(DT, n, -1.0f, 1.0f), dinp_cpu(dinp_start);
    unsigned blocks = (unsigned)((N + RMS_ROWS_PER_BLOCK - 1) / RMS_ROWS_PER_BLOCK);
    emu_order = order;
    rmsnorm_fwd_cpu(out_cpu.p, (float *)rstd_cpu.p, inp.p, w.p, DT, N, C, eps);
    std::vector<float> dw((size_t)C);
    rmsnorm_bwd_cpu(dinp_cpu.p, dw.data(), dout.p, inp.p, w.p, (const float *)rstd_cpu.p, DT,
                    N, C);
    bool ok = true;
    for (int packed = 0; packed < 1 + (C % VEC == 0); packed++) {
        Buf out(DT, n, 0.0f, 0.0f), rstd(OPS_F32, N, 0.0f, 0.0f), dinp(dinp_start);
        float *r = (float *)rstd.p;
        const float *rc = (const float *)rstd_cpu.p;
        if (packed) {
            launch(blocks, [&] {
                rmsnorm_fwd_kernel<DT, VEC, false>(out.p, r, inp.p, w.p, N, C, eps, NULL, NULL);
            });
            launch(blocks, [&] {
                rmsnorm_dinp_kernel<DT, VEC>(dinp.p, dout.p, inp.p, w.p, rc, N, C);
            });
        } else {
            launch(blocks, [&] {
                rmsnorm_fwd_kernel<DT, 1, false>(out.p, r, inp.p, w.p, N, C, eps, NULL, NULL);
            });
            launch(blocks, [&] { rmsnorm_dinp_kernel<DT, 1>(dinp.p, dout.p, inp.p, w.p, rc, N, C); });
        }
        double e_out = normwise(out, out_cpu), e_rstd = normwise(rstd, rstd_cpu);
        double e_dinp = normwise(dinp, dinp_cpu), t = tolerance(DT);
        bool good = e_out <= t && e_rstd <= 1e-5 && e_dinp <= t;
        printf("%s %d - rmsnorm fwd and dinp, %s, %s, %s order: N %d (%u blocks of %d rows), "
               "C %d: out %.1e, rstd %.1e, dinp (+=) %.1e from the CPU's (normwise; "
               "tolerances %.0e, 1e-05, %.0e)\n", good ? "ok" : "not ok", ++n_tests,
               dtype_name(DT), packed ? "16-byte packs" : "a channel a lane", order_name(order),
               N, blocks, RMS_ROWS_PER_BLOCK, C, e_out, e_rstd, e_dinp, t, t);
        ok &= good;
    }
    return ok;
}

/* The forward with the residual add (add_rmsnorm_fwd_cuda's launch), a
 * channel a lane and in packs where C allows: resid = a + b and out, rstd
 * of resid, against add_cpu then rmsnorm_fwd_cpu: resid bit for bit (one
 * rounding of the same sum), out and rstd normwise as above; then again
 * with resid over a (in place), which must give the same bits as the
 * separate resid. */
template <ops_dtype DT, int VEC>
static bool check_add_rmsnorm(int N, int C, EmuOrder order)
{
    const float eps = 1e-5f;
    int64_t n = (int64_t)N * C;
    Buf a(DT, n, -2.0f, 3.0f), b(DT, n, -1.0f, 1.0f), w(DT, C, 0.5f, 1.5f);
    Buf resid_cpu(DT, n, 0.0f, 0.0f), out_cpu(resid_cpu), rstd_cpu(OPS_F32, N, 0.0f, 0.0f);
    Buf resid_emu(resid_cpu), out_emu(resid_cpu), rstd_emu(rstd_cpu);
    Buf a_inplace(a), out_inplace(resid_cpu), rstd_inplace(rstd_cpu);
    unsigned blocks = (unsigned)((N + RMS_ROWS_PER_BLOCK - 1) / RMS_ROWS_PER_BLOCK);
    emu_order = order;
    add_cpu(resid_cpu.p, a.p, b.p, DT, n);
    rmsnorm_fwd_cpu(out_cpu.p, (float *)rstd_cpu.p, resid_cpu.p, w.p, DT, N, C, eps);
    launch(blocks, [&] {
        rmsnorm_fwd_kernel<DT, VEC, true>(out_emu.p, (float *)rstd_emu.p, a.p, w.p, N, C, eps,
                                          resid_emu.p, b.p);
    });
    launch(blocks, [&] {
        rmsnorm_fwd_kernel<DT, VEC, true>(out_inplace.p, (float *)rstd_inplace.p, a_inplace.p,
                                          w.p, N, C, eps, a_inplace.p, b.p);
    });
    double e_out = normwise(out_emu, out_cpu), e_rstd = normwise(rstd_emu, rstd_cpu);
    bool inplace = a_inplace.same(resid_emu) && out_inplace.same(out_emu) &&
                   rstd_inplace.same(rstd_emu);
    bool ok = resid_emu.same(resid_cpu) && e_out <= tolerance(DT) && e_rstd <= 1e-5 && inplace;
    printf("%s %d - add + rmsnorm fwd, %s, %s, %s order: N %d, C %d: resid %s add_cpu's bits, "
           "out %.1e, rstd %.1e from the CPU's rmsnorm of it (tolerances %.0e, 1e-05); "
           "resid over a: %s\n", ok ? "ok" : "not ok", ++n_tests, dtype_name(DT),
           VEC > 1 ? "16-byte packs" : "a channel a lane", order_name(order), N, C,
           resid_emu.same(resid_cpu) ? "has" : "has NOT", e_out, e_rstd, tolerance(DT),
           inplace ? "the same bits" : "OTHER bits");
    return ok;
}

static bool check_all_rmsnorm()
{
    bool ok = true;
    for (EmuOrder order : { EMU_FORWARD, EMU_BACKWARD }) {
        ok &= check_rmsnorm<OPS_F32>(13, 100, order); /* 4 blocks, the last one row */
        ok &= check_rmsnorm<OPS_BF16>(13, 100, order); /* C % 8 != 0: a channel a lane */
        ok &= check_rmsnorm<OPS_BF16>(6, 45, order);   /* fewer channels than 2 per lane */
        ok &= check_rmsnorm<OPS_BF16>(5, 2048, order); /* the 1B Llama's width: 8 packs a lane */
        ok &= check_rmsnorm<OPS_BF16>(9, 24, order);   /* 3 packs: fewer than the lanes */
        ok &= check_add_rmsnorm<OPS_F32, 1>(13, 100, order);
        ok &= check_add_rmsnorm<OPS_F32, 4>(13, 100, order);
        ok &= check_add_rmsnorm<OPS_BF16, 1>(6, 45, order);
        ok &= check_add_rmsnorm<OPS_BF16, 8>(7, 2048, order);
    }
    return ok;
}

/* ---- rotary embeddings, SwiGLU, grouped-query heads: bit for bit ---- */

static int report(bool ok, const char *what, ops_dtype dt, EmuOrder order)
{
    printf("%s %d - %s, %s, %s order, 3 blocks: bit-identical to the CPU twin\n",
           ok ? "ok" : "not ok", ++n_tests, what, dtype_name(dt), order_name(order));
    return ok;
}

/* x (B, T, H, hs) rotated from position t0, forward then inverse */
static bool check_rope(ops_dtype dt, int B, int T, int t0, int H, int hs, EmuOrder order)
{
    const double theta = 500000.0;
    Buf cpu(dt, (int64_t)B * T * H * hs, -1.0f, 1.0f), emu(cpu);
    int64_t pairs = (int64_t)B * T * H * (hs / 2);
    bool ok = true;
    emu_order = order;
    for (int inverse = 0; inverse < 2; inverse++) {
        rope_cpu(cpu.p, dt, B, T, t0, H, hs, theta, inverse);
        launch_grid(3, [&] { rope_kernel(emu.p, dt, pairs, T, t0, H, hs, theta, inverse); });
        char what[160];
        snprintf(what, sizeof what, "rope %s: B %d, T %d from position %d, %d heads of %d "
                 "(%lld pairs)", inverse ? "inverse" : "forward", B, T, t0, H, hs,
                 (long long)pairs);
        ok &= report(emu.same(cpu), what, dt, order);
    }
    return ok;
}

static bool check_swiglu(ops_dtype dt, int64_t n, EmuOrder order)
{
    Buf gate(dt, n, -6.0f, 6.0f), up(dt, n, -2.0f, 2.0f), dout(dt, n, -1.0f, 1.0f);
    Buf out_cpu(dt, n, 0.0f, 0.0f), out_emu(out_cpu);
    Buf dg_cpu(dt, n, 0.0f, 0.0f), dg_emu(dg_cpu), du_cpu(dg_cpu), du_emu(dg_cpu);
    emu_order = order;
    swiglu_fwd_cpu(out_cpu.p, gate.p, up.p, dt, n);
    launch_grid(3, [&] { swiglu_fwd_kernel(out_emu.p, gate.p, up.p, dt, n); });
    swiglu_bwd_cpu(dg_cpu.p, du_cpu.p, dout.p, gate.p, up.p, dt, n);
    launch_grid(3, [&] { swiglu_bwd_kernel(dg_emu.p, du_emu.p, dout.p, gate.p, up.p, dt, n); });
    char what[96];
    snprintf(what, sizeof what, "swiglu forward and backward over %lld elements", (long long)n);
    return report(out_emu.same(out_cpu) && dg_emu.same(dg_cpu) && du_emu.same(du_cpu), what,
                  dt, order);
}

/* expand q, k, v into qkv, then reduce a random dqkv into dq, dk, dv */
static bool check_gqa(ops_dtype dt, int N, int NH, int NKV, int hs, EmuOrder order)
{
    int64_t nq = (int64_t)N * NH * hs, nkv = (int64_t)N * NKV * hs;
    Buf q(dt, nq, -1.0f, 1.0f), k(dt, nkv, -1.0f, 1.0f), v(dt, nkv, -1.0f, 1.0f);
    Buf qkv_cpu(dt, 3 * nq, 0.0f, 0.0f), qkv_emu(qkv_cpu), dqkv(dt, 3 * nq, -1.0f, 1.0f);
    Buf dq_cpu(dt, nq, 0.0f, 0.0f), dq_emu(dq_cpu);
    Buf dk_cpu(dt, nkv, 0.0f, 0.0f), dk_emu(dk_cpu), dv_cpu(dk_cpu), dv_emu(dk_cpu);
    emu_order = order;
    gqa_expand_cpu(qkv_cpu.p, q.p, k.p, v.p, dt, N, NH, NKV, hs);
    launch_grid(3, [&] { gqa_expand_kernel(qkv_emu.p, q.p, k.p, v.p, dt, nq, NH, NKV, hs); });
    gqa_reduce_cpu(dq_cpu.p, dk_cpu.p, dv_cpu.p, dqkv.p, dt, N, NH, NKV, hs);
    launch_grid(3, [&] { gqa_reduce_q_kernel(dq_emu.p, dqkv.p, dt, nq, hs); });
    launch_grid(3, [&] {
        gqa_reduce_kv_kernel(dk_emu.p, dv_emu.p, dqkv.p, dt, nkv, NH, NKV, hs);
    });
    char what[128];
    snprintf(what, sizeof what, "gqa expand and reduce: N %d, %d query heads over %d key/value "
             "heads of %d", N, NH, NKV, hs);
    return report(qkv_emu.same(qkv_cpu) && dq_emu.same(dq_cpu) && dk_emu.same(dk_cpu) &&
                      dv_emu.same(dv_cpu), what, dt, order);
}

static bool check_all_elementwise()
{
    bool ok = true;
    for (EmuOrder order : { EMU_FORWARD, EMU_BACKWARD })
        for (ops_dtype dt : { OPS_F32, OPS_BF16 }) {
            ok &= check_rope(dt, 2, 7, 0, 4, 24, order); /* 672 pairs over 384 threads */
            ok &= check_rope(dt, 1, 5, 3000, 2, 128, order);
            ok &= check_swiglu(dt, 1001, order);
            ok &= check_gqa(dt, 7, 6, 2, 12, order); /* groups of 3 */
            ok &= check_gqa(dt, 3, 4, 4, 40, order); /* groups of 1 */
            ok &= check_gqa(dt, 5, 6, 1, 20, order); /* one key/value head */
        }
    return ok;
}

int main()
{
    bool ok = check_all_dw();
    ok &= check_all_rmsnorm();
    ok &= check_all_elementwise();
    printf("1..%d\n", n_tests);
    return ok ? 0 : 1;
}
