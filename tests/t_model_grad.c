/*
 * t_model_grad.c - the whole model's backward pass against central finite
 * differences, on one rank: every parameter tensor, a few elements each
 * (always including its largest gradient), with every recompute policy;
 * and zb1's split backward (input gradients, then the deferred weight
 * pass) against the fused one, bitwise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_load.h"
#include "model_rig.h"
#include "tap.h"


/* llama: 4 query heads over 2 key/value heads, so the grouped-query
 * reduction and the rotary embeddings are in every gradient. */
static void rig_create(Rig *r, RecomputeKind recompute, int tie, int llama, ScheduleKind sched)
{
    memset(r, 0, sizeof *r);
    Config *c = &r->cfg;
    config_defaults(c);
    c->model.n_layer = 2;
    c->model.n_embd = 16;
    c->model.n_head = 2;
    c->model.seq_len = 8;
    c->model.vocab_size = 24;
    c->model.init = INIT_NORMAL;
    c->model.init_std = 0.2;
    c->model.tie_embeddings = tie;
    c->train.micro_batch = 2;
    c->train.grad_accum = 2;
    c->train.recompute = recompute;
    c->train.recompute_every = 2;
    c->parallel.dp = c->parallel.pp = c->parallel.tp = 1;
    c->parallel.schedule = sched;
    if (llama) {
        c->model.arch = ARCH_LLAMA;
        c->model.n_head = 4;
        c->model.n_kv_head = 2;
        c->model.ffn_dim = 24;
        c->model.rope_theta = 100.0;
    }
    rig_build(r, 7);
}

/* Loss summed over all tokens; with grads, leaves d(sum)/dw in og. */
static double loss(Rig *r, int with_grads)
{
    Model *m = &r->model;
    PipelineTimes times = {0};
    model_reset_loss(m);
    if (with_grads) {
        zero_begin_step(r->zero);
        /* grad_scale 1: gradients of the summed loss */
        pipeline_run(&r->pipe, r->acts, r->n_acts, r->batch, r->cfg.train.micro_batch,
                     FORWARD_TRAIN, 1.0f, &times);
        zero_reduce_grads(r->zero);
        model_sum_split_grads(m);
    } else {
        Action fwd[8];
        for (int i = 0; i < r->cfg.train.grad_accum; i++)
            fwd[i] = (Action){ACTION_FORWARD, i, 0};
        pipeline_run(&r->pipe, fwd, r->cfg.train.grad_accum, r->batch,
                     r->cfg.train.micro_batch, FORWARD_EVAL, 1.0f, &times);
    }
    return model_loss_sum(m);
}

/* Finite differences of a few elements of p; returns the worst error. */
static double check_param(Rig *r, Param *p, const float *grad)
{
    int64_t n = params_local_numel(p), top = 0;
    for (int64_t i = 1; i < n; i++)
        if (fabsf(grad[i]) > fabsf(grad[top]))
            top = i;
    int64_t picks[4] = {top, n / 3, n / 2, n - 1};
    double worst = 0.0, eps = 1e-2;
    float *w = p->w.data;
    for (int k = 0; k < 4; k++) {
        int64_t i = picks[k];
        float saved = w[i];
        w[i] = saved + (float)eps;
        double up = loss(r, 0);
        w[i] = saved - (float)eps;
        double down = loss(r, 0);
        w[i] = saved;
        double fd = (up - down) / (2.0 * eps);
        double err = fabs(fd - grad[i]) / fmax(fmax(fabs(fd), fabs(grad[i])), 1e-2);
        if (err > worst)
            worst = err;
    }
    return worst;
}

static void check_model(RecomputeKind recompute, int tie, int llama, ScheduleKind sched,
                        const char *label)
{
    Rig r;
    rig_create(&r, recompute, tie, llama, sched);
    double l = loss(&r, 1);
    int ok = 1;
    double worst = 0.0;
    const char *worst_name = "";
    for (int i = 0; i < r.model.ps.n; i++) {
        Param *p = &r.model.ps.p[i];
        int64_t n = params_local_numel(p);
        float *g = malloc((size_t)n * sizeof *g);
        memcpy(g, p->og.data, (size_t)n * sizeof *g);
        double err = check_param(&r, p, g);
        if (err > worst) {
            worst = err;
            worst_name = p->name;
        }
        ok &= err < 2e-2;
        free(g);
    }
    tap_ok(ok && isfinite(l), "%s: all %d tensors match finite differences (worst %.2e in %s, tol 2e-2)",
           label, r.model.ps.n, worst, worst_name);
    rig_destroy(&r);
}

