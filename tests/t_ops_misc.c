/*
 * t_ops_misc.c - the ops without a backward pass, checked against values
 * worked out independently: casts at the edges of bf16 and fp16, AdamW
 * against its formula in double, the sum of squares, clipping and scaling,
 * cross-entropy against a double log-softmax, the GEMM against a triple
 * loop, and the dispatcher's error messages.
 */
#include "kernels/ops.h"

#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu.h"
#include "tests/tap.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float uniform(float lo, float hi)
{
    return tap_uniform(&rng_state, lo, hi);
}

static ops_tensor f32(int64_t n)
{
    return ops_alloc(OPS_F32, OPS_CPU, n);
}

static float *fp(ops_tensor t)
{
    return (float *)t.data;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ---- dtypes and memory ------------------------------------------------- */

static void test_dtypes(void)
{
    ops_dtype d = OPS_I32;
    int ok = ops_dtype_size(OPS_F32) == 4 && ops_dtype_size(OPS_BF16) == 2 &&
             ops_dtype_size(OPS_F16) == 2 && ops_dtype_size(OPS_I32) == 4;
    ok = ok && ops_dtype_parse("bf16", &d) == 0 && d == OPS_BF16;
    ok = ok && ops_dtype_parse("fp16", &d) == 0 && d == OPS_F16;
    ok = ok && ops_dtype_parse("fp32", &d) == 0 && d == OPS_F32;
    ok = ok && ops_dtype_parse("fp8", &d) != 0 && d == OPS_F32;
    ok = ok && strcmp(ops_dtype_name(OPS_BF16), "bf16") == 0;
    tap_ok(ok, "dtype sizes, names and parsing");

    ops_tensor t = ops_alloc(OPS_BF16, OPS_CPU, 1001);
    int zero = 1;
    for (int i = 0; i < 1001; i++)
        zero = zero && ((uint16_t *)t.data)[i] == 0;
    ops_tensor v = ops_view(t, 10, 5);
    ops_tensor e = ops_alloc(OPS_F32, OPS_CPU, 0);
    tap_ok(zero && ((uintptr_t)t.data % 64) == 0 &&
           (char *)v.data == (char *)t.data + 20 && v.n == 5 &&
           v.dtype == OPS_BF16 && e.data != NULL,
           "ops_alloc is zeroed and 64-byte aligned; ops_view offsets");
    ops_free(&t);
    ops_free(&e);
    tap_ok(t.data == NULL && t.n == 0, "ops_free clears the handle");
}

/* ops_wide_scratch (comm.c's fp32 widening of 16-bit reductions) on the
 * CPU: n fp32 elements, one buffer that grows when asked for more, counted
 * once per growth, and kept for smaller requests. Its GPU side (a scratch
 * slot grown in stream order) runs in t_ops_cuda's allocation checks. */
static void test_wide_scratch(void)
{
    int64_t before = ops_device_allocations(OPS_CPU);
    ops_tensor a = ops_wide_scratch(OPS_CPU, 0);
    ops_tensor b = ops_wide_scratch(OPS_CPU, 100);
    ((float *)b.data)[99] = 1.0f;
    ops_tensor c = ops_wide_scratch(OPS_CPU, 40);
    int64_t kept = ops_device_allocations(OPS_CPU);
    ops_tensor d = ops_wide_scratch(OPS_CPU, 1000);
    tap_ok(a.data && a.n == 0 && b.n == 100 && b.dtype == OPS_F32 && b.device == OPS_CPU &&
           c.data == b.data && c.n == 40 && kept - before == 2 && d.n == 1000 &&
           ops_device_allocations(OPS_CPU) - kept == 1,
           "ops_wide_scratch: n fp32 elements, one buffer grown on demand (%lld growths), "
           "kept for smaller requests", (long long)(ops_device_allocations(OPS_CPU) - before));
}

/* ---- casts ----------------------------------------------------------------- */

/* Casts n floats to dtype and back through ops_cast. */
static void round_trip(float *out, const float *in, int n, ops_dtype dtype)
{
    ops_tensor a = f32(n), h = ops_alloc(dtype, OPS_CPU, n), b = f32(n);
    memcpy(a.data, in, (size_t)n * sizeof(float));
    ops_cast(h, a);
    ops_cast(b, h);
    memcpy(out, b.data, (size_t)n * sizeof(float));
    ops_free(&a);
    ops_free(&h);
    ops_free(&b);
}

/* in[i] -> dtype -> fp32 must give want[i] bit for bit (NaN: any NaN). */
static int casts_to(const float *in, const float *want, int n,
                    ops_dtype dtype)
{
    float out[32];
    round_trip(out, in, n, dtype);
    int ok = 1;
    for (int i = 0; i < n; i++) {
        int same = isnan(want[i]) ? isnan(out[i]) : bits(out[i]) == bits(want[i]);
        if (!same)
            tap_diag("%s: %.9g -> %.9g, want %.9g", ops_dtype_name(dtype),
                     in[i], out[i], want[i]);
        ok = ok && same;
    }
    return ok;
}

static void test_bf16(void)
{
    const float u = 0x1p-7f; /* bf16's ulp at 1 */
    float exact[] = { 0.0f, -0.0f, 1.0f, -2.5f, 1.0f + u, 0x1p-133f,
                      3.3895313892515355e38f, 0x1p-126f };
    tap_ok(casts_to(exact, exact, 8, OPS_BF16),
           "bf16: representable values round-trip exactly");
    float in[] = { 1.0f + u / 2, 1.0f + 3 * u / 2, 1.0f + u / 2 + 0x1p-20f,
                   -(1.0f + 3 * u / 2), 1.0f + u / 4 };
    float want[] = { 1.0f, 1.0f + 2 * u, 1.0f + u, -(1.0f + 2 * u), 1.0f };
    tap_ok(casts_to(in, want, 5, OPS_BF16),
           "bf16: ties round to even, others to nearest");
    float sp[] = { NAN, -NAN, INFINITY, -INFINITY, 3.4e38f };
    float spw[] = { NAN, NAN, INFINITY, -INFINITY, INFINITY };
    tap_ok(casts_to(sp, spw, 5, OPS_BF16),
           "bf16: NaN stays NaN, inf stays inf, near-FLT_MAX rounds to inf");
}

static void test_f16(void)
{
    const float u = 0x1p-10f; /* fp16's ulp at 1 */
    float exact[] = { 0.0f, -0.0f, 1.0f, 65504.0f, -65504.0f, 0x1p-14f,
                      0x1p-24f, 3 * 0x1p-24f, 1023 * 0x1p-24f, 1.0f + u };
    tap_ok(casts_to(exact, exact, 10, OPS_F16),
           "fp16: representable values (max, min normal, subnormals) "
           "round-trip exactly");
    float in[] = { 1.0f + u / 2, 1.0f + 3 * u / 2, 1.0f + u / 2 + 0x1p-20f,
                   2048.0f + 1.0f, 2048.0f + 3.0f };
    float want[] = { 1.0f, 1.0f + 2 * u, 1.0f + u, 2048.0f, 2052.0f };
    tap_ok(casts_to(in, want, 5, OPS_F16),
           "fp16: ties round to even, others to nearest");
    float big[] = { 65504.0f, 65519.996f, 65520.0f, -65520.0f, 1e6f,
                    INFINITY };
    float bigw[] = { 65504.0f, 65504.0f, INFINITY, -INFINITY, INFINITY,
                     INFINITY };
    tap_ok(casts_to(big, bigw, 6, OPS_F16),
           "fp16: 65504 and 65519.996 stay finite, 65520 overflows to inf");
    float sub[] = { 0x1p-25f, 1.5f * 0x1p-25f, 0x1p-26f, -0x1p-26f,
                    3 * 0x1p-25f, 5 * 0x1p-25f, 1e-10f, 0x1p-14f - 0x1p-25f };
    float subw[] = { 0.0f, 0x1p-24f, 0.0f, -0.0f, 4 * 0x1p-25f,
                     4 * 0x1p-25f, 0.0f, 0x1p-14f };
    tap_ok(casts_to(sub, subw, 8, OPS_F16),
           "fp16: subnormals round to even, below 2^-25 flush to signed zero");
    float nan_in[] = { NAN, -NAN };
    float nan_w[] = { NAN, NAN };
    tap_ok(casts_to(nan_in, nan_w, 2, OPS_F16), "fp16: NaN stays NaN");
}

/* bf16 <-> fp16 directly must equal the trip through fp32, and a same-dtype
 * cast is a copy. */
static void test_cast_pairs(void)
{
    enum { N = 257 };
    ops_tensor a = f32(N), h = ops_alloc(OPS_F16, OPS_CPU, N);
    ops_tensor b = ops_alloc(OPS_BF16, OPS_CPU, N);
    ops_tensor b2 = ops_alloc(OPS_BF16, OPS_CPU, N), t = f32(N);
    ops_tensor h2 = ops_alloc(OPS_F16, OPS_CPU, N), h3 = ops_alloc(OPS_F16, OPS_CPU, N);
    for (int i = 0; i < N; i++)
        fp(a)[i] = uniform(-70000.0f, 70000.0f) * powf(2.0f, (float)(i % 40 - 30));
    ops_cast(h, a);
    ops_cast(b, h);   /* fp16 -> bf16 */
    ops_cast(t, h);
    ops_cast(b2, t);  /* fp16 -> fp32 -> bf16 */
    int ok = memcmp(b.data, b2.data, N * 2) == 0;
    ops_cast(h2, b);  /* bf16 -> fp16 */
    ops_cast(t, b);
    ops_cast(h3, t);  /* bf16 -> fp32 -> fp16 */
    ok = ok && memcmp(h2.data, h3.data, N * 2) == 0;
    ops_cast(h3, h2); /* same dtype: a copy */
    ok = ok && memcmp(h2.data, h3.data, N * 2) == 0;
    tap_ok(ok, "bf16 <-> fp16 casts equal the trip through fp32");
    ops_free(&a); ops_free(&h); ops_free(&b); ops_free(&b2); ops_free(&t);
    ops_free(&h2); ops_free(&h3);
}

/* ---- AdamW ----------------------------------------------------------------- */

enum { AD_N = 5, AD_STEPS = 3 };

/* The AdamW formula in double, for element i over steps 1..3. */
static void adamw_reference(double *w, const float g[AD_STEPS][AD_N],
                            const ops_adamw_args *a)
{
    for (int i = 0; i < AD_N; i++) {
        double m = 0.0, v = 0.0;
        for (int s = 1; s <= AD_STEPS; s++) {
            double gi = (double)g[s - 1][i] * a->grad_scale;
            m = a->beta1 * m + (1.0 - a->beta1) * gi;
            v = a->beta2 * v + (1.0 - a->beta2) * gi * gi;
            double mhat = m / (1.0 - pow(a->beta1, s));
            double vhat = v / (1.0 - pow(a->beta2, s));
            w[i] -= a->lr * (mhat / (sqrt(vhat) + a->eps) + a->weight_decay * w[i]);
        }
    }
}

/* Runs three steps with grads of dtype gdt and a wcopy of dtype wdt;
 * returns the worst relative error against the double reference and
 * whether wcopy always held the rounded master weights. */
static double adamw_run(ops_dtype gdt, ops_dtype wdt, int *copy_ok)
{
    static const float w0[AD_N] = { 0.5f, -1.0f, 2.0f, 0.0f, -0.25f };
    float g[AD_STEPS][AD_N] = {
        { 0.1f, -0.2f, 0.3f, 1.5f, -0.05f },
        { -0.3f, 0.1f, 0.25f, 1.0f, 0.0f },
        { 0.2f, 0.2f, -0.5f, -2.0f, 0.125f },
    };
    ops_adamw_args a = { 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0 };
    ops_tensor master = f32(AD_N), m = f32(AD_N), v = f32(AD_N), gf = f32(AD_N);
    ops_tensor grad = ops_alloc(gdt, OPS_CPU, AD_N);
    ops_tensor wcopy = ops_alloc(wdt, OPS_CPU, AD_N), back = f32(AD_N);
    ops_tensor round = ops_alloc(wdt, OPS_CPU, AD_N);
    memcpy(master.data, w0, sizeof w0);
    *copy_ok = 1;
    for (int s = 0; s < AD_STEPS; s++) {
        memcpy(gf.data, g[s], sizeof g[s]);
        ops_cast(grad, gf);
        ops_cast(back, grad);  /* the grads as the step sees them */
        memcpy(g[s], back.data, sizeof g[s]);
        a.step = s + 1;
        ops_adamw(master, grad, m, v, wcopy, AD_N, &a);
        ops_cast(round, master);
        *copy_ok = *copy_ok && memcmp(round.data, wcopy.data,
                                      AD_N * ops_dtype_size(wdt)) == 0;
    }
    double ref[AD_N];
    for (int i = 0; i < AD_N; i++)
        ref[i] = w0[i];
    adamw_reference(ref, (const float (*)[AD_N])g, &a);
    double worst = 0.0;
    for (int i = 0; i < AD_N; i++) {
        double e = fabs(fp(master)[i] - ref[i]) / fmax(fabs(ref[i]), 1e-3);
        worst = !(e <= worst) ? (isnan(e) ? INFINITY : e) : worst;
    }
    ops_free(&master); ops_free(&m); ops_free(&v); ops_free(&gf);
    ops_free(&grad); ops_free(&wcopy); ops_free(&back); ops_free(&round);
    return worst;
}

/* The training case, fp32 gradients with no copy or a bf16 / fp16 copy,
 * over 32773 elements (three threads' spans of 16384, vector lanes and a
 * ragged tail): every element, and its copy, must be elem.h's scalar
 * formula's bits, whatever loop the compiler made of it. */
static int adamw_matches_scalar(ops_dtype wdt, int with_copy)
{
    enum { N = 2 * 16384 + 5 };
    ops_adamw_args a = { 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.75f, 7 };
    ops_tensor master = f32(N), m = f32(N), v = f32(N), grad = f32(N);
    ops_tensor wcopy = ops_alloc(wdt, OPS_CPU, N);
    float *w0 = malloc(3 * N * sizeof(float)), *m0 = w0 + N, *v0 = m0 + N;
    for (int i = 0; i < N; i++) {
        w0[i] = fp(master)[i] = (float)sin(i * 0.37) * 2.0f;
        m0[i] = fp(m)[i] = (float)cos(i * 0.11) * 0.01f;
        v0[i] = fp(v)[i] = (float)(1.0 + sin(i * 0.05)) * 1e-4f;
        fp(grad)[i] = (float)sin(i * 1.3) * (i % 7 == 0 ? 1e-6f : 0.3f);
    }
    int saved = omp_get_max_threads();
    omp_set_num_threads(3);
    ops_adamw(master, grad, m, v, with_copy ? wcopy : (ops_tensor){ 0 }, N, &a);
    omp_set_num_threads(saved);
    /* the kernel's bias corrections: fp64 powers of the fp32 betas */
    float bc1 = (float)(1.0 - pow((double)a.beta1, a.step));
    float bc2 = (float)(1.0 - pow((double)a.beta2, a.step));
    int same = 1;
    for (int i = 0; i < N; i++) {
        float mi = m0[i], vi = v0[i];
        float w = elem_adamw(w0[i], fp(grad)[i] * a.grad_scale, &mi, &vi, a.lr,
                             a.beta1, a.beta2, a.eps, a.weight_decay, bc1, bc2);
        uint16_t c = wdt == OPS_BF16 ? elem_f32_to_bf16(w) : elem_f32_to_f16(w);
        same = same && memcmp(&w, &fp(master)[i], 4) == 0 &&
               memcmp(&mi, &fp(m)[i], 4) == 0 && memcmp(&vi, &fp(v)[i], 4) == 0 &&
               (!with_copy || ((uint16_t *)wcopy.data)[i] == c);
    }
    ops_free(&master); ops_free(&m); ops_free(&v); ops_free(&grad);
    ops_free(&wcopy);
    free(w0);
    return same;
}

static void test_adamw(void)
{
    tap_ok(adamw_matches_scalar(OPS_BF16, 0) && adamw_matches_scalar(OPS_BF16, 1) &&
           adamw_matches_scalar(OPS_F16, 1),
           "adamw on fp32 grads (no copy, bf16 copy, fp16 copy; 32773 elements, "
           "3 threads): master, m, v and the copy are elem_adamw's scalar bits");

    int c1, c2, c3;
    double e1 = adamw_run(OPS_F32, OPS_F32, &c1);
    tap_ok(e1 < 1e-5, "adamw steps 1-3 match the double formula (max rel "
           "%.1e, tol 1e-5)", e1);
    double e2 = adamw_run(OPS_BF16, OPS_BF16, &c2);
    double e3 = adamw_run(OPS_F16, OPS_F16, &c3);
    tap_ok(e2 < 1e-5 && e3 < 1e-5, "adamw with bf16 and fp16 grads (max rel "
           "%.1e, %.1e)", e2, e3);
    tap_ok(c1 && c2 && c3, "adamw wcopy (fp32, bf16, fp16) holds the rounded "
           "new master weights");
}

/* ---- sum of squares, clip, scale ------------------------------------------- */

static double sumsq_with(int threads, ops_tensor x, double start)
{
    ops_tensor acc = ops_alloc(OPS_F64, OPS_CPU, 1);
    memcpy(acc.data, &start, sizeof start);
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    ops_sumsq_accumulate(acc, x, x.n);
    omp_set_num_threads(saved);
    double r;
    memcpy(&r, acc.data, sizeof r);
    ops_free(&acc);
    return r;
}

static void test_sumsq(void)
{
    enum { N = 1000003 };
    ops_tensor x = f32(N);
    double ref = 0.0;
    for (int i = 0; i < N; i++) {
        fp(x)[i] = uniform(-2, 2);
        ref += (double)fp(x)[i] * fp(x)[i];
    }
    double s1 = sumsq_with(1, x, 1.5), s3 = sumsq_with(3, x, 1.5);
    double e = fabs(s1 - 1.5 - ref) / ref;
    tap_ok(e < 1e-12, "sumsq accumulates the fp64 sum of squares (rel %.1e)",
           e);
    tap_ok(memcmp(&s1, &s3, sizeof s1) == 0,
           "sumsq is bitwise equal with 1 and 3 threads");
    fp(x)[N / 2] = INFINITY;
    double si = sumsq_with(2, x, 0.0);
    fp(x)[N / 2] = NAN;
    double sn = sumsq_with(2, x, 0.0);
    fp(x)[N / 2] = 3e38f;
    double sb = sumsq_with(2, x, 0.0);
    tap_ok(!isfinite(si) && !isfinite(sn) && isfinite(sb),
           "sumsq is non-finite with an inf or a NaN, finite with 3e38");
    ops_free(&x);
}

static void test_clip_scale(void)
{
    float in[] = { -5.0f, -1.0f, 0.5f, 1.0f, 3.0f, INFINITY, -INFINITY, NAN };
    float want[] = { -1.0f, -1.0f, 0.5f, 1.0f, 1.0f, 1.0f, -1.0f, NAN };
    ops_tensor x = f32(8);
    memcpy(x.data, in, sizeof in);
    ops_clip_value(x, 1.0f, 8);
    int ok = 1;
    for (int i = 0; i < 8; i++)
        ok = ok && (isnan(want[i]) ? isnan(fp(x)[i]) : fp(x)[i] == want[i]);
    tap_ok(ok, "clip_value clamps to [-c, c] and keeps NaN");
    memcpy(x.data, in, sizeof in);
    ops_scale(x, -0.5f, 5);
    ok = fp(x)[0] == 2.5f && fp(x)[2] == -0.25f && fp(x)[4] == -1.5f &&
         isinf(fp(x)[5]);
    tap_ok(ok, "scale multiplies the first n elements only");
    ops_free(&x);
}

/* ---- cross-entropy ------------------------------------------------------- */

static void test_xent_loss(void)
{
    enum { N = 8, V = 50 };
    ops_tensor logits = f32(N * V), targets = ops_alloc(OPS_I32, OPS_CPU, N);
    ops_tensor rowmax = f32(N), sumexp = f32(N), tl = f32(N), losses = f32(N);
    for (int i = 0; i < N; i++) {
        ((int32_t *)targets.data)[i] = (i * 13) % V;
        for (int j = 0; j < V; j++)  /* large offsets test the max shift */
            fp(logits)[i * V + j] = uniform(-3, 3) + (i % 2 ? 80.0f : -30.0f);
    }
    ops_xent_max(rowmax, logits, N, V);
    ops_xent_sumexp(sumexp, tl, logits, rowmax, targets, 0, N, V);
    ops_xent_finish(losses, OPS_NONE, logits, rowmax, sumexp, tl, targets, 0,
                    N, V, 1.0f);
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        const float *row = fp(logits) + i * V;
        double m = -INFINITY, z = 0.0;
        for (int j = 0; j < V; j++)
            m = row[j] > m ? row[j] : m;
        for (int j = 0; j < V; j++)
            z += exp((double)row[j] - m);
        double ref = -((double)row[(i * 13) % V] - m - log(z));
        double e = fabs(fp(losses)[i] - ref) / ref;
        worst = e > worst ? e : worst;
    }
    tap_ok(worst < 1e-5, "xent loss vs double log-softmax (max rel %.1e)",
           worst);
    ops_free(&logits); ops_free(&targets); ops_free(&rowmax);
    ops_free(&sumexp); ops_free(&tl); ops_free(&losses);
}

