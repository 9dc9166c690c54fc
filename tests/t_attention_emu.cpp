/*
 * t_attention_emu.cpp - the fused CUDA attention's kernels, the CUDA-core
 * ones (kernels/cuda/attention_cuda.cu) and the tensor-core ones
 * (attention_mma_cuda.cu), run on the host under
 * tests/cuda_emu/cuda_common.h, against attention computed in double.
 *
 * This checks their indices, causal masks, ragged last tiles, online
 * softmax, mma and ldmatrix fragment layouts and barriers on any machine:
 * every CUDA thread is a fiber with its own stack, so the kernel code
 * runs as written. The tensor-core cases run twice: their tiles streamed
 * by cp.async into two buffers (the default) and loaded into one
 * (TRIDENT_ATTENTION_ASYNC=0); the stand-in defers each copy to its
 * thread's wait, so a tile read before it is waited for is NaN.
 * t_attention_emu.sh builds it with the kernel files' device code and
 * runs it; tests/t_ops_cuda checks the same kernels on a GPU.
 *
 * Reference: per (batch, head), S = Q K^T / sqrt(hs) in double on the
 * inputs as stored (rounded to the dtype), the causal softmax, O = P V,
 * lse; dP = dO V^T, D = rowsum(P * dP), dS = P * (dP - D) / sqrt(hs),
 * dQ = dS K, dK = dS^T Q, dV = P^T dO. dqkv starts as 0x7f bytes (a huge
 * value in every dtype), so an element the kernels fail to write fails.
 *
 * Row windows (context parallelism): the queries [q0, q0 + Tq) of T rows
 * against keys [0, q0 + Tq), out, dout and lse of Tq rows, the gradients
 * added (+=) into a dqkv that starts at 0.25 everywhere (exact in every
 * dtype): the kernels must add the window's dq and every earlier key's
 * dk, dv, and leave the rest at 0.25 (the reference's gradient there is
 * 0). Unaligned windows, windows that end before T, and windows of one
 * row put the tiles' edges where the whole sequence has none.
 * Tolerances, normwise (max |kernel - reference| over max |reference|):
 * fp32 1e-5 (fp32 sums over at most T = 70 terms: about 1e-6), bf16 2e-2
 * and fp16 4e-3 (one rounding of the stored result, 2^-8 and 2^-11 of the
 * largest element, plus fp32 sums), lse absolute 1e-5 (fp32, log T ~ 5).
 */
#include "fibers.h" /* cuda_common.h, and the block's threads as fibers */

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "attention_kernels.inc"
#include "attention_mma_kernels.inc"

static uint64_t rng = 88172645463325252ull;

static float uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static int n_tests;

/* Where the kernels run: query rows [q0, q0 + Tq) of T; add: the
 * gradients are added to dqkv (a window's) */
struct Window {
    int T, q0, Tq, add;
};

/* blocks of `rows` rows over n rows of each of BH heads */
static unsigned grid_of(int BH, int n, int rows)
{
    return (unsigned)(BH * ((n + rows - 1) / rows));
}

/* The CUDA-core kernels (fp32 in the trainer; any dtype here): the query
 * side's grid over the window's rows, the key side's over its keys */
template <int HD>
static void run_cuda_core(void *out, float *lse, float *D, void *dqkv, const void *dout,
                          const void *qkv, ops_dtype dt, int B, Window w, int NH, int hs)
{
    float scale = 1.0f / sqrtf((float)hs);
    int BH = B * NH, T = w.T, q0 = w.q0, Tq = w.Tq;
    launch(grid_of(BH, Tq, 16), [&] {
        attention_fwd_kernel<HD>(out, lse, qkv, dt, BH, NH, T, q0, Tq, hs, scale);
    });
    launch(grid_of(BH, Tq, 8), [&] {
        attention_dq_kernel<HD>(dqkv, D, dout, qkv, out, lse, dt, BH, NH, T, q0, Tq, hs, scale,
                                dt != OPS_F32, w.add);
    });
    launch(grid_of(BH, q0 + Tq, 8), [&] {
        attention_dkdv_kernel<HD>(dqkv, D, dout, qkv, lse, dt, BH, NH, T, q0, Tq, hs, scale,
                                  w.add);
    });
}

