/*
 * elementwise_cpu.c - GELU, add, accumulate, scale, clip and sum of squares.
 *
 * Memory-bound loops over flat arrays, split across threads with static
 * schedules; the math of GELU comes from elem.h so the GPU computes the
 * same numbers. The only reduction, the sum of squares behind the gradient
 * norm, adds fixed blocks and then the block sums in order, so its result
 * does not depend on the thread count (doc/design.md, invariant 5).
 *
 * bf16 and fp16: each element is widened, the math is fp32 (fp64 for the
 * sums), and the result is rounded once as it is stored. The hot loops
 * run in spans cloned per ISA (TRI_CLONES), with fp32 and bf16 each
 * compiled apart (fp32 spans, or TRI_WITH_CONST_DTYPE), so they vectorize
 * at the CPU's width; an OpenMP loop's own body is compiled for the
 * baseline ISA only.
 */
#include "cpu.h"

/* Elements per partial sum of sumsq, and partial sums per parallel region
 * (kept on the stack: 2048 doubles = 16 KiB). */
#define SUMSQ_BLOCK 4096
/* Elements widened to fp32 at a time in the bf16/fp16 paths (two 16 KiB
 * buffers on a thread's stack). */
#define LOW_SPAN 4096
#define SUMSQ_GROUP 2048

TRI_CLONES static void gelu_fwd_span(float *o, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        o[i] = elem_gelu(x[i]);
}

TRI_CLONES static void gelu_bwd_span(float *d, const float *x, const float *g, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = elem_gelu_grad(x[i]) * g[i];
}

void gelu_fwd_cpu(void *out, const void *inp, ops_dtype dt, int64_t n)
{
    if (dt == OPS_F32) {
        float *o = out;
        const float *x = inp;
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += TRI_SPAN)
            gelu_fwd_span(o + i, x + i, n - i < TRI_SPAN ? n - i : TRI_SPAN);
        return;
    }
    /* bf16/fp16: widen a span, run the fp32 loop, round it back */
    size_t es = ops_dtype_size(dt);
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += LOW_SPAN) {
        float x[LOW_SPAN], y[LOW_SPAN];
        int64_t len = n - i < LOW_SPAN ? n - i : LOW_SPAN;
        cast_span_cpu(x, OPS_F32, (const char *)inp + i * es, dt, len);
        gelu_fwd_span(y, x, len);
        cast_span_cpu((char *)out + i * es, dt, y, OPS_F32, len);
    }
}

void gelu_bwd_cpu(void *dinp, const void *inp, const void *dout,
                  ops_dtype dt, int64_t n)
{
    // dinp may alias dout: each element is read before it is written
    if (dt == OPS_F32) {
        float *d = dinp;
        const float *x = inp, *g = dout;
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += TRI_SPAN)
            gelu_bwd_span(d + i, x + i, g + i, n - i < TRI_SPAN ? n - i : TRI_SPAN);
        return;
    }
    size_t es = ops_dtype_size(dt);
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += LOW_SPAN) {
        float x[LOW_SPAN], g[LOW_SPAN];
        int64_t len = n - i < LOW_SPAN ? n - i : LOW_SPAN;
        cast_span_cpu(x, OPS_F32, (const char *)inp + i * es, dt, len);
        cast_span_cpu(g, OPS_F32, (const char *)dout + i * es, dt, len);
        gelu_bwd_span(g, x, g, len);
        cast_span_cpu((char *)dinp + i * es, dt, g, OPS_F32, len);
    }
}

/* out = a + b over n elements of a span (accumulate: y += x, out = a =
 * y, b = x), each widened, added in fp32 and rounded once: compiled for
 * fp32 and bf16 with the dtype a constant and cloned per ISA. */
TRI_CLONES static void add_span(void *out, const void *a, const void *b,
                                ops_dtype dt, int64_t i0, int64_t n)
{
    TRI_WITH_CONST_DTYPE(dt, for (int64_t i = i0; i < i0 + n; i++)
                                 store_f32_cpu(out, dt_, i, load_f32_cpu(a, dt_, i) +
                                                            load_f32_cpu(b, dt_, i)));
}

void add_cpu(void *out, const void *a, const void *b, ops_dtype dt,
             int64_t n)
{
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += TRI_SPAN)
        add_span(out, a, b, dt, i, n - i < TRI_SPAN ? n - i : TRI_SPAN);
}

void accumulate_cpu(void *y, const void *x, ops_dtype dt, int64_t n)
{
    add_cpu(y, y, x, dt, n);
}

void scale_cpu(void *x, float s, ops_dtype dt, int64_t n)
{
    if (dt == OPS_F32) {
        float *xx = x;
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++)
            xx[i] *= s;
        return;
    }
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        store_f32_cpu(x, dt, i, load_f32_cpu(x, dt, i) * s);
}

void clip_value_cpu(void *x, float c, ops_dtype dt, int64_t n)
{
    // comparisons, not fminf/fmaxf: those would turn a NaN into +-c and
    // hide it from the overflow check that runs after clipping
    if (dt == OPS_F32) {
        float *xx = x;
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float v = xx[i];
            xx[i] = v > c ? c : v < -c ? -c : v;
        }
        return;
    }
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = load_f32_cpu(x, dt, i);
        store_f32_cpu(x, dt, i, v > c ? c : v < -c ? -c : v);
    }
}

