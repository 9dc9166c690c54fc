/*
 * t_ops_precision.c - every op in bf16 and fp16 against the fp32 op, and
 * the dtype contract of ops.h ("Precision").
 *
 * Each check draws fp32 inputs, casts them to the compute dtype D with
 * ops_cast, and runs the op twice: in D, and in fp32 on the same values
 * (the D inputs widened back). The contract says a D result is the fp32
 * result rounded once, so a D output may differ from the fp32 one by half
 * an ulp of D (relative 2^-9 for bf16, 2^-12 for fp16) plus fp32 noise in
 * GEMM sums; the tolerances below, 1e-2 for bf16 and 2e-3 for fp16, leave
 * room for that and nothing more: a missing widening or a double rounding
 * shows up as 1e-1 or worse. fp32 outputs (parameter gradients,
 * statistics) must match to 1e-5. Errors are relative per element, with a
 * floor of 1e-3 of the largest reference value so that elements near zero
 * are judged by the op's scale; GEMM outputs in fp32 are compared with a
 * double reference relative to sum |a b|, the size of the dot product's
 * terms, which is what fp32 accumulation promises.
 */
#include "kernels/ops.h"

#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "tests/tap.h"

#define F32_TOL 1e-5
#define DOT_TOL 1e-5

static uint64_t rng_state = 0x853c49e6748fea9bull;

static float uniform(float lo, float hi)
{
    return tap_uniform(&rng_state, lo, hi);
}

static double tol_of(ops_dtype dt)
{
    return dt == OPS_BF16 ? 1e-2 : 2e-3;
}

static ops_tensor f32(int64_t n)
{
    return ops_alloc(OPS_F32, OPS_CPU, n);
}

static float *fp(ops_tensor t)
{
    return (float *)t.data;
}

/* An input in two forms: d in dtype dt, f the same values in fp32. */
typedef struct {
    ops_tensor d, f;
} pair;

static pair input(ops_dtype dt, int64_t n, float lo, float hi)
{
    pair p = { ops_alloc(dt, OPS_CPU, n), f32(n) };
    for (int64_t i = 0; i < n; i++)
        fp(p.f)[i] = uniform(lo, hi);
    ops_cast(p.d, p.f);
    ops_cast(p.f, p.d);
    return p;
}

/* An output in two forms: d for the op in dtype dt, f for the fp32 op. */
static pair output(ops_dtype dt, int64_t n)
{
    pair p = { ops_alloc(dt, OPS_CPU, n), f32(n) };
    return p;
}

static void pfree(pair *p)
{
    ops_free(&p->d);
    ops_free(&p->f);
}

/* Makes p.d hold p.f's values (which must be representable in dt). */
static void sync_d(pair p)
{
    ops_cast(p.d, p.f);
}

/* max |got - ref| / max(|ref|, 1e-3 max |ref|) with got of any dtype;
 * NaN or inf in got counts as infinite error. */
static double err(ops_tensor got, ops_tensor ref)
{
    ops_tensor g = f32(got.n);
    ops_cast(g, got);
    double big = 0.0, worst = 0.0;
    for (int64_t i = 0; i < ref.n; i++)
        big = fabs(fp(ref)[i]) > big ? fabs(fp(ref)[i]) : big;
    double floor = big > 0 ? 1e-3 * big : 1e-30;
    for (int64_t i = 0; i < ref.n; i++) {
        double r = fp(ref)[i];
        double e = fabs(fp(g)[i] - r) / (fabs(r) > floor ? fabs(r) : floor);
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    ops_free(&g);
    return worst;
}

static double max2(double a, double b)
{
    return !(a <= b) ? (isnan(a) ? INFINITY : a) : b;
}

static int same_bits(ops_tensor a, ops_tensor b)
{
    return a.n == b.n && a.dtype == b.dtype &&
           memcmp(a.data, b.data, (size_t)a.n * ops_dtype_size(a.dtype)) == 0;
}

/* ---- matmul ---------------------------------------------------------------- */

/* out(M,N) = inp(M,K) w(N,K)^T + bias in double, and sum |inp w| + |bias|
 * per element; returns the worst |got - ref| / scale over got (fp32). */
static double dot_err(const float *got, const float *inp, const float *w,
                      const float *bias, int M, int N, int K)
{
    double worst = 0.0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = bias ? bias[j] : 0.0, a = bias ? fabs(bias[j]) : 0.0;
            for (int k = 0; k < K; k++) {
                double t = (double)inp[(int64_t)i * K + k] * w[(int64_t)j * K + k];
                s += t;
                a += fabs(t);
            }
            double e = fabs(got[(int64_t)i * N + j] - s) / (a > 0 ? a : 1.0);
            worst = max2(e, worst);
        }
    return worst;
}

/* dw(N,K) = dout(M,N)^T inp(M,K) and dbias(N) = column sums of dout, in
 * double; the worst |got - ref| / sum |terms| over dw and dbias. */
static double dw_err(const float *dw, const float *db, const float *dout,
                     const float *inp, int M, int N, int K)
{
    double worst = 0.0;
    for (int j = 0; j < N; j++) {
        double s = 0.0, a = 0.0;
        for (int i = 0; i < M; i++) {
            s += dout[(int64_t)i * N + j];
            a += fabs(dout[(int64_t)i * N + j]);
        }
        worst = max2(fabs(db[j] - s) / (a > 0 ? a : 1.0), worst);
        for (int k = 0; k < K; k++) {
            s = a = 0.0;
            for (int i = 0; i < M; i++) {
                double t = (double)dout[(int64_t)i * N + j] * inp[(int64_t)i * K + k];
                s += t;
                a += fabs(t);
            }
            worst = max2(fabs(dw[(int64_t)j * K + k] - s) / (a > 0 ? a : 1.0),
                         worst);
        }
    }
    return worst;
}