/* The tensor-core kernels (bf16 and fp16); d_sweep: the dQ kernel's D
 * from a first sweep over the keys, not from dO and the stored O; ASYNC:
 * the tiles streamed by cp.async into two buffers (the default), else
 * loaded into one (TRIDENT_ATTENTION_ASYNC=0) */
template <int HD, bool BF16, bool ASYNC>
static void run_mma(void *out, float *lse, float *D, void *dqkv, const void *dout,
                    const void *qkv, int B, Window w, int NH, int hs, int d_sweep)
{
    float scale = 1.0f / sqrtf((float)hs);
    int BH = B * NH, T = w.T, q0 = w.q0, Tq = w.Tq;
    launch(grid_of(BH, Tq, MMA_BLOCK_ROWS), [&] {
        attention_mma_fwd_kernel<HD, BF16, ASYNC>(out, lse, qkv, BH, NH, T, q0, Tq, hs, scale);
    });
    launch(grid_of(BH, Tq, MMA_BLOCK_ROWS), [&] {
        attention_mma_dq_kernel<HD, BF16, ASYNC>(dqkv, D, dout, qkv, out, lse, BH, NH, T, q0,
                                                 Tq, hs, scale, w.add, d_sweep);
    });
    launch(grid_of(BH, q0 + Tq, MMA_BLOCK_ROWS), [&] {
        attention_mma_dkdv_kernel<HD, BF16, ASYNC>(dqkv, D, dout, qkv, lse, BH, NH, T, q0, Tq,
                                                   hs, scale, w.add);
    });
}

/* Which kernels a case runs: the CUDA-core ones, or the tensor-core ones
 * with their tiles by cp.async (the default) or loaded synchronously
 * (TRIDENT_ATTENTION_ASYNC=0) */
enum Kernels { CUDA_CORES, MMA_ASYNC, MMA_SYNC };

/* x = max(x, e), where a NaN sticks: once x is NaN it stays NaN (a bare
 * !(e <= x) test would let the next number replace it) */
static void worst(double *x, double e)
{
    if (!std::isnan(*x) && !(e <= *x))
        *x = e;
}

/* The three kernels of one family on random inputs, against the double
 * reference; for query rows [q0, q0 + Tq) of T when Tq > 0, added into
 * dqkv; d_sweep: the tensor-core dQ kernel's D by its first sweep over
 * the keys (TRIDENT_ATTENTION_D=sweep). */
