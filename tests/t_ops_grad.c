/*
 * t_ops_grad.c - every backward pass in kernels/ops.h against finite
 * differences, plus each forward against a naive double reference.
 *
 * For an op with output y and a fixed random R, the objective is
 * L = sum(y * R), evaluated in double from the fp32 outputs. Its gradient
 * with respect to any input is exactly what the op's backward computes from
 * dout = R, and the central difference (L(x+h) - L(x-h)) / 2h estimates it
 * with error ~ h^2 |L'''| (truncation) plus ~ 1e-7 sum|y R| / h (fp32
 * rounding of y). With h = 1e-2 and the O(1) shapes here both stay below
 * 1e-3 of the largest gradient, so the tolerance 1e-2 is sound; a wrong
 * term in a backward pass is off by O(1). Errors are reported as
 *   max_i |analytic_i - fd_i| / max(|fd_i|, 0.05 * max_j |fd_j|),
 * relative per element, floored so that an element whose true gradient is
 * ~0 is not judged by rounding noise alone.
 *
 * The vocab-parallel ops run as a tensor-parallel caller would drive them:
 * two vocabulary shards, reduced with max and sums between the phases.
 */
#include "kernels/ops.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "tests/tap.h"

#define FD_H 1e-2f
#define GRAD_TOL 1e-2
#define FWD_TOL 1e-5

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* uniform in [lo, hi), xorshift64*: the same numbers on every platform */
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

static void fill(ops_tensor t, float lo, float hi)
{
    for (int64_t i = 0; i < t.n; i++)
        fp(t)[i] = uniform(lo, hi);
}

static void set_all(ops_tensor t, float v)
{
    for (int64_t i = 0; i < t.n; i++)
        fp(t)[i] = v;
}

static ops_tensor clone(ops_tensor t)
{
    ops_tensor c = ops_alloc(t.dtype, OPS_CPU, t.n);
    ops_copy(c, t);
    return c;
}

static double dot(const float *y, const float *r, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)y[i] * (double)r[i];
    return s;
}

/* An objective L(inputs) in double; runs the forward op(s) on ctx. */
typedef double (*objective_fn)(void *ctx);

/* Central differences of f with respect to each element of x (n). */
static void fd_grad(objective_fn f, void *ctx, float *x, int64_t n,
                    double *g)
{
    for (int64_t i = 0; i < n; i++) {
        float x0 = x[i];
        float xp = x0 + FD_H, xm = x0 - FD_H;
        x[i] = xp;
        double lp = f(ctx);
        x[i] = xm;
        double lm = f(ctx);
        x[i] = x0;
        g[i] = (lp - lm) / ((double)xp - (double)xm);
    }
}