/* ---- GEMM ------------------------------------------------------------------- */

/* gemm_f32_cpu with padded leading dimensions against a double triple loop,
 * for one transpose combination; returns the worst relative error. */
static double gemm_err(int ta, int tb)
{
    enum { M = 13, N = 9, K = 7, PAD = 3 };
    /* stored shapes: A is (M,K) or (K,M), B is (K,N) or (N,K) */
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + PAD, ldb = bc + PAD + 2, ldc = N + PAD + 1;
    float *A = malloc(sizeof(float) * ar * lda), *B = malloc(sizeof(float) * br * ldb);
    float *C = malloc(sizeof(float) * M * ldc);
    double *ref = malloc(sizeof(double) * M * ldc);
    for (int i = 0; i < ar * lda; i++)
        A[i] = uniform(-1, 1);
    for (int i = 0; i < br * ldb; i++)
        B[i] = uniform(-1, 1);
    for (int i = 0; i < M * ldc; i++)
        ref[i] = C[i] = uniform(-1, 1);
    const float alpha = 0.75f, beta = -0.5f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++)
                s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
                     (tb ? B[j * ldb + k] : B[k * ldb + j]);
            ref[i * ldc + j] = alpha * s + beta * ref[i * ldc + j];
        }
    gemm_f32_cpu(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    double worst = 0.0;
    for (int i = 0; i < M * ldc; i++) {
        /* padding columns must be untouched: ref holds their old values */
        double e = fabs(C[i] - ref[i]) / fmax(fabs(ref[i]), 1.0);
        worst = !(e <= worst) ? (isnan(e) ? INFINITY : e) : worst;
    }
    free(A); free(B); free(C); free(ref);
    return worst;
}

