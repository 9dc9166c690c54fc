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

/* Two norms of N rows of C, forward and backward: LayerNorm (gain, bias,
 * mean and rstd) or RMSNorm (gain, rstd). The residual add rides along. */
static void time_norms(const KernelShape *s, int64_t N, double *add, KernelTimes *t)
{
    ops_dtype d = s->dtype;
    int C = s->C;
    ops_tensor x = filled(d, N * C), ln = filled(d, N * C), dx = filled(d, N * C);
    ops_tensor w = filled(d, C), b = filled(d, C), dw = filled(OPS_F32, C), db = filled(OPS_F32, C);
    ops_tensor mean = filled(OPS_F32, N), rstd = filled(OPS_F32, N);
    double f, bw;
    if (s->layer_norm) {
        TIME_MEAN(f, ops_layernorm_fwd(ln, mean, rstd, x, w, b, (int)N, C));
        TIME_MEAN(bw, ops_layernorm_bwd(dx, dw, db, ln, x, w, mean, rstd, (int)N, C));
    } else {
        TIME_MEAN(f, ops_rmsnorm_fwd(ln, rstd, x, w, (int)N, C, 1e-5f));
        TIME_MEAN(bw, ops_rmsnorm_bwd(dx, dw, ln, x, w, rstd, (int)N, C));
    }
    TIME_MEAN(*add, ops_add(dx, x, ln, N * C));
    t->elem_fwd += 2 * f;
    t->elem_bwd += 2 * bw;
    FREE_ALL(x, ln, dx, w, b, dw, db, mean, rstd);
}

/* Rotary embeddings on the NH local query and NKV key heads, and the
 * key/value heads expanded for attention (their gradients summed back). */
static void time_rotary(const KernelShape *s, int NH, int hs, KernelTimes *t)
{
    ops_dtype d = s->dtype;
    int B = s->B, T = s->T, NKV = s->NKVl;
    int64_t N = (int64_t)B * T;
    ops_tensor q = filled(d, N * NH * hs), k = filled(d, N * NKV * hs), v = filled(d, k.n);
    ops_tensor qkv = filled(d, N * 3 * NH * hs);
    double rope_f, rope_b, expand, reduce;
    TIME_MEAN(rope_f, (ops_rope_fwd(q, B, T, NH, hs, 1e4), ops_rope_fwd(k, B, T, NKV, hs, 1e4)));
    TIME_MEAN(expand, ops_gqa_expand(qkv, q, k, v, (int)N, NH, NKV, hs));
    TIME_MEAN(reduce, ops_gqa_reduce(q, k, v, qkv, (int)N, NH, NKV, hs));
    TIME_MEAN(rope_b, (ops_rope_bwd(q, B, T, NH, hs, 1e4), ops_rope_bwd(k, B, T, NKV, hs, 1e4)));
    t->elem_fwd += rope_f + expand;
    t->elem_bwd += reduce + rope_b;
    FREE_ALL(q, k, v, qkv);
}

/* The MLP's activation on Fl columns: SwiGLU of gate and up, or GELU. */
static void time_activation(const KernelShape *s, int64_t N, KernelTimes *t)
{
    ops_dtype d = s->dtype;
    int64_t n = N * s->Fl;
    ops_tensor a = filled(d, n), b = filled(d, n), h = filled(d, n), da = filled(d, n);
    ops_tensor db = filled(d, n);
    double f, bw;
    if (s->gated_mlp) {
        TIME_MEAN(f, ops_swiglu_fwd(h, a, b, n));
        TIME_MEAN(bw, ops_swiglu_bwd(da, db, h, a, b, n));
    } else {
        TIME_MEAN(f, ops_gelu_fwd(h, a, n));
        TIME_MEAN(bw, ops_gelu_bwd(h, a, h, n));
    }
    t->elem_fwd += f;
    t->elem_bwd += bw;
    FREE_ALL(a, b, h, da, db);
}