static void test_matmul(ops_dtype dt)
{
    const char *dn = ops_dtype_name(dt);
    double tol = tol_of(dt);
    enum { M = 48, N = 80, K = 200 };
    pair inp = input(dt, M * K, -1, 1), w = input(dt, N * K, -1, 1);
    pair bias = input(dt, N, -1, 1), out = output(dt, M * N);
    ops_matmul_fwd(out.d, inp.d, w.d, bias.d, M, N, K);
    ops_matmul_fwd(out.f, inp.f, w.f, bias.f, M, N, K);
    double e = err(out.d, out.f);
    tap_ok(e < tol, "%s matmul_fwd out %s vs fp32 matmul on the same inputs "
           "(max rel %.1e, tol %.0e)", dn, dn, e, tol);

    /* the LM head: D inputs, fp32 out, compared with a double reference */
    ops_tensor logits = f32(M * N);
    ops_matmul_fwd(logits, inp.d, w.d, bias.d, M, N, K);
    e = dot_err(fp(logits), fp(inp.f), fp(w.f), fp(bias.f), M, N, K);
    tap_ok(e < DOT_TOL, "%s matmul_fwd with fp32 out (logits) vs double "
           "reference on the %s-rounded inputs (max |err| / sum|a b| %.1e, "
           "tol %.0e; kernel: %s)", dn, dn, e, DOT_TOL,
           gemm_kernel_name_cpu(dt, 0, 1, M, N, K, OPS_F32, 0));

    pair dout = input(dt, M * N, -1, 1), dinp = output(dt, M * K);
    ops_tensor dw_d = f32(N * K), dw_f = f32(N * K);
    ops_tensor db_d = f32(N), db_f = f32(N);
    ops_matmul_bwd(dinp.d, dw_d, db_d, dout.d, inp.d, w.d, M, N, K);
    ops_matmul_bwd(dinp.f, dw_f, db_f, dout.f, inp.f, w.f, M, N, K);
    e = err(dinp.d, dinp.f);
    tap_ok(e < tol, "%s matmul_bwd dinp %s vs fp32 (max rel %.1e, tol %.0e)",
           dn, dn, e, tol);
    double ew = dw_err(fp(dw_d), fp(db_d), fp(dout.f), fp(inp.f), M, N, K);
    double ef = dw_err(fp(dw_f), fp(db_f), fp(dout.f), fp(inp.f), M, N, K);
    tap_ok(ew < DOT_TOL, "%s matmul_bwd dw, dbias (fp32, +=) vs double "
           "reference on the %s-rounded inputs (max |err| / sum|a b| %.1e, "
           "the fp32 op %.1e, tol %.0e)", dn, dn, ew, ef, DOT_TOL);

    pfree(&inp); pfree(&w); pfree(&bias); pfree(&out); pfree(&dout);
    pfree(&dinp); ops_free(&logits); ops_free(&dw_d); ops_free(&dw_f);
    ops_free(&db_d); ops_free(&db_f);
}

/* dinp(M,K) = dout(M,N) w(N,K) in double; the worst |got - ref| /
 * sum |terms| with got of any dtype. */
static double dinp_err(ops_tensor got, const float *dout, const float *w,
                       int M, int N, int K)
{
    ops_tensor g = f32(got.n);
    ops_cast(g, got);
    double worst = 0.0, *s = calloc((size_t)K, sizeof *s);
    double *a = calloc((size_t)K, sizeof *a);
    for (int i = 0; i < M; i++) {
        for (int k = 0; k < K; k++)
            s[k] = a[k] = 0.0;
        for (int j = 0; j < N; j++) {
            double d = dout[(int64_t)i * N + j];
            const float *wr = w + (int64_t)j * K;
            for (int k = 0; k < K; k++) {
                s[k] += d * wr[k];
                a[k] += fabs(d * wr[k]);
            }
        }
        for (int k = 0; k < K; k++)
            worst = max2(fabs(fp(g)[(int64_t)i * K + k] - s[k]) /
                         (a[k] > 0 ? a[k] : 1.0), worst);
    }
    free(s);
    free(a);
    ops_free(&g);
    return worst;
}

/* The head's backward: dout fp32 with D inputs. The contract rounds dout
 * to D as it is read: dw, fp32 and unrounded, shows whether it was (an
 * unrounded dout would be off by ~1e-4 of the terms); dinp is compared
 * with the same reference, and a cast-first call must agree. M*N is above
 * the kernel's rounding block, so several blocks meet. */