static void test_gemm(void)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            double e = gemm_err(ta, tb);
            tap_ok(e < 1e-5, "gemm_f32_cpu trans_a=%d trans_b=%d, padded "
                   "leading dims, vs triple loop (max rel %.1e)", ta, tb, e);
        }
    float a[6] = { 1, 2, 3, 4, 5, 6 }, b[6] = { 1, 0, 0, 1, 1, 1 };
    float c[4] = { NAN, NAN, NAN, NAN };
    gemm_f32_cpu(0, 0, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
    tap_ok(c[0] == 4 && c[1] == 5 && c[2] == 10 && c[3] == 11,
           "gemm_f32_cpu with beta 0 ignores NaN in C");

    const char *warning = NULL;
    const char *info = ops_gemm_info(&warning);
    tap_diag("GEMM: %s", info);
    if (warning)
        tap_diag("GEMM warning: %s", warning);
    tap_ok(strstr(info, "sgemm") != NULL, "ops_gemm_info names the library");
    double peak = ops_gemm_peak(0.2);
    tap_diag("ops_gemm_peak: %.1f GFLOP/s on %d threads", peak / 1e9,
             omp_get_max_threads());
    tap_ok(peak > 0 && isfinite(peak), "ops_gemm_peak is positive and finite");
}

/* The GEMM peak probes' data (elem.h): in [-1, 1), centred, spread like a
 * uniform draw, different for each matrix, and without the short period
 * of the old i % 7 fill, which read above a GEMM on real data. */
