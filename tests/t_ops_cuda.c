/*
 * t_ops_cuda.c - every CUDA op against its CPU twin, in fp32, bf16 and fp16.
 *
 * Each check draws random inputs in the compute dtype D, gives the same
 * bits to the `_cpu` and the `_cuda` function (called directly, not
 * through ops.c), and compares the outputs. Both backends widen D to fp32,
 * compute in fp32 and round once when storing, so they differ by fp32
 * reassociation plus, where that tips a rounding, one ulp of the output
 * dtype; the GPU's exact attention (the reference its fused one is
 * checked against) also rounds P and dS to D before its second GEMMs
 * (attention_exact_cuda.cu). The error is normwise, max |gpu - cpu| over
 * max |cpu|, so an element near zero is judged by the op's scale. The
 * tolerances: fp32 outputs (statistics, parameter gradients, anything in
 * an fp32 run) 1e-4, bf16 2e-2 (2^-8 is one ulp at the top of the range),
 * fp16 4e-3; a missing widening or a wrong index shows up as 1e-1 or worse.
 * Casts, the embedding lookup and the two scatter-add backward passes
 * (which add in the CPU's order) must match bit for bit, and the
 * reductions must give the same bits on a second run.
 *
 * Real models' shapes, in fp32 and bf16 (fp16 keeps the small ones):
 * head sizes 64 and 128 at T = 1024 and 4096, the vocabularies 50304
 * (GPT-2) and 128256 (Llama 3) in the LM head, the loss and the
 * embedding, tensors over 2^21 elements, and column sums over thousands
 * of rows (matmul dbias, LayerNorm and RMSNorm dw, db), which the GPU adds
 * in up to 256 chunks of rows and the CPU row by row. The normwise
 * tolerances hold at these sizes: fp32 reassociation over K terms grows
 * like sqrt(K) 2^-24 (K = 128256: 2e-5, under 1e-4), and a bf16 or fp16
 * output is rounded once whatever K. The GPU's fused attention and its
 * exact one are each checked against the CPU's fused kernel, and at
 * T = 4096 against the exact CPU kernel (attention_exact_cpu.c, which
 * keeps every probability), as is the CPU's fused one; there the GPU's
 * fused kernel is also checked against its exact one. Context
 * parallelism's row windows (attention_rows_*_cuda: queries [q0, q0 + Tq)
 * of T, the backward adding into dqkv; rope at a first position t0) are
 * checked against the CPU's, up to a window at 3072 of T = 4096.
 *
 * The bandwidth-bound kernels (cross-entropy, the elementwise maps,
 * LayerNorm) move 16-byte packs where pointers and rows are aligned and
 * one element at a time where not; both paths are checked (rows of 1001
 * and 1003, buffers one element off alignment, rows narrower than a
 * block, a tail shorter than a pack), and so is the one-shard fused
 * cross-entropy (xent_fused_cuda) against xent_fused_cpu.
 *
 * TRIDENT_FUSED's kernels (issue 34): the cross-entropy that writes the
 * head's gradient in bf16/fp16 over the logits, and the head's backward
 * reading it there, against the CPU's fp32 path at the dtype's tolerance
 * (fp16 with a loss scale); the batched token-embedding backward and the
 * serial one it replaces, bit-identical to the CPU with repeated, all
 * equal and all distinct tokens, twice. The head's gradient also over
 * rows of several stretches of 2048 packs, one element at a time and
 * packed (tests/t_fused_emu runs the same kernel on the host, in both
 * thread orders); the multi-tensor tables are kept: a second call with
 * the same tensors takes no host wait.
 * RMSNorm's dw a 16-byte pack a thread at the 1B Llama's shape (16384
 * rows of 2048, bf16 and fp32) and at an odd width, against the CPU and
 * bit for bit against the kernel a channel a thread that TRIDENT_FUSED=0
 * runs (tests/t_llama_emu runs both on the host).
 * The residual add inside Llama's RMSNorm (add_rmsnorm_fwd_cuda) against
 * the CPU's add then rmsnorm and bit for bit against the GPU's own two.
 * The linear layers' cuBLASLt epilogues (gemm_lt_cuda.cu: bias, GELU with
 * its input kept, dGELU, the bias gradient) run in each
 * TRIDENT_LT_EPILOGUE mode against the CPU's unfused ops and the GPU's
 * unfused kernels, on GPT-2 small's MLP shape too; the GEMMs that really
 * fused are counted, cuBLASLt's GELU must be the tanh form and its largest
 * difference from elem.h's is printed (the GPU session's cue for the
 * default mode); which cuBLASLt statuses fall back is checked without a
 * GPU.
 *
 * A scratch buffer grows in stream order: without a host wait, counted by
 * ops_device_allocations, and not again for the same op (issue 35).
 *
 * Without a GPU (or a driver) it checks what needs none and prints that
 * the GPU tests did not run. The plan is printed at the end (valid TAP),
 * since the number of checks follows the loops below. The big shapes'
 * CPU twins dominate the run time (about 120 GFLOP, half of it the exact
 * attention at T = 4096): 11 s on an H100 host with 16 cores.
 */
#include "kernels/ops.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CUDA's headers declare `f()` without `void`, which -Wstrict-prototypes
 * flags in C; they are not ours to fix. The test's wait hook needs
 * cudaEventSynchronize. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#pragma GCC diagnostic pop

#include "kernels/cpu/cpu.h"
#include "kernels/cuda/cuda.h"
#include "tests/tap.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float uniform(float lo, float hi)
{
    return tap_uniform(&rng_state, lo, hi);
}

static const ops_dtype dtypes[] = { OPS_F32, OPS_BF16, OPS_F16 };

/* tap_ok, counted for the trailing plan */
static int n_checks;
#define CHECK(...) (n_checks++, tap_ok(__VA_ARGS__))

static double tol(ops_dtype dt)
{
    return dt == OPS_BF16 ? 2e-2 : dt == OPS_F16 ? 4e-3 : 1e-4;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "t_ops_cuda: out of host memory\n");
        abort();
    }
    return p;
}

/* ---- a tensor with a host and a device copy --------------------------- */

typedef struct {
    ops_dtype dt;
    int64_t n;
    void *h;   /* host, dtype dt: the CPU twin's argument */
    void *d;   /* device, dtype dt: the CUDA op's argument */
} Buf;

static size_t bytes_of(const Buf *b)
{
    return (size_t)b->n * ops_dtype_size(b->dt);
}

static void upload(Buf *b)
{
    copy_cuda(b->d, OPS_CUDA, b->h, OPS_CPU, bytes_of(b));
}

/* n values uniform in [lo, hi), rounded to dt, on both sides. */
static Buf buf_rand(ops_dtype dt, int64_t n, float lo, float hi)
{
    Buf b = { dt, n, xmalloc((size_t)n * ops_dtype_size(dt)),
              alloc_cuda((size_t)n * ops_dtype_size(dt)) };
    for (int64_t i = 0; i < n; i++)
        store_f32_cpu(b.h, dt, i, uniform(lo, hi));
    upload(&b);
    return b;
}

static Buf buf_zero(ops_dtype dt, int64_t n)
{
    Buf b = { dt, n, xmalloc((size_t)n * ops_dtype_size(dt)),
              alloc_cuda((size_t)n * ops_dtype_size(dt)) };
    memset(b.h, 0, bytes_of(&b));
    return b;
}

static Buf buf_tokens(int64_t n, int lo, int hi)
{
    Buf b = { OPS_I32, n, xmalloc((size_t)n * 4), alloc_cuda((size_t)n * 4) };
    for (int64_t i = 0; i < n; i++) {
        int v = lo + (int)uniform(0.0f, (float)(hi - lo));
        ((int32_t *)b.h)[i] = v < hi ? v : hi - 1;
    }
    upload(&b);
    return b;
}

static void buf_free(Buf *b)
{
    free(b->h);
    free_cuda(b->d);
    b->h = b->d = NULL;
}

/* The elements of b from `by` on, a view sharing b's memory (free b, not
 * the view). by = 1 moves a tensor off the 16-byte alignment that the
 * packed kernels need, to check their element-at-a-time path. */
static Buf buf_from(const Buf *b, int64_t by)
{
    size_t es = ops_dtype_size(b->dt);
    Buf v = { b->dt, b->n - by, (char *)b->h + by * es, (char *)b->d + by * es };
    return v;
}

/* The device copy, downloaded raw. */
static void *download(const Buf *b)
{
    void *p = xmalloc(bytes_of(b));
    copy_cuda(p, OPS_CPU, b->d, OPS_CUDA, bytes_of(b));
    return p;
}

/* max |gpu - cpu| / max |cpu| over the buffer (NaN counts as failure). */
static double normwise(const Buf *b)
{
    void *g = download(b);
    double diff = 0.0, scale = 0.0;
    for (int64_t i = 0; i < b->n; i++) {
        double c = load_f32_cpu(b->h, b->dt, i), x = load_f32_cpu(g, b->dt, i);
        double d = fabs(x - c);
        if (!(d <= diff))
            diff = d; /* NaN sticks */
        if (fabs(c) > scale)
            scale = fabs(c);
    }
    free(g);
    return diff / (scale > 0.0 ? scale : 1.0);
}

static int bitwise(const Buf *b)
{
    void *g = download(b);
    int same = memcmp(g, b->h, bytes_of(b)) == 0;
    free(g);
    return same;
}

/* Checks buffer b, named `what`, of an op run in dtype run_dt. */
static void expect(const char *op, ops_dtype run_dt, const char *what,
                   const Buf *b)
{
    double err = normwise(b);
    double t = tol(b->dt);
    CHECK(err <= t, "%s %s: %s (%s) max err %.2e (tol %.0e)", op,
           ops_dtype_name(run_dt), what, ops_dtype_name(b->dt), err, t);
}

/* ---- memory and casts --------------------------------------------------- */

static void test_memory(void)
{
    Buf a = buf_rand(OPS_F32, 1000, -1.0f, 1.0f);
    Buf z = buf_zero(OPS_F32, 1000);
    int zeroed = bitwise(&z); /* alloc_cuda fills zeros */
    void *d2 = alloc_cuda(bytes_of(&a));
    copy_cuda(d2, OPS_CUDA, a.d, OPS_CUDA, bytes_of(&a));
    float *back = xmalloc(bytes_of(&a));
    copy_cuda(back, OPS_CPU, d2, OPS_CUDA, bytes_of(&a));
    int same = memcmp(back, a.h, bytes_of(&a)) == 0;
    zero_cuda(d2, bytes_of(&a));
    copy_cuda(back, OPS_CPU, d2, OPS_CUDA, bytes_of(&a));
    int cleared = 1;
    for (int i = 0; i < 1000; i++)
        cleared = cleared && back[i] == 0.0f;
    CHECK(zeroed && same && cleared,
           "alloc zero-fills; host->device->device->host copies; zero_cuda");
    free(back);
    free_cuda(d2);
    buf_free(&a);
    buf_free(&z);
}

/* ops_alloc_host near the GPU (pinned): zero-filled, and a download into
 * it through ops_copy (the asynchronous checkpoint's snapshot) is exact. */
static void test_pinned(void)
{
    Buf a = buf_rand(OPS_F32, 1000, -1.0f, 1.0f);
    ops_tensor host = ops_alloc_host(OPS_F32, 1000, OPS_CUDA);
    int zeroed = 1;
    for (int i = 0; i < 1000; i++)
        zeroed = zeroed && ((float *)host.data)[i] == 0.0f;
    ops_copy(host, (ops_tensor){a.d, 1000, OPS_F32, OPS_CUDA});
    int same = memcmp(host.data, a.h, bytes_of(&a)) == 0;
    CHECK(host.device == OPS_CPU && zeroed && same,
          "ops_alloc_host(near CUDA): host memory, zero-filled; a download into it is exact");
    ops_free_host(&host, OPS_CUDA);
    buf_free(&a);
}

/* ops_copy_rows on the device against copy_rows_cpu: a batch of rows of
 * T+1 tokens (GPT-2's T, 8 rows) split into inputs and targets, exact. */
static void test_copy_rows(void)
{
    const int64_t rows = 8, T = 1024, n = rows * (T + 1);
    int32_t *host = xmalloc((size_t)n * sizeof *host);
    int32_t *want = xmalloc((size_t)(rows * T) * sizeof *want);
    int32_t *got = xmalloc((size_t)(rows * T) * sizeof *got);
    for (int64_t i = 0; i < n; i++)
        host[i] = (int32_t)((i * 2654435761u) % 50304);
    ops_tensor batch = ops_alloc(OPS_I32, OPS_CUDA, n);
    ops_tensor split = ops_alloc(OPS_I32, OPS_CUDA, rows * T);
    ops_copy(batch, (ops_tensor){host, n, OPS_I32, OPS_CPU});
    int same = 1;
    for (int shift = 0; shift <= 1; shift++) { /* inputs, then targets */
        ops_copy_rows(split, ops_view(batch, shift, n - shift), rows, T, T + 1);
        ops_copy((ops_tensor){got, rows * T, OPS_I32, OPS_CPU}, split);
        copy_rows_cpu(want, host + shift, rows, (size_t)T * sizeof *want,
                      (size_t)(T + 1) * sizeof *want);
        same = same && memcmp(got, want, (size_t)(rows * T) * sizeof *want) == 0;
    }
    CHECK(same, "ops_copy_rows on the GPU: a batch's inputs and targets, as the CPU's");
    ops_free(&batch);
    ops_free(&split);
    free(host);
    free(want);
    free(got);
}

static void test_casts(void)
{
    /* the edges: signed zeros, inf, NaN, fp16 overflow (65520) and its
     * subnormals, bf16 ties, then random values over a wide range */
    static const float edge[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN,
        65504.0f, 65519.0f, 65520.0f, -70000.0f, 5.9604644775390625e-8f,
        2.98e-8f, 2.99e-8f, 6.1e-5f, 1.00390625f, 1.01171875f, 3.4e38f,
        1e-40f, -1e-45f };
    const int64_t ne = (int64_t)(sizeof edge / sizeof edge[0]), n = 4096;
    Buf src = buf_zero(OPS_F32, n);
    for (int64_t i = 0; i < n; i++) {
        float v = i < ne ? edge[i] : uniform(-1.0f, 1.0f) * exp2f(uniform(-30.0f, 20.0f));
        ((float *)src.h)[i] = v;
    }
    upload(&src);
    for (int k = 1; k < 3; k++) {
        ops_dtype low = dtypes[k];
        Buf to = buf_zero(low, n), back = buf_zero(OPS_F32, n);
        cast_cpu(to.h, low, src.h, OPS_F32, n);
        cast_cuda(to.d, low, src.d, OPS_F32, n);
        cast_cpu(back.h, OPS_F32, to.h, low, n);
        cast_cuda(back.d, OPS_F32, to.d, low, n);
        ops_dtype other = low == OPS_BF16 ? OPS_F16 : OPS_BF16;
        Buf cross = buf_zero(other, n);
        cast_cpu(cross.h, other, to.h, low, n);
        cast_cuda(cross.d, other, to.d, low, n);
        CHECK(bitwise(&to) && bitwise(&back) && bitwise(&cross),
               "cast fp32 -> %s -> fp32 and -> %s: bit-identical to the CPU",
               ops_dtype_name(low), ops_dtype_name(other));
        buf_free(&to);
        buf_free(&back);
        buf_free(&cross);
    }
    buf_free(&src);
}

/* ---- dense layers ---------------------------------------------------------- */

