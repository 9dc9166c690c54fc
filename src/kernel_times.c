/*
 * kernel_times.c - the model's own kernels timed on this CPU; see
 * kernel_times.h.
 *
 * Each kernel runs on buffers of the shapes model.c gives it, filled with
 * small varied values (zeros would let the exponentials and the GEMM
 * library take shortcuts), a warm-up call first, then the mean of a few
 * calls. Results are cached by shape: plan's layout search asks for the
 * same layer many times.
 */
#include "kernel_times.h"

#include <math.h>
#include <string.h>

#include "model.h"
#include "timer.h"

/* Evicts the caches, as the rest of a training step does between two
 * calls of one kernel: an in-cache rerun would flatter small layers. */
static void flush_caches(void)
{
    static float *junk;
    const int64_t n = 16LL << 20; /* 64 MiB */
    if (!junk)
        junk = ops_alloc(OPS_F32, OPS_CPU, n).data; /* kept for the process */
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += 16)
        junk[i] += 1.0f;
}

/* At most this many timed calls of one kernel. The flush before each
 * costs milliseconds, so a kernel of 40 us (a test-sized layer) took 500
 * calls and 4 s of flushing to fill 20 ms, and `plan --hw cpu` on
 * t_plan's 4-layer model 79 s (4.6 s with the cap). The mean of 16 cold
 * calls predicted that model's step as the mean of 500 did, within the
 * spread of repeated runs (4.6 to 5.3 ms on a loaded 2-core machine). */
#define TIME_MAX_CALLS 16

/* result = mean seconds of `call` over about 20 ms of calls (at least
 * two, at most TIME_MAX_CALLS, after a warm-up call), each from cold
 * caches. The mean, not the best: a training step pays for the typical
 * call, and the best one underpredicted small models' steps by 25 to 30%. */
#define TIME_MEAN(result, call)                                                \
    do {                                                                       \
        call;                                                                  \
        double spent_ = 0.0;                                                   \
        int calls_ = 0;                                                        \
        for (; calls_ < 2 || (spent_ < 0.02 && calls_ < TIME_MAX_CALLS); calls_++) { \
            flush_caches();                                                    \
            double t0_ = timer_now();                                          \
            call;                                                              \
            spent_ += timer_now() - t0_;                                       \
        }                                                                      \
        (result) = spent_ / calls_;                                            \
    } while (0)

/* n elements of dtype holding values in [-0.5, 0.5), varied per element. */
static ops_tensor filled(ops_dtype dtype, int64_t n)
{
    ops_tensor f = ops_alloc(OPS_F32, OPS_CPU, n);
    float *x = f.data;
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u) % 1000u) / 1000.0f - 0.5f;
    if (dtype == OPS_F32)
        return f;
    ops_tensor t = ops_alloc(dtype, OPS_CPU, n);
    ops_cast(t, f);
    ops_free(&f);
    return t;
}

/* Frees the tensors of a list that were allocated (OPS_NONE are skipped). */
static void free_all(ops_tensor *all, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (all[i].data)
            ops_free(&all[i]);
}
#define FREE_ALL(...)                                                          \
    do {                                                                       \
        ops_tensor all_[] = {__VA_ARGS__};                                     \
        free_all(all_, sizeof all_ / sizeof all_[0]);                          \
    } while (0)

/* Attention over NH local heads, forward and backward (the qkv, output
 * and lse layouts of ops.h), into *fwd and *bwd. */
static void time_attention(ops_dtype d, int B, int T, int NH, int hs, double *fwd, double *bwd)
{
    int64_t N = (int64_t)B * T;
    ops_tensor qkv = filled(d, N * 3 * NH * hs), out = filled(d, N * NH * hs);
    ops_tensor lse = filled(OPS_F32, (int64_t)B * NH * T), dqkv = filled(d, qkv.n);
    TIME_MEAN(*fwd, ops_attention_fwd(out, lse, qkv, B, T, NH, hs));
    TIME_MEAN(*bwd, ops_attention_bwd(dqkv, out, qkv, out, lse, B, T, NH, hs));
    FREE_ALL(qkv, out, lse, dqkv);
}

/* count linear layers of one shape and compute dtype d (timed once),
 * forward then backward (input gradient, weight gradient, and the bias's
 * when they have one); their outputs and output gradients in dtype yd: d
 * in the blocks, fp32 for the LM head, whose logits and their gradient
 * the trainer keeps in fp32. */
static void time_linears(ops_dtype d, ops_dtype yd, int biased, int count, int M, int N,
                         int K, KernelTimes *t)
{
    ops_tensor x = filled(d, (int64_t)M * K), w = filled(d, (int64_t)N * K);
    ops_tensor b = biased ? filled(d, N) : OPS_NONE, db = biased ? filled(OPS_F32, N) : OPS_NONE;
    ops_tensor y = filled(yd, (int64_t)M * N), dy = filled(yd, (int64_t)M * N);
    ops_tensor dx = filled(d, (int64_t)M * K), dw = filled(OPS_F32, (int64_t)N * K);
    double fwd, bwd;
    TIME_MEAN(fwd, ops_matmul_fwd(y, x, w, b, M, N, K));
    TIME_MEAN(bwd, ops_matmul_bwd(dx, dw, db, dy, x, w, M, N, K));
    t->gemm_fwd += count * fwd;
    t->gemm_bwd += count * bwd;
    FREE_ALL(x, w, b, y, dy, dx, dw, db);
}