static void test_probe_values(void)
{
    enum { N = 1 << 16, MAX_PERIOD = 64 };
    static float x[N];
    double sum = 0.0, sumsq = 0.0;
    int in_range = 1, same_as_other = 0;
    for (int i = 0; i < N; i++) {
        x[i] = elem_probe_value((uint64_t)i, 0);
        in_range &= x[i] >= -1.0f && x[i] < 1.0f;
        sum += x[i];
        sumsq += (double)x[i] * x[i];
        same_as_other += x[i] == elem_probe_value((uint64_t)i, 1);
    }
    double mean = sum / N, var = sumsq / N - mean * mean;
    int worst_repeats = 0;
    for (int p = 1; p <= MAX_PERIOD; p++) {
        int repeats = 0;
        for (int i = 0; i + p < N; i++)
            repeats += x[i] == x[i + p];
        if (repeats > worst_repeats)
            worst_repeats = repeats;
    }
    tap_diag("probe values: mean %.4f, variance %.4f (uniform: 0.3333), "
             "at most %d repeats at a period <= %d", mean, var, worst_repeats, MAX_PERIOD);
    tap_ok(in_range && fabs(mean) < 0.02 && fabs(var - 1.0 / 3.0) < 0.02 &&
           worst_repeats < N / 1000 && same_as_other < N / 1000,
           "elem_probe_value: hashed values in [-1, 1), uniform-like, no "
           "period up to %d, the two matrices differ", MAX_PERIOD);
}