template <int HD>
static int check(int B, int T, int NH, int hs, ops_dtype dt, Kernels k = CUDA_CORES,
                 int q0 = 0, int Tq = 0, int d_sweep = 0)
{
    const bool mma = k != CUDA_CORES;
    const Window w = { T, q0, Tq > 0 ? Tq : T, Tq > 0 };
    const int qend = q0 + w.Tq;
    const double pre = w.add ? 0.25 : 0.0; /* dqkv before a window adds to it */
    int64_t nqkv = (int64_t)B * T * NH * 3 * hs, no = (int64_t)B * w.Tq * NH * hs;
    size_t es = dt == OPS_F32 ? 4 : 2; /* no libkernels here */
    std::vector<char> qkv(nqkv * es), out(no * es), dout(no * es), dqkv(nqkv * es, 0x7f);
    std::vector<float> lse((size_t)B * NH * w.Tq), D((size_t)B * NH * w.Tq);
    for (int64_t i = 0; i < nqkv; i++) {
        store_f32_cuda(qkv.data(), dt, i, uniform());
        if (w.add)
            store_f32_cuda(dqkv.data(), dt, i, (float)pre);
    }
    for (int64_t i = 0; i < no; i++)
        store_f32_cuda(dout.data(), dt, i, uniform());
    if (!mma)
        run_cuda_core<HD>(out.data(), lse.data(), D.data(), dqkv.data(), dout.data(), qkv.data(),
                          dt, B, w, NH, hs);
    else if (dt == OPS_BF16 && k == MMA_ASYNC)
        run_mma<HD, true, true>(out.data(), lse.data(), D.data(), dqkv.data(), dout.data(),
                                qkv.data(), B, w, NH, hs, d_sweep);
    else if (dt == OPS_BF16)
        run_mma<HD, true, false>(out.data(), lse.data(), D.data(), dqkv.data(), dout.data(),
                                 qkv.data(), B, w, NH, hs, d_sweep);
    else if (k == MMA_ASYNC)
        run_mma<HD, false, true>(out.data(), lse.data(), D.data(), dqkv.data(), dout.data(),
                                 qkv.data(), B, w, NH, hs, d_sweep);
    else
        run_mma<HD, false, false>(out.data(), lse.data(), D.data(), dqkv.data(), dout.data(),
                                  qkv.data(), B, w, NH, hs, d_sweep);

    auto x = [&](int b, int t, int h, int part, int d) {
        return (double)load_f32_cuda(qkv.data(), dt, (((int64_t)b * T + t) * NH + h) * 3 * hs
                                                     + part * hs + d);
    };
    /* dout, out and lse of query t (of the sequence): row t - q0 of the window */
    auto row = [&](int b, int t, int h) { return ((int64_t)b * w.Tq + t - q0) * NH + h; };
    auto g = [&](int b, int t, int h, int d) {
        return (double)load_f32_cuda(dout.data(), dt, row(b, t, h) * hs + d);
    };
    double err_o = 0, max_o = 0, err_l = 0, err_g = 0, max_g = 0;
    double rs = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            std::vector<double> P((size_t)T * T, 0.0), dS((size_t)T * T, 0.0);
            std::vector<double> grad((size_t)3 * T * hs, 0.0); /* dq | dk | dv */
            for (int i = q0; i < qend; i++) {
                double *p = &P[(size_t)i * T], mx = -1e300, sum = 0, Di = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < hs; d++)
                        s += x(b, i, h, 0, d) * x(b, j, h, 1, d);
                    p[j] = s * rs;
                    mx = std::max(mx, p[j]);
                }
                for (int j = 0; j <= i; j++)
                    sum += exp(p[j] - mx);
                double L = mx + log(sum);
                worst(&err_l, fabs(L - lse[((size_t)b * NH + h) * w.Tq + i - q0]));
                for (int j = 0; j <= i; j++)
                    p[j] = exp(p[j] - L);
                for (int d = 0; d < hs; d++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++)
                        o += p[j] * x(b, j, h, 2, d);
                    double got = load_f32_cuda(out.data(), dt, row(b, i, h) * hs + d);
                    worst(&err_o, fabs(got - o));
                    max_o = std::max(max_o, fabs(o));
                }
                std::vector<double> dp(i + 1);
                for (int j = 0; j <= i; j++) {
                    dp[j] = 0;
                    for (int d = 0; d < hs; d++)
                        dp[j] += g(b, i, h, d) * x(b, j, h, 2, d);
                    Di += p[j] * dp[j];
                }
                for (int j = 0; j <= i; j++)
                    dS[(size_t)i * T + j] = p[j] * (dp[j] - Di) * rs;
            }
            for (int i = q0; i < qend; i++)
                for (int j = 0; j <= i; j++)
                    for (int d = 0; d < hs; d++) {
                        grad[(size_t)i * hs + d] += dS[(size_t)i * T + j] * x(b, j, h, 1, d);
                        grad[(size_t)(T + j) * hs + d] += dS[(size_t)i * T + j] * x(b, i, h, 0, d);
                        grad[(size_t)(2 * T + j) * hs + d] += P[(size_t)i * T + j] * g(b, i, h, d);
                    }
            for (int part = 0; part < 3; part++)
                for (int t = 0; t < T; t++)
                    for (int d = 0; d < hs; d++) {
                        double want = grad[((size_t)part * T + t) * hs + d];
                        double got = load_f32_cuda(dqkv.data(), dt, (((int64_t)b * T + t) * NH + h)
                                                                    * 3 * hs + part * hs + d) - pre;
                        worst(&err_g, fabs(got - want));
                        max_g = std::max(max_g, fabs(want));
                    }
        }
    double tol = dt == OPS_BF16 ? 2e-2 : dt == OPS_F16 ? 4e-3 : 1e-5;
    double eo = err_o / max_o, eg = err_g / max_g;
    int ok = eo <= tol && err_l <= 1e-5 && eg <= tol;
    char win[64] = "";
    if (w.add)
        snprintf(win, sizeof win, " rows [%d, %d)", q0, qend);
    printf("%s %d - %s%s%s B=%d T=%d%s NH=%d hs=%d (HD %d): out %.1e, lse %.1e (tol 1e-05), "
           "dqkv %.1e (tol %.0e)\n", ok ? "ok" : "not ok", ++n_tests,
           k == MMA_ASYNC ? "tensor cores, " : k == MMA_SYNC ? "tensor cores, synchronous tiles, " : "",
           d_sweep ? "D by a sweep, " : "", dt == OPS_F32 ? "fp32" : dt == OPS_BF16 ? "bf16" : "fp16",
           B, T, win, NH, hs, HD, eo, err_l, eg, tol);
    return ok;
}