/* The layer's non-GEMM work: two LayerNorms, attention over the NH local
 * heads (of NH_total), GELU, two residual adds, forward and backward. */
static void time_layer_elementwise(ops_dtype d, int B, int T, int C, int NH_total, int NH,
                                   KernelTimes *t)
{
    int64_t N = (int64_t)B * T;
    int hs = C / NH_total;
    ops_tensor x = filled(d, N * C), ln = filled(d, N * C), dx = filled(d, N * C);
    ops_tensor lw = filled(d, C), lb = filled(d, C), dlw = filled(OPS_F32, C), dlb = filled(OPS_F32, C);
    ops_tensor mean = filled(OPS_F32, N), rstd = filled(OPS_F32, N);
    double ln_f;
    TIME_MEAN(ln_f, ops_layernorm_fwd(ln, mean, rstd, x, lw, lb, (int)N, C));
    double ln_b;
    TIME_MEAN(ln_b, ops_layernorm_bwd(dx, dlw, dlb, ln, x, lw, mean, rstd, (int)N, C));
    double add;
    TIME_MEAN(add, ops_add(dx, x, ln, N * C));
    double att_f, att_b;
    time_attention(d, B, T, NH, hs, &att_f, &att_b);
    ops_tensor fc = filled(d, N * 4 * NH * hs), fcg = filled(d, fc.n);
    double gelu_f;
    TIME_MEAN(gelu_f, ops_gelu_fwd(fcg, fc, fc.n));
    double gelu_b;
    TIME_MEAN(gelu_b, ops_gelu_bwd(fcg, fc, fcg, fc.n));
    t->elem_fwd += 2 * ln_f + att_f + gelu_f + 2 * add;
    t->elem_bwd += 2 * ln_b + att_b + gelu_b + 2 * add; /* the residual gradients add up */
    FREE_ALL(x, ln, dx, lw, lb, dlw, dlb, mean, rstd, fc, fcg);
}

/* A Llama layer's non-GEMM work, forward and backward: two RMSNorms,
 * rotary embeddings on the NH query and NKV key heads, the key/value
 * heads expanded for attention (and their gradients summed back),
 * attention, SwiGLU on F columns, and the residual adds, with the three
 * input gradients (up, k, v) the backward adds into the norm's. */
static void time_llama_elementwise(ops_dtype d, int B, int T, int C, int NH_total, int NH,
                                   int NKV, int F, KernelTimes *t)
{
    int64_t N = (int64_t)B * T;
    int hs = C / NH_total;
    ops_tensor x = filled(d, N * C), ln = filled(d, N * C), dx = filled(d, N * C);
    ops_tensor w = filled(d, C), dw = filled(OPS_F32, C), rstd = filled(OPS_F32, N);
    double norm_f, norm_b, add;
    TIME_MEAN(norm_f, ops_rmsnorm_fwd(ln, rstd, x, w, (int)N, C, 1e-5f));
    TIME_MEAN(norm_b, ops_rmsnorm_bwd(dx, dw, ln, x, w, rstd, (int)N, C));
    TIME_MEAN(add, ops_add(dx, x, ln, N * C));
    ops_tensor q = filled(d, N * NH * hs), k = filled(d, N * NKV * hs), v = filled(d, k.n);
    ops_tensor qkv = filled(d, N * 3 * NH * hs);
    double rope_f, rope_b, expand, reduce, att_f, att_b;
    TIME_MEAN(rope_f, (ops_rope_fwd(q, B, T, NH, hs, 1e4), ops_rope_fwd(k, B, T, NKV, hs, 1e4)));
    TIME_MEAN(expand, ops_gqa_expand(qkv, q, k, v, (int)N, NH, NKV, hs));
    time_attention(d, B, T, NH, hs, &att_f, &att_b);
    TIME_MEAN(reduce, ops_gqa_reduce(q, k, v, qkv, (int)N, NH, NKV, hs));
    TIME_MEAN(rope_b, (ops_rope_bwd(q, B, T, NH, hs, 1e4), ops_rope_bwd(k, B, T, NKV, hs, 1e4)));
    ops_tensor gate = filled(d, N * F), up = filled(d, N * F), h = filled(d, N * F);
    ops_tensor dgate = filled(d, N * F), dup = filled(d, N * F);
    double swiglu_f, swiglu_b;
    TIME_MEAN(swiglu_f, ops_swiglu_fwd(h, gate, up, N * F));
    TIME_MEAN(swiglu_b, ops_swiglu_bwd(dgate, dup, h, gate, up, N * F));
    t->elem_fwd += 2 * norm_f + rope_f + expand + att_f + swiglu_f + 2 * add;
    t->elem_bwd += 2 * norm_b + reduce + rope_b + att_b + swiglu_b + (2 + 3) * add;
    FREE_ALL(x, ln, dx, w, dw, rstd, q, k, v, qkv, gate, up, h, dgate, dup);
}