/* ---- errors --------------------------------------------------------------- */

static jmp_buf fatal_jump;
static char fatal_msg[512];

static void catch_fatal(const char *what, const char *file, int line)
{
    (void)file;
    (void)line;
    snprintf(fatal_msg, sizeof fatal_msg, "%s", what);
    longjmp(fatal_jump, 1);
}

/* Runs a bad matmul_fwd and returns whether the fatal message holds want. */
static int fails_with(ops_tensor out, ops_tensor inp, const char *want)
{
    ops_tensor w = f32(6);
    fatal_msg[0] = '\0';
    if (setjmp(fatal_jump) == 0)
        ops_matmul_fwd(out, inp, w, OPS_NONE, 2, 3, 2);
    ops_free(&w);
    if (!strstr(fatal_msg, want))
        tap_diag("fatal message \"%s\" lacks \"%s\"", fatal_msg, want);
    return strstr(fatal_msg, want) != NULL;
}

static void test_errors(void)
{
    ops_set_fatal_handler(catch_fatal);
    ops_tensor out = f32(6), inp = f32(4);
    ops_tensor bf = ops_alloc(OPS_BF16, OPS_CPU, 4);
    ops_tensor gpu = inp;
    gpu.device = OPS_CUDA;
    ops_tensor small = ops_view(out, 0, 5);
    int ok = fails_with(out, bf, "ops_matmul_fwd: w is fp32 but inp is bf16; "
                        "the activations, weights and activation gradients "
                        "of one call share one compute dtype");
    ok = fails_with(out, OPS_NONE, "required argument inp is missing") && ok;
    ok = fails_with(small, inp, "out holds 5 elements but the shapes need 6")
         && ok;
    if (!TRI_HAVE_CUDA)
        ok = fails_with(out, gpu, "built without CUDA; reconfigure with "
                        "--with-cuda") && ok;
    tap_ok(ok, "bad calls reach the fatal handler with a clear message");
    ops_set_fatal_handler(NULL);
    ops_free(&out);
    ops_free(&inp);
    ops_free(&bf);
}

/* Runs ops_copy_rows and returns whether it reached the fatal handler
 * with a message containing want. */
static int copy_rows_fails(ops_tensor dst, ops_tensor src, int64_t rows, int64_t cols,
                           int64_t stride, const char *want)
{
    ops_set_fatal_handler(catch_fatal);
    fatal_msg[0] = '\0';
    if (setjmp(fatal_jump) == 0)
        ops_copy_rows(dst, src, rows, cols, stride);
    ops_set_fatal_handler(NULL);
    if (!strstr(fatal_msg, want))
        tap_diag("fatal message \"%s\" lacks \"%s\"", fatal_msg, want);
    return strstr(fatal_msg, want) != NULL;
}

/* ops_copy_rows as pipeline.c splits a batch: rows of T+1 tokens give the
 * inputs (elements 0..T-1 of each row) and, one further on, the targets. */