static void test_matmul_mixed(ops_dtype dt)
{
    const char *dn = ops_dtype_name(dt);
    double tol = tol_of(dt);
    enum { M = 512, N = 4100, K = 24 };
    pair inp = input(dt, M * K, -1, 1), w = input(dt, N * K, -1, 1);
    pair dout = input(dt, (int64_t)M * N, -1, 1);
    ops_tensor dout32 = f32((int64_t)M * N); /* unrounded */
    for (int64_t i = 0; i < dout32.n; i++)
        fp(dout32)[i] = uniform(-1, 1);
    ops_cast(dout.d, dout32);
    ops_cast(dout.f, dout.d);   /* the rounded values, for the reference */
    ops_tensor dinp1 = ops_alloc(dt, OPS_CPU, M * K);
    ops_tensor dinp2 = ops_alloc(dt, OPS_CPU, M * K);
    ops_tensor dw1 = f32(N * K), dw2 = f32(N * K), db1 = f32(N), db2 = f32(N);
    ops_matmul_bwd(dinp1, dw1, db1, dout32, inp.d, w.d, M, N, K);
    ops_matmul_bwd(dinp2, dw2, db2, dout.d, inp.d, w.d, M, N, K);
    double ew = dw_err(fp(dw1), fp(db1), fp(dout.f), fp(inp.f), M, N, K);
    double ei = dinp_err(dinp1, fp(dout.f), fp(w.f), M, N, K);
    double ew2 = dw_err(fp(dw2), fp(db2), fp(dout.f), fp(inp.f), M, N, K);
    double ei2 = dinp_err(dinp2, fp(dout.f), fp(w.f), M, N, K);
    /* one product: dout 1 + 2^-12 is 1 in bf16 and in fp16 */
    ops_tensor one32 = f32(1), one = ops_alloc(dt, OPS_CPU, 1), dw0 = f32(1);
    fp(one32)[0] = 1.0f + 0x1p-12f;
    store_f32_cpu(one.data, dt, 0, 1.0f);
    ops_matmul_bwd(OPS_NONE, dw0, OPS_NONE, one32, one, OPS_NONE, 1, 1, 1);
    tap_ok(ew < DOT_TOL && ei < tol && ew2 < DOT_TOL && ei2 < tol &&
           fp(dw0)[0] == 1.0f,
           "%s matmul_bwd, fp32 dout with %s inp, w: dout rounded to %s as "
           "read (dw, dbias vs double reference %.1e tol %.0e; dinp %.1e tol "
           "%.0e; cast-first call %.1e, %.1e; max |err| / sum|a b|; dout "
           "1+2^-12 gives dw %.9g, want 1)", dn, dn, dn, ew, DOT_TOL, ei, tol,
           ew2, ei2, fp(dw0)[0]);
    ops_free(&one32); ops_free(&one); ops_free(&dw0);
    pfree(&inp); pfree(&w); pfree(&dout); ops_free(&dinp1);
    ops_free(&dinp2); ops_free(&dout32); ops_free(&dw1); ops_free(&dw2);
    ops_free(&db1); ops_free(&db2);
}

/* dw accumulates in fp32: starting at 256, where bf16's spacing is 2 and
 * fp16's 0.25, two small gradients still add up. */
static void test_dw_accumulates(ops_dtype dt)
{
    const char *dn = ops_dtype_name(dt);
    enum { M = 32, N = 16, K = 24 };
    pair inp = input(dt, M * K, -0.1f, 0.1f), dout = input(dt, M * N, -0.1f, 0.1f);
    ops_tensor once = f32(N * K), dw = f32(N * K);
    ops_matmul_bwd(OPS_NONE, once, OPS_NONE, dout.d, inp.d, OPS_NONE, M, N, K);
    for (int64_t i = 0; i < dw.n; i++)
        fp(dw)[i] = 256.0f;
    ops_matmul_bwd(OPS_NONE, dw, OPS_NONE, dout.d, inp.d, OPS_NONE, M, N, K);
    ops_matmul_bwd(OPS_NONE, dw, OPS_NONE, dout.d, inp.d, OPS_NONE, M, N, K);
    double worst = 0.0, big = 0.0;
    for (int64_t i = 0; i < dw.n; i++) {
        big = fmax(big, fabs(fp(once)[i]));
        worst = max2(fabs((fp(dw)[i] - 256.0) - 2.0 * fp(once)[i]), worst);
    }
    /* fp32 at 256 keeps 2^-15: the sum is exact to a few of those */
    tap_ok(big > 0.01 && worst < 1e-4, "%s matmul_bwd: dw += twice in fp32 "
           "on top of 256 (gradients up to %.3f; max |dw - 256 - 2 g| %.1e, "
           "tol 1e-4)", dn, big, worst);
    pfree(&inp); pfree(&dout); ops_free(&once); ops_free(&dw);
}

/* ---- elementwise ------------------------------------------------------------ */

static void test_gelu(ops_dtype dt)
{
    enum { N = 1000 };
    pair x = input(dt, N, -4, 4), out = output(dt, N), g = input(dt, N, -1, 1);
    pair din = output(dt, N);
    ops_gelu_fwd(out.d, x.d, N);
    ops_gelu_fwd(out.f, x.f, N);
    ops_gelu_bwd(din.d, x.d, g.d, N);
    ops_gelu_bwd(din.f, x.f, g.f, N);
    double e1 = err(out.d, out.f), e2 = err(din.d, din.f), tol = tol_of(dt);
    tap_ok(e1 < tol && e2 < tol, "%s gelu fwd, bwd vs fp32 (max rel %.1e, "
           "%.1e, tol %.0e)", ops_dtype_name(dt), e1, e2, tol);
    pfree(&x); pfree(&out); pfree(&g); pfree(&din);
}

static void test_add_family(ops_dtype dt)
{
    enum { N = 777 };
    pair a = input(dt, N, -2, 2), b = input(dt, N, -2, 2), out = output(dt, N);
    ops_add(out.d, a.d, b.d, N);
    ops_add(out.f, a.f, b.f, N);
    double e = err(out.d, out.f);
    ops_accumulate(a.d, b.d, N);
    ops_accumulate(a.f, b.f, N);
    e = max2(err(a.d, a.f), e);
    ops_scale(b.d, -0.3f, N);
    ops_scale(b.f, -0.3f, N);
    e = max2(err(b.d, b.f), e);
    ops_clip_value(a.d, 1.5f, N);
    ops_clip_value(a.f, 1.5f, N);
    e = max2(err(a.d, a.f), e);
    double tol = tol_of(dt);
    tap_ok(e < tol, "%s add, accumulate, scale, clip_value vs fp32 (max rel "
           "%.1e, tol %.0e)", ops_dtype_name(dt), e, tol);
    pfree(&a); pfree(&b); pfree(&out);
}