static void test_matmul_case(ops_dtype dt, int M, int N, int K, int f32_ends)
{
    ops_dtype odt = f32_ends ? OPS_F32 : dt; /* the LM head's fp32 logits */
    const char *op = f32_ends ? "matmul (fp32 out, fp32 dout)" : "matmul";
    Buf inp = buf_rand(dt, (int64_t)M * K, -1.0f, 1.0f);
    Buf w = buf_rand(dt, (int64_t)N * K, -0.5f, 0.5f);
    Buf bias = buf_rand(dt, N, -1.0f, 1.0f);
    Buf out = buf_zero(odt, (int64_t)M * N);
    matmul_fwd_cpu(out.h, odt, inp.h, w.h, bias.h, dt, M, N, K);
    matmul_fwd_cuda(out.d, odt, inp.d, w.d, bias.d, dt, M, N, K);
    expect(op, dt, "fwd out", &out);

    Buf dout = buf_rand(odt, (int64_t)M * N, -1.0f, 1.0f);
    Buf dinp = buf_zero(dt, (int64_t)M * K);
    Buf dw = buf_rand(OPS_F32, (int64_t)N * K, -1.0f, 1.0f); /* += */
    Buf dbias = buf_rand(OPS_F32, N, -1.0f, 1.0f);
    matmul_bwd_cpu(dinp.h, dw.h, dbias.h, dout.h, odt, inp.h, w.h, dt, M, N, K);
    matmul_bwd_cuda(dinp.d, dw.d, dbias.d, dout.d, odt, inp.d, w.d, dt, M, N, K);
    expect(op, dt, "bwd dinp", &dinp);
    expect(op, dt, "bwd dw (+=)", &dw);
    expect(op, dt, "bwd dbias (+=)", &dbias);
    Buf *all[] = { &inp, &w, &bias, &out, &dout, &dinp, &dw, &dbias };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

static void test_matmul(ops_dtype dt, int big)
{
    test_matmul_case(dt, 37, 45, 29, 0);
    if (big) {
        /* dbias over 8209 rows: 249 chunks of 33, the last one short */
        test_matmul_case(dt, 8209, 96, 64, 0);
        /* the LM heads of GPT-2 and Llama 3 (fp32 logits): 3.2M and 4.1M
         * outputs, the column sums over 64 and 32 rows */
        test_matmul_case(dt, 64, 50304, 256, 1);
        test_matmul_case(dt, 32, 128256, 128, 1);
    }
    if (dt == OPS_F32)
        return;
    test_matmul_case(dt, 37, 45, 29, 1);
    /* dlogits wider than one rounded block (2^24 elements) */
    test_matmul_case(dt, 2048, 8448, 32, 1);
}

/* ---- cuBLASLt epilogues (gemm_lt_cuda.cu) ---------------------------------- */

static const lt_epilogue_mode lt_modes[] = { LT_EPILOGUE_NONE, LT_EPILOGUE_BIAS,
                                             LT_EPILOGUE_ALL };

/* fused's device copy against other's device copy (the unfused kernels),
 * normwise, at fused's dtype's tolerance. */
static void expect_same_run(const char *op, ops_dtype run_dt, const char *what,
                            const Buf *fused, const Buf *other)
{
    Buf ref = { fused->dt, fused->n, download(other), fused->d };
    expect(op, run_dt, what, &ref);
    free(ref.h);
}

/* GPT-2's MLP: fc with its GELU (M,N from K), and the MLP down's backward
 * into the GELU's gradient (M,K from N), each in every
 * TRIDENT_LT_EPILOGUE mode against the CPU's unfused ops; the fused runs
 * (all) also against the GPU's unfused kernels (none), and counted, so a
 * silent fallback to the unfused path fails. */
static void test_lt_mlp(ops_dtype dt, int M, int N, int K)
{
    Buf inp = buf_rand(dt, (int64_t)M * K, -1.0f, 1.0f);
    Buf w = buf_rand(dt, (int64_t)N * K, -0.5f, 0.5f);
    Buf bias = buf_rand(dt, N, -1.0f, 1.0f);
    Buf dout = buf_rand(dt, (int64_t)M * K, -1.0f, 1.0f);
    Buf w2 = buf_rand(dt, (int64_t)K * N, -0.5f, 0.5f);
    Buf dw0 = buf_rand(OPS_F32, (int64_t)K * N, -1.0f, 1.0f), db0 = buf_rand(OPS_F32, K, -1.0f, 1.0f);
    Buf pre[3], out[3], dinp[3], dw[3], db[3];
    for (int i = 0; i < 3; i++) {
        pre[i] = buf_zero(dt, (int64_t)M * N);
        out[i] = buf_zero(dt, (int64_t)M * N);
        dinp[i] = buf_zero(dt, (int64_t)M * N);
        dw[i] = buf_from(&dw0, 0);
        dw[i].d = alloc_cuda(bytes_of(&dw0));
        copy_cuda(dw[i].d, OPS_CUDA, dw0.d, OPS_CUDA, bytes_of(&dw0));
        db[i] = buf_from(&db0, 0);
        db[i].d = alloc_cuda(bytes_of(&db0));
        copy_cuda(db[i].d, OPS_CUDA, db0.d, OPS_CUDA, bytes_of(&db0));
    }
    /* the CPU's unfused ops into the host copies of mode none's buffers */
    matmul_fwd_cpu(pre[0].h, dt, inp.h, w.h, bias.h, dt, M, N, K);
    gelu_fwd_cpu(out[0].h, pre[0].h, dt, (int64_t)M * N);
    matmul_bwd_cpu(dinp[0].h, dw0.h, db0.h, dout.h, dt, out[0].h, w2.h, dt, M, K, N);
    gelu_bwd_cpu(dinp[0].h, pre[0].h, dinp[0].h, dt, (int64_t)M * N);
    lt_epilogue_mode was = lt_epilogue_cuda();
    for (int i = 0; i < 3; i++) {
        lt_epilogue_set_cuda(lt_modes[i]);
        int64_t fused = lt_fused_count_cuda();
        matmul_gelu_fwd_cuda(out[i].d, pre[i].d, inp.d, w.d, bias.d, dt, M, N, K);
        matmul_dgelu_bwd_cuda(dinp[i].d, (float *)dw[i].d, (float *)db[i].d, dout.d, out[i].d,
                              w2.d, pre[i].d, dt, M, K, N);
        fused = lt_fused_count_cuda() - fused;
        char op[96];
        snprintf(op, sizeof op, "lt_epilogue=%s mlp %dx%dx%d", lt_epilogue_name(lt_modes[i]),
                 M, N, K);
        Buf got[] = { pre[i], out[i], dinp[i], dw[i], db[i] };
        void *cpu[] = { pre[0].h, out[0].h, dinp[0].h, dw0.h, db0.h };
        const char *names[] = { "fc pre", "gelu out", "dgelu dinp", "dw (+=)", "dbias (+=)" };
        for (int j = 0; j < 5; j++) {
            got[j].h = cpu[j];
            expect(op, dt, names[j], &got[j]);
        }
        /* none: 0 fused; bias: the forward's bias and the bias gradient;
         * all: the GELU GEMM and the dGELU GEMM too (bias folded in) */
        int64_t want = lt_modes[i] == LT_EPILOGUE_NONE ? 0 : lt_modes[i] == LT_EPILOGUE_BIAS ? 2 : 3;
        CHECK(fused == want, "%s: %lld GEMMs fused (want %lld)", op, (long long)fused,
              (long long)want);
    }
    lt_epilogue_set_cuda(was);
    expect_same_run("lt_epilogue=all vs none (GPU)", dt, "gelu out", &out[2], &out[0]);
    expect_same_run("lt_epilogue=all vs none (GPU)", dt, "dgelu dinp", &dinp[2], &dinp[0]);
    expect_same_run("lt_epilogue=bias vs none (GPU)", dt, "fc pre (bias)", &pre[1], &pre[0]);
    expect_same_run("lt_epilogue=bias vs none (GPU)", dt, "dbias", &db[1], &db[0]);
    for (int i = 0; i < 3; i++) {
        Buf *own[] = { &pre[i], &out[i], &dinp[i] };
        for (int j = 0; j < 3; j++)
            buf_free(own[j]);
        free_cuda(dw[i].d);
        free_cuda(db[i].d);
    }
    Buf *all[] = { &inp, &w, &bias, &dout, &w2, &dw0, &db0 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* The epilogue's GELU against elem.h's, which the CPU and the unfused
 * kernels use: pre = x exactly (x in the first column of inp, ones in
 * w's), x over [-10, 10] in fp32; the largest difference, relative to
 * max(|gelu|, 1), of GELU and of its derivative is printed for the GPU
 * session. It must be the tanh form (within 1e-4: erf's GELU differs by
 * about 4e-4), else TRIDENT_LT_EPILOGUE=all computes another function;
 * within round-off (1e-6, a few fp32 ulps) the issue would fuse GELU by
 * default, which the line says (the default is bias: cuda.h). */
static void test_lt_gelu_formula(void)
{
    enum { M = 4096, W = 8 };
    Buf inp = buf_zero(OPS_F32, (int64_t)M * W), w = buf_zero(OPS_F32, W * W);
    Buf first = buf_zero(OPS_F32, (int64_t)M * W); /* each row (1, 0, ..., 0) */
    for (int i = 0; i < M; i++)
        ((float *)inp.h)[(int64_t)i * W] = -10.0f + 20.0f * (float)i / (M - 1);
    for (int j = 0; j < W; j++)
        ((float *)w.h)[j * W] = 1.0f;
    for (int i = 0; i < M; i++)
        ((float *)first.h)[(int64_t)i * W] = 1.0f;
    upload(&inp);
    upload(&w);
    upload(&first);
    Buf pre = buf_zero(OPS_F32, (int64_t)M * W), out = buf_zero(OPS_F32, (int64_t)M * W);
    Buf grad = buf_zero(OPS_F32, (int64_t)M * W);
    lt_epilogue_mode was = lt_epilogue_cuda();
    lt_epilogue_set_cuda(LT_EPILOGUE_ALL);
    int64_t fused = lt_fused_count_cuda();
    matmul_gelu_fwd_cuda(out.d, pre.d, inp.d, w.d, NULL, OPS_F32, M, W, W);
    /* (first . w) is w's row 0, (1, 0, ..., 0): grad = gelu'(pre) in column 0 */
    matmul_dgelu_bwd_cuda(grad.d, NULL, NULL, first.d, NULL, w.d, pre.d, OPS_F32, M, W, W);
    fused = lt_fused_count_cuda() - fused;
    lt_epilogue_set_cuda(was);
    float *g_pre = (float *)download(&pre), *g_out = (float *)download(&out);
    float *g_grad = (float *)download(&grad);
    double worst_f = 0.0, worst_b = 0.0, at_f = 0.0, at_b = 0.0;
    int exact_pre = 1;
    for (int i = 0; i < M; i++) {
        int64_t k = (int64_t)i * W;
        float x = ((float *)inp.h)[k], ref_f, ref_b, one = 1.0f;
        exact_pre = exact_pre && g_pre[k] == x;
        gelu_fwd_cpu(&ref_f, &x, OPS_F32, 1);
        gelu_bwd_cpu(&ref_b, &x, &one, OPS_F32, 1);
        double ef = fabs(g_out[k] - ref_f) / fmax(fabs(ref_f), 1.0);
        double eb = fabs(g_grad[k] - ref_b) / fmax(fabs(ref_b), 1.0);
        if (!(ef <= worst_f)) {
            worst_f = ef;
            at_f = x;
        }
        if (!(eb <= worst_b)) {
            worst_b = eb;
            at_b = x;
        }
    }
    tap_diag("cuBLASLt GELU vs elem.h: fwd max diff %.2e at x = %.3f, derivative %.2e at "
             "x = %.3f (relative to max(|value|, 1))", worst_f, at_f, worst_b, at_b);
    CHECK(fused == 2 && exact_pre, "cuBLASLt GELU and dGELU epilogues ran (%lld of 2), pre "
          "is x exactly", (long long)fused);
    CHECK(worst_f <= 1e-4 && worst_b <= 1e-4, "cuBLASLt's GELU is the tanh form, elem.h's: fwd "
          "%.2e, derivative %.2e (tol 1e-4; erf's is about 4e-4 off)", worst_f, worst_b);
    tap_diag("cuBLASLt's GELU %s elem.h's to round-off (1e-6): %s", worst_f <= 1e-6 &&
             worst_b <= 1e-6 ? "is" : "is not", worst_f <= 1e-6 && worst_b <= 1e-6 ?
             "TRIDENT_LT_EPILOGUE=all could be the default (cuda.h)" : "bias stays the default");
    free(g_pre);
    free(g_out);
    free(g_grad);
    Buf *all[] = { &inp, &w, &first, &pre, &out, &grad };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* What a cuBLASLt status means for a fused GEMM (lt_status_verdict):
 * needs no GPU. The statuses by number, as cublas_api.h has them. */
static void test_lt_verdict(void)
{
    int runs = lt_status_verdict(0 /* SUCCESS */) == LT_RUNS;
    int falls_back = lt_status_verdict(15 /* NOT_SUPPORTED */) == LT_FALLS_BACK &&
                     lt_status_verdict(7 /* INVALID_VALUE */) == LT_FALLS_BACK &&
                     lt_status_verdict(8 /* ARCH_MISMATCH */) == LT_FALLS_BACK;
    int fatal = lt_status_verdict(1 /* NOT_INITIALIZED */) == LT_FATAL &&
                lt_status_verdict(3 /* ALLOC_FAILED */) == LT_FATAL &&
                lt_status_verdict(13 /* EXECUTION_FAILED */) == LT_FATAL &&
                lt_status_verdict(14 /* INTERNAL_ERROR */) == LT_FATAL;
    CHECK(runs && falls_back && fatal, "cuBLASLt statuses: SUCCESS runs; NOT_SUPPORTED, "
          "INVALID_VALUE and ARCH_MISMATCH fall back to the unfused kernels; the rest are fatal");
}

/* TRIDENT_LT_EPILOGUE's mode follows the switch's word (the no-GPU run
 * sets bias, a GPU session's environment says): needs no GPU. */
static void test_lt_parse(void)
{
    int ok = (lt_epilogue_switch() == LT_EPILOGUE_NONE) ==
                 ops_switch_is(OPS_SWITCH_LT_EPILOGUE, "none") &&
             (lt_epilogue_switch() == LT_EPILOGUE_BIAS) ==
                 ops_switch_is(OPS_SWITCH_LT_EPILOGUE, "bias") &&
             (lt_epilogue_switch() == LT_EPILOGUE_ALL) ==
                 ops_switch_is(OPS_SWITCH_LT_EPILOGUE, "all");
    CHECK(ok, "TRIDENT_LT_EPILOGUE: the mode is the switch's word, %s (switches.h parses it; "
          "t_switch_parse)", lt_epilogue_name(lt_epilogue_switch()));
}

/* ---- elementwise ----------------------------------------------------------- */

/* n elements from element `shift` of their buffers: 0 takes 16-byte packs
 * and the n % 8 (or % 4) left one at a time, 1 one at a time throughout. */
static void test_elementwise(ops_dtype dt, int64_t n, int shift)
{
    tap_diag("elementwise %s: n %lld from element %d", ops_dtype_name(dt), (long long)n, shift);
    Buf x0 = buf_rand(dt, n + shift, -4.0f, 4.0f), y0 = buf_rand(dt, n + shift, -1.0f, 1.0f);
    Buf out0 = buf_zero(dt, n + shift);
    Buf x = buf_from(&x0, shift), y = buf_from(&y0, shift), out = buf_from(&out0, shift);
    gelu_fwd_cpu(out.h, x.h, dt, n);
    gelu_fwd_cuda(out.d, x.d, dt, n);
    expect("gelu_fwd", dt, "out", &out);
    /* in place over dout, as ops.h allows */
    memcpy(out.h, y.h, bytes_of(&y));
    upload(&out);
    gelu_bwd_cpu(out.h, x.h, out.h, dt, n);
    gelu_bwd_cuda(out.d, x.d, out.d, dt, n);
    expect("gelu_bwd (dinp = dout)", dt, "dinp", &out);
    add_cpu(out.h, x.h, y.h, dt, n);
    add_cuda(out.d, x.d, y.d, dt, n);
    expect("add", dt, "out", &out);
    accumulate_cpu(out.h, y.h, dt, n);
    accumulate_cuda(out.d, y.d, dt, n);
    expect("accumulate", dt, "y", &out);
    scale_cpu(out.h, 0.375f, dt, n);
    scale_cuda(out.d, 0.375f, dt, n);
    expect("scale", dt, "x", &out);
    clip_value_cpu(out.h, 1.0f, dt, n);
    clip_value_cuda(out.d, 1.0f, dt, n);
    expect("clip_value", dt, "x", &out);

    for (int square = 0; square < 2; square++) {
        double cpu = 0.25, gpu[2];
        if (square)
            sumsq_accumulate_cpu(&cpu, x.h, dt, n);
        else
            sum_accumulate_cpu(&cpu, x.h, dt, n);
        double *acc = alloc_cuda(sizeof(double));
        for (int run = 0; run < 2; run++) {
            double start = 0.25;
            copy_cuda(acc, OPS_CUDA, &start, OPS_CPU, sizeof start);
            if (square)
                sumsq_accumulate_cuda(acc, x.d, dt, n);
            else
                sum_accumulate_cuda(acc, x.d, dt, n);
            copy_cuda(&gpu[run], OPS_CPU, acc, OPS_CUDA, sizeof(double));
        }
        free_cuda(acc);
        double rel = fabs(gpu[0] - cpu) / (fabs(cpu) > 1.0 ? fabs(cpu) : 1.0);
        CHECK(rel <= 1e-10 && memcmp(&gpu[0], &gpu[1], sizeof(double)) == 0,
               "%s %s: %.17g vs CPU %.17g (rel %.1e), same bits twice",
               square ? "sumsq_accumulate" : "sum_accumulate",
               ops_dtype_name(dt), gpu[0], cpu, rel);
    }
    /* a non-finite element makes the sum of squares non-finite */
    store_f32_cpu(x.h, dt, n / 2, INFINITY);
    upload(&x);
    double *acc = alloc_cuda(sizeof(double)), got = 0.0;
    sumsq_accumulate_cuda(acc, x.d, dt, n);
    copy_cuda(&got, OPS_CPU, acc, OPS_CUDA, sizeof got);
    free_cuda(acc);
    CHECK(!isfinite(got), "sumsq_accumulate %s: an inf element gives %g",
           ops_dtype_name(dt), got);
    buf_free(&x0);
    buf_free(&y0);
    buf_free(&out0);
}

/* ---- LayerNorm ------------------------------------------------------------- */

/* The rows of inp, out, dout and dinp from element `shift` of their
 * buffers: 0 with C a multiple of 8 (4 in fp32) takes 16-byte packs, 1
 * or another C a channel at a time. */
static void test_layernorm(ops_dtype dt, int N, int C, int shift)
{
    tap_diag("layernorm %s: N %d, C %d, from element %d", ops_dtype_name(dt), N, C, shift);
    int64_t n = (int64_t)N * C;
    Buf inp0 = buf_rand(dt, n + shift, -2.0f, 3.0f);
    Buf w = buf_rand(dt, C, 0.5f, 1.5f), b = buf_rand(dt, C, -0.5f, 0.5f);
    Buf out0 = buf_zero(dt, n + shift);
    Buf mean = buf_zero(OPS_F32, N), rstd = buf_zero(OPS_F32, N);
    Buf inp = buf_from(&inp0, shift), out = buf_from(&out0, shift);
    layernorm_fwd_cpu(out.h, mean.h, rstd.h, inp.h, w.h, b.h, dt, N, C);
    layernorm_fwd_cuda(out.d, mean.d, rstd.d, inp.d, w.d, b.d, dt, N, C);
    expect("layernorm_fwd", dt, "out", &out);
    expect("layernorm_fwd", dt, "mean", &mean);
    expect("layernorm_fwd", dt, "rstd", &rstd);
    /* each side's backward pass reads its own statistics */
    Buf dout0 = buf_rand(dt, n + shift, -1.0f, 1.0f);
    Buf dinp0 = buf_rand(dt, n + shift, -1.0f, 1.0f); /* += */
    Buf dout = buf_from(&dout0, shift), dinp = buf_from(&dinp0, shift);
    Buf dw = buf_rand(OPS_F32, C, -1.0f, 1.0f), db = buf_rand(OPS_F32, C, -1.0f, 1.0f);
    layernorm_bwd_cpu(dinp.h, dw.h, db.h, dout.h, inp.h, w.h, mean.h, rstd.h,
                      dt, N, C);
    layernorm_bwd_cuda(dinp.d, dw.d, db.d, dout.d, inp.d, w.d, mean.d, rstd.d,
                       dt, N, C);
    expect("layernorm_bwd", dt, "dinp (+=)", &dinp);
    expect("layernorm_bwd", dt, "dw (+=)", &dw);
    expect("layernorm_bwd", dt, "db (+=)", &db);
    Buf *all[] = { &inp0, &w, &b, &out0, &mean, &rstd, &dout0, &dinp0, &dw, &db };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* ---- Llama: RMSNorm, rotary embeddings, SwiGLU, grouped-query heads ------ */

/* hs: the head size of the rotary and grouped-query checks (C / hs heads). */
static void test_llama(ops_dtype dt, int N, int C, int hs)
{
    Buf inp = buf_rand(dt, (int64_t)N * C, -2.0f, 3.0f), w = buf_rand(dt, C, 0.5f, 1.5f);
    Buf out = buf_zero(dt, (int64_t)N * C), rstd = buf_zero(OPS_F32, N);
    rmsnorm_fwd_cpu(out.h, rstd.h, inp.h, w.h, dt, N, C, 1e-5f);
    rmsnorm_fwd_cuda(out.d, rstd.d, inp.d, w.d, dt, N, C, 1e-5f);
    expect("rmsnorm_fwd", dt, "out", &out);
    expect("rmsnorm_fwd", dt, "rstd", &rstd);
    Buf dout = buf_rand(dt, (int64_t)N * C, -1.0f, 1.0f);
    Buf dinp = buf_rand(dt, (int64_t)N * C, -1.0f, 1.0f), dw = buf_rand(OPS_F32, C, -1.0f, 1.0f);
    rmsnorm_bwd_cpu(dinp.h, dw.h, dout.h, inp.h, w.h, rstd.h, dt, N, C);
    rmsnorm_bwd_cuda(dinp.d, dw.d, dout.d, inp.d, w.d, rstd.d, dt, N, C);
    expect("rmsnorm_bwd", dt, "dinp (+=)", &dinp);
    expect("rmsnorm_bwd", dt, "dw (+=)", &dw);

    /* rotary: N rows as B = 1, T = N positions of C / hs heads of hs, from
     * position 0, then from 3000 (a context-parallel rank's chunk) */
    Buf x = buf_rand(dt, (int64_t)N * C, -1.0f, 1.0f);
    static const int first[] = { 0, 3000 };
    for (int f = 0; f < 2; f++)
        for (int inverse = 0; inverse < 2; inverse++) {
            char op[64];
            snprintf(op, sizeof op, "rope_%s t0=%d", inverse ? "bwd" : "fwd", first[f]);
            rope_cpu(x.h, dt, 1, N, first[f], C / hs, hs, 500000.0, inverse);
            rope_cuda(x.d, dt, 1, N, first[f], C / hs, hs, 500000.0, inverse);
            expect(op, dt, inverse ? "dx" : "x", &x);
        }

    int64_t n = (int64_t)N * C;
    Buf gate = buf_rand(dt, n, -4.0f, 4.0f), up = buf_rand(dt, n, -2.0f, 2.0f);
    Buf h = buf_zero(dt, n), dg = buf_zero(dt, n), du = buf_zero(dt, n);
    swiglu_fwd_cpu(h.h, gate.h, up.h, dt, n);
    swiglu_fwd_cuda(h.d, gate.d, up.d, dt, n);
    expect("swiglu_fwd", dt, "out", &h);
    swiglu_bwd_cpu(dg.h, du.h, dout.h, gate.h, up.h, dt, n);
    swiglu_bwd_cuda(dg.d, du.d, dout.d, gate.d, up.d, dt, n);
    expect("swiglu_bwd", dt, "dgate", &dg);
    expect("swiglu_bwd", dt, "dup", &du);

    /* grouped-query heads: C / hs query heads over 2 key/value heads */
    int NH = C / hs, NKV = 2;
    int64_t nq = (int64_t)N * NH * hs, nk = (int64_t)N * NKV * hs;
    Buf q = buf_rand(dt, nq, -1.0f, 1.0f), k = buf_rand(dt, nk, -1.0f, 1.0f);
    Buf v = buf_rand(dt, nk, -1.0f, 1.0f), qkv = buf_zero(dt, 3 * nq);
    gqa_expand_cpu(qkv.h, q.h, k.h, v.h, dt, N, NH, NKV, hs);
    gqa_expand_cuda(qkv.d, q.d, k.d, v.d, dt, N, NH, NKV, hs);
    CHECK(bitwise(&qkv), "gqa_expand %s: qkv bitwise", ops_dtype_name(dt));
    Buf dqkv = buf_rand(dt, 3 * nq, -1.0f, 1.0f);
    Buf dq = buf_zero(dt, nq), dk = buf_zero(dt, nk), dv = buf_zero(dt, nk);
    gqa_reduce_cpu(dq.h, dk.h, dv.h, dqkv.h, dt, N, NH, NKV, hs);
    gqa_reduce_cuda(dq.d, dk.d, dv.d, dqkv.d, dt, N, NH, NKV, hs);
    CHECK(bitwise(&dq) && bitwise(&dk) && bitwise(&dv),
          "gqa_reduce %s: dq, dk, dv bitwise (the group summed in the same order)",
          ops_dtype_name(dt));
    Buf *all[] = { &inp, &w, &out, &rstd, &dout, &dinp, &dw, &x, &gate, &up, &h, &dg, &du,
                   &q, &k, &v, &qkv, &dqkv, &dq, &dk, &dv };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* ---- attention ------------------------------------------------------------- */

typedef void (*attention_fwd_fn)(void *, float *, const void *, ops_dtype, int, int, int, int);
typedef void (*attention_bwd_fn)(void *, const void *, const void *, const void *,
                                 const float *, ops_dtype, int, int, int, int);

/* Both GPU kernels, the fused one the trainer runs and the exact one it
 * is checked against, against the CPU's fused twin. The fused kernel
 * makes the CPU's roundings (inputs widened, one rounding per store), so
 * expect()'s tolerances hold as for any op; the exact one also rounds P
 * and dS to D before its second GEMMs (attention_exact_cuda.cu), the size
 * of the output's own rounding, which the 16-bit tolerances cover. The
 * fused backward must also give the same bits twice (no atomics). Shapes
 * cover a ragged last tile (T = 37, 100: not multiples of the 16, 8 and
 * 32-row tiles) and each template bucket of head sizes: 16 and 32 in the
 * 32 bucket, 64 in 64's, 80 and 128 in 128's (80 with dimensions past hs
 * zero). */
static void test_attention(ops_dtype dt, int B, int T, int NH, int hs)
{
    static const struct {
        const char *name;
        attention_fwd_fn fwd;
        attention_bwd_fn bwd;
    } gpu[] = { { "attention (fused)", attention_fwd_cuda, attention_bwd_cuda },
                { "attention (exact GPU)", attention_exact_fwd_cuda, attention_exact_bwd_cuda } };
    int64_t rows = (int64_t)B * T;
    Buf qkv = buf_rand(dt, rows * NH * 3 * hs, -1.0f, 1.0f);
    Buf out = buf_zero(dt, rows * NH * hs), lse = buf_zero(OPS_F32, rows * NH);
    Buf dout = buf_rand(dt, rows * NH * hs, -1.0f, 1.0f);
    Buf dqkv = buf_zero(dt, rows * NH * 3 * hs);
    attention_rows_fwd_cpu(out.h, lse.h, qkv.h, dt, B, T, 0, T, NH, hs);
    attention_rows_bwd_cpu(dqkv.h, dout.h, qkv.h, out.h, lse.h, dt, B, T, 0, T, NH, hs, 0);
    for (size_t k = 0; k < sizeof gpu / sizeof gpu[0]; k++) {
        char op[96];
        snprintf(op, sizeof op, "%s B=%d T=%d NH=%d hs=%d", gpu[k].name, B, T, NH, hs);
        gpu[k].fwd(out.d, lse.d, qkv.d, dt, B, T, NH, hs);
        expect(op, dt, "fwd out", &out);
        expect(op, dt, "fwd lse", &lse);
        /* the backward from the CPU's out and lse: each kernel judged alone */
        upload(&out);
        upload(&lse);
        Buf noise = buf_rand(dt, dqkv.n, -9.0f, 9.0f); /* dqkv is overwritten */
        copy_cuda(dqkv.d, OPS_CUDA, noise.d, OPS_CUDA, bytes_of(&dqkv));
        buf_free(&noise);
        gpu[k].bwd(dqkv.d, dout.d, qkv.d, out.d, lse.d, dt, B, T, NH, hs);
        expect(op, dt, "bwd dqkv", &dqkv);
        if (k > 0)
            continue;
        void *first = download(&dqkv);
        gpu[k].bwd(dqkv.d, dout.d, qkv.d, out.d, lse.d, dt, B, T, NH, hs);
        void *again = download(&dqkv);
        CHECK(memcmp(first, again, bytes_of(&dqkv)) == 0,
              "%s %s: bwd gives the same bits twice", op, ops_dtype_name(dt));
        free(first);
        free(again);
    }
    Buf *all[] = { &qkv, &out, &lse, &dout, &dqkv };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

#if TRI_HAVE_CUDNN
/* cuDNN's fused attention (attention_cudnn_cuda.cu) against the CPU's
 * fused twin at expect()'s 16-bit tolerances: out, lse (cuDNN's Stats must
 * be trident's natural-log log-sum-exp of the scaled scores) and, from the
 * CPU's out and lse, dqkv; its deterministic backward gives the same bits
 * twice; attention_fwd_cuda/bwd_cuda run it under the cuDNN route (the
 * same bits as the direct call); and a second step of the shape, its graph
 * and workspace cached, allocates nothing. */
static void test_attention_cudnn(ops_dtype dt, int B, int T, int NH, int hs)
{
    int64_t rows = (int64_t)B * T;
    Buf qkv = buf_rand(dt, rows * NH * 3 * hs, -1.0f, 1.0f);
    Buf out = buf_zero(dt, rows * NH * hs), lse = buf_zero(OPS_F32, rows * NH);
    Buf dout = buf_rand(dt, rows * NH * hs, -1.0f, 1.0f);
    Buf dqkv = buf_zero(dt, rows * NH * 3 * hs);
    char op[96];
    snprintf(op, sizeof op, "attention (cuDNN) B=%d T=%d NH=%d hs=%d", B, T, NH, hs);
    attention_rows_fwd_cpu(out.h, lse.h, qkv.h, dt, B, T, 0, T, NH, hs);
    attention_rows_bwd_cpu(dqkv.h, dout.h, qkv.h, out.h, lse.h, dt, B, T, 0, T, NH, hs, 0);
    int ran = attention_cudnn_fwd_cuda(out.d, (float *)lse.d, qkv.d, dt, B, T, NH, hs);
    CHECK(ran, "%s %s: cuDNN takes the forward", op, ops_dtype_name(dt));
    expect(op, dt, "fwd out", &out);
    expect(op, dt, "fwd lse", &lse);
    void *cudnn_out = download(&out);
    upload(&out);
    upload(&lse);
    Buf noise = buf_rand(dt, dqkv.n, -9.0f, 9.0f); /* dqkv is overwritten */
    copy_cuda(dqkv.d, OPS_CUDA, noise.d, OPS_CUDA, bytes_of(&dqkv));
    buf_free(&noise);
    ran = attention_cudnn_bwd_cuda(dqkv.d, dout.d, qkv.d, out.d, (float *)lse.d, dt, B, T, NH,
                                   hs);
    CHECK(ran, "%s %s: cuDNN takes the backward", op, ops_dtype_name(dt));
    expect(op, dt, "bwd dqkv", &dqkv);
    void *first = download(&dqkv);
    int64_t allocations = ops_device_allocations(OPS_CUDA);
    ops_attention_route_set(OPS_ATTENTION_CUDNN);
    attention_fwd_cuda(out.d, (float *)lse.d, qkv.d, dt, B, T, NH, hs);
    void *routed_out = download(&out);
    upload(&out);
    upload(&lse);
    attention_bwd_cuda(dqkv.d, dout.d, qkv.d, out.d, (float *)lse.d, dt, B, T, NH, hs);
    ops_attention_route_set(OPS_ATTENTION_TRIDENT);
    void *again = download(&dqkv);
    CHECK(memcmp(first, again, bytes_of(&dqkv)) == 0,
          "%s %s: bwd gives the same bits twice, and through attention_bwd_cuda", op,
          ops_dtype_name(dt));
    CHECK(memcmp(cudnn_out, routed_out, bytes_of(&out)) == 0,
          "%s %s: attention_fwd_cuda runs cuDNN under its route", op, ops_dtype_name(dt));
    CHECK(ops_device_allocations(OPS_CUDA) == allocations,
          "%s %s: a second step allocates nothing (%lld more)", op, ops_dtype_name(dt),
          (long long)(ops_device_allocations(OPS_CUDA) - allocations));
    /* the deterministic backward's workspace against B*NH*T^2 bf16, which
     * the issue's "memory linear in T" rules out (doc/gpu.md) */
    tap_diag("%s %s: cuDNN workspace fwd %lld B, bwd %lld B (B*NH*T*T*2 = %lld B)", op,
             ops_dtype_name(dt), (long long)attention_cudnn_workspace_cuda(0, dt, B, T, NH, hs),
             (long long)attention_cudnn_workspace_cuda(1, dt, B, T, NH, hs),
             (long long)B * NH * T * T * 2);
    free(first);
    free(again);
    free(cudnn_out);
    free(routed_out);
    Buf *all[] = { &qkv, &out, &lse, &dout, &dqkv };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* What cuDNN's route leaves to trident's kernel: fp32 and head sizes
 * off its multiples of 8. */
static void test_attention_cudnn_refusals(void)
{
    CHECK(!attention_cudnn_supports_cuda(OPS_F32, 64)
          && !attention_cudnn_supports_cuda(OPS_BF16, 20)
          && !attention_cudnn_supports_cuda(OPS_F16, 256)
          && attention_cudnn_supports_cuda(OPS_BF16, 64)
          && attention_cudnn_supports_cuda(OPS_F16, 128),
          "attention_cudnn_supports_cuda: bf16 and fp16, hs a multiple of 8 up to 128");
    tap_diag("attention route: %s", attention_cudnn_version_cuda());
}
#endif

/* Context parallelism's row windows: query rows [q0, q0 + Tq) of T
 * against keys [0, q0 + Tq), the GPU's fused kernels against the CPU's
 * (tolerances as expect()'s). The backward adds into a dqkv that holds
 * the same random values on both sides, from the CPU's out and lse. */
static void test_attention_rows(ops_dtype dt, int B, int T, int q0, int Tq, int NH, int hs)
{
    int64_t all = (int64_t)B * T * NH * 3 * hs, win = (int64_t)B * Tq * NH * hs;
    Buf qkv = buf_rand(dt, all, -1.0f, 1.0f), dqkv = buf_rand(dt, all, -1.0f, 1.0f);
    Buf out = buf_zero(dt, win), lse = buf_zero(OPS_F32, (int64_t)B * NH * Tq);
    Buf dout = buf_rand(dt, win, -1.0f, 1.0f);
    char op[96];
    snprintf(op, sizeof op, "attention rows [%d, %d) B=%d T=%d NH=%d hs=%d", q0, q0 + Tq, B, T,
             NH, hs);
    attention_rows_fwd_cpu(out.h, lse.h, qkv.h, dt, B, T, q0, Tq, NH, hs);
    attention_rows_fwd_cuda(out.d, lse.d, qkv.d, dt, B, T, q0, Tq, NH, hs);
    expect(op, dt, "fwd out", &out);
    expect(op, dt, "fwd lse", &lse);
    upload(&out);
    upload(&lse);
    attention_rows_bwd_cpu(dqkv.h, dout.h, qkv.h, out.h, lse.h, dt, B, T, q0, Tq, NH, hs, 1);
    attention_rows_bwd_cuda(dqkv.d, dout.d, qkv.d, out.d, lse.d, dt, B, T, q0, Tq, NH, hs, 1);
    expect(op, dt, "bwd dqkv (+=)", &dqkv);
    Buf *bufs[] = { &qkv, &dqkv, &out, &lse, &dout };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        buf_free(bufs[i]);
}

/* b's host copy := bytes (the reference of the next expect()). */
static void set_host(Buf *b, const void *bytes)
{
    memcpy(b->h, bytes, bytes_of(b));
}

/* b's device copy := bytes (the results the next expect() judges). */
static void set_device(Buf *b, const void *bytes)
{
    copy_cuda(b->d, OPS_CUDA, bytes, OPS_CPU, bytes_of(b));
}

/* At T = 4096, where the rows are long and the fused kernels' online
 * softmax runs over 128 (GPU) or 16 (CPU) key tiles: the exact CPU kernel
 * (every probability kept, fp32) against the GPU's fused and exact
 * kernels and the CPU's fused one, and the GPU's fused kernel against its
 * exact one. Tolerances as expect()'s: all compute in fp32 in different
 * orders (fp32: 1e-4 of the largest element, against reassociation over
 * 4096 terms, about sqrt(4096) 2^-24 = 4e-6), and in bf16 round each
 * stored result once, the exact GPU kernel also P and dS (2e-2, against
 * bf16's 2^-8 = 4e-3 at the top of the range). */
static void test_attention_exact(ops_dtype dt, int T, int hs)
{
    const int B = 1, NH = 1;
    int64_t n = (int64_t)B * T * NH * hs, probs = (int64_t)B * NH * T * T;
    Buf qkv = buf_rand(dt, 3 * n, -1.0f, 1.0f), dout = buf_rand(dt, n, -1.0f, 1.0f);
    Buf out = buf_zero(dt, n), dqkv = buf_zero(dt, 3 * n), lse = buf_zero(OPS_F32, B * NH * T);
    float *att = xmalloc((size_t)probs * sizeof(float));
    float *scratch = xmalloc((size_t)probs * sizeof(float));
    attention_exact_fwd_cpu(out.h, att, qkv.h, dt, B, T, NH, hs);
    attention_exact_bwd_cpu(dqkv.h, scratch, dout.h, qkv.h, att, dt, B, T, NH, hs);
    free(att);
    free(scratch);
    void *exact_out = xmalloc(bytes_of(&out)), *exact_dqkv = xmalloc(bytes_of(&dqkv));
    memcpy(exact_out, out.h, bytes_of(&out));
    memcpy(exact_dqkv, dqkv.h, bytes_of(&dqkv));

    attention_fwd_cuda(out.d, lse.d, qkv.d, dt, B, T, NH, hs);
    attention_bwd_cuda(dqkv.d, dout.d, qkv.d, out.d, lse.d, dt, B, T, NH, hs);
    expect("attention (GPU fused) vs exact CPU kernel", dt, "out", &out);
    expect("attention (GPU fused) vs exact CPU kernel", dt, "dqkv", &dqkv);
    void *fused_out = download(&out), *fused_dqkv = download(&dqkv), *fused_lse = download(&lse);

    attention_exact_fwd_cuda(out.d, lse.d, qkv.d, dt, B, T, NH, hs);
    attention_exact_bwd_cuda(dqkv.d, dout.d, qkv.d, out.d, lse.d, dt, B, T, NH, hs);
    expect("attention (GPU exact) vs exact CPU kernel", dt, "out", &out);
    expect("attention (GPU exact) vs exact CPU kernel", dt, "dqkv", &dqkv);

    /* the GPU's fused kernel against its exact one */
    void *gpu_exact[3] = { download(&out), download(&dqkv), download(&lse) };
    set_host(&out, gpu_exact[0]);
    set_host(&dqkv, gpu_exact[1]);
    set_host(&lse, gpu_exact[2]);
    set_device(&out, fused_out);
    set_device(&dqkv, fused_dqkv);
    set_device(&lse, fused_lse);
    expect("attention (GPU fused) vs GPU exact", dt, "out", &out);
    expect("attention (GPU fused) vs GPU exact", dt, "lse", &lse);
    expect("attention (GPU fused) vs GPU exact", dt, "dqkv", &dqkv);

    /* the CPU's fused kernel against the exact CPU one, its results
     * uploaded where the GPU's were */
    void *lse_h = xmalloc((size_t)B * NH * T * sizeof(float));
    void *out_f = xmalloc(bytes_of(&out)), *dqkv_f = xmalloc(bytes_of(&dqkv));
    attention_rows_fwd_cpu(out_f, lse_h, qkv.h, dt, B, T, 0, T, NH, hs);
    attention_rows_bwd_cpu(dqkv_f, dout.h, qkv.h, out_f, lse_h, dt, B, T, 0, T, NH, hs, 0);
    set_host(&out, exact_out);
    set_host(&dqkv, exact_dqkv);
    set_device(&out, out_f);
    set_device(&dqkv, dqkv_f);
    expect("attention (CPU fused) vs exact CPU kernel", dt, "out", &out);
    expect("attention (CPU fused) vs exact CPU kernel", dt, "dqkv", &dqkv);
    void *frees[] = { exact_out, exact_dqkv, fused_out, fused_dqkv, fused_lse, gpu_exact[0],
                      gpu_exact[1], gpu_exact[2], lse_h, out_f, dqkv_f };
    for (size_t i = 0; i < sizeof frees / sizeof frees[0]; i++)
        free(frees[i]);
    Buf *all[] = { &qkv, &dout, &out, &dqkv, &lse };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* ---- embeddings ------------------------------------------------------------ */

/* N = B * T tokens drawn from [0, vocab), this shard holding [v0, v0 + Vl). */
static void test_embedding(ops_dtype dt, int B, int T, int C, int v0, int Vl, int vocab)
{
    const int N = B * T;
    Buf tok = buf_tokens(N, 0, vocab);
    Buf wte = buf_rand(dt, (int64_t)Vl * C, -1.0f, 1.0f);
    Buf out = buf_rand(dt, (int64_t)N * C, -9.0f, 9.0f); /* overwritten */
    embedding_fwd_cpu(out.h, tok.h, wte.h, dt, v0, Vl, N, C);
    embedding_fwd_cuda(out.d, tok.d, wte.d, dt, v0, Vl, N, C);
    CHECK(bitwise(&out), "embedding_fwd %s: bit-identical", ops_dtype_name(dt));

    Buf dout = buf_rand(dt, (int64_t)N * C, -1.0f, 1.0f);
    Buf dwte = buf_rand(OPS_F32, (int64_t)Vl * C, -1.0f, 1.0f);
    void *before = download(&dwte);
    embedding_bwd_cpu(dwte.h, tok.h, dout.h, dt, v0, Vl, N, C);
    embedding_bwd_cuda(dwte.d, tok.d, dout.d, dt, v0, Vl, N, C);
    int same = bitwise(&dwte);
    /* again from the same start: the same bits (no atomics) */
    copy_cuda(dwte.d, OPS_CUDA, before, OPS_CPU, bytes_of(&dwte));
    embedding_bwd_cuda(dwte.d, tok.d, dout.d, dt, v0, Vl, N, C);
    CHECK(same && bitwise(&dwte), "embedding_bwd %s: dwte (+=) bit-identical "
           "to the CPU's token-order sum, twice (max err %.1e)",
           ops_dtype_name(dt), normwise(&dwte));
    free(before);

    Buf pos = buf_rand(dt, (int64_t)B * T * C, -1.0f, 1.0f);
    Buf wpe = buf_rand(dt, (int64_t)T * C, -1.0f, 1.0f);
    position_fwd_cpu(pos.h, wpe.h, dt, B, T, C);
    position_fwd_cuda(pos.d, wpe.d, dt, B, T, C);
    expect("position_fwd", dt, "out (+=)", &pos);
    Buf dpos = buf_rand(dt, (int64_t)B * T * C, -1.0f, 1.0f);
    Buf dwpe = buf_rand(OPS_F32, (int64_t)T * C, -1.0f, 1.0f);
    position_bwd_cpu(dwpe.h, dpos.h, dt, B, T, C);
    position_bwd_cuda(dwpe.d, dpos.d, dt, B, T, C);
    CHECK(bitwise(&dwpe), "position_bwd %s: dwpe (+=) bit-identical to the "
          "CPU's batch-order sum", ops_dtype_name(dt));
    Buf *all[] = { &tok, &wte, &out, &dout, &dwte, &pos, &wpe, &dpos, &dwpe };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* ---- cross-entropy ----------------------------------------------------------- */

/* N rows over this shard's [v0, v0 + Vl) of a vocabulary of V; targets
 * drawn from all of it, so some fall on other shards when Vl < V. The
 * logits from element `shift` of their buffer: 0 with Vl a multiple of 8
 * (4 in fp32) takes 16-byte packs, 1 or another Vl one element at a
 * time. With one shard (v0 = 0, Vl = V) the fused path is checked too. */
static void test_xent(ops_dtype dt, int N, int Vl, int v0, int V, int shift)
{
    tap_diag("xent %s: N %d, Vl %d, v0 %d, V %d, logits from element %d",
             ops_dtype_name(dt), N, Vl, v0, V, shift);
    const float grad_scale = 1.0f / (float)N;
    Buf tgt = buf_tokens(N, 0, V);
    Buf logits0 = buf_rand(dt, (int64_t)N * Vl + shift, -6.0f, 6.0f);
    Buf logits = buf_from(&logits0, shift);
    Buf rowmax = buf_zero(OPS_F32, N), sumexp = buf_zero(OPS_F32, N);
    Buf tl = buf_zero(OPS_F32, N), losses = buf_zero(OPS_F32, N);
    if (Vl == V) { /* before the phases overwrite the logits */
        Buf copy0 = buf_zero(dt, logits0.n);
        memcpy(copy0.h, logits0.h, bytes_of(&logits0));
        upload(&copy0);
        Buf copy = buf_from(&copy0, shift);
        xent_fused_cpu(losses.h, copy.h, copy.h, dt, rowmax.h, sumexp.h, tl.h, tgt.h, N, V,
                       grad_scale);
        xent_fused_cuda(losses.d, copy.d, copy.d, dt, rowmax.d, sumexp.d, tl.d, tgt.d, N, V,
                        grad_scale);
        expect("xent_fused", dt, "rowmax", &rowmax);
        expect("xent_fused", dt, "sumexp", &sumexp);
        expect("xent_fused", dt, "target_logit", &tl);
        expect("xent_fused", dt, "losses", &losses);
        expect("xent_fused (in place)", dt, "dlogits", &copy);
        buf_free(&copy0);
    }
    xent_max_cpu(rowmax.h, logits.h, dt, N, Vl);
    xent_max_cuda(rowmax.d, logits.d, dt, N, Vl);
    expect("xent_max", dt, "rowmax", &rowmax);
    upload(&rowmax); /* each phase from the same inputs on both sides */
    xent_sumexp_cpu(sumexp.h, tl.h, logits.h, dt, rowmax.h, tgt.h, v0, N, Vl);
    xent_sumexp_cuda(sumexp.d, tl.d, logits.d, dt, rowmax.d, tgt.d, v0, N, Vl);
    expect("xent_sumexp", dt, "sumexp", &sumexp);
    expect("xent_sumexp", dt, "target_logit", &tl);
    upload(&sumexp);
    upload(&tl);
    /* the loss alone (evaluation), then dlogits in place over the logits,
     * as the model calls it */
    xent_finish_cpu(losses.h, NULL, logits.h, dt, rowmax.h, sumexp.h, tl.h,
                    tgt.h, v0, N, Vl, grad_scale);
    xent_finish_cuda(losses.d, NULL, logits.d, dt, rowmax.d, sumexp.d, tl.d,
                     tgt.d, v0, N, Vl, grad_scale);
    expect("xent_finish (no dlogits)", dt, "losses", &losses);
    xent_finish_cpu(losses.h, logits.h, logits.h, dt, rowmax.h, sumexp.h, tl.h,
                    tgt.h, v0, N, Vl, grad_scale);
    xent_finish_cuda(losses.d, logits.d, logits.d, dt, rowmax.d, sumexp.d, tl.d,
                     tgt.d, v0, N, Vl, grad_scale);
    expect("xent_finish", dt, "losses", &losses);
    expect("xent_finish (in place)", dt, "dlogits", &logits);
    Buf *all[] = { &tgt, &logits0, &rowmax, &sumexp, &tl, &losses };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* ---- the head's gradient in the compute dtype (TRIDENT_FUSED) --------------- */

/* Elements of a 16-bit gradient that may differ from the CPU's fp32 one:
 * the dtype's relative tolerance, plus its smallest subnormal (fp16: the
 * CPU's value rounds to 0 or 2^-24 where the GPU's may round the other
 * way). A gradient rounded before its loss scale multiplied would flush
 * the small entries and fail this elementwise check. */
static int narrow_close(float gpu, float cpu, ops_dtype gdt)
{
    double floor = gdt == OPS_F16 ? 0x1p-24 : 0x1p-133;
    return fabs((double)gpu - cpu) <= tol(gdt) * fabs((double)cpu) + floor;
}

/* xent_fused_narrow_cuda against xent_fused_cpu over fp32 logits: the
 * statistics and losses to fp32 rounding; the gradient, read in gdt from
 * the logits' own memory at rows 2V apart, elementwise within the
 * dtype's tolerance of the CPU's fp32 gradient. loss_scale multiplies
 * grad_scale as fp16 loss scaling does. */
static void test_xent_narrow(ops_dtype gdt, int N, int V, int shift, float loss_scale)
{
    tap_diag("xent_fused_narrow %s: N %d, V %d, logits from element %d, loss scale %g",
             ops_dtype_name(gdt), N, V, shift, (double)loss_scale);
    const float grad_scale = loss_scale / (float)N;
    Buf tgt = buf_tokens(N, 0, V);
    Buf logits0 = buf_rand(OPS_F32, (int64_t)N * V + shift, -12.0f, 12.0f);
    Buf logits = buf_from(&logits0, shift);
    Buf rowmax = buf_zero(OPS_F32, N), sumexp = buf_zero(OPS_F32, N);
    Buf tl = buf_zero(OPS_F32, N), losses = buf_zero(OPS_F32, N);
    /* the unfused GPU path on a copy: its fp32 gradient, for the diagnostic below */
    Buf old = buf_zero(OPS_F32, logits.n);
    copy_cuda(old.d, OPS_CUDA, logits.d, OPS_CUDA, bytes_of(&old));
    xent_fused_cuda(losses.d, old.d, old.d, OPS_F32, rowmax.d, sumexp.d, tl.d, tgt.d, N, V,
                    grad_scale);
    void *old_g = download(&old);
    xent_fused_cpu(losses.h, logits.h, logits.h, OPS_F32, rowmax.h, sumexp.h, tl.h, tgt.h, N,
                   V, grad_scale);
    xent_fused_narrow_cuda((float *)losses.d, (float *)logits.d, gdt, (float *)rowmax.d,
                           (float *)sumexp.d, (float *)tl.d, (const int32_t *)tgt.d, N, V,
                           grad_scale);
    expect("xent_fused_narrow", gdt, "rowmax", &rowmax);
    expect("xent_fused_narrow", gdt, "sumexp", &sumexp);
    expect("xent_fused_narrow", gdt, "target_logit", &tl);
    expect("xent_fused_narrow", gdt, "losses", &losses);
    void *g = download(&logits);
    int64_t bad = 0, nonzero = 0, unlike_old = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < V; j++) {
            float c = load_f32_cpu(logits.h, OPS_F32, i * V + j);
            float x = load_f32_cpu(g, gdt, i * 2 * V + j);
            bad += !narrow_close(x, c, gdt);
            nonzero += x != 0.0f;
            float o = load_f32_cpu(old_g, OPS_F32, i * V + j);
            uint16_t r = gdt == OPS_BF16 ? elem_f32_to_bf16(o) : elem_f32_to_f16(o);
            unlike_old += r != ((const uint16_t *)g)[i * 2 * V + j];
        }
    /* the same fp32 expression rounded once either way: expected 0, unless
     * nvcc contracts it differently in the two kernels */
    tap_diag("xent_fused_narrow %s: %lld of %lld elements differ from the unfused path's "
             "fp32 gradient rounded to %s", ops_dtype_name(gdt), (long long)unlike_old,
             (long long)N * V, ops_dtype_name(gdt));
    free(g);
    free(old_g);
    buf_free(&old);
    CHECK(bad == 0 && nonzero > 0, "xent_fused_narrow %s: dlogits over the logits (rows 2V "
          "apart) within %.0e of the CPU's fp32 gradient, elementwise (%lld off, %lld nonzero)",
          ops_dtype_name(gdt), tol(gdt), (long long)bad, (long long)nonzero);
    Buf *all[] = { &tgt, &logits0, &rowmax, &sumexp, &tl, &losses };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* matmul_bwd_ld_cuda on a gradient laid out as xent_fused_narrow_cuda
 * leaves it (rows 2N apart) against the CPU's mixed backward pass on the
 * fp32 gradient, which rounds it to dt as it reads it: the head's
 * backward before and after TRIDENT_FUSED. */
static void test_head_bwd(ops_dtype dt, int M, int N, int K)
{
    Buf inp = buf_rand(dt, (int64_t)M * K, -1.0f, 1.0f);
    Buf w = buf_rand(dt, (int64_t)N * K, -0.5f, 0.5f);
    Buf dout = buf_rand(OPS_F32, (int64_t)M * N, -1.0f, 1.0f);
    Buf narrow = buf_zero(dt, (int64_t)M * 2 * N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            store_f32_cpu(narrow.h, dt, i * 2 * N + j, load_f32_cpu(dout.h, OPS_F32, i * N + j));
    upload(&narrow);
    Buf dinp = buf_zero(dt, (int64_t)M * K);
    Buf dw = buf_rand(OPS_F32, (int64_t)N * K, -1.0f, 1.0f); /* += */
    matmul_bwd_cpu(dinp.h, dw.h, NULL, dout.h, OPS_F32, inp.h, w.h, dt, M, N, K);
    matmul_bwd_ld_cuda(dinp.d, (float *)dw.d, narrow.d, 2 * (int64_t)N, inp.d, w.d, dt, M, N, K);
    expect("matmul_bwd_ld (rows 2N apart)", dt, "dinp", &dinp);
    expect("matmul_bwd_ld (rows 2N apart)", dt, "dw (+=)", &dw);
    Buf *all[] = { &inp, &w, &dout, &narrow, &dinp, &dw };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* The token backward's two kernels, the batched one (TRIDENT_FUSED, what
 * embedding_bwd_cuda runs unless it is 0) and the serial one, each
 * bit-identical to the CPU's position-order sum and the same bits on a
 * second run, over N tokens: `same` all one token (one run of N rows),
 * else all distinct when N <= Vl (v0 + a stride through the shard), else
 * drawn from [0, vocab) (some on other shards). */
static void test_embedding_runs(ops_dtype dt, int N, int C, int v0, int Vl, int vocab, int same)
{
    Buf tok = buf_tokens(N, 0, vocab);
    const char *kind = same ? "all one token" : N <= Vl ? "all distinct" : "drawn";
    for (int i = 0; i < N; i++)
        if (same)
            ((int32_t *)tok.h)[i] = v0 + Vl / 2;
        else if (N <= Vl)
            ((int32_t *)tok.h)[i] = v0 + (int)(((int64_t)i * 7919) % Vl);
    upload(&tok);
    Buf dout = buf_rand(dt, (int64_t)N * C, -1.0f, 1.0f);
    Buf dwte = buf_rand(OPS_F32, (int64_t)Vl * C, -1.0f, 1.0f);
    void *before = download(&dwte);
    embedding_bwd_cpu(dwte.h, tok.h, dout.h, dt, v0, Vl, N, C);
    for (int serial = 0; serial < 2; serial++) {
        int ok = 1;
        for (int run = 0; run < 2; run++) {
            copy_cuda(dwte.d, OPS_CUDA, before, OPS_CPU, bytes_of(&dwte));
            if (serial)
                embedding_bwd_serial_cuda((float *)dwte.d, (const int32_t *)tok.d, dout.d, dt,
                                          v0, Vl, N, C);
            else
                embedding_bwd_cuda((float *)dwte.d, (const int32_t *)tok.d, dout.d, dt, v0, Vl,
                                   N, C);
            ok = ok && bitwise(&dwte);
        }
        CHECK(ok, "embedding_bwd%s %s: %d tokens %s, C %d, shard [%d, %d): dwte (+=) "
              "bit-identical to the CPU's, twice (max err %.1e)", serial ? "_serial" : "",
              ops_dtype_name(dt), N, kind, C, v0, v0 + Vl, normwise(&dwte));
    }
    free(before);
    Buf *all[] = { &tok, &dout, &dwte };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* ---- optimizer --------------------------------------------------------------- */

static void test_adamw(ops_dtype dt)
{
    const int64_t n = 50001;
    ops_adamw_args a = { 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3 };
    Buf master = buf_rand(OPS_F32, n, -1.0f, 1.0f);
    Buf grad = buf_rand(dt, n, -2.0f, 2.0f);
    Buf m = buf_rand(OPS_F32, n, -0.1f, 0.1f), v = buf_rand(OPS_F32, n, 0.0f, 0.01f);
    Buf wcopy = buf_zero(dt, n);
    adamw_cpu(master.h, grad.h, dt, m.h, v.h, wcopy.h, dt, n, &a);
    adamw_cuda(master.d, grad.d, dt, m.d, v.d, wcopy.d, dt, n, &a);
    expect("adamw", dt, "master", &master);
    expect("adamw", dt, "m", &m);
    expect("adamw", dt, "v", &v);
    expect("adamw", dt, "wcopy", &wcopy);
    Buf *all[] = { &master, &grad, &m, &v, &wcopy };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* ---- issue 34: multi-tensor AdamW and norm, the residual add in LayerNorm -- */

/* A second buffer with b's host bits, uploaded. */
static Buf buf_clone(const Buf *b)
{
    Buf c = { b->dt, b->n, xmalloc(bytes_of(b)), alloc_cuda(bytes_of(b)) };
    memcpy(c.h, b->h, bytes_of(b));
    upload(&c);
    return c;
}

/* Whether the device copies of x and y hold the same bits. */
static int same_on_device(const Buf *x, const Buf *y)
{
    void *gx = download(x), *gy = download(y);
    int same = bytes_of(x) == bytes_of(y) && memcmp(gx, gy, bytes_of(x)) == 0;
    free(gx);
    free(gy);
    return same;
}

static ops_tensor on_device(const Buf *b)
{
    return (ops_tensor){ b->d, b->n, b->dt, OPS_CUDA };
}

/* ---- mixture of experts (issue 38: moe_cuda.cu, ops_moe.c) --------------- */

/* Every MoE kernel takes the CPU's inputs (the CPU router's ids, probs and
 * permutation), so a difference is that kernel's own. Bit for bit where
 * the GPU does what the CPU does with no rounding that nvcc can move: the
 * expert ids (comparisons of the logits only; ties go to the lower
 * index), the permutation, the aux loss's counts and mean probabilities
 * (plain adds), gather (copies), the gather's backward (adds in slot
 * order) and the combine's dys (one product). CUDA's expf (softmax,
 * z-loss, sigmoid) and the fused multiply-adds nvcc makes of the dot
 * products (router and aux backward, the combine and its dweights) move
 * the rest by ulps: normwise, at the file's tolerances. tests/t_moe_emu
 * runs the same kernels on the host, bit for bit against the CPU. */

static Buf buf_i32(int64_t n)
{
    return buf_zero(OPS_I32, n);
}

/* N rows of E router logits: uniform, with ties (a third of the rows on
 * three levels, every 7th row all equal) that the top-k must break as
 * the CPU does, toward the lower expert. */
static Buf moe_logits(int N, int E)
{
    Buf z = buf_rand(OPS_F32, (int64_t)N * E, -4.0f, 4.0f);
    float *h = z.h;
    for (int t = 0; t < N; t++)
        for (int e = 0; e < E; e++)
            if (t % 7 == 6)
                h[(int64_t)t * E + e] = 0.5f;
            else if (t % 3 == 0)
                h[(int64_t)t * E + e] = (float)((int)(h[(int64_t)t * E + e] + 4.0f) / 3);
    upload(&z);
    return z;
}

/* The device's result (d) downloaded over the host's (h) is the CPU's? */
static int moe_same(const Buf *b)
{
    return bitwise(b);
}

/* Router fwd/bwd, the aux and z losses fwd/bwd and the permutation (no
 * capacity, and capacity factor 1: ceil(N k / E)) for N tokens, E experts,
 * k a token, in `order`. */
static void test_moe_routing(int N, int E, int k, int order)
{
    const char *on = order == OPS_MOE_SOFTMAX_TOPK ? "renormalised" : "raw";
    const int64_t Nk = (int64_t)N * k, NE = (int64_t)N * E;
    Buf z = moe_logits(N, E);
    Buf ids = buf_i32(Nk), w = buf_zero(OPS_F32, Nk), probs = buf_zero(OPS_F32, NE);
    moe_router_fwd_cpu(ids.h, w.h, probs.h, z.h, N, E, k, order);
    moe_router_fwd_cuda(ids.d, w.d, probs.d, z.d, N, E, k, order);
    CHECK(moe_same(&ids), "moe_router_fwd %s, N %d, E %d, k %d (ties among the logits): the "
          "experts bit-identical to the CPU's", on, N, E, k);
    expect("moe_router_fwd", OPS_F32, "weights", &w);
    expect("moe_router_fwd", OPS_F32, "probs", &probs);
    /* from here on both sides read the CPU's routing */
    upload(&ids);
    upload(&w);
    upload(&probs);

    Buf dw = buf_rand(OPS_F32, Nk, -1.0f, 1.0f), dz = buf_rand(OPS_F32, NE, -0.1f, 0.1f);
    moe_router_bwd_cpu(dz.h, dw.h, ids.h, w.h, probs.h, N, E, k, order);
    moe_router_bwd_cuda(dz.d, dw.d, ids.d, w.d, probs.d, N, E, k, order);
    expect("moe_router_bwd", OPS_F32, "dlogits (+=)", &dz);

    Buf loss = buf_zero(OPS_F32, 1), frac = buf_zero(OPS_F32, E), mean = buf_zero(OPS_F32, E);
    moe_aux_fwd_cpu(loss.h, frac.h, mean.h, probs.h, ids.h, N, E, k);
    moe_aux_fwd_cuda(loss.d, frac.d, mean.d, probs.d, ids.d, N, E, k);
    CHECK(moe_same(&frac) && moe_same(&mean), "moe_aux_fwd N %d, E %d, k %d: frac and "
          "mean_prob bit-identical to the CPU's", N, E, k);
    expect("moe_aux_fwd", OPS_F32, "loss", &loss);
    upload(&frac);
    Buf dza = buf_rand(OPS_F32, NE, -0.1f, 0.1f);
    moe_aux_bwd_cpu(dza.h, probs.h, frac.h, N, E, 0.01f);
    moe_aux_bwd_cuda(dza.d, probs.d, frac.d, N, E, 0.01f);
    expect("moe_aux_bwd", OPS_F32, "dlogits (+=)", &dza);

    Buf zl = buf_zero(OPS_F32, 1), lse = buf_zero(OPS_F32, N);
    moe_zloss_fwd_cpu(zl.h, lse.h, z.h, N, E);
    moe_zloss_fwd_cuda(zl.d, lse.d, z.d, N, E);
    expect("moe_zloss_fwd", OPS_F32, "lse", &lse);
    expect("moe_zloss_fwd", OPS_F32, "loss", &zl);
    upload(&lse);
    Buf dzz = buf_rand(OPS_F32, NE, -0.1f, 0.1f);
    moe_zloss_bwd_cpu(dzz.h, z.h, lse.h, N, E, 0.001f);
    moe_zloss_bwd_cuda(dzz.d, z.d, lse.d, N, E, 0.001f);
    expect("moe_zloss_bwd", OPS_F32, "dlogits (+=)", &dzz);

    for (int c = 0; c < 4; c++) { /* each kernel dropless and at capacity factor 1 */
        int capacity = c % 2 ? (int)((Nk + E - 1) / E) : 0, serial = c >= 2;
        Buf ord = buf_i32(Nk), row_of = buf_i32(Nk), off = buf_i32(E + 1), drop = buf_i32(1);
        moe_permute_cpu(ord.h, row_of.h, off.h, drop.h, ids.h, N, E, k, capacity);
        if (serial)
            moe_permute_serial_cuda(ord.d, row_of.d, off.d, drop.d, ids.d, N, E, k, capacity);
        else
            moe_permute_experts_cuda(ord.d, row_of.d, off.d, drop.d, ids.d, N, E, k, capacity);
        CHECK(moe_same(&ord) && moe_same(&row_of) && moe_same(&off) && moe_same(&drop),
              "moe_permute (%s) N %d, E %d, k %d, capacity %d (%d pairs dropped): order, "
              "row_of, offsets, dropped bit-identical to the CPU's",
              serial ? "one thread, TRIDENT_FUSED=0" : "a thread per expert", N, E, k,
              capacity, ((int32_t *)drop.h)[0]);
        Buf *p[] = { &ord, &row_of, &off, &drop };
        for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
            buf_free(p[i]);
    }
    Buf *all[] = { &z, &ids, &w, &probs, &dw, &dz, &loss, &frac, &mean, &dza, &zl, &lse, &dzz };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* Gather, its backward, combine and its backward (both outputs, and
 * dweights alone with dys and weights absent) over N tokens of C channels
 * in dt, routed to k of E experts by the CPU; capacity factor 1 when
 * `drop`, so some pairs are dropped. */
static void test_moe_rows(ops_dtype dt, int N, int C, int E, int k, int drop)
{
    const int64_t Nk = (int64_t)N * k;
    Buf z = moe_logits(N, E);
    Buf ids = buf_i32(Nk), w = buf_zero(OPS_F32, Nk), probs = buf_zero(OPS_F32, (int64_t)N * E);
    Buf ord = buf_i32(Nk), row_of = buf_i32(Nk), off = buf_i32(E + 1), dropped = buf_i32(1);
    moe_router_fwd_cpu(ids.h, w.h, probs.h, z.h, N, E, k, OPS_MOE_SOFTMAX_TOPK);
    moe_permute_cpu(ord.h, row_of.h, off.h, dropped.h, ids.h, N, E, k,
                    drop ? (int)((Nk + E - 1) / E) : 0);
    upload(&w);
    upload(&ord);
    upload(&row_of);
    int R = ((int32_t *)off.h)[E];
    char what[96];
    snprintf(what, sizeof what, "N %d, C %d, E %d, k %d, %d of %lld pairs dropped", N, C, E, k,
             ((int32_t *)dropped.h)[0], (long long)Nk);

    Buf x = buf_rand(dt, (int64_t)N * C, -2.0f, 2.0f), xs = buf_zero(dt, (int64_t)R * C);
    moe_gather_cpu(xs.h, x.h, dt, ord.h, R, C, k);
    moe_gather_cuda(xs.d, x.d, dt, ord.d, R, C, k);
    CHECK(moe_same(&xs), "moe_gather %s, %s: rows bit-identical to the CPU's",
          ops_dtype_name(dt), what);
    Buf dxs = buf_rand(dt, Nk * C, -1.0f, 1.0f), dx = buf_zero(dt, (int64_t)N * C);
    moe_gather_bwd_cpu(dx.h, dxs.h, dt, row_of.h, N, C, k);
    moe_gather_bwd_cuda(dx.d, dxs.d, dt, row_of.d, N, C, k);
    CHECK(moe_same(&dx), "moe_gather_bwd %s, %s: dx bit-identical to the CPU's (slot order)",
          ops_dtype_name(dt), what);

    Buf ys = buf_rand(dt, Nk * C, -2.0f, 2.0f), out = buf_zero(dt, (int64_t)N * C);
    moe_combine_fwd_cpu(out.h, ys.h, dt, w.h, row_of.h, N, C, k);
    moe_combine_fwd_cuda(out.d, ys.d, dt, w.d, row_of.d, N, C, k);
    expect("moe_combine_fwd", dt, "out", &out);
    Buf dout = buf_rand(dt, (int64_t)N * C, -1.0f, 1.0f), dys = buf_zero(dt, Nk * C);
    Buf dwts = buf_zero(OPS_F32, Nk);
    moe_combine_bwd_cpu(dys.h, dwts.h, dout.h, ys.h, dt, w.h, row_of.h, N, C, k);
    moe_combine_bwd_cuda(dys.d, dwts.d, dout.d, ys.d, dt, w.d, row_of.d, N, C, k);
    CHECK(moe_same(&dys), "moe_combine_bwd %s, %s: dys bit-identical to the CPU's (one "
          "product each)", ops_dtype_name(dt), what);
    expect("moe_combine_bwd", dt, "dweights", &dwts);
    Buf dw_only = buf_zero(OPS_F32, Nk);
    moe_combine_bwd_cuda(NULL, dw_only.d, dout.d, ys.d, dt, NULL, row_of.d, N, C, k);
    CHECK(same_on_device(&dw_only, &dwts), "moe_combine_bwd %s, %s: dweights alone (dys and "
          "weights absent) the same bits as with dys", ops_dtype_name(dt), what);
    Buf *all[] = { &z, &ids, &w, &probs, &ord, &row_of, &off, &dropped, &x, &xs, &dxs, &dx,
                   &ys, &out, &dout, &dys, &dwts, &dw_only };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

static void test_moe_sigmoid(int N)
{
    Buf logit = buf_rand(OPS_F32, N, -12.0f, 12.0f), gate = buf_zero(OPS_F32, N);
    Buf dgate = buf_rand(OPS_F32, N, -1.0f, 1.0f), dlogit = buf_zero(OPS_F32, N);
    moe_sigmoid_fwd_cpu(gate.h, logit.h, N);
    moe_sigmoid_fwd_cuda(gate.d, logit.d, N);
    expect("moe_sigmoid_fwd", OPS_F32, "gate", &gate);
    upload(&gate);
    moe_sigmoid_bwd_cpu(dlogit.h, dgate.h, gate.h, N);
    moe_sigmoid_bwd_cuda(dlogit.d, dgate.d, gate.d, N);
    expect("moe_sigmoid_bwd", OPS_F32, "dlogit", &dlogit);
    Buf *all[] = { &logit, &gate, &dgate, &dlogit };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

static ops_tensor on_host(const Buf *b)
{
    return (ops_tensor){ b->h, b->n, b->dt, OPS_CPU };
}

/* ops_moe_grouped_matmul_fwd and _bwd (one ops_matmul per expert's rows)
 * on the GPU against the CPU: E experts with the rows `rows` says (some
 * none), inputs of K, outputs of Nout channels in dt; dw[e] fp32, +=. */
static void test_moe_grouped(ops_dtype dt, int E, const int *rows, int Nout, int K)
{
    int32_t off[E + 1];
    off[0] = 0;
    for (int e = 0; e < E; e++)
        off[e + 1] = off[e] + rows[e];
    int64_t R = off[E];
    Buf inp = buf_rand(dt, R * K, -1.0f, 1.0f), out = buf_zero(dt, R * Nout);
    Buf dout = buf_rand(dt, R * Nout, -1.0f, 1.0f), dinp = buf_zero(dt, R * K);
    Buf w[E], dw[E];
    ops_tensor wh[E], wd[E], dwh[E], dwd[E];
    for (int e = 0; e < E; e++) {
        w[e] = buf_rand(dt, (int64_t)Nout * K, -0.5f, 0.5f);
        dw[e] = buf_rand(OPS_F32, (int64_t)Nout * K, -1.0f, 1.0f);
        wh[e] = on_host(&w[e]);
        wd[e] = on_device(&w[e]);
        dwh[e] = on_host(&dw[e]);
        dwd[e] = on_device(&dw[e]);
    }
    ops_moe_grouped_matmul_fwd(on_host(&out), on_host(&inp), wh, off, E, Nout, K);
    ops_moe_grouped_matmul_fwd(on_device(&out), on_device(&inp), wd, off, E, Nout, K);
    char op[96];
    snprintf(op, sizeof op, "moe_grouped_matmul E %d, %lld rows, N %d, K %d", E, (long long)R,
             Nout, K);
    expect(op, dt, "fwd out", &out);
    ops_moe_grouped_matmul_bwd(on_host(&dinp), dwh, on_host(&dout), on_host(&inp), wh, off, E,
                               Nout, K);
    ops_moe_grouped_matmul_bwd(on_device(&dinp), dwd, on_device(&dout), on_device(&inp), wd,
                               off, E, Nout, K);
    expect(op, dt, "bwd dinp", &dinp);
    double worst = 0.0;
    for (int e = 0; e < E; e++) {
        double err = normwise(&dw[e]);
        worst = err > worst || err != err ? err : worst;
    }
    CHECK(worst <= tol(OPS_F32), "%s %s: bwd dw[e] (+=, fp32) max err %.2e over the %d "
          "experts (tol %.0e)", op, ops_dtype_name(dt), worst, E, tol(OPS_F32));
    for (int e = 0; e < E; e++) {
        buf_free(&w[e]);
        buf_free(&dw[e]);
    }
    Buf *all[] = { &inp, &out, &dout, &dinp };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* Every ops_moe_* op at Mixtral's routing (E 8, k 2) and Qwen-MoE's (E 64,
 * k 8) over 8192 tokens, rows of 2048 channels, fp32 and bf16 (fp16 the
 * small shape). */
static void test_moe(void)
{
    for (int order = 0; order < 2; order++) {
        test_moe_routing(8192, 8, 2, order);
        test_moe_routing(8192, 64, 8, order);
    }
    test_moe_routing(300, 4, 1, OPS_MOE_SOFTMAX_TOPK);
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        ops_dtype dt = dtypes[i];
        test_moe_rows(dt, 300, 70, 8, 2, 1);
        if (dt == OPS_F16)
            continue;
        test_moe_rows(dt, 8192, 2048, 8, 2, 0);
        test_moe_rows(dt, 2048, 2048, 8, 2, 1);
        test_moe_rows(dt, 1024, 2048, 64, 8, 1);
        /* 2048 rows over 8 experts, two of them without any */
        static const int rows8[8] = { 300, 0, 517, 1, 256, 0, 700, 274 };
        test_moe_grouped(dt, 8, rows8, 704, 2048);
        int rows64[64];
        for (int e = 0; e < 64; e++)
            rows64[e] = e % 5 == 2 ? 0 : 16 + (e * 37) % 61;
        test_moe_grouped(dt, 64, rows64, 256, 512);
    }
    test_moe_sigmoid(8193);
}

/* ---- packed column sums (LayerNorm's dw, db; the bias gradient; RMSNorm's dw) */

/* The column sums a 16-byte pack a thread (what runs unless TRIDENT_FUSED
 * is 0) against the CPU and bit for bit against the kernels a column a
 * thread (TRIDENT_FUSED=0's): N rows of C channels from element `shift`
 * of their buffers, the bias gradient's rows ld = C + pad apart. C not a
 * multiple of 8 (4 in fp32), shift 1 or pad 1 take the element path of
 * the packed kernels. */
static void test_colsums_packed(ops_dtype dt, int N, int C, int shift, int pad)
{
    int64_t n = (int64_t)N * C, ld = C + pad;
    Buf inp0 = buf_rand(dt, n + shift, -2.0f, 3.0f), dout0 = buf_rand(dt, n + shift, -1.0f, 1.0f);
    Buf inp = buf_from(&inp0, shift), dout = buf_from(&dout0, shift);
    Buf mean = buf_rand(OPS_F32, N, -0.5f, 0.5f), rstd = buf_rand(OPS_F32, N, 0.5f, 2.0f);
    Buf w = buf_rand(dt, C, 0.5f, 1.5f), dinp = buf_zero(dt, n);
    Buf dw[2], db[2];
    dw[0] = buf_rand(OPS_F32, C, -1.0f, 1.0f); /* += */
    for (int packed = 0; packed < 2; packed++) {
        if (packed)
            dw[1] = buf_clone(&dw[0]); /* the same start as the unpacked run */
        db[packed] = buf_clone(&dw[0]);
        layernorm_dwdb_cuda((float *)dw[packed].d, (float *)db[packed].d, dout.d, inp.d,
                            (const float *)mean.d, (const float *)rstd.d, dt, N, C, packed);
    }
    layernorm_bwd_cpu(dinp.h, dw[1].h, db[1].h, dout.h, inp.h, w.h, (const float *)mean.h,
                      (const float *)rstd.h, dt, N, C);
    char op[96];
    snprintf(op, sizeof op, "layernorm dw, db packed: N %d, C %d, from element %d", N, C, shift);
    expect(op, dt, "dw (+=)", &dw[1]);
    expect(op, dt, "db (+=)", &db[1]);
    CHECK(same_on_device(&dw[1], &dw[0]) && same_on_device(&db[1], &db[0]),
          "%s %s: dw and db bit-identical to the kernel a channel a thread", op,
          ops_dtype_name(dt));

    /* the bias gradient over the same dout seen as M = n / ld rows of C */
    int M = (int)((n - C) / ld) + 1;
    Buf dbias[2];
    dbias[0] = buf_rand(OPS_F32, C, -1.0f, 1.0f); /* += */
    for (int packed = 0; packed < 2; packed++) {
        if (packed)
            dbias[1] = buf_clone(&dbias[0]);
        bias_bwd_cuda((float *)dbias[packed].d, dout.d, dt, ld, M, C, packed);
    }
    for (int j = 0; j < C; j++) {
        float sum = 0.0f;
        for (int64_t i = 0; i < M; i++)
            sum += load_f32_cpu(dout.h, dt, i * ld + j);
        ((float *)dbias[1].h)[j] += sum;
    }
    snprintf(op, sizeof op, "bias gradient packed: M %d, N %d, rows %lld apart, from element %d",
             M, C, (long long)ld, shift);
    expect(op, dt, "dbias (+=)", &dbias[1]);
    CHECK(same_on_device(&dbias[1], &dbias[0]),
          "%s %s: dbias bit-identical to the kernel a column a thread", op, ops_dtype_name(dt));
    Buf *all[] = { &inp0, &dout0, &mean, &rstd, &w, &dinp, &dw[0], &dw[1], &db[0], &db[1],
                   &dbias[0], &dbias[1] };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* RMSNorm's dw a 16-byte pack a thread (rmsnorm_dw_cuda packed, what
 * rmsnorm_bwd_cuda runs unless TRIDENT_FUSED is 0) against the CPU and
 * bit for bit against the kernel a channel a thread (TRIDENT_FUSED=0's):
 * N rows of C channels from element `shift` of their buffers. C not a
 * multiple of 8 (4 in fp32) or shift 1 take the element path of the
 * packed kernel. */
static void test_rmsnorm_dw_packed(ops_dtype dt, int N, int C, int shift)
{
    tap_diag("rmsnorm dw packed %s: N %d, C %d, from element %d", ops_dtype_name(dt), N, C,
             shift);
    int64_t n = (int64_t)N * C;
    Buf inp0 = buf_rand(dt, n + shift, -2.0f, 3.0f), dout0 = buf_rand(dt, n + shift, -1.0f, 1.0f);
    Buf inp = buf_from(&inp0, shift), dout = buf_from(&dout0, shift);
    Buf rstd = buf_rand(OPS_F32, N, 0.5f, 2.0f), w = buf_rand(dt, C, 0.5f, 1.5f);
    Buf dinp = buf_zero(dt, n);
    Buf dw[2];
    dw[0] = buf_rand(OPS_F32, C, -1.0f, 1.0f); /* += */
    dw[1] = buf_clone(&dw[0]);                 /* the same start as the unpacked run */
    for (int packed = 0; packed < 2; packed++)
        rmsnorm_dw_cuda((float *)dw[packed].d, dout.d, inp.d, (const float *)rstd.d, dt, N, C,
                        packed);
    rmsnorm_bwd_cpu(dinp.h, dw[1].h, dout.h, inp.h, w.h, (const float *)rstd.h, dt, N, C);
    char op[96];
    snprintf(op, sizeof op, "rmsnorm dw packed: N %d, C %d, from element %d", N, C, shift);
    expect(op, dt, "dw (+=)", &dw[1]);
    CHECK(same_on_device(&dw[1], &dw[0]), "%s %s: dw bit-identical to the kernel a channel a "
          "thread", op, ops_dtype_name(dt));
    Buf *all[] = { &inp0, &dout0, &rstd, &w, &dinp, &dw[0], &dw[1] };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* add_layernorm_fwd_cuda against the CPU's add then layernorm (normwise),
 * and bit for bit against the GPU's own add_cuda then layernorm_fwd_cuda
 * (the same arithmetic), also with the sum written over a. */
static void test_add_layernorm(ops_dtype dt, int N, int C, int shift)
{
    tap_diag("add_layernorm %s: N %d, C %d, from element %d", ops_dtype_name(dt), N, C, shift);
    int64_t n = (int64_t)N * C;
    Buf a0 = buf_rand(dt, n + shift, -2.0f, 3.0f), b0 = buf_rand(dt, n + shift, -1.0f, 1.0f);
    Buf w = buf_rand(dt, C, 0.5f, 1.5f), bias = buf_rand(dt, C, -0.5f, 0.5f);
    Buf r0 = buf_zero(dt, n + shift), o0 = buf_zero(dt, n + shift);
    Buf mean = buf_zero(OPS_F32, N), rstd = buf_zero(OPS_F32, N);
    Buf a = buf_from(&a0, shift), b = buf_from(&b0, shift);
    Buf resid = buf_from(&r0, shift), out = buf_from(&o0, shift);
    add_cpu(resid.h, a.h, b.h, dt, n);
    layernorm_fwd_cpu(out.h, mean.h, rstd.h, resid.h, w.h, bias.h, dt, N, C);
    add_layernorm_fwd_cuda(resid.d, out.d, mean.d, rstd.d, a.d, b.d, w.d, bias.d, dt, N, C);
    expect("add_layernorm_fwd", dt, "resid", &resid);
    expect("add_layernorm_fwd", dt, "out", &out);
    expect("add_layernorm_fwd", dt, "mean", &mean);
    expect("add_layernorm_fwd", dt, "rstd", &rstd);

    /* at the same alignment, so both take the same (packed or not) path */
    Buf r20 = buf_zero(dt, n + shift), o20 = buf_zero(dt, n + shift);
    Buf mean2 = buf_zero(OPS_F32, N), rstd2 = buf_zero(OPS_F32, N);
    Buf r2 = buf_from(&r20, shift), o2 = buf_from(&o20, shift);
    add_cuda(r2.d, a.d, b.d, dt, n);
    layernorm_fwd_cuda(o2.d, mean2.d, rstd2.d, r2.d, w.d, bias.d, dt, N, C);
    int same = same_on_device(&resid, &r2) && same_on_device(&out, &o2)
               && same_on_device(&mean, &mean2) && same_on_device(&rstd, &rstd2);
    /* in place: the sum over a */
    add_layernorm_fwd_cuda(a.d, out.d, mean.d, rstd.d, a.d, b.d, w.d, bias.d, dt, N, C);
    same = same && same_on_device(&a, &r2) && same_on_device(&out, &o2);
    CHECK(same, "add_layernorm_fwd %s (N %d, C %d, shift %d): the bits of add_cuda then "
          "layernorm_fwd_cuda, also with resid = a", ops_dtype_name(dt), N, C, shift);
    Buf *all[] = { &a0, &b0, &w, &bias, &r0, &o0, &mean, &rstd, &r20, &o20, &mean2, &rstd2 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* add_rmsnorm_fwd_cuda against the CPU's add then rmsnorm (normwise), and
 * bit for bit against the GPU's own add_cuda then rmsnorm_fwd_cuda (the
 * same arithmetic), also with the sum written over a. */
static void test_add_rmsnorm(ops_dtype dt, int N, int C)
{
    tap_diag("add_rmsnorm %s: N %d, C %d", ops_dtype_name(dt), N, C);
    int64_t n = (int64_t)N * C;
    Buf a = buf_rand(dt, n, -2.0f, 3.0f), b = buf_rand(dt, n, -1.0f, 1.0f);
    Buf w = buf_rand(dt, C, 0.5f, 1.5f);
    Buf resid = buf_zero(dt, n), out = buf_zero(dt, n), rstd = buf_zero(OPS_F32, N);
    add_cpu(resid.h, a.h, b.h, dt, n);
    rmsnorm_fwd_cpu(out.h, rstd.h, resid.h, w.h, dt, N, C, 1e-5f);
    add_rmsnorm_fwd_cuda(resid.d, out.d, rstd.d, a.d, b.d, w.d, dt, N, C, 1e-5f);
    expect("add_rmsnorm_fwd", dt, "resid", &resid);
    expect("add_rmsnorm_fwd", dt, "out", &out);
    expect("add_rmsnorm_fwd", dt, "rstd", &rstd);

    Buf r2 = buf_zero(dt, n), o2 = buf_zero(dt, n), rstd2 = buf_zero(OPS_F32, N);
    add_cuda(r2.d, a.d, b.d, dt, n);
    rmsnorm_fwd_cuda(o2.d, rstd2.d, r2.d, w.d, dt, N, C, 1e-5f);
    int same = same_on_device(&resid, &r2) && same_on_device(&out, &o2)
               && same_on_device(&rstd, &rstd2);
    /* in place: the sum over a */
    add_rmsnorm_fwd_cuda(a.d, out.d, rstd.d, a.d, b.d, w.d, dt, N, C, 1e-5f);
    same = same && same_on_device(&a, &r2) && same_on_device(&out, &o2);
    CHECK(same, "add_rmsnorm_fwd %s (N %d, C %d): the bits of add_cuda then rmsnorm_fwd_cuda, "
          "also with resid = a", ops_dtype_name(dt), N, C);
    Buf *all[] = { &a, &b, &w, &resid, &out, &rstd, &r2, &o2, &rstd2 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

enum { MULTI_SEGS = 4 };

/* The host-wait hook below (cuda_set_wait): counts the waits. */
static int waits_seen;
static void counting_wait(void *event, const char *what);

/* One set of AdamW segments: master, m, v, grad and copy of each. */
typedef struct {
    Buf master[MULTI_SEGS], m[MULTI_SEGS], v[MULTI_SEGS], grad[MULTI_SEGS], wcopy[MULTI_SEGS];
} AdamwSet;

static const float multi_wd[MULTI_SEGS] = { 0.1f, 0.0f, 0.1f, 0.0f };

/* Segment 2 has no copy; segments 1 and 3 have fp32 gradients. */
static void adamw_set_segs(AdamwSet *s, ops_adamw_seg *seg)
{
    for (int i = 0; i < MULTI_SEGS; i++)
        seg[i] = (ops_adamw_seg){ on_device(&s->master[i]), on_device(&s->m[i]),
                                  on_device(&s->v[i]), on_device(&s->grad[i]),
                                  i == 2 ? OPS_NONE : on_device(&s->wcopy[i]), multi_wd[i] };
}

static void adamw_set_loop(AdamwSet *s, const ops_adamw_args *a)
{
    for (int i = 0; i < MULTI_SEGS; i++) {
        ops_adamw_args ai = *a;
        ai.weight_decay = multi_wd[i];
        adamw_cuda(s->master[i].d, s->grad[i].d, s->grad[i].dt, s->m[i].d, s->v[i].d,
                   i == 2 ? NULL : s->wcopy[i].d, s->wcopy[i].dt, s->master[i].n, &ai);
    }
}

static int adamw_sets_equal(const AdamwSet *x, const AdamwSet *y)
{
    int same = 1;
    for (int i = 0; i < MULTI_SEGS; i++)
        same = same && same_on_device(&x->master[i], &y->master[i])
               && same_on_device(&x->m[i], &y->m[i]) && same_on_device(&x->v[i], &y->v[i])
               && same_on_device(&x->wcopy[i], &y->wcopy[i]);
    return same;
}

/* adamw_multi_cuda against adamw_cuda segment by segment, bit for bit,
 * three steps: the multi kernel on set A, then on set B (a new table: the
 * loop runs on A), then on B again (the table kept); and against the CPU's
 * adamw_cpu after the first step. Segments span several chunks, one
 * element, a row, a tail. */
static void test_adamw_multi(ops_dtype dt)
{
    const int64_t n[MULTI_SEGS] = { 2 * 32768 + 77, 1, 768, 4099 };
    AdamwSet A, B;
    for (int i = 0; i < MULTI_SEGS; i++) {
        ops_dtype gdt = i % 2 ? OPS_F32 : dt;
        A.master[i] = buf_rand(OPS_F32, n[i], -1.0f, 1.0f);
        A.m[i] = buf_rand(OPS_F32, n[i], -0.1f, 0.1f);
        A.v[i] = buf_rand(OPS_F32, n[i], 0.0f, 0.01f);
        A.grad[i] = buf_rand(gdt, n[i], -2.0f, 2.0f);
        A.wcopy[i] = buf_zero(dt, n[i]);
        upload(&A.wcopy[i]);
        B.master[i] = buf_clone(&A.master[i]);
        B.m[i] = buf_clone(&A.m[i]);
        B.v[i] = buf_clone(&A.v[i]);
        B.grad[i] = buf_clone(&A.grad[i]);
        B.wcopy[i] = buf_clone(&A.wcopy[i]);
    }
    ops_adamw_args a = { 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.5f, 3 };
    ops_adamw_seg sa[MULTI_SEGS], sb[MULTI_SEGS];
    adamw_set_segs(&A, sa);
    adamw_set_segs(&B, sb);
    adamw_multi_cuda(sa, MULTI_SEGS, &a);
    adamw_set_loop(&B, &a);
    int same1 = adamw_sets_equal(&A, &B);
    for (int i = 0; i < MULTI_SEGS; i++) {
        ops_adamw_args ai = a;
        ai.weight_decay = multi_wd[i];
        adamw_cpu(A.master[i].h, A.grad[i].h, A.grad[i].dt, A.m[i].h, A.v[i].h,
                  i == 2 ? NULL : A.wcopy[i].h, dt, n[i], &ai);
        expect("adamw_multi", dt, "master", &A.master[i]);
        if (i != 2)
            expect("adamw_multi", dt, "wcopy", &A.wcopy[i]);
    }
    a.step = 4;
    cuda_set_wait(counting_wait);
    waits_seen = 0;
    adamw_multi_cuda(sb, MULTI_SEGS, &a);
    int new_waits = waits_seen;
    adamw_set_loop(&A, &a);
    int same2 = adamw_sets_equal(&A, &B);
    a.step = 5;
    waits_seen = 0;
    adamw_multi_cuda(sb, MULTI_SEGS, &a);
    int kept_waits = waits_seen;
    cuda_set_wait(NULL);
    adamw_set_loop(&A, &a);
    int same3 = adamw_sets_equal(&A, &B);
    CHECK(same1 && same2 && same3, "adamw_multi %s: the bits of adamw_cuda segment by segment "
          "(steps 3, 4 on a new table, 5 on the kept one: %d %d %d)", ops_dtype_name(dt),
          same1, same2, same3);
    /* the kept table is not uploaded again: a host wait every step would
     * stall the optimizer behind the backward pass (multi_cuda.cu) */
    CHECK(new_waits >= 1 && kept_waits == 0, "adamw_multi %s: a new table's upload waits "
          "(%d host waits), the kept one's step does not (%d)", ops_dtype_name(dt), new_waits,
          kept_waits);
    for (int i = 0; i < MULTI_SEGS; i++) {
        Buf *all[] = { &A.master[i], &A.m[i], &A.v[i], &A.grad[i], &A.wcopy[i],
                       &B.master[i], &B.m[i], &B.v[i], &B.grad[i], &B.wcopy[i] };
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            buf_free(all[k]);
    }
}

/* *acc = start, then sumsq_multi_cuda of x; returns *acc, and in *waits
 * the host waits sumsq_multi_cuda itself took (NULL: not counted). */
static double sumsq_multi_from(double start, const ops_tensor *x, int count, int *waits)
{
    double *acc = alloc_cuda(sizeof(double)), got;
    copy_cuda(acc, OPS_CUDA, &start, OPS_CPU, sizeof start);
    cuda_set_wait(counting_wait);
    waits_seen = 0;
    sumsq_multi_cuda(acc, x, count);
    cuda_set_wait(NULL);
    if (waits)
        *waits = waits_seen;
    copy_cuda(&got, OPS_CPU, acc, OPS_CUDA, sizeof got);
    free_cuda(acc);
    return got;
}

/* sumsq_multi_cuda against the CPU's loop (rel 1e-10), the same bits on a
 * second run, and non-finite with an inf in its last tensor. Tensors of
 * several chunks, of a few elements, off alignment, in dt and fp32. */
static void test_sumsq_multi(ops_dtype dt)
{
    Buf x0 = buf_rand(dt, 3 * 32768 + 5, -2.0f, 2.0f), x1 = buf_rand(OPS_F32, 7, -2.0f, 2.0f);
    Buf x2a = buf_rand(dt, 100004, -2.0f, 2.0f);
    Buf x2 = buf_from(&x2a, 1);
    const Buf *bufs[3] = { &x0, &x1, &x2 };
    ops_tensor x[3];
    double cpu = 0.25;
    for (int i = 0; i < 3; i++) {
        x[i] = on_device(bufs[i]);
        sumsq_accumulate_cpu(&cpu, bufs[i]->h, bufs[i]->dt, bufs[i]->n);
    }
    int kept_waits = -1;
    double g1 = sumsq_multi_from(0.25, x, 3, NULL), g2 = sumsq_multi_from(0.25, x, 3, &kept_waits);
    double rel = fabs(g1 - cpu) / (fabs(cpu) > 1.0 ? fabs(cpu) : 1.0);
    CHECK(rel <= 1e-10 && memcmp(&g1, &g2, sizeof g1) == 0,
          "sumsq_multi %s: %.17g vs the CPU's loop %.17g (rel %.1e), same bits twice",
          ops_dtype_name(dt), g1, cpu, rel);
    CHECK(kept_waits == 0, "sumsq_multi %s: the second call keeps the table (%d host waits)",
          ops_dtype_name(dt), kept_waits);
    store_f32_cpu(x2.h, dt, x2.n - 1, INFINITY);
    upload(&x2);
    double inf = sumsq_multi_from(0.0, x, 3, NULL);
    CHECK(!isfinite(inf), "sumsq_multi %s: an inf in the last tensor gives %g",
          ops_dtype_name(dt), inf);
    buf_free(&x0);
    buf_free(&x1);
    buf_free(&x2a);
}

/* sumsq_multi_cuda over more chunks than the finish kernel has threads
 * (1100 tensors of 100 elements, a chunk each, views of one buffer):
 * its threads then add several partials each, which GPT-2 small's norm
 * (about 3900 chunks) needs and the cases above (9 chunks) never reach.
 * Against the CPU's loop (rel 1e-10; t_optim_emu has the bound), the
 * same bits twice. */
static void test_sumsq_multi_many(ops_dtype dt)
{
    enum { MANY = 1100, EACH = 100 };
    Buf b = buf_rand(dt, (int64_t)MANY * EACH, -2.0f, 2.0f);
    ops_tensor *x = xmalloc(sizeof *x * MANY);
    size_t es = ops_dtype_size(dt);
    double cpu = 0.25;
    for (int i = 0; i < MANY; i++) {
        x[i] = (ops_tensor){ (char *)b.d + (size_t)i * EACH * es, EACH, dt, OPS_CUDA };
        sumsq_accumulate_cpu(&cpu, (char *)b.h + (size_t)i * EACH * es, dt, EACH);
    }
    double g1 = sumsq_multi_from(0.25, x, MANY, NULL), g2 = sumsq_multi_from(0.25, x, MANY, NULL);
    double rel = fabs(g1 - cpu) / (fabs(cpu) > 1.0 ? fabs(cpu) : 1.0);
    CHECK(rel <= 1e-10 && memcmp(&g1, &g2, sizeof g1) == 0,
          "sumsq_multi %s over %d tensors (more partials than the finish kernel's threads): "
          "%.17g vs the CPU's loop %.17g (rel %.1e), same bits twice",
          ops_dtype_name(dt), MANY, g1, cpu, rel);
    free(x);
    buf_free(&b);
}

/* ---- host waits and device timers ------------------------------------------ */

static void counting_wait(void *event, const char *what)
{
    (void)what;
    waits_seen++;
    if (cudaEventSynchronize((cudaEvent_t)event) != cudaSuccess)
        tap_diag("cudaEventSynchronize failed in the test's wait hook");
}

/* A download waits through cuda_set_wait's hook (src/parallel/comm_nccl.c's polls
 * NCCL there); a device timer around a GEMM reads the GPU's time, more
 * than zero and no more than the host's clock around the GEMM and the
 * wait for it; its second read is 0. */
static void test_wait_and_timer(void)
{
    cuda_set_wait(counting_wait);
    Buf a = buf_rand(OPS_F32, (int64_t)2048 * 2048, -1.0f, 1.0f);
    Buf c = buf_zero(OPS_F32, (int64_t)2048 * 2048);
    waits_seen = 0;
    ops_timer t = ops_timer_on(OPS_CUDA);
    double t0 = clock_cpu();
    ops_timer_start(&t);
    matmul_fwd_cuda(c.d, OPS_F32, a.d, a.d, NULL, OPS_F32, 2048, 2048, 2048);
    ops_timer_stop(&t);
    void *back = download(&c);
    double host = clock_cpu() - t0, gpu = ops_timer_read(&t), again = ops_timer_read(&t);
    CHECK(waits_seen >= 1, "a download waits through the host-wait hook (%d waits)", waits_seen);
    CHECK(gpu > 0 && gpu <= host && again == 0.0,
          "ops_timer on CUDA: a 2048^3 GEMM took %.3f ms of GPU time, %.3f ms on the host; "
          "read again: %g", 1e3 * gpu, 1e3 * host, again);
    cuda_set_wait(NULL);
    ops_timer_free(&t);
    free(back);
    buf_free(&a);
    buf_free(&c);
}

/* ---- scratch and allocations ------------------------------------------------ */

/* A scratch buffer grows in stream order (issue 35): growing it waits for
 * nothing on the host (no cudaFree, which would wait for the whole
 * device), the op that grew it is right, the growth is counted by
 * ops_device_allocations, and the same op again allocates nothing. The
 * device's memory, which sizes the LM head's chunks, is known. */
static void test_scratch_growth(void)
{
    const int M = 4096, N = 4096, K = 64; /* an fp32 dout block of M x N: 64 MiB */
    Buf inp = buf_rand(OPS_BF16, (int64_t)M * K, -1.0f, 1.0f);
    Buf w = buf_rand(OPS_BF16, (int64_t)N * K, -0.5f, 0.5f);
    Buf dout = buf_rand(OPS_F32, (int64_t)M * N, -1.0f, 1.0f);
    Buf dinp = buf_zero(OPS_BF16, (int64_t)M * K);
    Buf dw = buf_zero(OPS_F32, (int64_t)N * K);
    cuda_set_wait(counting_wait);
    waits_seen = 0;
    int64_t before = ops_device_allocations(OPS_CUDA);
    matmul_bwd_cuda(dinp.d, dw.d, NULL, dout.d, OPS_F32, inp.d, w.d, OPS_BF16, M, N, K);
    int64_t grown = ops_device_allocations(OPS_CUDA);
    int waits = waits_seen;
    cuda_set_wait(NULL);
    matmul_bwd_cpu(dinp.h, dw.h, NULL, dout.h, OPS_F32, inp.h, w.h, OPS_BF16, M, N, K);
    expect("matmul_bwd (fp32 dout, scratch grown)", OPS_BF16, "dinp", &dinp);
    Buf dinp2 = buf_zero(OPS_BF16, (int64_t)M * K), dw2 = buf_zero(OPS_F32, (int64_t)N * K);
    int64_t steady = ops_device_allocations(OPS_CUDA);
    matmul_bwd_cuda(dinp2.d, dw2.d, NULL, dout.d, OPS_F32, inp.d, w.d, OPS_BF16, M, N, K);
    int64_t after = ops_device_allocations(OPS_CUDA);
    CHECK(grown > before && waits == 0 && after == steady,
          "scratch grows in stream order: %lld allocation(s), %d host waits; the same op "
          "again allocates %lld", (long long)(grown - before), waits, (long long)(after - steady));
    int64_t mem = ops_device_memory_bytes(OPS_CUDA);
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    CHECK(mem == (int64_t)total_b && mem > ((int64_t)1 << 30),
          "ops_device_memory_bytes: %.1f GiB", mem / 1073741824.0);
    Buf *all[] = { &inp, &w, &dout, &dinp, &dw, &dinp2, &dw2 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* ops_wide_scratch on the GPU, comm.c's fp32 buffer for 16-bit
 * reductions (issue 35): growing it waits for nothing on the host (it
 * once grew by ops_free and ops_alloc, whose cudaFree waits for the whole
 * device, NCCL's kernels on other streams included), each growth is
 * counted, a smaller request allocates nothing, and bf16 cast into it and
 * back (comm.c's path around the all-reduce) comes back bit for bit. */
static void test_wide_scratch(void)
{
    const int64_t n = (int64_t)1 << 22;
    Buf x = buf_rand(OPS_BF16, n, -4.0f, 4.0f), y = buf_zero(OPS_BF16, n);
    cuda_set_wait(counting_wait);
    waits_seen = 0;
    int64_t before = ops_device_allocations(OPS_CUDA);
    (void)ops_wide_scratch(OPS_CUDA, n / 4);
    ops_tensor wide = ops_wide_scratch(OPS_CUDA, n); /* past the first: grows */
    int64_t grown = ops_device_allocations(OPS_CUDA);
    ops_tensor again = ops_wide_scratch(OPS_CUDA, n / 2);
    int64_t steady = ops_device_allocations(OPS_CUDA);
    int waits = waits_seen;
    cuda_set_wait(NULL);
    cast_cuda(wide.data, OPS_F32, x.d, OPS_BF16, n);
    cast_cuda(y.d, OPS_BF16, wide.data, OPS_F32, n);
    memcpy(y.h, x.h, bytes_of(&x));
    CHECK(waits == 0 && grown - before >= 1 && steady == grown && again.data == wide.data &&
          wide.n == n && wide.dtype == OPS_F32 && wide.device == OPS_CUDA && bitwise(&y),
          "ops_wide_scratch grows in stream order: %lld allocation(s), %d host waits, "
          "none for a smaller request; bf16 through it unchanged",
          (long long)(grown - before), waits);
    buf_free(&x);
    buf_free(&y);
}

/* ---- GEMM info and rate ------------------------------------------------------ */

static void test_gemm_info(void)
{
    const char *warning = NULL;
    const char *info = gemm_info_cuda(&warning);
    tap_diag("%s", info);
    if (warning)
        tap_diag("warning: %s", warning);
    double f32 = gemm_peak_cuda(OPS_F32, 0.2), bf16 = gemm_peak_cuda(OPS_BF16, 0.2);
    CHECK(strstr(info, "cuBLAS") != NULL && f32 > 1e9 && bf16 > 1e9,
           "gemm_info_cuda and gemm_peak_cuda: fp32 %.1f, bf16 %.1f TFLOP/s",
           f32 / 1e12, bf16 / 1e12);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int count = cuda_device_count();
    if (count == 0) {
        /* what "no GPU" means, which needs none: a CPU node with a CUDA
         * build trains on the CPU under device = auto, a GPU node whose
         * driver is too old does not */
        tap_plan(6);
        /* the switches as the kernels see them, before anything read them */
        setenv("TRIDENT_FUSED", "0", 1);
        setenv("TRIDENT_LT_EPILOGUE", "bias", 1);
        tap_ok(!fused_enabled_cuda(), "TRIDENT_FUSED=0: the unfused kernels (switches.h parses "
               "it; t_switch_parse)");
        test_lt_parse();
        test_lt_verdict();
        tap_ok(cuda_count_means_no_gpu(100 /* cudaErrorNoDevice */, 1), "no device: no GPU");
        tap_ok(cuda_count_means_no_gpu(35 /* cudaErrorInsufficientDriver */, 0),
               "no NVIDIA driver installed: no GPU");
        tap_ok(!cuda_count_means_no_gpu(35, 1) && !cuda_count_means_no_gpu(999, 0),
               "a driver older than the runtime, or any other error: a broken GPU, reported");
        tap_diag("no CUDA device: the GPU tests did not run");
        return tap_done();
    }
    if (count < 0) {
        tap_plan(1);
        tap_ok(0, "the CUDA runtime fails: %s", cuda_device_count_error());
        return tap_done();
    }
    char err[256];
    if (cuda_device_init(0, 1, err, sizeof err) != 0) {
        CHECK(0, "cuda_device_init: %s", err);
        tap_plan(n_checks);
        return tap_done();
    }
    const char *fused_env = getenv("TRIDENT_FUSED");
    CHECK(fused_enabled_cuda() == !(fused_env && strcmp(fused_env, "0") == 0),
          "TRIDENT_FUSED: the kernels run %s", fused_enabled_cuda() ? "fused" : "unfused");
    /* the cases of trident's fused attention run its own kernel, whatever
     * TRIDENT_ATTENTION says; cuDNN's have test_attention_cudnn */
    ops_attention_route_set(OPS_ATTENTION_TRIDENT);
    test_memory();
    test_pinned();
    test_copy_rows();
    test_casts();
    test_wait_and_timer();
    test_scratch_growth();
    test_wide_scratch();
    test_lt_parse();
    test_lt_verdict();
    test_lt_gelu_formula();
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
        ops_dtype dt = dtypes[k];
        int big = dt != OPS_F16; /* real models' shapes: fp32 and bf16 */
        test_matmul(dt, big);
        test_lt_mlp(dt, 64, 96, 32);
        test_elementwise(dt, 100003, 0);
        test_elementwise(dt, 100003, 1);
        test_elementwise(dt, 5, 0); /* the tail alone */
        test_layernorm(dt, 37, 100, 0);
        test_layernorm(dt, 5, 1000, 0);
        test_layernorm(dt, 37, 96, 1);
        test_layernorm(dt, 9, 24, 0); /* fewer packs than lanes */
        test_llama(dt, 37, 128, 16);
        test_llama(dt, 37, 100, 10); /* C % 8 != 0: RMSNorm a channel a lane */
        test_attention(dt, 2, 37, 3, 16);
        test_attention(dt, 1, 64, 2, 32);
        test_attention(dt, 3, 100, 2, 80);
        test_attention_rows(dt, 2, 100, 37, 40, 3, 16);
        test_attention_rows(dt, 1, 300, 200, 100, 2, 64);
        test_attention_rows(dt, 1, 130, 129, 1, 1, 80);
        /* tokens in [0, 60), this shard [10, 50): some on other shards */
        test_embedding(dt, 3, 100, 70, 10, 40, 60);
        test_xent(dt, 9, 1000, 500, 2000, 0);
        /* one shard (the fused path too): aligned and narrower than the
         * block; a row not a whole number of packs; rows off alignment */
        test_xent(dt, 7, 40, 0, 40, 0);
        test_xent(dt, 5, 1001, 0, 1001, 0);
        test_xent(dt, 6, 1000, 0, 1000, 1);
        test_xent(dt, 9, 1003, 600, 2000, 0);
        test_adamw(dt);
        test_adamw_multi(dt);
        test_sumsq_multi(dt);
        test_sumsq_multi_many(dt);
        test_add_layernorm(dt, 37, 100, 0);
        test_add_layernorm(dt, 37, 96, 1);
        test_add_layernorm(dt, 9, 24, 0);
        test_colsums_packed(dt, 37, 100, 0, 0); /* packs in fp32 only */
        test_colsums_packed(dt, 37, 96, 1, 0);  /* unaligned: elements */
        test_colsums_packed(dt, 70, 96, 0, 1);  /* rows 97 apart: elements */
        test_colsums_packed(dt, 9, 24, 0, 0);   /* fewer packs than a warp */
        test_rmsnorm_dw_packed(dt, 37, 100, 0); /* packs in fp32 only */
        test_rmsnorm_dw_packed(dt, 37, 96, 1);  /* unaligned: elements */
        test_rmsnorm_dw_packed(dt, 9, 24, 0);   /* fewer packs than a warp */
        test_add_rmsnorm(dt, 37, 100);
        test_add_rmsnorm(dt, 9, 24);
        /* TRIDENT_FUSED's kernels: tokens that repeat, all equal, all
         * distinct; the head's 16-bit gradient, packed and not, fp16
         * with a loss scale */
        test_embedding_runs(dt, 300, 70, 10, 40, 60, 0);
        test_embedding_runs(dt, 300, 70, 10, 40, 60, 1);
        test_embedding_runs(dt, 37, 70, 10, 40, 60, 0);
        /* 12 words over 300 tokens: runs of about 25 rows, across the
         * batches of 16, ending mid-array; 4 of the words on other shards */
        test_embedding_runs(dt, 300, 70, 2, 8, 12, 0);
        if (dt != OPS_F32) {
            test_xent_narrow(dt, 7, 40, 0, 1.0f);
            test_xent_narrow(dt, 5, 1001, 0, 1.0f);
            test_xent_narrow(dt, 6, 1000, 1, dt == OPS_F16 ? 1024.0f : 1.0f);
            /* rows of several stretches (2048 packs): element by element
             * (5001, odd), and packed with a last stretch of one pack */
            test_xent_narrow(dt, 3, 5001, 0, 1.0f);
            test_xent_narrow(dt, 2, 8196, 0, 1.0f);
            test_head_bwd(dt, 37, 1000, 64);
            test_head_bwd(dt, 5, 1001, 24);
        }
        if (!big)
            continue;
        test_add_layernorm(dt, 8209, 768, 0);
        /* GPT-2 small's width over 8209 rows: 249 chunks, the last short */
        test_colsums_packed(dt, 8209, 768, 0, 0);
        test_colsums_packed(dt, 8209, 2304, 0, 8); /* rows 2312 apart: packs */
        /* the 1B Llama's RMSNorm (2048 channels, 16384 rows: 256 chunks
         * of 64), and an odd width over 8209 rows (the element path) */
        test_rmsnorm_dw_packed(dt, 16384, 2048, 0);
        test_rmsnorm_dw_packed(dt, 8209, 2051, 0);
        test_add_rmsnorm(dt, 4099, 2048); /* the 1B Llama's width */
        test_elementwise(dt, ((int64_t)1 << 21) + 5, 0);
        /* GPT-2 small's MLP on 512 tokens: fc 768 -> 3072 */
        test_lt_mlp(dt, 512, 3072, 768);
        /* 8209 rows of GPT-2 small's width: 6.3M elements, dw and db
         * summed over 8209 rows in 249 chunks; Llama's RMSNorm, rotary
         * heads of 128 (4.2M elements, dw over 1031 rows) and of 64 */
        test_layernorm(dt, 8209, 768, 0);
        test_llama(dt, 1031, 4096, 128);
        test_llama(dt, 1031, 1024, 64);
        test_attention(dt, 1, 1024, 4, 64);
        test_attention(dt, 1, 1024, 2, 128);
        test_attention(dt, 1, 4096, 1, 64);
        test_attention_rows(dt, 1, 4096, 3072, 512, 2, 128);
        test_attention_exact(dt, 4096, 128);
        test_embedding(dt, 2, 2048, 768, 0, 50304, 50304);
        /* GPT-2's vocabulary whole; Llama 3's split in two, this shard the upper half */
        test_xent(dt, 16, 50304, 0, 50304, 0);
        test_xent(dt, 8, 64128, 64128, 128256, 0);
        /* GPT-2 small's step of 16k tokens: one run of them all, and
         * all distinct; its head's gradient and backward on 333 rows */
        test_embedding_runs(dt, 16384, 768, 0, 50304, 50304, 1);
        test_embedding_runs(dt, 16384, 768, 0, 50304, 50304, 0);
        if (dt != OPS_F32) {
            test_xent_narrow(dt, 16, 50304, 0, 1.0f);
            test_head_bwd(dt, 333, 50304, 768);
        }
    }
#if TRI_HAVE_CUDNN
    test_attention_cudnn_refusals();
    for (int k = 1; k < 3; k++) { /* bf16, fp16 */
        test_attention_cudnn(dtypes[k], 2, 1024, 4, 64);
        test_attention_cudnn(dtypes[k], 1, 1024, 2, 128);
        test_attention_cudnn(dtypes[k], 3, 1000, 3, 64); /* a ragged T */
        test_attention_cudnn(dtypes[k], 2, 37, 2, 128);
    }
#endif
    test_moe();
    test_gemm_info();
    cuda_device_finalize();
    /* a trailing plan: the count follows the loops above */
    tap_plan(n_checks);
    return tap_done();
}