static void test_copy_rows(void)
{
    enum { ROWS = 3, T = 4 };
    int32_t batch[ROWS * (T + 1)];
    for (int i = 0; i < ROWS * (T + 1); i++)
        batch[i] = 100 + i;
    ops_tensor src = {batch, ROWS * (T + 1), OPS_I32, OPS_CPU};
    ops_tensor tokens = ops_alloc(OPS_I32, OPS_CPU, ROWS * T);
    ops_tensor targets = ops_alloc(OPS_I32, OPS_CPU, ROWS * T);
    ops_copy_rows(tokens, src, ROWS, T, T + 1);
    ops_copy_rows(targets, ops_view(src, 1, src.n - 1), ROWS, T, T + 1);
    int ok = 1;
    for (int r = 0; r < ROWS; r++)
        for (int t = 0; t < T; t++) {
            ok &= ((int32_t *)tokens.data)[r * T + t] == 100 + r * (T + 1) + t;
            ok &= ((int32_t *)targets.data)[r * T + t] == 100 + r * (T + 1) + t + 1;
        }
    tap_ok(ok, "ops_copy_rows: rows of T+1 tokens split into inputs and targets");
    ops_tensor f = f32(ROWS * T), gpu = tokens;
    gpu.device = OPS_CUDA;
    int bad = copy_rows_fails(tokens, src, ROWS, T, T - 1, "the stride >= cols");
    bad &= copy_rows_fails(tokens, ops_view(src, 2, src.n - 2), ROWS, T, T + 1,
                           "src holds 13 elements but the shapes need 14");
    bad &= copy_rows_fails(f, src, ROWS, T, T + 1, "dst is fp32 but src is int32");
    bad &= copy_rows_fails(gpu, src, ROWS, T, T + 1, TRI_HAVE_CUDA
                           ? "src is on cpu but dst is on cuda" : "built without CUDA");
    tap_ok(bad, "ops_copy_rows: a short stride, a short source, mixed dtypes or devices: fatal");
    ops_free(&tokens);
    ops_free(&targets);
    ops_free(&f);
}

/* The bad calls of window_fails */
enum { BAD_ROWS_FWD, BAD_ROWS_BWD, BAD_ROPE_AT };

/* Runs one context-parallel op (which) on a window [q0, q0 + Tq) of a
 * sequence of 8 rows (for rope: t0 = q0, Tq rows) and returns whether it
 * reached the fatal handler with a message containing want. */
static int window_fails(int which, int q0, int Tq, const char *want)
{
    enum { T = 8, HS = 2 };
    ops_tensor qkv = f32(3 * T * HS), dqkv = f32(3 * T * HS), out = f32(T * HS), lse = f32(T);
    ops_set_fatal_handler(catch_fatal);
    fatal_msg[0] = '\0';
    if (setjmp(fatal_jump) == 0) {
        if (which == BAD_ROWS_FWD)
            ops_attention_rows_fwd(out, lse, qkv, 1, T, q0, Tq, 1, HS);
        else if (which == BAD_ROWS_BWD)
            ops_attention_rows_bwd(dqkv, out, qkv, out, lse, 1, T, q0, Tq, 1, HS);
        else
            ops_rope_fwd_at(out, 1, Tq, q0, 1, HS, 1e4);
    }
    ops_set_fatal_handler(NULL);
    ops_free(&qkv); ops_free(&dqkv); ops_free(&out); ops_free(&lse);
    if (!strstr(fatal_msg, want))
        tap_diag("fatal message \"%s\" lacks \"%s\"", fatal_msg, want);
    return strstr(fatal_msg, want) != NULL;
}

/* Context parallelism's ops refuse a window outside the sequence, naming
 * the op and the rows, and take one that fills it. */
static void test_window_errors(void)
{
    int bad = window_fails(BAD_ROWS_FWD, 5, 4, "ops_attention_rows_fwd: query rows [5, 5 + 4) "
                           "are not inside the sequence's T = 8");
    bad &= window_fails(BAD_ROWS_BWD, -1, 2, "ops_attention_rows_bwd: query rows [-1, -1 + 2)");
    bad &= window_fails(BAD_ROPE_AT, -3, 8, "ops_rope_fwd_at: first position t0 = -3 of T = 8 "
                        "rows is negative");
    int good = window_fails(BAD_ROWS_FWD, 4, 4, "") && fatal_msg[0] == '\0';
    tap_ok(bad && good, "attention rows outside [0, T) and a negative rope position: fatal, "
           "naming the op and the rows; rows [4, 8) of 8 run");
}

static void sleep_s(double s)
{
    struct timespec ts = {0, (long)(s * 1e9)};
    nanosleep(&ts, NULL);
}

/* The CPU's device timer is the host clock: intervals add, the time
 * between them does not count, and a read starts the count again; marks
 * out of turn reach the fatal handler. (The CUDA timer is t_ops_cuda's.) */
static void test_timer(void)
{
    ops_timer t = {0}; /* zeroed: a CPU timer */
    ops_timer_start(&t);
    sleep_s(0.02);
    ops_timer_stop(&t);
    sleep_s(0.05); /* between intervals: not counted */
    ops_timer_start(&t);
    sleep_s(0.01);
    ops_timer_stop(&t);
    double first = ops_timer_read(&t), again = ops_timer_read(&t);
    /* sleeps last at least their time; 0.02 s of slack for a busy host */
    tap_ok(first >= 0.03 && first < 0.05 && again == 0.0,
           "ops_timer on the CPU: 20 ms + 10 ms intervals read %.4f s, then 0", first);
    ops_set_fatal_handler(catch_fatal);
    fatal_msg[0] = '\0';
    if (setjmp(fatal_jump) == 0)
        ops_timer_stop(&t);
    int unopened = strstr(fatal_msg, "no interval is open") != NULL;
    ops_timer_start(&t);
    fatal_msg[0] = '\0';
    if (setjmp(fatal_jump) == 0)
        ops_timer_read(&t);
    int open = strstr(fatal_msg, "still open") != NULL;
    ops_set_fatal_handler(NULL);
    tap_ok(unopened && open, "ops_timer: a stop without a start, a read inside an interval: fatal");
    ops_timer_free(&t);
}