static void test_sums(ops_dtype dt)
{
    enum { N = 10007 };
    pair x = input(dt, N, -3, 3);
    ops_tensor acc[4];
    for (int i = 0; i < 4; i++) {
        acc[i] = ops_alloc(OPS_F64, OPS_CPU, 1);
        ((double *)acc[i].data)[0] = 0.5;
    }
    ops_sumsq_accumulate(acc[0], x.d, N);
    ops_sumsq_accumulate(acc[1], x.f, N);
    ops_sum_accumulate(acc[2], x.d, N);
    ops_sum_accumulate(acc[3], x.f, N);
    tap_ok(same_bits(acc[0], acc[1]) && same_bits(acc[2], acc[3]),
           "%s sumsq/sum_accumulate: the same fp64 bits as on the fp32 copy",
           ops_dtype_name(dt));
    pfree(&x);
    for (int i = 0; i < 4; i++)
        ops_free(&acc[i]);
}

/* ---- LayerNorm ---------------------------------------------------------- */

static void test_layernorm(ops_dtype dt)
{
    const char *dn = ops_dtype_name(dt);
    double tol = tol_of(dt);
    enum { N = 37, C = 96 };
    pair inp = input(dt, N * C, -2, 3), w = input(dt, C, 0.5f, 1.5f);
    pair b = input(dt, C, -1, 1), out = output(dt, N * C);
    ops_tensor mean[2] = { f32(N), f32(N) }, rstd[2] = { f32(N), f32(N) };
    ops_layernorm_fwd(out.d, mean[0], rstd[0], inp.d, w.d, b.d, N, C);
    ops_layernorm_fwd(out.f, mean[1], rstd[1], inp.f, w.f, b.f, N, C);
    double e = err(out.d, out.f);
    double es = max2(err(mean[0], mean[1]), err(rstd[0], rstd[1]));
    tap_ok(e < tol && es < F32_TOL, "%s layernorm_fwd vs fp32 (out max rel "
           "%.1e tol %.0e; mean, rstd fp32 %.1e tol %.0e)", dn, e, tol, es,
           F32_TOL);

    pair dout = input(dt, N * C, -1, 1), dinp = input(dt, N * C, -1, 1);
    ops_tensor dw[2] = { f32(C), f32(C) }, db[2] = { f32(C), f32(C) };
    ops_layernorm_bwd(dinp.d, dw[0], db[0], dout.d, inp.d, w.d, mean[0],
                      rstd[0], N, C);
    ops_layernorm_bwd(dinp.f, dw[1], db[1], dout.f, inp.f, w.f, mean[1],
                      rstd[1], N, C);
    e = err(dinp.d, dinp.f);
    es = max2(err(dw[0], dw[1]), err(db[0], db[1]));
    tap_ok(e < tol && es < F32_TOL, "%s layernorm_bwd vs fp32 (dinp += max "
           "rel %.1e tol %.0e; dw, db fp32 %.1e tol %.0e)", dn, e, tol, es,
           F32_TOL);
    pfree(&inp); pfree(&w); pfree(&b); pfree(&out); pfree(&dout);
    pfree(&dinp);
    for (int i = 0; i < 2; i++) {
        ops_free(&mean[i]); ops_free(&rstd[i]); ops_free(&dw[i]);
        ops_free(&db[i]);
    }
}

/* ---- attention ------------------------------------------------------------ */

static void test_attention(ops_dtype dt)
{
    const char *dn = ops_dtype_name(dt);
    double tol = tol_of(dt);
    enum { B = 2, T = 70, NH = 3, hs = 8 };
    int64_t n = (int64_t)B * T * NH * hs, rows = (int64_t)B * NH * T;
    pair qkv = input(dt, 3 * n, -2, 2), out = output(dt, n);
    ops_tensor lse[2] = { f32(rows), f32(rows) };
    ops_attention_fwd(out.d, lse[0], qkv.d, B, T, NH, hs);
    ops_attention_fwd(out.f, lse[1], qkv.f, B, T, NH, hs);
    double e = err(out.d, out.f), ea = err(lse[0], lse[1]);
    tap_ok(e < tol && ea < F32_TOL, "%s attention_fwd vs fp32 (out max rel "
           "%.1e tol %.0e; lse fp32 %.1e tol %.0e)", dn, e, tol, ea, F32_TOL);

    pair dout = input(dt, n, -1, 1), dqkv = output(dt, 3 * n);
    ops_attention_bwd(dqkv.d, dout.d, qkv.d, out.d, lse[0], B, T, NH, hs);
    ops_attention_bwd(dqkv.f, dout.f, qkv.f, out.f, lse[1], B, T, NH, hs);
    e = err(dqkv.d, dqkv.f);
    tap_ok(e < tol, "%s attention_bwd dqkv vs fp32 (max rel %.1e, tol %.0e)",
           dn, e, tol);
    pfree(&qkv); pfree(&out); pfree(&dout); pfree(&dqkv);
    ops_free(&lse[0]); ops_free(&lse[1]);
}

/* ---- embeddings ------------------------------------------------------------- */