/* The LM head on one chunk of rows: its GEMM pair and the fused loss. */
static void time_head_chunk(ops_dtype d, int rows, int Vl, int C, KernelTimes *t)
{
    time_linears(d, OPS_F32, 0, 1, rows, Vl, C, t);
    ops_tensor logits = filled(OPS_F32, (int64_t)rows * Vl), targets = ops_alloc(OPS_I32, OPS_CPU, rows);
    ops_tensor losses = filled(OPS_F32, rows), rowmax = filled(OPS_F32, rows);
    ops_tensor sumexp = filled(OPS_F32, rows), target = filled(OPS_F32, rows);
    double xent;
    TIME_MEAN(xent, ops_xent_fused(losses, logits, logits, rowmax, sumexp, target, targets, rows,
                                   Vl, 1.0f));
    t->elem_fwd += xent;
    FREE_ALL(logits, targets, losses, rowmax, sumexp, target);
}

typedef struct {
    KernelShape shape;
    KernelTimes layer, head;
} CachedTimes;

static int same_shape(const KernelShape *a, const KernelShape *b)
{
    return a->dtype == b->dtype && a->B == b->B && a->T == b->T && a->C == b->C
        && a->NH == b->NH && a->tp == b->tp && a->V == b->V && a->llama == b->llama
        && (!a->llama || (a->NKVl == b->NKVl && a->Fl == b->Fl));
}

void kernel_times_measure(const KernelShape *s, KernelTimes *layer, KernelTimes *head)
{
    static CachedTimes cache[32];
    static int cached;
    for (int i = 0; i < cached; i++) {
        if (same_shape(&cache[i].shape, s)) {
            *layer = cache[i].layer;
            *head = cache[i].head;
            return;
        }
    }
    int M = s->B * s->T, C = s->C, Cl = s->C / s->tp, Vl = s->V / s->tp;
    memset(layer, 0, sizeof *layer);
    memset(head, 0, sizeof *head);
    ops_dtype d = s->dtype;
    if (s->llama) {
        /* q, k and v, the output projection, gate and up, down */
        int KVl = s->NKVl * (C / s->NH);
        time_linears(d, d, 0, 1, M, Cl, C, layer);
        time_linears(d, d, 0, 2, M, KVl, C, layer);
        time_linears(d, d, 0, 1, M, C, Cl, layer);
        time_linears(d, d, 0, 2, M, s->Fl, C, layer);
        time_linears(d, d, 0, 1, M, C, s->Fl, layer);
        time_llama_elementwise(d, s->B, s->T, C, s->NH, s->NH / s->tp, s->NKVl, s->Fl, layer);
    } else {
        time_linears(d, d, 1, 1, M, 3 * Cl, C, layer);
        time_linears(d, d, 1, 1, M, C, Cl, layer);
        time_linears(d, d, 1, 1, M, 4 * Cl, C, layer);
        time_linears(d, d, 1, 1, M, C, 4 * Cl, layer);
        time_layer_elementwise(d, s->B, s->T, C, s->NH, s->NH / s->tp, layer);
    }
    /* model.c runs the head in even chunks of at most 16 Mi logits */
    int chunk = model_head_chunk_rows(M, (int)Vl);
    time_head_chunk(s->dtype, chunk, Vl, C, head);
    double chunks = (double)M / chunk;
    head->gemm_fwd *= chunks;
    head->gemm_bwd *= chunks;
    head->elem_fwd *= chunks;
    if (cached < (int)(sizeof cache / sizeof cache[0]))
        cache[cached++] = (CachedTimes){*s, *layer, *head};
}

double kernel_times_adamw(ops_dtype dtype)
{
    static double per_element[OPS_F64 + 1];
    if (per_element[dtype] > 0)
        return per_element[dtype];
    int64_t n = 4LL << 20; /* 64 MiB of state in all: far beyond the caches */
    /* the trainer's gradients are fp32 whatever the compute dtype (zero.c);
     * only the compute copy AdamW writes beside the master is in dtype */
    ops_tensor master = filled(OPS_F32, n), grad = filled(OPS_F32, n);
    ops_tensor m = ops_alloc(OPS_F32, OPS_CPU, n), v = ops_alloc(OPS_F32, OPS_CPU, n);
    ops_tensor copy = dtype == OPS_F32 ? OPS_NONE : ops_alloc(dtype, OPS_CPU, n);
    ops_tensor acc = ops_alloc(OPS_F64, OPS_CPU, 1);
    ops_adamw_args a = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1};
    double norm, s;
    TIME_MEAN(norm, ops_sumsq_accumulate(acc, grad, n));
    TIME_MEAN(s, ops_adamw(master, grad, m, v, copy, n, &a));
    s += norm;
    FREE_ALL(master, grad, m, v, copy, acc);
    per_element[dtype] = s / (double)n;
    return per_element[dtype];
}