/* ---- issue 34's multi-tensor and fused ops: the CPU runs what they fuse --- */

/* A tensor of n values in [lo, hi), rounded to dt. */
static ops_tensor rand_of(ops_dtype dt, int64_t n, float lo, float hi)
{
    ops_tensor t = ops_alloc(dt, OPS_CPU, n);
    for (int64_t i = 0; i < n; i++)
        store_f32_cpu(t.data, dt, i, uniform(lo, hi));
    return t;
}

/* A copy of t on the CPU, bit for bit. */
static ops_tensor twin_of(ops_tensor t)
{
    ops_tensor c = ops_alloc(t.dtype, OPS_CPU, t.n);
    ops_copy(c, t);
    return c;
}

static int same_bits(ops_tensor a, ops_tensor b)
{
    return a.n == b.n && memcmp(a.data, b.data, (size_t)a.n * ops_dtype_size(a.dtype)) == 0;
}

enum { MULTI_SEGS = 4 };

/* ops_adamw_multi over segments of different sizes, weight decays, grad
 * and copy dtypes (one without a copy), against ops_adamw segment by
 * segment on twins: the same bits. */
static int adamw_multi_is_the_loop(void)
{
    static const int64_t n[MULTI_SEGS] = { 70001, 1, 768, 4099 };
    static const ops_dtype gdt[MULTI_SEGS] = { OPS_F32, OPS_BF16, OPS_F32, OPS_F16 };
    static const ops_dtype wdt[MULTI_SEGS] = { OPS_BF16, OPS_BF16, OPS_F32, OPS_F16 };
    ops_adamw_seg seg[MULTI_SEGS], twin[MULTI_SEGS];
    for (int i = 0; i < MULTI_SEGS; i++) {
        seg[i] = (ops_adamw_seg){ rand_of(OPS_F32, n[i], -1, 1), rand_of(OPS_F32, n[i], -0.1f, 0.1f),
                                  rand_of(OPS_F32, n[i], 0, 0.01f), rand_of(gdt[i], n[i], -2, 2),
                                  i == 2 ? OPS_NONE : ops_alloc(wdt[i], OPS_CPU, n[i]),
                                  i % 2 ? 0.0f : 0.1f };
        twin[i] = (ops_adamw_seg){ twin_of(seg[i].master), twin_of(seg[i].m), twin_of(seg[i].v),
                                   twin_of(seg[i].grad),
                                   i == 2 ? OPS_NONE : twin_of(seg[i].wcopy), seg[i].weight_decay };
    }
    ops_adamw_args a = { 1e-3f, 0.9f, 0.95f, 1e-8f, 0.5f /* not read */, 0.25f, 2 };
    ops_adamw_multi(seg, MULTI_SEGS, &a);
    int ok = 1;
    for (int i = 0; i < MULTI_SEGS; i++) {
        ops_adamw_args ai = a;
        ai.weight_decay = twin[i].weight_decay;
        ops_adamw(twin[i].master, twin[i].grad, twin[i].m, twin[i].v, twin[i].wcopy, n[i], &ai);
        ok = ok && same_bits(seg[i].master, twin[i].master) && same_bits(seg[i].m, twin[i].m)
             && same_bits(seg[i].v, twin[i].v)
             && (i == 2 || same_bits(seg[i].wcopy, twin[i].wcopy));
        ops_tensor *all[] = { &seg[i].master, &seg[i].m, &seg[i].v, &seg[i].grad, &seg[i].wcopy,
                              &twin[i].master, &twin[i].m, &twin[i].v, &twin[i].grad,
                              &twin[i].wcopy };
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            if (all[k]->data)
                ops_free(all[k]);
    }
    return ok;
}

/* ops_sumsq_multi against ops_sumsq_accumulate tensor by tensor: the same
 * bits; and an inf in the last tensor makes it non-finite. */
static int sumsq_multi_is_the_loop(void)
{
    ops_tensor x[3] = { rand_of(OPS_F32, 100003, -2, 2), rand_of(OPS_BF16, 7, -2, 2),
                        rand_of(OPS_F16, 40000, -2, 2) };
    ops_tensor acc = ops_alloc(OPS_F64, OPS_CPU, 1), loop = ops_alloc(OPS_F64, OPS_CPU, 1);
    ops_sumsq_multi(acc, x, 3);
    for (int i = 0; i < 3; i++)
        ops_sumsq_accumulate(loop, x[i], x[i].n);
    int ok = same_bits(acc, loop) && *(double *)acc.data > 0.0;
    store_f32_cpu(x[2].data, OPS_F16, 39999, INFINITY);
    ops_sumsq_multi(acc, x, 3);
    ok = ok && !isfinite(*(double *)acc.data);
    for (int i = 0; i < 3; i++)
        ops_free(&x[i]);
    ops_free(&acc);
    ops_free(&loop);
    return ok;
}

/* ops_add_layernorm_fwd (rms: ops_add_rmsnorm_fwd) against ops_add then
 * ops_layernorm_fwd (ops_rmsnorm_fwd) in dtype dt, the sum written over a
 * (the alias ops.h allows): the same bits. */
static int add_norm_is_the_pair(ops_dtype dt, int rms)
{
    enum { N = 37, C = 100 };
    ops_tensor a = rand_of(dt, N * C, -2, 3), b = rand_of(dt, N * C, -1, 1);
    ops_tensor w = rand_of(dt, C, 0.5f, 1.5f), bias = rand_of(dt, C, -0.5f, 0.5f);
    ops_tensor a2 = twin_of(a), resid = ops_alloc(dt, OPS_CPU, N * C);
    ops_tensor out = ops_alloc(dt, OPS_CPU, N * C), out2 = ops_alloc(dt, OPS_CPU, N * C);
    ops_tensor st[4] = { f32(N), f32(N), f32(N), f32(N) };
    if (rms)
        ops_add_rmsnorm_fwd(a, out, st[1], a, b, w, N, C, 1e-5f);
    else
        ops_add_layernorm_fwd(a, out, st[0], st[1], a, b, w, bias, N, C);
    ops_add(resid, a2, b, N * C);
    if (rms)
        ops_rmsnorm_fwd(out2, st[3], resid, w, N, C, 1e-5f);
    else
        ops_layernorm_fwd(out2, st[2], st[3], resid, w, bias, N, C);
    int ok = same_bits(a, resid) && same_bits(out, out2) && same_bits(st[0], st[2])
             && same_bits(st[1], st[3]);
    ops_tensor *all[] = { &a, &b, &w, &bias, &a2, &resid, &out, &out2,
                          &st[0], &st[1], &st[2], &st[3] };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        ops_free(all[k]);
    return ok;
}