/* Whether two rigs' step gives bitwise the same loss and gradients. */
static int same_step(Rig *a, Rig *b)
{
    double la = loss(a, 1), lb = loss(b, 1);
    int same = la == lb;
    for (int i = 0; i < a->model.ps.n && same; i++) {
        Param *p = &a->model.ps.p[i], *q = &b->model.ps.p[i];
        same = memcmp(p->og.data, q->og.data, (size_t)params_local_numel(p) * sizeof(float)) == 0;
    }
    return same;
}

/* Recompute changes memory, never gradients: bitwise equal. */
static void check_recompute_identical(int llama)
{
    Rig a, b;
    rig_create(&a, RECOMPUTE_NONE, 1, llama, SCHED_1F1B);
    rig_create(&b, RECOMPUTE_FULL, 1, llama, SCHED_1F1B);
    tap_ok(same_step(&a, &b), "%s: recompute=full gives bitwise the gradients of recompute=none",
           llama ? "llama" : "gpt2");
    rig_destroy(&a);
    rig_destroy(&b);
}

/* zb1's backward (input gradients) then weight pass computes the same
 * GEMMs as the fused backward, in the same order per parameter. */
static void check_split_identical(int llama, int tie, RecomputeKind recompute)
{
    Rig a, b;
    rig_create(&a, RECOMPUTE_NONE, tie, llama, SCHED_1F1B);
    rig_create(&b, recompute, tie, llama, SCHED_ZB1);
    int split = b.model.defer_weights && b.n_acts == 3 * b.cfg.train.grad_accum;
    tap_ok(split && same_step(&a, &b),
           "%s%s%s: zb1's B then W give bitwise the gradients of the fused backward",
           llama ? "llama" : "gpt2", tie ? ", tied" : ", untied",
           recompute == RECOMPUTE_FULL ? ", recompute=full" : "");
    rig_destroy(&a);
    rig_destroy(&b);
}

/* Under zb1 the backward alone leaves the linear layers' weight gradients
 * untouched and the weight pass fills them: W is not a no-op. */
static void check_backward_defers(int llama)
{
    Rig r;
    rig_create(&r, RECOMPUTE_NONE, 0, llama, SCHED_ZB1);
    Model *m = &r.model;
    PipelineTimes times = {0};
    Action fb[2] = {{ACTION_FORWARD, 0, 0}, {ACTION_BACKWARD, 0, 0}};
    zero_begin_step(r.zero);
    pipeline_run(&r.pipe, fb, 2, r.batch, r.cfg.train.micro_batch, FORWARD_TRAIN, 1.0f, &times);
    const Param *qkv = &m->ps.p[m->blocks[0].qkvw], *ln = &m->ps.p[m->blocks[0].ln1w];
    int64_t nq = params_local_numel(qkv), nl = params_local_numel(ln);
    double q_before = 0.0, ln_before = 0.0, q_after = 0.0;
    for (int64_t i = 0; i < nq; i++)
        q_before += fabsf(((const float *)qkv->g.data)[i]);
    for (int64_t i = 0; i < nl; i++)
        ln_before += fabsf(((const float *)ln->g.data)[i]);
    /* the weight pass on the slot the forward took (the executor gives
     * slot 0 first), as the executor runs it: gradients become final */
    model_backward_weights(m, 0, 0, r.cfg.train.micro_batch,
                           (ModelPass){.final = 1, .grad_scale = 1.0f});
    for (int64_t i = 0; i < nq; i++)
        q_after += fabsf(((const float *)qkv->g.data)[i]);
    tap_ok(q_before == 0.0 && ln_before > 0.0 && q_after > 0.0,
           "%s zb1: B leaves the QKV weight gradient to W (|g| %.3g after B, %.3g after W), "
           "the norm's comes with B (%.3g)", llama ? "llama" : "gpt2", q_before, q_after,
           ln_before);
    rig_destroy(&r);
}

/* The recompute rule: none, full, every K-th layer by global index, and
 * the model keeps what the rule says. */