/* The tensor-core kernels' cases, their tiles streamed as k says:
 * 64-row blocks, key and query tiles of 64 (32 at HD 128), 16 rows a
 * warp; hs = HD streams by cp.async (MMA_ASYNC), a narrower hs element by
 * element. Then row windows, added into dqkv. */
static int mma_cases(Kernels k)
{
    int ok = 1;
    ok &= check<32>(1, 1, 1, 16, OPS_BF16, k);    /* one row, one key; hs < HD */
    ok &= check<32>(2, 37, 3, 32, OPS_BF16, k);   /* ragged: rows past T in the block */
    ok &= check<64>(1, 130, 2, 64, OPS_BF16, k);  /* 3 blocks, 3 tiles, the last ragged */
    ok &= check<64>(1, 128, 1, 64, OPS_F16, k);   /* T a multiple of every tile */
    ok &= check<64>(1, 70, 1, 40, OPS_F16, k);    /* hs inside the bucket: element loads */
    ok &= check<128>(1, 100, 1, 128, OPS_BF16, k); /* Llama's head size: 32-row tiles */
    ok &= check<128>(1, 45, 2, 80, OPS_BF16, k);
    ok &= check<32>(2, 37, 3, 32, OPS_BF16, k, 0, 0, 1); /* the dQ kernel's old D: 2 sweeps */
    ok &= check<64>(1, 130, 2, 64, OPS_BF16, k, 70, 45);
    ok &= check<64>(1, 128, 1, 64, OPS_F16, k, 64, 64);
    ok &= check<128>(1, 100, 1, 128, OPS_BF16, k, 33, 40);
    ok &= check<32>(1, 5, 1, 16, OPS_BF16, k, 4, 1);
    return ok;
}

int main()
{
    printf("1..36\n");
    int ok = 1;
    ok &= check<32>(1, 1, 1, 8, OPS_F32);      /* one row, one key */
    ok &= check<32>(2, 37, 3, 16, OPS_F32);    /* ragged: 37 rows, 2 key tiles */
    ok &= check<64>(1, 70, 1, 64, OPS_F32);    /* 3 key tiles, 5 query tiles, last ragged */
    ok &= check<128>(1, 41, 1, 80, OPS_F32);   /* hs inside the 128 bucket */
    ok &= check<128>(1, 50, 1, 128, OPS_F32);  /* Llama's head size, 2 key tiles */
    ok &= check<32>(2, 37, 3, 16, OPS_BF16);   /* D from P * dP in a first sweep */
    ok &= check<64>(1, 33, 2, 64, OPS_F16);
    ok &= check<64>(1, 32, 1, 64, OPS_BF16);   /* T a multiple of every tile */
    /* row windows, added into dqkv: mid-sequence and unaligned, to the
     * end, one row */
    ok &= check<64>(1, 70, 1, 64, OPS_F32, CUDA_CORES, 37, 20);
    ok &= check<32>(2, 37, 3, 16, OPS_F32, CUDA_CORES, 5, 32);
    ok &= check<32>(2, 37, 3, 16, OPS_BF16, CUDA_CORES, 9, 17);
    ok &= check<32>(1, 5, 1, 16, OPS_F32, CUDA_CORES, 4, 1);
    ok &= mma_cases(MMA_ASYNC);
    ok &= mma_cases(MMA_SYNC);
    return ok ? 0 : 1;
}