/* A layer's non-GEMM work, forward and backward, as its features make it:
 * two norms, attention over the NH/tp local heads (rotary q and k and the
 * key/value expansion where the architecture has them), the MLP's
 * activation, the two residual adds, and in the backward one add more for
 * each extra input gradient summed into a norm's (the gated MLP's up; the
 * separate k and v of rotary attention). */
static void time_elementwise(const KernelShape *s, KernelTimes *t)
{
    int64_t N = (int64_t)s->B * s->T;
    int NH = s->NH / s->tp, hs = s->C / s->NH;
    double add, att_f, att_b;
    time_norms(s, N, &add, t);
    if (s->rotary)
        time_rotary(s, NH, hs, t);
    time_attention(s->dtype, s->B, s->T, NH, hs, &att_f, &att_b);
    time_activation(s, N, t);
    int extra = (s->gated_mlp ? 1 : 0) + (s->rotary ? 2 : 0);
    t->elem_fwd += att_f + 2 * add;
    t->elem_bwd += att_b + (2 + extra) * add; /* the residual gradients add up */
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
    if (a->dtype != b->dtype || a->B != b->B || a->T != b->T || a->C != b->C || a->NH != b->NH
        || a->tp != b->tp || a->V != b->V || a->n_linears != b->n_linears
        || a->layer_norm != b->layer_norm || a->rotary != b->rotary
        || a->gated_mlp != b->gated_mlp || a->NKVl != b->NKVl || a->Fl != b->Fl)
        return 0;
    for (int i = 0; i < a->n_linears; i++) {
        const ArchLinear *x = &a->linears[i], *y = &b->linears[i];
        if (x->out != y->out || x->in != y->in || x->count != y->count || x->bias != y->bias)
            return 0;
    }
    return 1;
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
    int M = s->B * s->T, C = s->C, Vl = s->V / s->tp;
    memset(layer, 0, sizeof *layer);
    memset(head, 0, sizeof *head);
    for (int i = 0; i < s->n_linears; i++) {
        const ArchLinear *l = &s->linears[i];
        time_linears(s->dtype, s->dtype, l->bias, l->count, M, l->out, l->in, layer);
    }
    time_elementwise(s, layer);
    /* model.c runs the head on the CPU in even chunks of at most 16 Mi logits */
    int chunk = model_head_chunk_rows(M, (int)Vl, MODEL_HEAD_CPU_LOGITS);
    time_head_chunk(s->dtype, chunk, Vl, C, head);
    double chunks = (double)M / chunk;
    head->gemm_fwd *= chunks;
    head->gemm_bwd *= chunks;
    head->elem_fwd *= chunks;
    if (cached < (int)(sizeof cache / sizeof cache[0]))
        cache[cached++] = (CachedTimes){*s, *layer, *head};
}

/* The width per token the MLP's activation runs on, one TP rank: a MoE
 * layer's SwiGLU over its top_k routed experts' rows and the shared
 * expert's. */
static int activation_width(const ModelConfig *m, int layer, int tp)
{
    if (!arch_layer_is_moe(m, layer))
        return arch_ffn_dim(m) / tp;
    return (m->top_k * arch_moe_ffn_dim(m) + arch_shared_ffn_dim(m)) / tp;
}

KernelShape kernel_times_shape(const ModelConfig *m, int layer, ops_dtype d, int B, int tp)
{
    const Arch *arch = arch_of(m);
    KernelShape s = {.dtype = d, .B = B, .T = m->seq_len, .C = m->n_embd, .NH = m->n_head,
                     .V = m->vocab_size, .tp = tp, .layer_norm = arch->norm_bias,
                     .rotary = arch->rotary, .gated_mlp = arch->gated_mlp,
                     .NKVl = arch_kv_heads_local(m, tp), .Fl = activation_width(m, layer, tp)};
    s.n_linears = arch->linears(m, layer, tp, s.linears);
    return s;
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