/* Eight independent lanes in a fixed pattern: the compiler can vectorize
 * them without reassociating, and the add latency chain is 8x shorter.
 * bf16 and fp16 elements are widened as they are read: the same lanes in
 * the same order, so an fp32 copy of x gives the same bits. */
static inline __attribute__((always_inline)) double block_sum_of(const void *p, ops_dtype dt,
                                                                 int64_t i0, int64_t n, int square)
{
    double lane[8] = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            double v = load_f32_cpu(p, dt, i0 + i + j);
            lane[j] += square ? v * v : v;
        }
    double s = 0.0;
    for (int j = 0; j < 8; j++)
        s += lane[j];
    for (; i < n; i++) {
        double v = load_f32_cpu(p, dt, i0 + i);
        s += square ? v * v : v;
    }
    return s;
}

/* One block, compiled for fp32 and bf16 with the dtype a constant and
 * cloned per ISA: the OpenMP loop's own body would run in SSE2, which
 * made the gradient norm compute-bound (10 GB/s in fp32, 2 in bf16). */
TRI_CLONES static double block_sum(const void *p, ops_dtype dt, int64_t i0,
                                   int64_t n, int square)
{
    double s;
    if (square)
        TRI_WITH_CONST_DTYPE(dt, s = block_sum_of(p, dt_, i0, n, 1));
    else
        TRI_WITH_CONST_DTYPE(dt, s = block_sum_of(p, dt_, i0, n, 0));
    return s;
}

/* Fixed blocks summed in order: the same bits whatever the thread count. */
static void reduce_into(double *acc, const void *x, ops_dtype dt, int64_t n,
                        int square)
{
    int64_t blocks = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    double total = *acc;
    for (int64_t g0 = 0; g0 < blocks; g0 += SUMSQ_GROUP) {
        int ng = blocks - g0 < SUMSQ_GROUP ? (int)(blocks - g0) : SUMSQ_GROUP;
        double part[SUMSQ_GROUP];
        #pragma omp parallel for schedule(static)
        for (int b = 0; b < ng; b++) {
            int64_t i0 = (g0 + b) * SUMSQ_BLOCK;
            int64_t len = n - i0 < SUMSQ_BLOCK ? n - i0 : SUMSQ_BLOCK;
            part[b] = block_sum(x, dt, i0, len, square);
        }
        for (int b = 0; b < ng; b++)
            total += part[b];
    }
    *acc = total;
}

void sumsq_accumulate_cpu(double *acc, const void *x, ops_dtype dt, int64_t n)
{
    reduce_into(acc, x, dt, n, 1);
}

void sum_accumulate_cpu(double *acc, const void *x, ops_dtype dt, int64_t n)
{
    reduce_into(acc, x, dt, n, 0);
}

/* SwiGLU: out = silu(gate) * up, the math from elem.h; spans of fp32 as
 * GELU's, so the loops vectorize. */
TRI_CLONES static void swiglu_fwd_span(float *o, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        o[i] = elem_swiglu(g[i], u[i]);
}

TRI_CLONES static void swiglu_bwd_span(float *dg, float *du, const float *d, const float *g,
                                       const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        elem_swiglu_grad(g[i], u[i], d[i], &dg[i], &du[i]);
}

void swiglu_fwd_cpu(void *out, const void *gate, const void *up, ops_dtype dt,
                    int64_t n)
{
    if (dt == OPS_F32) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += TRI_SPAN)
            swiglu_fwd_span((float *)out + i, (const float *)gate + i, (const float *)up + i,
                            n - i < TRI_SPAN ? n - i : TRI_SPAN);
        return;
    }
    size_t es = ops_dtype_size(dt);
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += LOW_SPAN) {
        float g[LOW_SPAN], u[LOW_SPAN];
        int64_t len = n - i < LOW_SPAN ? n - i : LOW_SPAN;
        cast_span_cpu(g, OPS_F32, (const char *)gate + i * es, dt, len);
        cast_span_cpu(u, OPS_F32, (const char *)up + i * es, dt, len);
        swiglu_fwd_span(g, g, u, len);
        cast_span_cpu((char *)out + i * es, dt, g, OPS_F32, len);
    }
}

void swiglu_bwd_cpu(void *dgate, void *dup, const void *dout, const void *gate,
                    const void *up, ops_dtype dt, int64_t n)
{
    if (dt == OPS_F32) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += TRI_SPAN)
            swiglu_bwd_span((float *)dgate + i, (float *)dup + i, (const float *)dout + i,
                            (const float *)gate + i, (const float *)up + i,
                            n - i < TRI_SPAN ? n - i : TRI_SPAN);
        return;
    }
    size_t es = ops_dtype_size(dt);
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += LOW_SPAN) {
        float g[LOW_SPAN], u[LOW_SPAN], d[LOW_SPAN];
        int64_t len = n - i < LOW_SPAN ? n - i : LOW_SPAN;
        cast_span_cpu(g, OPS_F32, (const char *)gate + i * es, dt, len);
        cast_span_cpu(u, OPS_F32, (const char *)up + i * es, dt, len);
        cast_span_cpu(d, OPS_F32, (const char *)dout + i * es, dt, len);
        swiglu_bwd_span(g, u, d, g, u, len);
        cast_span_cpu((char *)dgate + i * es, dt, g, OPS_F32, len);
        cast_span_cpu((char *)dup + i * es, dt, u, OPS_F32, len);
    }
}