static void test_embedding(ops_dtype dt)
{
    const char *dn = ops_dtype_name(dt);
    double tol = tol_of(dt);
    enum { B = 3, T = 5, C = 24, V = 11, v0 = 4, Vl = 7 };
    ops_tensor tok = ops_alloc(OPS_I32, OPS_CPU, B * T);
    for (int i = 0; i < B * T; i++)
        ((int32_t *)tok.data)[i] = (i * 5) % V;
    pair wte = input(dt, Vl * C, -1, 1), wpe = input(dt, T * C, -1, 1);
    pair out = output(dt, B * T * C);
    ops_embedding_fwd(out.d, tok, wte.d, v0, Vl, B * T, C);
    ops_embedding_fwd(out.f, tok, wte.f, v0, Vl, B * T, C);
    ops_position_fwd(out.d, wpe.d, B, T, C);
    ops_position_fwd(out.f, wpe.f, B, T, C);
    double e = err(out.d, out.f);
    tap_ok(e < tol, "%s embedding+position fwd (shard [%d, %d)) vs fp32 (max "
           "rel %.1e, tol %.0e)", dn, v0, v0 + Vl, e, tol);

    pair dout = input(dt, B * T * C, -1, 1);
    ops_tensor dwte[2] = { f32(Vl * C), f32(Vl * C) };
    ops_tensor dwpe[2] = { f32(T * C), f32(T * C) };
    ops_embedding_bwd(dwte[0], tok, dout.d, v0, Vl, B * T, C);
    ops_embedding_bwd(dwte[1], tok, dout.f, v0, Vl, B * T, C);
    ops_position_bwd(dwpe[0], dout.d, B, T, C);
    ops_position_bwd(dwpe[1], dout.f, B, T, C);
    int ok = same_bits(dwte[0], dwte[1]) && same_bits(dwpe[0], dwpe[1]);
    tap_ok(ok, "%s embedding/position bwd: fp32 dwte, dwpe equal the fp32 "
           "op's bit for bit", dn);
    ops_free(&tok); pfree(&wte); pfree(&wpe); pfree(&out); pfree(&dout);
    for (int i = 0; i < 2; i++) {
        ops_free(&dwte[i]);
        ops_free(&dwpe[i]);
    }
}

/* ---- cross-entropy on low-precision logits ------------------------------ */

static void test_xent(ops_dtype dt)
{
    const char *dn = ops_dtype_name(dt);
    double tol = tol_of(dt);
    enum { N = 9, V = 300 };
    pair logits = input(dt, N * V, -4, 4);
    ops_tensor tg = ops_alloc(OPS_I32, OPS_CPU, N);
    for (int i = 0; i < N; i++)
        ((int32_t *)tg.data)[i] = (i * 37) % V;
    ops_tensor st[2][4];
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 4; k++)
            st[s][k] = f32(N);
    ops_tensor lg[2] = { logits.d, logits.f };
    for (int s = 0; s < 2; s++) {
        ops_xent_max(st[s][0], lg[s], N, V);
        ops_xent_sumexp(st[s][1], st[s][2], lg[s], st[s][0], tg, 0, N, V);
        ops_xent_finish(st[s][3], lg[s], lg[s], st[s][0], st[s][1], st[s][2],
                        tg, 0, N, V, 1.0f / N);
    }
    double el = err(st[0][3], st[1][3]), ed = err(logits.d, logits.f);
    tap_ok(el < F32_TOL && ed < tol, "%s xent on %s logits vs fp32 (losses "
           "max rel %.1e tol %.0e; dlogits in place %.1e tol %.0e)", dn, dn,
           el, F32_TOL, ed, tol);
    pfree(&logits);
    ops_free(&tg);
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 4; k++)
            ops_free(&st[s][k]);
}

/* ---- fp16 range ------------------------------------------------------------ */

static void test_f16_range(void)
{
    /* 4 x 200 x 100 = 80000 > 65504 */
    pair inp = input(OPS_F16, 4, 1, 1), w = input(OPS_F16, 8, 1, 1);
    for (int i = 0; i < 4; i++)
        fp(inp.f)[i] = 200.0f;
    for (int i = 0; i < 8; i++)
        fp(w.f)[i] = i < 4 ? 100.0f : 1.0f;
    sync_d(inp);
    sync_d(w);
    ops_tensor out16 = ops_alloc(OPS_F16, OPS_CPU, 2), out32 = f32(2);
    ops_matmul_fwd(out16, inp.d, w.d, OPS_NONE, 1, 2, 4);
    ops_matmul_fwd(out32, inp.d, w.d, OPS_NONE, 1, 2, 4);
    uint16_t *h = out16.data;
    tap_ok(h[0] == 0x7c00 && h[1] == elem_f32_to_f16(800.0f) &&
           fp(out32)[0] == 80000.0f,
           "fp16 matmul: 80000 overflows to inf in an fp16 out (0x%04x), "
           "stays 80000 in an fp32 out (%.0f); 800 is finite", h[0],
           fp(out32)[0]);

    float small[3] = { 1e-8f, -1e-8f, 1e-7f };
    ops_tensor s32 = f32(3), s16 = ops_alloc(OPS_F16, OPS_CPU, 3);
    memcpy(s32.data, small, sizeof small);
    ops_cast(s16, s32);
    h = s16.data;
    tap_ok(h[0] == 0 && h[1] == 0x8000 && h[2] == 2,
           "fp16 cast: 1e-8 flushes to 0 (0x%04x), -1e-8 to -0 (0x%04x), "
           "1e-7 is the subnormal 2 x 2^-24 (0x%04x)", h[0], h[1], h[2]);
    pfree(&inp); pfree(&w); ops_free(&out16); ops_free(&out32);
    ops_free(&s32); ops_free(&s16);
}

