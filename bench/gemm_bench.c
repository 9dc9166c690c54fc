/*
 * gemm_bench.c - GFLOP/s of the CPU backend's GEMMs in fp32, bf16 and fp16
 * on GPT-2 small's shapes (B*T = 1024 tokens, C = 768, V = 50304).
 *
 * Each linear layer runs three GEMMs, measured here the way
 * kernels/cpu/matmul_cpu.c calls them (gemm_cpu, which is what ops_matmul_*
 * run):
 *   fwd   out(M,N)  = inp(M,K) . w(N,K)^T        out in D (fp32 for the head)
 *   dinp  dinp(M,K) = dout(M,N) . w(N,K)         out in D
 *   dw    dw(N,K)  += dout(M,N)^T . inp(M,K)     out fp32, accumulating
 * plus the LM head's whole backward pass with fp32 dlogits (the mixed
 * path), against the same call with dlogits already in D. Each case is the
 * best of repeated runs over about `seconds` (argument 1, default 0.5),
 * after one warm-up run (which also builds oneDNN's primitives). Printed,
 * never asserted: `make bench-gemm`, and set OMP_NUM_THREADS first.
 */
#include "kernels/ops.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

static double seconds = 0.5;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (float)((rng * 0x2545f4914f6cdd1dull) >> 40) / 16777216.0f * 2.0f - 1.0f;
}

/* n random values in [-1, 1) of dtype dt, 64-byte aligned */
static void *random_buf(ops_dtype dt, int64_t n)
{
    ops_tensor t = ops_alloc(dt, OPS_CPU, n);
    for (int64_t i = 0; i < n; i++)
        store_f32_cpu(t.data, dt, i, uniform());
    return t.data;
}

typedef enum { FWD, DINP, DW } layout;
static const char *layout_name[] = { "fwd", "dinp", "dw" };

/* One GEMM of layer shape (M, N, K) in dt, laid out as `which`. */
static void run(layout which, ops_dtype dt, ops_dtype out_dt, int M, int N,
                int K, void *a, void *b, void *c)
{
    switch (which) {
    case FWD:
        gemm_cpu(dt, 0, 1, M, N, K, a, K, b, K, NULL, 0, c, out_dt, N);
        break;
    case DINP:
        gemm_cpu(dt, 0, 0, M, K, N, a, N, b, K, NULL, 0, c, dt, K);
        break;
    case DW:
        gemm_cpu(dt, 1, 0, N, K, M, a, N, b, K, NULL, 1, c, OPS_F32, K);
        break;
    }
}

/* Best time of run(...) over `seconds`, in GFLOP/s. */
static double rate(layout which, ops_dtype dt, ops_dtype out_dt, int M,
                   int N, int K)
{
    /* operands: fwd a = inp (M,K), b = w (N,K), c (M,N);
     * dinp a = dout (M,N), b = w (N,K), c (M,K);
     * dw   a = dout (M,N), b = inp (M,K), c = dw (N,K) fp32 */
    int64_t na = which == FWD ? (int64_t)M * K : (int64_t)M * N;
    int64_t nb = which == DW ? (int64_t)M * K : (int64_t)N * K;
    int64_t nc = which == FWD ? (int64_t)M * N : which == DINP ? (int64_t)M * K
                                                               : (int64_t)N * K;
    ops_dtype cdt = which == DW ? OPS_F32 : which == DINP ? dt : out_dt;
    void *a = random_buf(dt, na), *b = random_buf(dt, nb);
    void *c = random_buf(cdt, nc);
    run(which, dt, out_dt, M, N, K, a, b, c);
    double best = 1e30, start = omp_get_wtime();
    do {
        double t0 = omp_get_wtime();
        run(which, dt, out_dt, M, N, K, a, b, c);
        double t = omp_get_wtime() - t0;
        best = t < best ? t : best;
    } while (omp_get_wtime() - start < seconds);
    free(a);
    free(b);
    free(c);
    return 2.0 * M * N * K / best / 1e9;
}