/* A multi op given a count but no table reaches the fatal handler. */
static int multi_without_table_fails(void)
{
    ops_set_fatal_handler(catch_fatal);
    ops_adamw_args a = { 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1 };
    ops_tensor acc = ops_alloc(OPS_F64, OPS_CPU, 1);
    fatal_msg[0] = '\0';
    if (setjmp(fatal_jump) == 0)
        ops_adamw_multi(NULL, 2, &a);
    volatile int ok = strstr(fatal_msg, "ops_adamw_multi: 2 segments but no table") != NULL;
    fatal_msg[0] = '\0';
    if (setjmp(fatal_jump) == 0)
        ops_sumsq_multi(acc, NULL, 3);
    ok = ok && strstr(fatal_msg, "ops_sumsq_multi: 3 tensors but no table") != NULL;
    ops_set_fatal_handler(NULL);
    ops_free(&acc);
    return ok;
}

static void test_multi_and_fused(void)
{
    tap_ok(adamw_multi_is_the_loop(),
           "ops_adamw_multi on the CPU is ops_adamw segment by segment, bit for bit "
           "(4 segments: sizes 70001, 1, 768, 4099, own weight decays, one without a copy)");
    tap_ok(sumsq_multi_is_the_loop(),
           "ops_sumsq_multi on the CPU is ops_sumsq_accumulate tensor by tensor, bit for "
           "bit; an inf in the last tensor makes it non-finite");
    tap_ok(add_norm_is_the_pair(OPS_F32, 0) && add_norm_is_the_pair(OPS_BF16, 0)
           && add_norm_is_the_pair(OPS_F16, 0),
           "ops_add_layernorm_fwd on the CPU is ops_add then ops_layernorm_fwd, bit for "
           "bit (fp32, bf16, fp16; the sum written over its first input)");
    tap_ok(add_norm_is_the_pair(OPS_F32, 1) && add_norm_is_the_pair(OPS_BF16, 1)
           && add_norm_is_the_pair(OPS_F16, 1),
           "ops_add_rmsnorm_fwd on the CPU is ops_add then ops_rmsnorm_fwd, bit for "
           "bit (fp32, bf16, fp16; the sum written over its first input)");
    tap_ok(multi_without_table_fails(),
           "ops_adamw_multi and ops_sumsq_multi without a table fail, naming the op");
}

/* The head's 16-bit gradient is the GPU's (TRIDENT_FUSED): the CPU never
 * takes it, and its two ops refuse CPU tensors, naming the op; the view
 * of the gradient is the logits' bytes as twice as many 16-bit elements. */
static void test_head_narrow_cpu(void)
{
    ops_tensor logits = ops_alloc(OPS_F32, OPS_CPU, 6 * 10);
    ops_tensor v = ops_alloc(OPS_F32, OPS_CPU, 6);
    ops_tensor tg = ops_alloc(OPS_I32, OPS_CPU, 6);
    ops_tensor dl = ops_head_dlogits(logits, OPS_BF16);
    ops_tensor w = ops_alloc(OPS_BF16, OPS_CPU, 10 * 4), x = ops_alloc(OPS_BF16, OPS_CPU, 6 * 4);
    volatile int ok = !ops_head_narrow(OPS_CPU, OPS_BF16) && !ops_fused(OPS_CPU) &&
                      dl.data == logits.data && dl.n == 120 && dl.dtype == OPS_BF16;
    ops_set_fatal_handler(catch_fatal);
    fatal_msg[0] = '\0';
    if (setjmp(fatal_jump) == 0)
        ops_xent_fused_narrow(v, logits, OPS_BF16, v, v, v, tg, 6, 10, 1.0f);
    ok = ok && strstr(fatal_msg, "ops_xent_fused_narrow: runs on a GPU only") != NULL;
    fatal_msg[0] = '\0';
    if (setjmp(fatal_jump) == 0)
        ops_matmul_bwd_ld(x, OPS_NONE, dl, 20, OPS_NONE, w, 6, 10, 4);
    ok = ok && strstr(fatal_msg, "ops_matmul_bwd_ld: runs on a GPU only") != NULL;
    fatal_msg[0] = '\0';
    if (setjmp(fatal_jump) == 0)
        ops_matmul_bwd_ld(x, OPS_NONE, dl, 9, OPS_NONE, w, 6, 10, 4);
    ok = ok && strstr(fatal_msg, "ops_matmul_bwd_ld: row stride ld 9 outside") != NULL;
    ops_set_fatal_handler(NULL);
    tap_ok(ok, "the head's 16-bit gradient: never on the CPU; its ops refuse CPU tensors and "
               "a row stride below N, naming the op; the view doubles the elements");
    ops_tensor *all[] = { &logits, &v, &tg, &w, &x };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        ops_free(all[k]);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(43);
    test_dtypes();
    test_wide_scratch();
    test_bf16();
    test_f16();
    test_cast_pairs();
    test_adamw();
    test_sumsq();
    test_clip_scale();
    test_xent_loss();
    test_gemm();
    test_probe_values();
    test_errors();
    test_copy_rows();
    test_window_errors();
    test_timer();
    test_multi_and_fused();
    test_head_narrow_cpu();
    return tap_done();
}