/* The floored relative error described at the top of the file. */
static double grad_err(const float *a, const double *fd, int64_t n)
{
    double big = 0.0, worst = 0.0;
    for (int64_t i = 0; i < n; i++)
        big = fabs(fd[i]) > big ? fabs(fd[i]) : big;
    double floor = 0.05 * big > 1e-6 ? 0.05 * big : 1e-6;
    for (int64_t i = 0; i < n; i++) {
        double den = fabs(fd[i]) > floor ? fabs(fd[i]) : floor;
        double e = fabs((double)a[i] - fd[i]) / den;
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

/* FD-checks the analytic gradient `a` of f with respect to x; one TAP line. */
static void check_grad(const char *what, objective_fn f, void *ctx, float *x,
                       const float *a, int64_t n)
{
    double *g = malloc((size_t)n * sizeof *g);
    fd_grad(f, ctx, x, n, g);
    double e = grad_err(a, g, n);
    tap_ok(e < GRAD_TOL, "%s vs finite differences (max rel %.1e, tol %.0e)",
           what, e, GRAD_TOL);
    free(g);
}

/* Largest |a - b| / max(|b|, 1) against a double reference. */
static double ref_err(const float *a, const double *ref, int64_t n)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double den = fabs(ref[i]) > 1.0 ? fabs(ref[i]) : 1.0;
        double e = fabs((double)a[i] - ref[i]) / den;
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static int same_bits(ops_tensor a, ops_tensor b)
{
    return a.n == b.n && memcmp(a.data, b.data, (size_t)a.n * 4) == 0;
}

/* |a - k b| <= 1e-6 max(1, |k b|) elementwise: "a is k times b". */
static int is_multiple(ops_tensor a, ops_tensor b, float k)
{
    for (int64_t i = 0; i < a.n; i++) {
        double want = (double)k * fp(b)[i];
        double tol = 1e-6 * (fabs(want) > 1.0 ? fabs(want) : 1.0);
        if (!(fabs(fp(a)[i] - want) <= tol))
            return 0;
    }
    return 1;
}

/* ---- matmul ---------------------------------------------------------------- */

enum { MM_M = 5, MM_N = 7, MM_K = 3 };

typedef struct {
    ops_tensor out, inp, w, bias, r;
} matmul_ctx;

static double matmul_objective(void *p)
{
    matmul_ctx *c = p;
    ops_matmul_fwd(c->out, c->inp, c->w, c->bias, MM_M, MM_N, MM_K);
    return dot(fp(c->out), fp(c->r), c->out.n);
}

static void test_matmul(void)
{
    matmul_ctx c = { f32(MM_M * MM_N), f32(MM_M * MM_K), f32(MM_N * MM_K),
                     f32(MM_N), f32(MM_M * MM_N) };
    fill(c.inp, -1, 1);
    fill(c.w, -1, 1);
    fill(c.bias, -1, 1);
    fill(c.r, -1, 1);

    double ref[MM_M * MM_N];
    for (int i = 0; i < MM_M; i++)
        for (int j = 0; j < MM_N; j++) {
            double s = fp(c.bias)[j];
            for (int k = 0; k < MM_K; k++)
                s += (double)fp(c.inp)[i * MM_K + k] * fp(c.w)[j * MM_K + k];
            ref[i * MM_N + j] = s;
        }
    matmul_objective(&c);
    double e = ref_err(fp(c.out), ref, MM_M * MM_N);
    tap_ok(e < FWD_TOL, "matmul fwd vs double reference (max rel %.1e)", e);

    ops_tensor dinp = f32(MM_M * MM_K), dw = f32(MM_N * MM_K);
    ops_tensor db = f32(MM_N);
    set_all(dinp, NAN); /* "=": garbage in dinp must not matter */
    ops_matmul_bwd(dinp, dw, db, c.r, c.inp, c.w, MM_M, MM_N, MM_K);
    check_grad("matmul dinp", matmul_objective, &c, fp(c.inp), fp(dinp),
               dinp.n);
    check_grad("matmul dw", matmul_objective, &c, fp(c.w), fp(dw), dw.n);
    check_grad("matmul dbias", matmul_objective, &c, fp(c.bias), fp(db),
               db.n);

    ops_tensor dinp1 = clone(dinp), dw1 = clone(dw), db1 = clone(db);
    set_all(dinp, 5.0f);
    ops_matmul_bwd(dinp, dw, db, c.r, c.inp, c.w, MM_M, MM_N, MM_K);
    tap_ok(same_bits(dinp, dinp1) && is_multiple(dw, dw1, 2.0f) &&
           is_multiple(db, db1, 2.0f),
           "matmul bwd: dinp overwritten, dw and dbias accumulate");

    /* without bias, and with only some gradients requested */
    ops_tensor dw_only = f32(MM_N * MM_K);
    ops_matmul_fwd(c.out, c.inp, c.w, OPS_NONE, MM_M, MM_N, MM_K);
    ops_matmul_bwd(OPS_NONE, dw_only, OPS_NONE, c.r, c.inp, OPS_NONE, MM_M,
                   MM_N, MM_K);
    int ok = same_bits(dw_only, dw1);
    for (int i = 0; i < MM_M * MM_N; i++)
        ok = ok && fabs(fp(c.out)[i] - (ref[i] - fp(c.bias)[i % MM_N])) < 1e-5;
    tap_ok(ok, "matmul without bias, and bwd with only dw present");

    ops_free(&c.out); ops_free(&c.inp); ops_free(&c.w); ops_free(&c.bias);
    ops_free(&c.r); ops_free(&dinp); ops_free(&dw); ops_free(&db);
    ops_free(&dinp1); ops_free(&dw1); ops_free(&db1); ops_free(&dw_only);
}

/* ---- gelu -------------------------------------------------------------- */

enum { GELU_N = 37 };

typedef struct {
    ops_tensor out, inp, r;
} gelu_ctx;

static double gelu_objective(void *p)
{
    gelu_ctx *c = p;
    ops_gelu_fwd(c->out, c->inp, GELU_N);
    return dot(fp(c->out), fp(c->r), GELU_N);
}

static void test_gelu(void)
{
    gelu_ctx c = { f32(GELU_N), f32(GELU_N), f32(GELU_N) };
    fill(c.inp, -3, 3);
    fill(c.r, -1, 1);
    ops_tensor dinp = f32(GELU_N);
    set_all(dinp, NAN);
    ops_gelu_bwd(dinp, c.inp, c.r, GELU_N);
    check_grad("gelu dinp", gelu_objective, &c, fp(c.inp), fp(dinp), GELU_N);

    ops_tensor d = clone(c.r);
    ops_gelu_bwd(d, c.inp, d, GELU_N); /* dinp aliasing dout */
    tap_ok(same_bits(d, dinp), "gelu bwd overwrites dinp, also in place "
           "over dout");
    ops_free(&c.out); ops_free(&c.inp); ops_free(&c.r); ops_free(&dinp);
    ops_free(&d);
}

/* ---- layernorm ---------------------------------------------------------- */

enum { LN_N = 4, LN_C = 7 };

typedef struct {
    ops_tensor out, mean, rstd, inp, w, b, r;
} ln_ctx;

static double ln_objective(void *p)
{
    ln_ctx *c = p;
    ops_layernorm_fwd(c->out, c->mean, c->rstd, c->inp, c->w, c->b, LN_N,
                      LN_C);
    return dot(fp(c->out), fp(c->r), c->out.n);
}

static double ln_reference(const ln_ctx *c, double *ref)
{
    double worst = 0.0;
    for (int i = 0; i < LN_N; i++) {
        const float *x = fp(c->inp) + i * LN_C;
        double m = 0.0, v = 0.0;
        for (int k = 0; k < LN_C; k++)
            m += x[k];
        m /= LN_C;
        for (int k = 0; k < LN_C; k++)
            v += (x[k] - m) * (x[k] - m);
        double s = 1.0 / sqrt(v / LN_C + 1e-5);
        for (int k = 0; k < LN_C; k++)
            ref[i * LN_C + k] = (x[k] - m) * s * fp(c->w)[k] + fp(c->b)[k];
        double em = fabs(fp(c->mean)[i] - m), es = fabs(fp(c->rstd)[i] - s) / s;
        worst = em > worst ? em : worst;
        worst = es > worst ? es : worst;
    }
    return worst;
}

static void test_layernorm(void)
{
    ln_ctx c = { f32(LN_N * LN_C), f32(LN_N), f32(LN_N), f32(LN_N * LN_C),
                 f32(LN_C), f32(LN_C), f32(LN_N * LN_C) };
    fill(c.inp, -1, 1);
    fill(c.w, 0.5f, 1.5f);
    fill(c.b, -1, 1);
    fill(c.r, -1, 1);
    ln_objective(&c);
    double ref[LN_N * LN_C];
    double es = ln_reference(&c, ref);
    double e = ref_err(fp(c.out), ref, LN_N * LN_C);
    tap_ok(e < FWD_TOL && es < FWD_TOL, "layernorm fwd vs double reference "
           "(out max rel %.1e, mean/rstd %.1e)", e, es);

    ops_tensor dinp = f32(LN_N * LN_C), dw = f32(LN_C), db = f32(LN_C);
    ops_layernorm_bwd(dinp, dw, db, c.r, c.inp, c.w, c.mean, c.rstd, LN_N,
                      LN_C);
    check_grad("layernorm dinp", ln_objective, &c, fp(c.inp), fp(dinp),
               dinp.n);
    check_grad("layernorm dw", ln_objective, &c, fp(c.w), fp(dw), dw.n);
    check_grad("layernorm db", ln_objective, &c, fp(c.b), fp(db), db.n);

    ops_tensor dinp1 = clone(dinp), dw1 = clone(dw), db1 = clone(db);
    ln_objective(&c); /* mean, rstd of the unperturbed input */
    ops_layernorm_bwd(dinp, dw, db, c.r, c.inp, c.w, c.mean, c.rstd, LN_N,
                      LN_C);
    tap_ok(is_multiple(dinp, dinp1, 2.0f) && is_multiple(dw, dw1, 2.0f) &&
           is_multiple(db, db1, 2.0f),
           "layernorm bwd: dinp, dw and db all accumulate");
    ops_free(&c.out); ops_free(&c.mean); ops_free(&c.rstd); ops_free(&c.inp);
    ops_free(&c.w); ops_free(&c.b); ops_free(&c.r); ops_free(&dinp);
    ops_free(&dw); ops_free(&db); ops_free(&dinp1); ops_free(&dw1);
    ops_free(&db1);
}

/* ---- attention ------------------------------------------------------------ */

/* Shapes: a small one; one with T above the query tiles (64), so the
 * causal tiles meet at tile edges; one with T above the key tiles (256),
 * so the online softmax rescales rows across key tiles. */
typedef struct {
    int B, T, NH, hs;
    ops_tensor out, lse, qkv, r;
    int q0, Tq; /* the row window of att_rows_objective */
} att_ctx;

static double att_objective(void *p)
{
    att_ctx *c = p;
    ops_attention_fwd(c->out, c->lse, c->qkv, c->B, c->T, c->NH, c->hs);
    return dot(fp(c->out), fp(c->r), c->out.n);
}

/* qkv element (b, t, h, part, d) with part 0 = q, 1 = k, 2 = v */
static double qkv_at(const att_ctx *c, int b, int t, int h, int part, int d)
{
    return fp(c->qkv)[(((int64_t)(b * c->T + t) * c->NH + h) * 3 + part)
                      * c->hs + d];
}

/* Naive causal attention in double for row (b, h, t); returns the worst
 * error of out and of the row's log-sum-exp. */
static double att_row_err(const att_ctx *c, int b, int h, int t, double *s)
{
    double worst = 0.0, m = -INFINITY, z = 0.0;
    for (int j = 0; j <= t; j++) {
        s[j] = 0.0;
        for (int d = 0; d < c->hs; d++)
            s[j] += qkv_at(c, b, t, h, 0, d) * qkv_at(c, b, j, h, 1, d);
        s[j] /= sqrt((double)c->hs);
        m = s[j] > m ? s[j] : m;
    }
    for (int j = 0; j <= t; j++)
        z += exp(s[j] - m);
    double lse = fp(c->lse)[(int64_t)(b * c->NH + h) * c->T + t];
    worst = fabs(lse - (m + log(z)));
    for (int d = 0; d < c->hs; d++) {
        double o = 0.0;
        for (int j = 0; j <= t; j++)
            o += exp(s[j] - m) / z * qkv_at(c, b, j, h, 2, d);
        int64_t i = (int64_t)(b * c->T + t) * c->NH * c->hs + h * c->hs + d;
        double e = fabs(fp(c->out)[i] - o);
        worst = e > worst ? e : worst;
    }
    return worst;
}

static double att_reference_err(const att_ctx *c)
{
    double worst = 0.0, *s = malloc((size_t)c->T * sizeof *s);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++)
            for (int t = 0; t < c->T; t++) {
                double e = att_row_err(c, b, h, t, s);
                worst = e > worst ? e : worst;
            }
    free(s);
    return worst;
}

/* Copies part (0 q, 1 k, 2 v) of a (B,T,NH,3,hs) tensor into dst, or back
 * from dst when `back`. */
static void move_part(const att_ctx *c, float *dst, float *qkv, int part,
                      int back)
{
    int64_t n = 0;
    for (int64_t row = 0; row < (int64_t)c->B * c->T * c->NH; row++)
        for (int d = 0; d < c->hs; d++, n++) {
            float *q = &qkv[(row * 3 + part) * c->hs + d];
            if (back)
                *q = dst[n];
            else
                dst[n] = *q;
        }
}

/* The objective as a function of one part only: x holds that part; f
 * is the objective (att_objective when NULL). */
typedef struct {
    att_ctx *c;
    int part;
    float *x;
    objective_fn f;
} att_part_ctx;

static double att_part_objective(void *p)
{
    att_part_ctx *pc = p;
    move_part(pc->c, pc->x, fp(pc->c->qkv), pc->part, 1);
    return pc->f ? pc->f(pc->c) : att_objective(pc->c);
}

static void test_attention(int B, int T, int NH, int hs)
{
    int64_t n = (int64_t)B * T * NH * hs;
    att_ctx c = { B, T, NH, hs, f32(n), f32((int64_t)B * NH * T),
                  f32(3 * n), f32(n), 0, T };
    fill(c.qkv, -1.5f, 1.5f);
    fill(c.r, -1, 1);
    set_all(c.lse, NAN);
    att_objective(&c);
    double e = att_reference_err(&c);
    tap_ok(e < FWD_TOL, "attention B=%d T=%d NH=%d hs=%d fwd (out, lse) vs "
           "double reference (max abs %.1e)", B, T, NH, hs, e);

    ops_tensor dqkv = f32(3 * n);
    set_all(dqkv, NAN);
    ops_attention_bwd(dqkv, c.r, c.qkv, c.out, c.lse, B, T, NH, hs);
    static const char *names[] = { "dq", "dk", "dv" };
    float *x = malloc((size_t)n * sizeof *x), *a = malloc((size_t)n * sizeof *a);
    for (int part = 0; part < 3; part++) {
        char what[64];
        snprintf(what, sizeof what, "attention T=%d %s", T, names[part]);
        move_part(&c, x, fp(c.qkv), part, 0);
        move_part(&c, a, fp(dqkv), part, 0);
        att_part_ctx pc = { &c, part, x, NULL };
        check_grad(what, att_part_objective, &pc, x, a, n);
        att_part_objective(&pc); /* restore qkv, out, lse */
    }
    free(x);
    free(a);

    ops_tensor d1 = clone(dqkv);
    set_all(dqkv, 7.0f);
    ops_attention_bwd(dqkv, c.r, c.qkv, c.out, c.lse, B, T, NH, hs);
    tap_ok(same_bits(dqkv, d1), "attention T=%d bwd overwrites dqkv", T);
    ops_free(&c.out); ops_free(&c.lse); ops_free(&c.qkv); ops_free(&c.r);
    ops_free(&dqkv); ops_free(&d1);
}

/* max |a - r| / max |r| over n elements of dtype dt: the difference on the
 * scale of the tensor, as an elementwise ratio blows up where r ~ 0. */
static double scaled_diff(ops_tensor a, ops_tensor r)
{
    ops_tensor a32 = f32(a.n), r32 = f32(r.n);
    ops_cast(a32, a);
    ops_cast(r32, r);
    double big = 0.0, worst = 0.0;
    for (int64_t i = 0; i < r.n; i++)
        big = fabs(fp(r32)[i]) > big ? fabs(fp(r32)[i]) : big;
    for (int64_t i = 0; i < r.n; i++) {
        double e = fabs((double)fp(a32)[i] - fp(r32)[i]) / (big > 0 ? big : 1.0);
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    ops_free(&a32);
    ops_free(&r32);
    return worst;
}

/* n elements of dtype dt, uniform in [-size, size) rounded to dt. */
static ops_tensor random_of(ops_dtype dt, int64_t n, float size)
{
    ops_tensor x = f32(n), y = ops_alloc(dt, OPS_CPU, n);
    fill(x, -size, size);
    ops_cast(y, x);
    ops_free(&x);
    return y;
}

static int same_bytes(ops_tensor a, ops_tensor b)
{
    size_t es = ops_dtype_size(a.dtype);
    return a.n == b.n && memcmp(a.data, b.data, (size_t)a.n * es) == 0;
}

/* The fused kernel against the exact one that keeps the (B,NH,T,T)
 * probabilities (kernels/cpu/attention_exact_cpu.c, the trainer's kernel
 * before the fused one), on the same inputs in dt. Both do fp32
 * arithmetic on the same values in a different order: out and dqkv agree
 * to fp32 round-off in fp32 (tol 2e-5 of the tensor's largest element;
 * the sums run over up to T = 1024 terms), and in bf16 to one rounding of
 * the stored result (2^-8 of an element, tol 4e-3 of the largest). The
 * fused kernel also runs on 1 thread and must give the bits of 3. */
static void test_attention_exact(ops_dtype dt, int B, int T, int NH, int hs)
{
    double tol = dt == OPS_F32 ? 2e-5 : 4e-3;
    int64_t n = (int64_t)B * T * NH * hs, probs = (int64_t)B * NH * T * T;
    ops_tensor qkv = random_of(dt, 3 * n, 2.0f), dout = random_of(dt, n, 1.0f);
    ops_tensor out = ops_alloc(dt, OPS_CPU, n), out_r = ops_alloc(dt, OPS_CPU, n);
    ops_tensor dqkv = ops_alloc(dt, OPS_CPU, 3 * n), dqkv_r = ops_alloc(dt, OPS_CPU, 3 * n);
    ops_tensor lse = f32((int64_t)B * NH * T), att = f32(probs), scratch = f32(probs);

    int threads = omp_get_max_threads();
    omp_set_num_threads(3);
    ops_attention_fwd(out, lse, qkv, B, T, NH, hs);
    ops_attention_bwd(dqkv, dout, qkv, out, lse, B, T, NH, hs);
    attention_exact_fwd_cpu(out_r.data, fp(att), qkv.data, dt, B, T, NH, hs);
    attention_exact_bwd_cpu(dqkv_r.data, fp(scratch), dout.data, qkv.data, fp(att), dt,
                            B, T, NH, hs);
    double eo = scaled_diff(out, out_r), ed = scaled_diff(dqkv, dqkv_r);
    tap_ok(eo < tol && ed < tol, "%s attention B=%d T=%d NH=%d hs=%d fused vs exact "
           "kernel: out max diff %.1e, dqkv %.1e (of the largest element; tol %.0e)",
           ops_dtype_name(dt), B, T, NH, hs, eo, ed, tol);

    ops_tensor out1 = ops_alloc(dt, OPS_CPU, n), lse1 = f32(lse.n);
    ops_tensor dqkv1 = ops_alloc(dt, OPS_CPU, 3 * n);
    omp_set_num_threads(1);
    ops_attention_fwd(out1, lse1, qkv, B, T, NH, hs);
    ops_attention_bwd(dqkv1, dout, qkv, out1, lse1, B, T, NH, hs);
    omp_set_num_threads(threads);
    tap_ok(same_bytes(out, out1) && same_bits(lse, lse1) && same_bytes(dqkv, dqkv1),
           "%s attention T=%d: 1 thread gives the bits of 3", ops_dtype_name(dt), T);
    ops_tensor all[] = { qkv, dout, out, out_r, dqkv, dqkv_r, lse, att,
                         scratch, out1, lse1, dqkv1 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ops_free(&all[i]);
}

/* ---- context parallelism's row windows ------------------------------------ */

static double att_rows_objective(void *p)
{
    att_ctx *c = p;
    ops_attention_rows_fwd(c->out, c->lse, c->qkv, c->B, c->T, c->q0, c->Tq, c->NH, c->hs);
    return dot(fp(c->out), fp(c->r), c->out.n);
}

/* The window [q0, q0 + Tq) of a T-token sequence, q0 > 0, against finite
 * differences: dq of the window's rows, dk and dv of every earlier key
 * (and zero for the rows after the window, which the window never reads). */
static void test_attention_rows_grad(int B, int T, int q0, int Tq, int NH, int hs)
{
    int64_t n = (int64_t)B * T * NH * hs, nw = (int64_t)B * Tq * NH * hs;
    att_ctx c = { B, T, NH, hs, f32(nw), f32((int64_t)B * NH * Tq), f32(3 * n), f32(nw),
                  q0, Tq };
    fill(c.qkv, -1.5f, 1.5f);
    fill(c.r, -1, 1);
    att_rows_objective(&c);
    ops_tensor dqkv = f32(3 * n);
    ops_attention_rows_bwd(dqkv, c.r, c.qkv, c.out, c.lse, B, T, q0, Tq, NH, hs);
    static const char *names[] = { "dq", "dk", "dv" };
    float *x = malloc((size_t)n * sizeof *x), *a = malloc((size_t)n * sizeof *a);
    for (int part = 0; part < 3; part++) {
        char what[96];
        snprintf(what, sizeof what, "attention rows [%d, %d) of T=%d %s", q0, q0 + Tq, T,
                 names[part]);
        move_part(&c, x, fp(c.qkv), part, 0);
        move_part(&c, a, fp(dqkv), part, 0);
        att_part_ctx pc = { &c, part, x, att_rows_objective };
        check_grad(what, att_part_objective, &pc, x, a, n);
        att_part_objective(&pc); /* restore qkv */
    }
    free(x);
    free(a);
    ops_free(&c.out); ops_free(&c.lse); ops_free(&c.qkv); ops_free(&c.r); ops_free(&dqkv);
}

/* Rows [t0, t0 + rows) of each of B sequences of `width` elements a row:
 * from src (src_T rows a sequence, from row src_t0) to dst (dst_T, from
 * dst_t0). */
static void copy_seq_rows(ops_tensor dst, int dst_T, int dst_t0, ops_tensor src, int src_T,
                          int src_t0, int B, int rows, int64_t width)
{
    for (int b = 0; b < B; b++)
        ops_copy(ops_view(dst, ((int64_t)b * dst_T + dst_t0) * width, rows * width),
                 ops_view(src, ((int64_t)b * src_T + src_t0) * width, rows * width));
}

/* The whole sequence as its windows: the rows op at q0 = 0, Tq = T gives
 * the whole op's bits (the same code); the windows cut at `cuts` (zigzag
 * chunks of context parallelism, in the order the ranks would run them),
 * each forward's out and lse put in place and each backward added into
 * one zeroed dqkv, give the whole op's out, lse and dqkv to round-off. The
 * windows' query tiles break where the whole sequence's do (multiples of
 * 64 rows), but their GEMMs have other shapes, and a 16-bit dqkv is
 * rounded once per window that adds to it: tol 1e-5 of the largest
 * element in fp32, 1e-2 (two roundings of 2^-8) in bf16. */
static void test_attention_windows(ops_dtype dt, int B, int T, int NH, int hs,
                                   const int *cuts, int windows)
{
    double tol = dt == OPS_F32 ? 1e-5 : 1e-2;
    int64_t n = (int64_t)B * T * NH * hs, C = (int64_t)NH * hs;
    ops_tensor qkv = random_of(dt, 3 * n, 2.0f), dout = random_of(dt, n, 1.0f);
    ops_tensor out = ops_alloc(dt, OPS_CPU, n), lse = f32((int64_t)B * NH * T);
    ops_tensor dqkv = ops_alloc(dt, OPS_CPU, 3 * n);
    ops_attention_fwd(out, lse, qkv, B, T, NH, hs);
    ops_attention_bwd(dqkv, dout, qkv, out, lse, B, T, NH, hs);

    ops_tensor out_r = ops_alloc(dt, OPS_CPU, n), lse_r = f32(lse.n);
    ops_tensor dqkv_r = ops_alloc(dt, OPS_CPU, 3 * n);
    ops_attention_rows_fwd(out_r, lse_r, qkv, B, T, 0, T, NH, hs);
    ops_attention_rows_bwd(dqkv_r, dout, qkv, out_r, lse_r, B, T, 0, T, NH, hs);
    tap_ok(same_bytes(out, out_r) && same_bits(lse, lse_r) && same_bytes(dqkv, dqkv_r),
           "%s attention rows [0, T=%d) give the whole op's bits (out, lse, dqkv)",
           ops_dtype_name(dt), T);

    ops_zero(dqkv_r);
    for (int w = 0; w < windows; w++) {
        int q0 = cuts[2 * w], Tq = cuts[2 * w + 1] - q0;
        ops_tensor ow = ops_alloc(dt, OPS_CPU, (int64_t)B * Tq * C);
        ops_tensor gw = ops_alloc(dt, OPS_CPU, ow.n), lw = f32((int64_t)B * NH * Tq);
        ops_attention_rows_fwd(ow, lw, qkv, B, T, q0, Tq, NH, hs);
        copy_seq_rows(out_r, T, q0, ow, Tq, 0, B, Tq, C);
        copy_seq_rows(lse_r, T, q0, lw, Tq, 0, B * NH, Tq, 1);
        copy_seq_rows(gw, Tq, 0, dout, T, q0, B, Tq, C);
        ops_attention_rows_bwd(dqkv_r, gw, qkv, ow, lw, B, T, q0, Tq, NH, hs);
        ops_free(&ow); ops_free(&gw); ops_free(&lw);
    }
    double eo = scaled_diff(out_r, out), el = scaled_diff(lse_r, lse);
    double ed = scaled_diff(dqkv_r, dqkv);
    tap_ok(eo < tol && el < tol && ed < tol, "%s attention T=%d as %d windows: out %.1e, "
           "lse %.1e, accumulated dqkv %.1e off the whole op (of the largest; tol %.0e)",
           ops_dtype_name(dt), T, windows, eo, el, ed, tol);
    ops_tensor all[] = { qkv, dout, out, lse, dqkv, out_r, lse_r, dqkv_r };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ops_free(&all[i]);
}

/* ---- embeddings, two vocabulary shards ------------------------------------- */

enum { EM_B = 2, EM_T = 3, EM_C = 4, EM_V = 11 };
#define EM_N (EM_B * EM_T)
static const int em_v0[2] = { 0, 6 }, em_vl[2] = { 6, 5 };

typedef struct {
    ops_tensor out, part, tokens, wte[2], wpe, r;
} emb_ctx;

/* out = sum over shards of the shard lookups, + positions: what the
 * tensor-parallel all-reduce after ops_embedding_fwd produces. */
static double emb_objective(void *p)
{
    emb_ctx *c = p;
    ops_embedding_fwd(c->out, c->tokens, c->wte[0], em_v0[0], em_vl[0], EM_N,
                      EM_C);
    ops_embedding_fwd(c->part, c->tokens, c->wte[1], em_v0[1], em_vl[1], EM_N,
                      EM_C);
    ops_accumulate(c->out, c->part, c->out.n);
    ops_position_fwd(c->out, c->wpe, EM_B, EM_T, EM_C);
    return dot(fp(c->out), fp(c->r), c->out.n);
}

static void emb_backward(emb_ctx *c, ops_tensor dwte[2], ops_tensor dwpe)
{
    for (int s = 0; s < 2; s++)
        ops_embedding_bwd(dwte[s], c->tokens, c->r, em_v0[s], em_vl[s], EM_N,
                          EM_C);
    ops_position_bwd(dwpe, c->r, EM_B, EM_T, EM_C);
}

static void test_embedding(void)
{
    /* token 3 repeats, and each shard owns some of the tokens */
    static const int32_t toks[EM_N] = { 3, 9, 3, 10, 0, 6 };
    emb_ctx c = { f32(EM_N * EM_C), f32(EM_N * EM_C),
                  ops_alloc(OPS_I32, OPS_CPU, EM_N),
                  { f32(em_vl[0] * EM_C), f32(em_vl[1] * EM_C) },
                  f32(EM_T * EM_C), f32(EM_N * EM_C) };
    memcpy(c.tokens.data, toks, sizeof toks);
    fill(c.wte[0], -1, 1);
    fill(c.wte[1], -1, 1);
    fill(c.wpe, -1, 1);
    fill(c.r, -1, 1);
    emb_objective(&c);
    double ref[EM_N * EM_C];
    for (int i = 0; i < EM_N; i++)
        for (int k = 0; k < EM_C; k++) {
            int s = toks[i] >= em_v0[1];
            ref[i * EM_C + k] = fp(c.wte[s])[(toks[i] - em_v0[s]) * EM_C + k]
                                + fp(c.wpe)[(i % EM_T) * EM_C + k];
        }
    double e = ref_err(fp(c.out), ref, EM_N * EM_C);
    tap_ok(e < FWD_TOL, "embedding+position fwd over 2 vocab shards vs "
           "direct lookup (max rel %.1e)", e);

    ops_tensor dwte[2] = { f32(c.wte[0].n), f32(c.wte[1].n) };
    ops_tensor dwpe = f32(c.wpe.n);
    emb_backward(&c, dwte, dwpe);
    check_grad("embedding dwte shard 0", emb_objective, &c, fp(c.wte[0]),
               fp(dwte[0]), dwte[0].n);
    check_grad("embedding dwte shard 1", emb_objective, &c, fp(c.wte[1]),
               fp(dwte[1]), dwte[1].n);
    check_grad("position dwpe", emb_objective, &c, fp(c.wpe), fp(dwpe),
               dwpe.n);

    ops_tensor d0 = clone(dwte[0]), d1 = clone(dwte[1]), dp = clone(dwpe);
    emb_backward(&c, dwte, dwpe);
    tap_ok(is_multiple(dwte[0], d0, 2.0f) && is_multiple(dwte[1], d1, 2.0f) &&
           is_multiple(dwpe, dp, 2.0f),
           "embedding and position bwd accumulate");
    ops_free(&c.out); ops_free(&c.part); ops_free(&c.tokens);
    ops_free(&c.wte[0]); ops_free(&c.wte[1]); ops_free(&c.wpe);
    ops_free(&c.r); ops_free(&dwte[0]); ops_free(&dwte[1]); ops_free(&dwpe);
    ops_free(&d0); ops_free(&d1); ops_free(&dp);
}

/* ---- cross-entropy, two vocabulary shards ----------------------------------- */

enum { XE_N = 6, XE_V = 11 };
static const int xe_v0[2] = { 0, 6 }, xe_vl[2] = { 6, 5 };
#define XE_SCALE (1.0f / XE_N)

typedef struct {
    ops_tensor logits[2], targets, rowmax, tmp, sumexp, tlogit, tmp2, losses;
} xent_ctx;

static void vec_max(ops_tensor y, ops_tensor x)
{
    for (int64_t i = 0; i < y.n; i++)
        fp(y)[i] = fp(x)[i] > fp(y)[i] ? fp(x)[i] : fp(y)[i];
}

/* The three phases as a tensor-parallel caller runs them, the all-reduces
 * done by hand; dlogits[s] may be absent or alias logits[s]. */
static void xent_run(xent_ctx *c, ops_tensor dlogits[2])
{
    ops_xent_max(c->rowmax, c->logits[0], XE_N, xe_vl[0]);
    ops_xent_max(c->tmp, c->logits[1], XE_N, xe_vl[1]);
    vec_max(c->rowmax, c->tmp);
    ops_xent_sumexp(c->sumexp, c->tlogit, c->logits[0], c->rowmax, c->targets,
                    xe_v0[0], XE_N, xe_vl[0]);
    ops_xent_sumexp(c->tmp, c->tmp2, c->logits[1], c->rowmax, c->targets,
                    xe_v0[1], XE_N, xe_vl[1]);
    ops_accumulate(c->sumexp, c->tmp, XE_N);
    ops_accumulate(c->tlogit, c->tmp2, XE_N);
    for (int s = 0; s < 2; s++)
        ops_xent_finish(c->losses, dlogits[s], c->logits[s], c->rowmax,
                        c->sumexp, c->tlogit, c->targets, xe_v0[s], XE_N,
                        xe_vl[s], XE_SCALE);
}

static double xent_objective(void *p)
{
    xent_ctx *c = p;
    ops_tensor none[2] = { OPS_NONE, OPS_NONE };
    xent_run(c, none);
    double l = 0.0;
    for (int i = 0; i < XE_N; i++)
        l += fp(c->losses)[i];
    return l * XE_SCALE;
}

static void test_xent(void)
{
    static const int32_t tg[XE_N] = { 0, 5, 6, 10, 3, 8 };
    xent_ctx c = { { f32(XE_N * xe_vl[0]), f32(XE_N * xe_vl[1]) },
                   ops_alloc(OPS_I32, OPS_CPU, XE_N), f32(XE_N), f32(XE_N),
                   f32(XE_N), f32(XE_N), f32(XE_N), f32(XE_N) };
    memcpy(c.targets.data, tg, sizeof tg);
    fill(c.logits[0], -2, 2);
    fill(c.logits[1], -2, 2);

    /* the same rows as one unsharded (N,V) block */
    ops_tensor full = f32(XE_N * XE_V), l1 = f32(XE_N);
    for (int i = 0; i < XE_N; i++)
        for (int s = 0; s < 2; s++)
            memcpy(fp(full) + i * XE_V + xe_v0[s],
                   fp(c.logits[s]) + i * xe_vl[s], xe_vl[s] * sizeof(float));
    ops_xent_max(c.rowmax, full, XE_N, XE_V);
    ops_xent_sumexp(c.sumexp, c.tlogit, full, c.rowmax, c.targets, 0, XE_N,
                    XE_V);
    ops_xent_finish(l1, OPS_NONE, full, c.rowmax, c.sumexp, c.tlogit,
                    c.targets, 0, XE_N, XE_V, 1.0f);
    xent_objective(&c);
    double e = tap_max_rel_diff(fp(c.losses), fp(l1), XE_N, 1e-6);
    tap_ok(e < 1e-6, "xent losses over 2 vocab shards match one shard "
           "(max rel %.1e)", e);

    ops_tensor d[2] = { f32(c.logits[0].n), f32(c.logits[1].n) };
    set_all(d[0], NAN);
    set_all(d[1], NAN);
    xent_run(&c, d);
    check_grad("xent dlogits shard 0", xent_objective, &c, fp(c.logits[0]),
               fp(d[0]), d[0].n);
    check_grad("xent dlogits shard 1", xent_objective, &c, fp(c.logits[1]),
               fp(d[1]), d[1].n);

    /* in place: dlogits written over logits */
    ops_tensor inplace[2] = { clone(c.logits[0]), clone(c.logits[1]) };
    ops_tensor saved[2] = { c.logits[0], c.logits[1] };
    c.logits[0] = inplace[0];
    c.logits[1] = inplace[1];
    xent_run(&c, inplace);
    tap_ok(same_bits(inplace[0], d[0]) && same_bits(inplace[1], d[1]),
           "xent dlogits in place over logits equals out of place");
    c.logits[0] = saved[0];
    c.logits[1] = saved[1];

    ops_free(&c.logits[0]); ops_free(&c.logits[1]); ops_free(&c.targets);
    ops_free(&c.rowmax); ops_free(&c.tmp); ops_free(&c.sumexp);
    ops_free(&c.tlogit); ops_free(&c.tmp2); ops_free(&c.losses);
    ops_free(&full); ops_free(&l1); ops_free(&d[0]); ops_free(&d[1]);
    ops_free(&inplace[0]); ops_free(&inplace[1]);
}

/* ---- add and accumulate ---------------------------------------------------- */

enum { ADD_N = 9 };

typedef struct {
    ops_tensor out, a, b, r;
} add_ctx;

static double add_objective(void *p)
{
    add_ctx *c = p;
    ops_add(c->out, c->a, c->b, ADD_N);
    return dot(fp(c->out), fp(c->r), ADD_N);
}

/* y = y0 + x via ops_accumulate, starting from y0 in b each time */
static double acc_objective(void *p)
{
    add_ctx *c = p;
    ops_copy(c->out, c->b);
    ops_accumulate(c->out, c->a, ADD_N);
    return dot(fp(c->out), fp(c->r), ADD_N);
}

static void test_add(void)
{
    add_ctx c = { f32(ADD_N), f32(ADD_N), f32(ADD_N), f32(ADD_N) };
    fill(c.a, -1, 1);
    fill(c.b, -1, 1);
    fill(c.r, -1, 1);
    /* both inputs' gradient is dout itself */
    check_grad("add da", add_objective, &c, fp(c.a), fp(c.r), ADD_N);
    check_grad("add db", add_objective, &c, fp(c.b), fp(c.r), ADD_N);
    check_grad("accumulate dx", acc_objective, &c, fp(c.a), fp(c.r), ADD_N);
    ops_free(&c.out); ops_free(&c.a); ops_free(&c.b); ops_free(&c.r);
}

/* ---- the order of the row sums -------------------------------------------- */

/* x[0..n) summed as vec.h does: 16 lanes, each in order, folded lane 0
 * first, then the n % 16 left over. Plain scalar C, so it is the same on
 * every CPU; an op that gives these bits gives them on every CPU. */
static float sum16(const float *x, int n, float centre, int squares)
{
    float lane[16] = { 0 };
    int n16 = n & ~15;
    for (int j = 0; j < n16; j++) {
        float d = x[j] - centre;
        lane[j % 16] += squares ? d * d : x[j];
    }
    float s = 0.0f;
    for (int k = 0; k < 16; k++)
        s += lane[k];
    for (int j = n16; j < n; j++) {
        float d = x[j] - centre;
        s += squares ? d * d : x[j];
    }
    return s;
}

/* LayerNorm's mean and rstd, RMSNorm's rstd and dbias (chunks of 32 rows,
 * each in row order, then the chunks in order) are the bits of their
 * documented order of operations, with a row length that leaves a tail. */
static void test_reduction_order(void)
{
    enum { N = 300, C = 200, ROWS = 32 };
    rng_state = 11;
    ops_tensor inp = f32(N * C), w = f32(C), out = f32(N * C);
    ops_tensor mean = f32(N), rstd = f32(N), rms = f32(N), dbias = f32(C);
    fill(inp, -1, 1);
    fill(w, -1, 1);
    ops_layernorm_fwd(out, mean, rstd, inp, w, w, N, C);
    ops_rmsnorm_fwd(out, rms, inp, w, N, C, 1e-5f);
    ops_matmul_bwd(OPS_NONE, OPS_NONE, dbias, inp, OPS_NONE, OPS_NONE, N, C,
                   C);
    int ok = 1;
    for (int i = 0; i < N; i++) {
        const float *x = fp(inp) + (int64_t)i * C;
        float m = sum16(x, C, 0.0f, 0) / (float)C;
        float var = sum16(x, C, m, 1) / (float)C;
        float r = 1.0f / sqrtf(var + TRI_LN_EPS);
        float rr = elem_rms_rstd(sum16(x, C, 0.0f, 1), C, 1e-5f);
        ok = ok && fp(mean)[i] == m && fp(rstd)[i] == r && fp(rms)[i] == rr;
    }
    for (int j = 0; j < C; j++) {
        float total = 0.0f;
        for (int r0 = 0; r0 < N; r0 += ROWS) {
            float part = 0.0f;
            for (int i = r0; i < N && i < r0 + ROWS; i++)
                part += fp(inp)[(int64_t)i * C + j];
            total = r0 == 0 ? part : total + part;
        }
        ok = ok && fp(dbias)[j] == 0.0f + total;
    }
    tap_ok(ok, "layernorm mean/rstd, rmsnorm rstd and dbias are the bits of "
           "their fixed order of sums (16 lanes; chunks of %d rows), on "
           "any CPU", ROWS);
    ops_free(&inp); ops_free(&w); ops_free(&out); ops_free(&mean);
    ops_free(&rstd); ops_free(&rms); ops_free(&dbias);
}

/* ---- determinism ------------------------------------------------------------ */

/* The reductions over rows (dbias, layernorm dw/db, dwte, dwpe) must give
 * the same bits whatever the thread count (doc/design.md, invariant 5). */
static void run_row_reductions(int threads, ops_tensor out[5])
{
    enum { N = 300, C = 200, V = 50 };
    rng_state = 42;
    ops_tensor dout = f32(N * C), inp = f32(N * C), w = f32(C);
    ops_tensor mean = f32(N), rstd = f32(N), tmp = f32(N * C), dinp = f32(N * C);
    ops_tensor tok = ops_alloc(OPS_I32, OPS_CPU, N);
    fill(dout, -1, 1);
    fill(inp, -1, 1);
    fill(w, -1, 1);
    for (int i = 0; i < N; i++)
        ((int32_t *)tok.data)[i] = (i * 7) % V;
    out[0] = f32(C); out[1] = f32(C); out[2] = f32(C);
    out[3] = f32(V * C); out[4] = f32(N / 3 * C);
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    ops_matmul_bwd(OPS_NONE, OPS_NONE, out[0], dout, OPS_NONE, OPS_NONE, N, C, C);
    ops_layernorm_fwd(tmp, mean, rstd, inp, w, w, N, C);
    ops_layernorm_bwd(dinp, out[1], out[2], dout, inp, w, mean, rstd, N, C);
    ops_embedding_bwd(out[3], tok, dout, 0, V, N, C);
    ops_position_bwd(out[4], dout, 3, N / 3, C);
    omp_set_num_threads(saved);
    ops_free(&dout); ops_free(&inp); ops_free(&w); ops_free(&mean);
    ops_free(&rstd); ops_free(&tmp); ops_free(&dinp); ops_free(&tok);
}

static void test_determinism(void)
{
    ops_tensor a[5], b[5];
    run_row_reductions(1, a);
    run_row_reductions(3, b);
    int ok = 1;
    for (int i = 0; i < 5; i++) {
        ok = ok && same_bits(a[i], b[i]);
        ops_free(&a[i]);
        ops_free(&b[i]);
    }
    tap_ok(ok, "dbias, layernorm dw/db, dwte, dwpe bitwise equal with 1 "
           "and 3 threads");
}

/* ---- Llama: RMSNorm, rotary embeddings, SwiGLU, grouped-query heads ------ */

enum { RMS_N = 4, RMS_C = 7 };

typedef struct {
    ops_tensor out, rstd, inp, w, r;
} rms_ctx;

static double rms_objective(void *p)
{
    rms_ctx *c = p;
    ops_rmsnorm_fwd(c->out, c->rstd, c->inp, c->w, RMS_N, RMS_C, 1e-5f);
    return dot(fp(c->out), fp(c->r), c->out.n);
}

static void test_rmsnorm(void)
{
    rms_ctx c = { f32(RMS_N * RMS_C), f32(RMS_N), f32(RMS_N * RMS_C), f32(RMS_C),
                  f32(RMS_N * RMS_C) };
    fill(c.inp, -1, 1);
    fill(c.w, 0.5f, 1.5f);
    fill(c.r, -1, 1);
    rms_objective(&c);
    double ref[RMS_N * RMS_C];
    for (int i = 0; i < RMS_N; i++) {
        const float *x = fp(c.inp) + i * RMS_C;
        double ss = 0.0;
        for (int k = 0; k < RMS_C; k++)
            ss += (double)x[k] * x[k];
        double s = 1.0 / sqrt(ss / RMS_C + 1e-5);
        for (int k = 0; k < RMS_C; k++)
            ref[i * RMS_C + k] = x[k] * s * fp(c.w)[k];
    }
    double e = ref_err(fp(c.out), ref, RMS_N * RMS_C);
    tap_ok(e < FWD_TOL, "rmsnorm fwd vs double reference (max rel %.1e)", e);

    ops_tensor dinp = f32(RMS_N * RMS_C), dw = f32(RMS_C);
    ops_rmsnorm_bwd(dinp, dw, c.r, c.inp, c.w, c.rstd, RMS_N, RMS_C);
    check_grad("rmsnorm dinp", rms_objective, &c, fp(c.inp), fp(dinp), dinp.n);
    check_grad("rmsnorm dw", rms_objective, &c, fp(c.w), fp(dw), dw.n);
    ops_tensor dinp1 = clone(dinp), dw1 = clone(dw);
    rms_objective(&c);
    ops_rmsnorm_bwd(dinp, dw, c.r, c.inp, c.w, c.rstd, RMS_N, RMS_C);
    tap_ok(is_multiple(dinp, dinp1, 2.0f) && is_multiple(dw, dw1, 2.0f),
           "rmsnorm bwd: dinp and dw accumulate");
    ops_free(&c.out); ops_free(&c.rstd); ops_free(&c.inp); ops_free(&c.w);
    ops_free(&c.r); ops_free(&dinp); ops_free(&dw); ops_free(&dinp1); ops_free(&dw1);
}

/* B=2, T=5, H=3, hs=6; theta 100 makes every pair turn visibly. */
enum { RO_B = 2, RO_T = 5, RO_H = 3, RO_HS = 6 };
#define RO_N (RO_B * RO_T * RO_H * RO_HS)
#define RO_THETA 100.0

typedef struct {
    ops_tensor x, y, r;
} rope_ctx;

static double rope_objective(void *p)
{
    rope_ctx *c = p;
    ops_copy(c->y, c->x);
    ops_rope_fwd(c->y, RO_B, RO_T, RO_H, RO_HS, RO_THETA);
    return dot(fp(c->y), fp(c->r), RO_N);
}

/* HuggingFace's formula, in double: y = x cos + rotate_half(x) sin with
 * rotate_half(x) = (-x2, x1) and the angle t / theta^(2i/hs). */
static double rope_reference_err(const rope_ctx *c)
{
    double worst = 0.0;
    int half = RO_HS / 2;
    for (int n = 0; n < RO_B * RO_T; n++)
        for (int h = 0; h < RO_H; h++)
            for (int d = 0; d < RO_HS; d++) {
                int i = d % half, t = n % RO_T;
                double a = t / pow(RO_THETA, 2.0 * i / RO_HS);
                const float *x = fp(c->x) + ((int64_t)n * RO_H + h) * RO_HS;
                double rot = d < half ? -x[d + half] : x[d - half];
                double ref = x[d] * cos(a) + rot * sin(a);
                double e = fabs(fp(c->y)[((int64_t)n * RO_H + h) * RO_HS + d] - ref);
                worst = e > worst ? e : worst;
            }
    return worst;
}

/* ops_rope_fwd_at(x, T, t0) is rows [t0, t0 + T) of ops_rope_fwd over
 * t0 + T rows (the same angles, so the same bits), and its backward is
 * its transpose: <fwd_at(x), y> = <x, bwd_at(y)> (in double, to fp32
 * round-off). */
static void test_rope_at(int t0)
{
    enum { T = 4, B = 2 };
    int64_t row = RO_H * RO_HS, n = (int64_t)B * T * row, nl = (int64_t)B * (t0 + T) * row;
    ops_tensor x = f32(n), y = f32(n), xl = f32(nl), bx = f32(n);
    fill(x, -1, 1);
    fill(y, -1, 1);
    fill(xl, -1, 1);
    copy_seq_rows(xl, t0 + T, t0, x, T, 0, B, T, row);
    ops_tensor fx = clone(x), by = clone(y);
    ops_rope_fwd_at(fx, B, T, t0, RO_H, RO_HS, RO_THETA);
    ops_rope_fwd(xl, B, t0 + T, RO_H, RO_HS, RO_THETA);
    copy_seq_rows(bx, T, 0, xl, t0 + T, t0, B, T, row);
    tap_ok(same_bits(fx, bx), "rope_at t0=%d: rows [t0, t0+T) of rope over t0+T rows", t0);
    ops_rope_bwd_at(by, B, T, t0, RO_H, RO_HS, RO_THETA);
    double lhs = dot(fp(fx), fp(y), n), rhs = dot(fp(x), fp(by), n);
    tap_ok(fabs(lhs - rhs) <= 1e-5 * (fabs(lhs) + 1.0),
           "rope_bwd_at t0=%d is rope_fwd_at's transpose (%.9g vs %.9g)", t0, lhs, rhs);
    ops_free(&x); ops_free(&y); ops_free(&xl); ops_free(&bx); ops_free(&fx); ops_free(&by);
}

static void test_rope(void)
{
    rope_ctx c = { f32(RO_N), f32(RO_N), f32(RO_N) };
    fill(c.x, -1, 1);
    fill(c.r, -1, 1);
    rope_objective(&c);
    double e = rope_reference_err(&c);
    tap_ok(e < FWD_TOL, "rope fwd vs HuggingFace's rotate_half in double (max abs %.1e)", e);
    ops_tensor dx = clone(c.r);
    ops_rope_bwd(dx, RO_B, RO_T, RO_H, RO_HS, RO_THETA);
    check_grad("rope dx", rope_objective, &c, fp(c.x), fp(dx), RO_N);
    ops_free(&c.x); ops_free(&c.y); ops_free(&c.r); ops_free(&dx);
}

enum { SW_N = 64 };

typedef struct {
    ops_tensor out, gate, up, r;
} swiglu_ctx;

static double swiglu_objective(void *p)
{
    swiglu_ctx *c = p;
    ops_swiglu_fwd(c->out, c->gate, c->up, SW_N);
    return dot(fp(c->out), fp(c->r), SW_N);
}

static void test_swiglu(void)
{
    swiglu_ctx c = { f32(SW_N), f32(SW_N), f32(SW_N), f32(SW_N) };
    fill(c.gate, -4, 4);
    fill(c.up, -2, 2);
    fill(c.r, -1, 1);
    swiglu_objective(&c);
    double ref[SW_N];
    for (int i = 0; i < SW_N; i++) {
        double g = fp(c.gate)[i];
        ref[i] = g / (1.0 + exp(-g)) * fp(c.up)[i];
    }
    double e = ref_err(fp(c.out), ref, SW_N);
    tap_ok(e < FWD_TOL, "swiglu fwd vs silu(gate) * up in double (max rel %.1e)", e);
    ops_tensor dgate = f32(SW_N), dup = f32(SW_N);
    set_all(dgate, NAN);
    set_all(dup, NAN);
    ops_swiglu_bwd(dgate, dup, c.r, c.gate, c.up, SW_N);
    check_grad("swiglu dgate", swiglu_objective, &c, fp(c.gate), fp(dgate), SW_N);
    check_grad("swiglu dup", swiglu_objective, &c, fp(c.up), fp(dup), SW_N);
    ops_free(&c.out); ops_free(&c.gate); ops_free(&c.up); ops_free(&c.r);
    ops_free(&dgate); ops_free(&dup);
}

/* N=3 rows, 6 query heads over 2 key/value heads, hs=4. */
enum { GQ_N = 3, GQ_NH = 6, GQ_NKV = 2, GQ_HS = 4 };
#define GQ_NQ (GQ_N * GQ_NH * GQ_HS)
#define GQ_NK (GQ_N * GQ_NKV * GQ_HS)

typedef struct {
    ops_tensor qkv, q, k, v, r;
} gqa_ctx;

static double gqa_objective(void *p)
{
    gqa_ctx *c = p;
    ops_gqa_expand(c->qkv, c->q, c->k, c->v, GQ_N, GQ_NH, GQ_NKV, GQ_HS);
    return dot(fp(c->qkv), fp(c->r), 3 * GQ_NQ);
}

static void test_gqa(void)
{
    gqa_ctx c = { f32(3 * GQ_NQ), f32(GQ_NQ), f32(GQ_NK), f32(GQ_NK), f32(3 * GQ_NQ) };
    fill(c.q, -1, 1);
    fill(c.k, -1, 1);
    fill(c.v, -1, 1);
    fill(c.r, -1, 1);
    gqa_objective(&c);
    int ok = 1, group = GQ_NH / GQ_NKV;
    for (int n = 0; n < GQ_N; n++)
        for (int h = 0; h < GQ_NH; h++)
            for (int d = 0; d < GQ_HS; d++) {
                const float *o = fp(c.qkv) + ((n * GQ_NH + h) * 3) * GQ_HS + d;
                int kv = (n * GQ_NKV + h / group) * GQ_HS + d;
                ok &= o[0] == fp(c.q)[(n * GQ_NH + h) * GQ_HS + d] && o[GQ_HS] == fp(c.k)[kv]
                      && o[2 * GQ_HS] == fp(c.v)[kv];
            }
    tap_ok(ok, "gqa expand: query head h reads key/value head h / (NH/NKV)");
    ops_tensor dq = f32(GQ_NQ), dk = f32(GQ_NK), dv = f32(GQ_NK);
    set_all(dq, NAN);
    set_all(dk, NAN);
    set_all(dv, NAN);
    ops_gqa_reduce(dq, dk, dv, c.r, GQ_N, GQ_NH, GQ_NKV, GQ_HS);
    check_grad("gqa dq", gqa_objective, &c, fp(c.q), fp(dq), GQ_NQ);
    check_grad("gqa dk (summed over the group)", gqa_objective, &c, fp(c.k), fp(dk), GQ_NK);
    check_grad("gqa dv (summed over the group)", gqa_objective, &c, fp(c.v), fp(dv), GQ_NK);
    ops_free(&c.qkv); ops_free(&c.q); ops_free(&c.k); ops_free(&c.v); ops_free(&c.r);
    ops_free(&dq); ops_free(&dk); ops_free(&dv);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(81);
    test_matmul();
    test_gelu();
    test_layernorm();
    test_attention(2, 5, 2, 4);
    test_attention(1, 130, 2, 3);
    test_attention(1, 300, 1, 2);
    test_attention_exact(OPS_F32, 2, 300, 3, 8);
    test_attention_exact(OPS_F32, 1, 1024, 2, 16);
    test_attention_exact(OPS_BF16, 2, 300, 3, 8);
    test_attention_exact(OPS_BF16, 1, 1024, 2, 16);
    static const int zigzag[] = { 225, 300, 0, 75, 150, 225, 75, 150 };
    static const int ragged[] = { 0, 1, 1, 130, 130, 290, 290, 300 };
    test_attention_windows(OPS_F32, 2, 300, 3, 8, zigzag, 4);
    test_attention_windows(OPS_F32, 1, 300, 2, 16, ragged, 4);
    test_attention_windows(OPS_BF16, 2, 300, 3, 8, zigzag, 4);
    test_attention_windows(OPS_F16, 1, 300, 2, 16, ragged, 4);
    test_attention_rows_grad(2, 9, 4, 3, 2, 4);
    test_attention_rows_grad(1, 80, 60, 12, 1, 3);
    test_embedding();
    test_xent();
    test_add();
    test_determinism();
    test_reduction_order();
    test_rmsnorm();
    test_rope();
    test_rope_at(0);
    test_rope_at(37);
    test_swiglu();
    test_gqa();
    return tap_done();
}