/* The head's ops_matmul_bwd (dinp and dw) with dout of dtype ddt. */
static double head_bwd_rate(ops_dtype dt, ops_dtype ddt, int M, int V, int C)
{
    ops_tensor dout = ops_alloc(ddt, OPS_CPU, (int64_t)M * V);
    ops_tensor inp = ops_alloc(dt, OPS_CPU, (int64_t)M * C);
    ops_tensor w = ops_alloc(dt, OPS_CPU, (int64_t)V * C);
    ops_tensor dinp = ops_alloc(dt, OPS_CPU, (int64_t)M * C);
    ops_tensor dw = ops_alloc(OPS_F32, OPS_CPU, (int64_t)V * C);
    ops_tensor ts[3] = { dout, inp, w };
    for (int t = 0; t < 3; t++)
        for (int64_t i = 0; i < ts[t].n; i++)
            store_f32_cpu(ts[t].data, ts[t].dtype, i, uniform());
    ops_matmul_bwd(dinp, dw, OPS_NONE, dout, inp, w, M, V, C);
    double best = 1e30, start = omp_get_wtime();
    do {
        double t0 = omp_get_wtime();
        ops_matmul_bwd(dinp, dw, OPS_NONE, dout, inp, w, M, V, C);
        double t = omp_get_wtime() - t0;
        best = t < best ? t : best;
    } while (omp_get_wtime() - start < seconds);
    ops_free(&dout); ops_free(&inp); ops_free(&w); ops_free(&dinp);
    ops_free(&dw);
    return 4.0 * M * V * C / best / 1e9;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        seconds = atof(argv[1]);
    if (!(seconds > 0)) {
        fprintf(stderr, "usage: gemm_bench [seconds per case]\n");
        return 2;
    }
    /* (M, N, K) of a linear layer: M tokens, N outputs, K inputs */
    static const int shapes[][3] = {
        { 1024, 2304, 768 },  /* attention qkv */
        { 1024, 768, 768 },   /* attention out */
        { 1024, 3072, 768 },  /* MLP up */
        { 1024, 768, 3072 },  /* MLP down */
        { 1024, 50304, 768 }, /* LM head (fp32 logits) */
    };
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    printf("gemm_bench: %s, %d OpenMP threads, best of %.2f s per case\n",
           ops_gemm_info(NULL), omp_get_max_threads(), seconds);
    printf("bf16 kernel: %s\n",
           gemm_kernel_name_cpu(OPS_BF16, 0, 1, 1024, 768, 768, OPS_BF16, 0));
    printf("fp16 kernel: %s\n\n",
           gemm_kernel_name_cpu(OPS_F16, 0, 1, 1024, 768, 768, OPS_F16, 0));
    printf("%-6s %5s %6s %5s  %9s %9s %9s  %9s %9s\n", "gemm", "M", "N", "K",
           "fp32", "bf16", "fp16", "bf16/f32", "fp16/f32");
    printf("%-6s %5s %6s %5s  %9s %9s %9s\n", "", "", "", "", "GFLOP/s",
           "GFLOP/s", "GFLOP/s");
    /* a GPT-2 small step: 12 layers of the first four shapes, one head */
    double tot[3] = { 0 }, flops = 0;
    for (int s = 0; s < nshapes; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        int head = s == nshapes - 1;
        double weight = head ? 1.0 : 12.0;
        for (int l = 0; l < 3; l++) {
            double f = rate((layout)l, OPS_F32, OPS_F32, M, N, K);
            double b = rate((layout)l, OPS_BF16, head ? OPS_F32 : OPS_BF16,
                            M, N, K);
            double h = rate((layout)l, OPS_F16, head ? OPS_F32 : OPS_F16,
                            M, N, K);
            /* the GEMM's own (M, N, K) as the library sees it */
            int gm = l == DW ? N : M, gn = l == FWD ? N : K;
            int gk = l == FWD ? K : l == DINP ? N : M;
            printf("%-6s %5d %6d %5d  %9.1f %9.1f %9.1f  %8.2fx %8.2fx\n",
                   layout_name[l], gm, gn, gk, f, b, h, b / f, h / f);
            double fl = weight * 2.0 * M * N * K;
            flops += fl;
            tot[0] += fl / f;
            tot[1] += fl / b;
            tot[2] += fl / h;
        }
    }
    printf("%-6s %19s  %9.1f %9.1f %9.1f  %8.2fx %8.2fx  (one step's "
           "GEMMs: 12 layers + head)\n", "step", "",
           flops / tot[0], flops / tot[1], flops / tot[2], tot[0] / tot[1],
           tot[0] / tot[2]);

    printf("\nLM head backward (ops_matmul_bwd, dinp + dw, M=1024 V=50304 "
           "C=768):\n");
    for (int i = 0; i < 2; i++) {
        ops_dtype dt = i == 0 ? OPS_BF16 : OPS_F16;
        double mixed = head_bwd_rate(dt, OPS_F32, 1024, 50304, 768);
        double same = head_bwd_rate(dt, dt, 1024, 50304, 768);
        printf("  %s inputs: fp32 dlogits %.1f GFLOP/s, %s dlogits %.1f "
               "GFLOP/s\n", ops_dtype_name(dt), mixed, ops_dtype_name(dt),
               same);
    }

    printf("\nmeasured peak (ops_gemm_peak_dtype, 1024^3 forward GEMM):\n");
    for (int i = 0; i < 3; i++) {
        ops_dtype dt = (ops_dtype[]){ OPS_F32, OPS_BF16, OPS_F16 }[i];
        printf("  %-5s %9.1f GFLOP/s\n", ops_dtype_name(dt),
               ops_gemm_peak_dtype(dt, seconds) / 1e9);
    }
    return 0;
}