/* ---- casts: the vectorized loops against elem.h -------------------------- */

/* ops_cast's branch-free loops must give elem.h's bits: on every 1021st
 * fp32 bit pattern (all exponents, both signs, NaNs), on the edges where
 * fp16 overflows, goes subnormal and flushes, and on every half and bf16. */
static void test_cast_bits(void)
{
    enum { S = 1 << 22 };
    static const uint32_t edges[] = { 0x477fefffu, 0x477ff000u, 0x477ff001u,
        0x387fffffu, 0x38800000u, 0x33000000u, 0x33000001u, 0x32ffffffu,
        0x7f800000u, 0x7f800001u, 0xffc00000u, 0x7f7fffffu, 0x3f808000u,
        0x3f818000u, 0x80000000u, 0x00000001u };
    int ne = (int)(sizeof edges / sizeof edges[0]);
    ops_tensor f = f32(S), b = ops_alloc(OPS_BF16, OPS_CPU, S);
    ops_tensor h = ops_alloc(OPS_F16, OPS_CPU, S);
    uint32_t *u = f.data;
    for (int64_t i = 0; i < S; i++)
        u[i] = i < ne ? edges[i] : (uint32_t)(i * 1021u + 7u);
    ops_cast(b, f);
    ops_cast(h, f);
    long bad = 0;
    for (int64_t i = 0; i < S; i++) {
        float x = fp(f)[i];
        bad += ((uint16_t *)b.data)[i] != elem_f32_to_bf16(x);
        bad += ((uint16_t *)h.data)[i] != elem_f32_to_f16(x);
    }
    ops_tensor all = ops_alloc(OPS_F16, OPS_CPU, 65536), w = f32(65536);
    for (int i = 0; i < 65536; i++)
        ((uint16_t *)all.data)[i] = (uint16_t)i;
    ops_cast(w, all);
    for (int i = 0; i < 65536; i++) {
        float e = elem_f16_to_f32((uint16_t)i);
        bad += memcmp(&e, &fp(w)[i], sizeof e) != 0;
    }
    all.dtype = OPS_BF16;
    ops_cast(w, all);
    for (int i = 0; i < 65536; i++) {
        float e = elem_bf16_to_f32((uint16_t)i);
        bad += memcmp(&e, &fp(w)[i], sizeof e) != 0;
    }
    tap_ok(bad == 0, "ops_cast fp32 -> bf16, fp16 on %d bit patterns and "
           "fp16, bf16 -> fp32 on all 65536: elem.h's bits (%ld differ)", S,
           bad);
    ops_free(&f); ops_free(&b); ops_free(&h); ops_free(&all); ops_free(&w);
}

/* ---- the bf16 GEMM kernel and its primitive cache ----------------------- */

static void test_bf16_kernel(void)
{
    /* the path gemm_bf16_cpu.c chooses: oneDNN's bf16 matmul only with
     * AMX, trident's vdpbf16ps kernel with AVX512_BF16, sgemm over fp32
     * copies otherwise; trident's kernel whenever TRIDENT_CPU_BF16_GEMM
     * asks for it (t_ops_precision_trident.sh) */
    const char *k = gemm_kernel_name_cpu(OPS_BF16, 0, 1, 1024, 768, 768,
                                         OPS_BF16, 0);
    const char *info = ops_gemm_info(NULL);
    const char *env = getenv("TRIDENT_CPU_BF16_GEMM");
    int asked = env && strcmp(env, "trident") == 0;
    int amx = strstr(info, "oneDNN") && strstr(info, "avx512_core_amx");
    __builtin_cpu_init();
    int dpbf16 = __builtin_cpu_supports("avx512bf16");
    tap_diag("bf16 GEMM kernel: %s (%s)", k, info);
    const char *want = asked ? "trident's" : amx ? "oneDNN matmul"
                       : dpbf16 ? "vdpbf16ps" : "fp32 copies";
    tap_ok(strstr(k, want) && (!amx || asked || strstr(k, "amx")),
           "bf16 GEMMs run on %s (wanted: %s)", k, want);

    /* 70 shapes, twice round: more than the 64 cached primitives, so
     * entries are evicted and rebuilt; every result must stay right */
    double worst = 0.0;
    for (int pass = 0; pass < 2; pass++)
        for (int m = 1; m <= 70; m++) {
            enum { N = 5, K = 6 };
            pair inp = input(OPS_BF16, m * K, -1, 1), w = input(OPS_BF16, N * K, -1, 1);
            ops_tensor out = f32(m * N);
            ops_matmul_fwd(out, inp.d, w.d, OPS_NONE, m, N, K);
            worst = max2(dot_err(fp(out), fp(inp.f), fp(w.f), NULL, m, N, K),
                         worst);
            pfree(&inp); pfree(&w); ops_free(&out);
        }
    tap_ok(worst < DOT_TOL, "bf16 matmul over 70 shapes twice (primitive "
           "cache evicts and rebuilds) stays right (max |err| / sum|a b| "
           "%.1e, tol %.0e)", worst, DOT_TOL);

    for (int i = 0; i < 3; i++) {
        ops_dtype dt = (ops_dtype[]){ OPS_F32, OPS_BF16, OPS_F16 }[i];
        double peak = ops_gemm_peak_dtype(dt, 0.1);
        tap_diag("ops_gemm_peak_dtype(%s): %.1f GFLOP/s on %d threads",
                 ops_dtype_name(dt), peak / 1e9, omp_get_max_threads());
        worst = i == 0 ? peak : fmin(worst, peak);
    }
    tap_ok(worst > 0 && isfinite(worst),
           "ops_gemm_peak_dtype is positive and finite for fp32, bf16, fp16");
}