static void check_recompute_rule(void)
{
    TrainConfig t = {.recompute = RECOMPUTE_EVERY, .recompute_every = 3};
    int ok = model_recomputed_layers(&t, 0, 7) == 3 && model_recomputed_layers(&t, 4, 3) == 1
          && model_recomputed_layers(&t, 5, 5) == 2 && model_layer_recomputes(&t, 6)
          && !model_layer_recomputes(&t, 7);
    t.recompute = RECOMPUTE_FULL;
    ok &= model_recomputed_layers(&t, 2, 5) == 5;
    t.recompute = RECOMPUTE_NONE;
    ok &= model_recomputed_layers(&t, 0, 5) == 0;
    Rig r;
    rig_create(&r, RECOMPUTE_EVERY, 1, 0, SCHED_1F1B);
    for (int l = 0; l < r.model.n_local; l++)
        ok &= r.model.recompute[l] == model_layer_recomputes(&r.cfg.train, r.model.layer0 + l);
    ok &= r.model.recompute[0] && !r.model.recompute[1];
    rig_destroy(&r);
    tap_ok(ok, "recompute: every:K picks layers by global index; the model keeps what it says");
}

/* The head's chunks: the CPU's 16 Mi logits (GPT-2's 1,024 rows in 4 even
 * chunks of 256, as before), a GPU's sixteenth of its memory (GPT-2
 * small's 16 x 1024 rows in one chunk on an 80 GB card, whose 64 GiB
 * power of two a 94 GB card shares; a 128k-word
 * vocabulary at 32k rows in even chunks within the budget), never less
 * than the CPU's; the model on the CPU takes the CPU's budget. */
static void check_head_chunk_rule(void)
{
    const int64_t h100 = 80LL * 1000 * 1000 * 1000, small_gpu = 1LL << 30;
    int64_t cpu = model_head_logit_budget(0), gpu = model_head_logit_budget(h100);
    int gpt2_cpu = model_head_chunk_rows(1024, 50257, cpu);
    int gpt2_gpu = model_head_chunk_rows(16 * 1024, 50257, gpu);
    int llama_gpu = model_head_chunk_rows(16 * 2048, 128256, gpu);
    int ok = cpu == MODEL_HEAD_CPU_LOGITS && cpu == 16LL << 20 && gpt2_cpu == 256
          && gpu == (64LL << 30) / 64 && model_head_logit_budget(94LL * 1000 * 1000 * 1000) == gpu
          && gpt2_gpu == 16 * 1024
          && (int64_t)llama_gpu * 128256 <= gpu && (16 * 2048) % llama_gpu == 0
          && model_head_logit_budget(small_gpu) == MODEL_HEAD_CPU_LOGITS;
    Rig r;
    rig_create(&r, RECOMPUTE_NONE, 1, 0, SCHED_1F1B);
    ok &= r.model.head_budget == MODEL_HEAD_CPU_LOGITS;
    rig_destroy(&r);
    tap_ok(ok, "head chunks: GPT-2 %d rows a chunk on the CPU, %d on an 80 GB GPU (one chunk); "
           "a 128k vocabulary %d rows of 32768 on it; the CPU model takes the CPU's budget",
           gpt2_cpu, gpt2_gpu, llama_gpu);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(21);
    check_recompute_rule();
    check_head_chunk_rule();
    check_model(RECOMPUTE_NONE, 1, 0, SCHED_1F1B, "tied embeddings");
    check_model(RECOMPUTE_NONE, 0, 0, SCHED_1F1B, "untied LM head");
    check_model(RECOMPUTE_FULL, 1, 0, SCHED_1F1B, "recompute=full");
    check_model(RECOMPUTE_EVERY, 1, 0, SCHED_1F1B, "recompute=every:2");
    check_model(RECOMPUTE_NONE, 0, 0, SCHED_ZB1, "zb1, untied");
    check_recompute_identical(0);
    check_model(RECOMPUTE_NONE, 0, 1, SCHED_1F1B, "llama, n_kv_head 2 of 4, untied");
    check_model(RECOMPUTE_NONE, 1, 1, SCHED_1F1B, "llama, tied");
    check_model(RECOMPUTE_EVERY, 0, 1, SCHED_1F1B, "llama, recompute=every:2");
    check_model(RECOMPUTE_NONE, 0, 1, SCHED_ZB1, "llama, zb1");
    check_recompute_identical(1);
    for (int llama = 0; llama <= 1; llama++) {
        check_split_identical(llama, 1, RECOMPUTE_NONE);
        check_split_identical(llama, 0, RECOMPUTE_NONE);
        check_split_identical(llama, 1, RECOMPUTE_FULL);
        check_backward_defers(llama);
    }
    return tap_done();
}