/* ---- determinism ------------------------------------------------------------ */

/* The non-GEMM ops in bf16 with 1 and 3 threads: the same bits. */
static void run_lowp(int threads, ops_tensor res[6])
{
    enum { N = 300, C = 200, V = 50 };
    rng_state = 7;
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    pair dout = input(OPS_BF16, N * C, -1, 1), inp = input(OPS_BF16, N * C, -1, 1);
    pair w = input(OPS_BF16, C, 0.5f, 1.5f);
    ops_tensor mean = f32(N), rstd = f32(N);
    ops_tensor tok = ops_alloc(OPS_I32, OPS_CPU, N);
    for (int i = 0; i < N; i++)
        ((int32_t *)tok.data)[i] = (i * 7) % V;
    res[0] = f32(C); res[1] = f32(C); res[2] = f32(C); res[3] = f32(V * C);
    res[4] = ops_alloc(OPS_BF16, OPS_CPU, N * C);
    res[5] = ops_alloc(OPS_BF16, OPS_CPU, N * C);
    ops_matmul_bwd(OPS_NONE, OPS_NONE, res[0], dout.d, OPS_NONE, OPS_NONE, N,
                   C, C);
    ops_layernorm_fwd(res[4], mean, rstd, inp.d, w.d, w.d, N, C);
    ops_layernorm_bwd(res[5], res[1], res[2], dout.d, inp.d, w.d, mean, rstd,
                      N, C);
    ops_embedding_bwd(res[3], tok, dout.d, 0, V, N, C);
    ops_gelu_bwd(res[5], inp.d, res[5], N * C);
    omp_set_num_threads(saved);
    pfree(&dout); pfree(&inp); pfree(&w); ops_free(&mean); ops_free(&rstd);
    ops_free(&tok);
}

static void test_determinism(void)
{
    ops_tensor a[6], b[6];
    run_lowp(1, a);
    run_lowp(3, b);
    int ok = 1;
    for (int i = 0; i < 6; i++) {
        ok = ok && same_bits(a[i], b[i]);
        ops_free(&a[i]);
        ops_free(&b[i]);
    }
    tap_ok(ok, "bf16 dbias, layernorm fwd/bwd, dwte, gelu bwd: bitwise "
           "equal with 1 and 3 threads");
}

/* ---- the dtype contract ------------------------------------------------------- */

static jmp_buf fatal_jump;
static char fatal_msg[512];

static void catch_fatal(const char *what, const char *file, int line)
{
    (void)file;
    (void)line;
    snprintf(fatal_msg, sizeof fatal_msg, "%s", what);
    longjmp(fatal_jump, 1);
}

/* Whether the last call failed with a message holding want. */
static int failed_with(const char *want)
{
    int ok = strstr(fatal_msg, want) != NULL;
    if (!ok)
        tap_diag("fatal message \"%s\" lacks \"%s\"", fatal_msg, want);
    return ok;
}

/* Runs `call` expecting the fatal handler, and adds to ok whether its
 * message holds want. */
#define FAILS(call, want)                                                    \
    do {                                                                     \
        fatal_msg[0] = '\0';                                                 \
        if (setjmp(fatal_jump) == 0)                                         \
            call;                                                            \
        ok = failed_with(want) && ok;                                        \
    } while (0)

static void test_contract(void)
{
    ops_set_fatal_handler(catch_fatal);
    enum { M = 2, N = 3, K = 4 };
    ops_tensor b_in = ops_alloc(OPS_BF16, OPS_CPU, M * K);
    ops_tensor h_w = ops_alloc(OPS_F16, OPS_CPU, N * K);
    ops_tensor b_w = ops_alloc(OPS_BF16, OPS_CPU, N * K);
    ops_tensor b_out = ops_alloc(OPS_BF16, OPS_CPU, M * N);
    ops_tensor h_out = ops_alloc(OPS_F16, OPS_CPU, M * N);
    ops_tensor b_dw = ops_alloc(OPS_BF16, OPS_CPU, N * K);
    ops_tensor f_dw = f32(N * K), f_n = f32(M * K);
    ops_tensor b_n = ops_alloc(OPS_BF16, OPS_CPU, M * K);
    ops_tensor b_stat = ops_alloc(OPS_BF16, OPS_CPU, M);
    ops_tensor f_stat = f32(M), b_c = ops_alloc(OPS_BF16, OPS_CPU, K);
    ops_tensor tok = ops_alloc(OPS_I32, OPS_CPU, M);
    ops_tensor f_out = f32(M * N), f_c = f32(K);
    volatile int ok = 1;
    FAILS(ops_matmul_fwd(b_out, b_in, h_w, OPS_NONE, M, N, K),
                "ops_matmul_fwd: w is fp16 but inp is bf16");
    FAILS(ops_matmul_fwd(h_out, b_in, b_w, OPS_NONE, M, N, K),
                "ops_matmul_fwd: out is fp16 but must be fp32 or the compute "
                "dtype, bf16 (that of inp)");
    FAILS(ops_matmul_bwd(OPS_NONE, b_dw, OPS_NONE, b_out, b_in,
                               OPS_NONE, M, N, K),
                "ops_matmul_bwd: dw is bf16 but must be fp32 (parameter "
                "gradients are fp32");
    FAILS(ops_matmul_bwd(f_n, f_dw, OPS_NONE, f_out, b_in, b_w, M, N,
                               K),
                "ops_matmul_bwd: inp is bf16 but dinp is fp32");
    FAILS(ops_layernorm_fwd(b_n, b_stat, f_stat, b_n, b_c, b_c, M, K),
                "ops_layernorm_fwd: mean is bf16 but must be fp32");
    FAILS(ops_layernorm_bwd(b_n, b_c, f_c, b_n, b_n, b_c, f_stat,
                                  f_stat, M, K),
                "ops_layernorm_bwd: dw is bf16 but must be fp32 (parameter");
    FAILS(ops_embedding_bwd(b_dw, tok, b_n, 0, N, M, K),
                "ops_embedding_bwd: dwte is bf16 but must be fp32");
    FAILS(ops_add(b_n, b_n, f_n, M * K),
                "ops_add: b is fp32 but out is bf16");
    FAILS(ops_attention_fwd(b_n, b_n, b_n, 1, 1, 1, 1),
                "ops_attention_fwd: lse is bf16 but must be fp32");
    tap_ok(ok, "wrong dtype combinations fail with a message naming the "
           "argument and the rule (9 cases)");
    ops_set_fatal_handler(NULL);
    ops_free(&b_in); ops_free(&h_w); ops_free(&b_w); ops_free(&b_out);
    ops_free(&h_out); ops_free(&b_dw); ops_free(&f_dw); ops_free(&f_n);
    ops_free(&b_n); ops_free(&b_stat); ops_free(&f_stat); ops_free(&b_c);
    ops_free(&tok); ops_free(&f_out); ops_free(&f_c);
}

/* ---- GPT-2's MLP GEMMs with their GELU ------------------------------------- */

/* ops_matmul_gelu_fwd and ops_matmul_dgelu_bwd are, on the CPU, exactly
 * the unfused ops in sequence (the model's bits must not change), and
 * check their arguments like them. */
static void test_fused_mlp(ops_dtype dt)
{
    enum { M = 37, N = 45, K = 29 };
    pair inp = input(dt, M * K, -1, 1), w = input(dt, N * K, -0.5, 0.5), b = input(dt, N, -1, 1);
    ops_tensor pre = ops_alloc(dt, OPS_CPU, M * N), out = ops_alloc(dt, OPS_CPU, M * N);
    ops_tensor pre2 = ops_alloc(dt, OPS_CPU, M * N), out2 = ops_alloc(dt, OPS_CPU, M * N);
    ops_matmul_gelu_fwd(out, pre, inp.d, w.d, b.d, M, N, K);
    ops_matmul_fwd(pre2, inp.d, w.d, b.d, M, N, K);
    ops_gelu_fwd(out2, pre2, M * N);
    int fwd = same_bits(pre, pre2) && same_bits(out, out2);

    /* the layer after the GELU: in = N wide (pre), out = K wide */
    pair dout = input(dt, M * K, -1, 1), w2 = input(dt, K * N, -0.5, 0.5);
    ops_tensor dinp = ops_alloc(dt, OPS_CPU, M * N), dinp2 = ops_alloc(dt, OPS_CPU, M * N);
    ops_tensor dw = f32(K * N), dw2 = f32(K * N), db = f32(K), db2 = f32(K), fpre = f32(M * N);
    for (int64_t i = 0; i < K * N; i++)
        fp(dw)[i] = fp(dw2)[i] = uniform(-1, 1); /* they accumulate */
    ops_matmul_dgelu_bwd(dinp, dw, db, dout.d, out, w2.d, pre, M, K, N);
    ops_matmul_bwd(dinp2, dw2, db2, dout.d, out, w2.d, M, K, N);
    ops_gelu_bwd(dinp2, pre, dinp2, M * N);
    int bwd = same_bits(dinp, dinp2) && same_bits(dw, dw2) && same_bits(db, db2);

    ops_set_fatal_handler(catch_fatal);
    volatile int ok = 1;
    FAILS(ops_matmul_dgelu_bwd(dinp, dw, db, dout.d, out, w2.d, fpre, M, K, N),
          "ops_matmul_dgelu_bwd: pre is fp32 but dinp is");
    FAILS(ops_matmul_gelu_fwd(out, OPS_NONE, inp.d, w.d, b.d, M, N, K),
          "ops_matmul_gelu_fwd: required argument pre is missing");
    ops_set_fatal_handler(NULL);
    tap_ok(fwd && bwd && ok, "%s matmul+gelu fwd and matmul+dgelu bwd: the unfused ops' "
           "bits (fwd %d, bwd %d), bad arguments named (%d)", ops_dtype_name(dt), fwd, bwd, ok);
    ops_tensor all[] = { pre, out, pre2, out2, dinp, dinp2, dw, dw2, db, db2, fpre };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ops_free(&all[i]);
    pfree(&inp); pfree(&w); pfree(&b); pfree(&dout); pfree(&w2);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(2 * 17 + 8);
    static const ops_dtype dts[2] = { OPS_BF16, OPS_F16 };
    for (int i = 0; i < 2; i++) {
        ops_dtype dt = dts[i];
        test_matmul(dt);
        test_matmul_mixed(dt);
        test_dw_accumulates(dt);
        test_gelu(dt);
        test_fused_mlp(dt);
        test_add_family(dt);
        test_sums(dt);
        test_layernorm(dt);
        test_attention(dt);
        test_embedding(dt);
        test_xent(dt);
    }
    test_f16_range();
    test_cast_bits();
    test_bf16_kernel();
    test_determinism();
    test_contract();
    return tap_done();
}
