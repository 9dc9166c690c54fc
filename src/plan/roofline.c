/*
 * roofline.c - predicted step time, term by term; see roofline.h.
 *
 * Every term is a count (FLOPs, bytes) from the model's shapes divided by
 * a rate of the hardware, so each line of the printout can be checked by
 * hand. The counts follow what trident executes: GEMMs as the model runs
 * them (full T x T attention products, recomputed forwards counted), the
 * elementwise passes of model.c, the optimizer's streams over the owned
 * rows, and the bytes plan_communication says each group sends.
 */
#include "roofline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "arch.h"
#include "fail.h"
#include "grid.h"
#include "hw_peak.h"
#include "kernel_times.h"
#include "model.h"
#include "params_stage.h"
#include "plan.h"
#include "plan_moe.h"
#include "plan_reason.h"
#include "schedule.h"
#include "params.h"
#include "schedule.h"
#include "timer.h"
#include "zero.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* ---- hardware ---------------------------------------------------------- */

/* Datasheet dense peaks (FLOP/s, no sparsity), HBM bandwidth, NVLink
 * bandwidth per GPU and direction, and one 400 (NDR) or 200 (HDR) Gb/s NIC
 * per GPU. The GEMM efficiency is what large cuBLAS GEMMs sustain. fp32
 * is true fp32 (trident's CUDA GEMMs use CUBLAS_COMPUTE_32F, not TF32).
 * For the optimizer offload: what pinned copies sustain over PCIe 5.0
 * (H100, H200) or 4.0 (A100) x16, and an eighth of a two-socket host's
 * memory bandwidth (about 400 GB/s) for each GPU's AdamW: assumptions,
 * not measurements (doc/gpu.md). */
static const Hardware profiles[] = {
    {"h100", 67e12, 989e12, 989e12, 0.70, 3.35e12, 80, 450e9, 50e9, 8, 0, "", 50e9, 50e9},
    {"h200", 67e12, 989e12, 989e12, 0.70, 4.8e12, 141, 450e9, 50e9, 8, 0, "", 50e9, 50e9},
    {"a100", 19.5e12, 312e12, 312e12, 0.75, 2.0e12, 80, 300e9, 25e9, 8, 0, "", 25e9, 40e9},
};

/* Sustained bandwidth (bytes read + written) of this machine, all
 * threads, over buffers larger than its caches: a scale-and-add, the
 * access pattern of the elementwise ops. */
static double measure_memory_bandwidth(void)
{
    int64_t n = 32LL << 20; /* 128 MiB per buffer */
    float *a = TRI_CALLOC((size_t)n, sizeof *a, "the bandwidth probe");
    float *b = TRI_CALLOC((size_t)n, sizeof *b, "the bandwidth probe");
    double best = 0.0;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = timer_now();
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++)
            b[i] = 0.5f * b[i] + a[i];
        double dt = timer_now() - t0;
        if (rep > 0 && 12.0 * n / dt > best) /* the first touches the pages */
            best = 12.0 * n / dt;
    }
    free(a);
    free(b);
    return best;
}

int roofline_hardware(const char *name, int world, ops_dtype dtype, Hardware *hw, FILE *err)
{
    for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++) {
        if (strcmp(name, profiles[i].name) == 0) {
            *hw = profiles[i];
            return 0;
        }
    }
    if (strcmp(name, "cpu") != 0) {
        fprintf(err, "trident: plan --hw %s: unknown hardware (h100, h200, a100, cpu)\n", name);
        return 1;
    }
    /* this machine: the hardware's peak in the run's dtype (MFU's
     * denominator, as the trainer's) and the GEMM library's share of it,
     * shared by all the world's ranks */
    memset(hw, 0, sizeof *hw);
    snprintf(hw->name, sizeof hw->name, "cpu");
    int cores;
    char how[160];
    double ceiling = hw_peak_cpu_node(dtype, 0.2, &cores, how, sizeof how);
    ops_gemm_peak_on(OPS_CPU, dtype, 0.05); /* warm the library up */
    double gemm = ops_gemm_peak_on(OPS_CPU, dtype, 0.3);
    if (ceiling < gemm) /* a probe the machine's load slowed: no GEMM beats the hardware */
        ceiling = gemm;
    snprintf(hw->how, sizeof hw->how, "%s, %s, %d core%s: %s peak %.1f GFLOP/s",
             ops_cpu_name(), how, cores, cores == 1 ? "" : "s", ops_dtype_name(dtype),
             ceiling / 1e9);
    hw->flops_fp32 = hw->flops_bf16 = hw->flops_fp16 = ceiling;
    hw->gemm_efficiency = gemm / ceiling;
    hw->mem_bw = measure_memory_bandwidth();
    /* the ranks share the machine's memory */
    hw->mem_gib = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / GIB / world;
    hw->intra_bw = hw->inter_bw = hw->mem_bw / 2.0; /* a shared-memory copy reads and writes */
    hw->per_node = world;
    hw->shared = 1;
    return 0;
}

static double peak(const Hardware *hw, const Config *cfg)
{
    ops_dtype d = model_dtype(cfg->train.precision);
    double p = d == OPS_BF16 ? hw->flops_bf16 : d == OPS_F16 ? hw->flops_fp16 : hw->flops_fp32;
    return p * hw->gemm_efficiency;
}

/* ---- the counts -------------------------------------------------------- */

/* Stage s's layers over all its chunks: how many, how many recompute,
 * and per token the sums of their forward FLOPs (whole width, not a TP
 * shard) and elementwise bytes, of all of them and of the recomputed
 * ones: a MoE model's dense and MoE layers differ, so each is priced as
 * the architecture prices its index. */
typedef struct {
    int layers, recomputed, moe, moe_recomputed;
    double flops, re_flops, bytes, re_bytes;
} StageLayers;

static StageLayers stage_layers(const Config *cfg, int s, double a, double tp, double sp)
{
    const ModelConfig *m = &cfg->model;
    const Arch *arch = arch_of(m);
    StageLayers t = {0};
    for (int c = 0; c < cfg->parallel.virtual_stages; c++) {
        int first, count;
        layout_chunk_layers(m->n_layer, cfg->parallel.pp, cfg->parallel.virtual_stages, s, c,
                            &first, &count);
        for (int l = first; l < first + count; l++) {
            int re = model_layer_recomputes(&cfg->train, l), moe = arch_layer_is_moe(m, l);
            double f = arch->layer_flops(m, l), b = arch->layer_bytes(m, l, a, tp, sp);
            t.layers++;
            t.moe += moe;
            t.recomputed += re;
            t.moe_recomputed += re && moe;
            t.flops += f;
            t.bytes += b;
            t.re_flops += re ? f : 0.0;
            t.re_bytes += re ? b : 0.0;
        }
    }
    return t;
}

typedef struct {
    double gemm_flops;     /* per microbatch, per rank of the busiest stage */
    double attention_flops; /* ... of them, attention's products */
    double elem_bytes;     /* per microbatch */
    double gemm_seconds;   /* the CPU profile: the stage's kernels timed, */
    double elem_seconds;   /* else 0 */
    double gemm_f, gemm_w; /* shares of the GEMMs in the forward (the head's
                              backward included: it runs there) and in the
                              blocks' weight gradients (zb1's W) */
} StageWork;

/* zb1's W runs a recomputed layer's forward a second time. */
static int recomputes_twice(const Config *cfg)
{
    return cfg->parallel.schedule == SCHED_ZB1;
}

/* A layer of m that is MoE (moe) or dense, to time as the stand-in of
 * its kind: the first of each (arch_layer_is_moe). */
static int layer_of_kind(const ModelConfig *m, int moe)
{
    for (int l = 0; l < m->n_layer; l++)
        if (arch_layer_is_moe(m, l) == moe)
            return l;
    return 0;
}

/* The CPU profile's timed kernels for one microbatch of the stage's
 * layers (dense and MoE ones timed each at their own shapes, the
 * recomputed ones' forwards again) and, if `with_head`, the LM head. */
static void timed_stage(const Config *cfg, const StageLayers *sl, int with_head, StageWork *w)
{
    const ModelConfig *m = &cfg->model;
    int tp = cfg->parallel.tp, twice = recomputes_twice(cfg);
    ops_dtype d = model_dtype(cfg->train.precision);
    KernelTimes layer[2], head;
    double fwd = 0.0, bwd = 0.0;
    w->gemm_seconds = w->elem_seconds = 0.0;
    for (int moe = 0; moe <= 1; moe++) {
        int n = moe ? sl->moe : sl->layers - sl->moe;
        int re = moe ? sl->moe_recomputed : sl->recomputed - sl->moe_recomputed;
        if (!n)
            continue;
        KernelShape shape = kernel_times_shape(m, layer_of_kind(m, moe), d,
                                               cfg->train.micro_batch, tp);
        kernel_times_measure(&shape, &layer[moe], &head);
        int re_runs = re * (1 + twice);
        w->gemm_seconds += n * (layer[moe].gemm_fwd + layer[moe].gemm_bwd)
                           + re_runs * layer[moe].gemm_fwd;
        w->elem_seconds += n * (layer[moe].elem_fwd + layer[moe].elem_bwd)
                           + re_runs * layer[moe].elem_fwd;
        fwd += n * layer[moe].gemm_fwd;
        /* the backward's GEMMs are its two halves, dinp and dW, alike */
        bwd += n * layer[moe].gemm_bwd / 2.0 + re * twice * layer[moe].gemm_fwd;
    }
    if (with_head) {
        w->gemm_seconds += head.gemm_fwd + head.gemm_bwd;
        w->elem_seconds += head.elem_fwd + head.elem_bwd;
        fwd += head.gemm_fwd + head.gemm_bwd;
    }
    w->gemm_f = fwd / w->gemm_seconds;
    w->gemm_w = bwd / w->gemm_seconds;
    /* timed on whole sequences: a cp rank holds 1/cp of the tokens and,
     * with the zigzag chunks, 1/cp of attention's causal work */
    w->gemm_seconds /= cfg->parallel.cp;
    w->elem_seconds /= cfg->parallel.cp;
}

/* Attention's products per token of a layer: the part of its FLOPs that
 * grows with the sequence (scores and values over seq_len keys), alike
 * in every layer. */
static double attention_flops_per_token(const ModelConfig *m)
{
    ModelConfig no_context = *m;
    no_context.seq_len = 0;
    return model_layer_flops(m, 0, 1.0) - model_layer_flops(&no_context, 0, 1.0);
}

/* One microbatch on the busiest stage, one TP and CP rank: GEMM FLOPs (3
 * forward passes' worth, plus recomputed forwards; the LM head on the last
 * stage counts when it is the busier) and elementwise bytes, on the rank's
 * seq_len / cp tokens of each sequence (each still attends over the whole
 * sequence, so attention's share stays per token as at cp 1). */
static StageWork stage_work(const Config *cfg, const Hardware *hw)
{
    const ModelConfig *m = &cfg->model;
    double a = (double)ops_dtype_size(model_dtype(cfg->train.precision));
    double tp = cfg->parallel.tp;
    double C = m->n_embd, V = m->vocab_size;
    double tokens = (double)cfg->train.micro_batch * plan_rank_seq_len(cfg);
    /* the elementwise work per token per layer is the architecture's; a CPU
     * plan times the kernels instead (timed_stage). Sequence parallelism
     * runs the norms and residual adds on 1/tp of the tokens. */
    double sp = cfg->parallel.sequence_parallel ? tp : 1.0;
    /* stage 0 has the most blocks: the first stages take the spare ones */
    StageLayers sl = stage_layers(cfg, 0, a, tp, sp);
    StageWork w;
    int twice = recomputes_twice(cfg);
    double per_rank = tokens / tp; /* FLOPs per token to a rank's FLOPs */
    w.gemm_flops = (3.0 * sl.flops + (1 + twice) * sl.re_flops) * per_rank;
    w.elem_bytes = (3.0 * sl.bytes + (1 + twice) * sl.re_bytes) * tokens;
    double head_flops = 3.0 * tokens * 2.0 * C * V / tp;
    double head_bytes = tokens * 20.0 * V / tp; /* fp32 logits: write, max, sumexp, finish */
    int with_head = cfg->parallel.pp == 1;
    if (with_head) {
        w.gemm_flops += head_flops;
        w.elem_bytes += head_bytes;
    } else {
        StageLayers last = stage_layers(cfg, cfg->parallel.pp - 1, a, tp, sp);
        double last_flops = (3.0 * last.flops + (1 + twice) * last.re_flops) * per_rank
                            + head_flops;
        if (last_flops > w.gemm_flops) {
            w.gemm_flops = last_flops;
            w.elem_bytes = 3.0 * last.bytes * tokens + head_bytes;
            sl = last;
            with_head = 1;
        }
    }
    w.attention_flops = (3.0 * sl.layers + sl.recomputed * (1 + twice)) * tokens
                        * attention_flops_per_token(m) / tp;
    w.gemm_f = (sl.flops * per_rank + (with_head ? head_flops : 0.0)) / w.gemm_flops;
    w.gemm_w = (sl.flops + sl.re_flops * twice) * per_rank / w.gemm_flops;
    w.gemm_seconds = w.elem_seconds = 0.0;
    if (hw->shared)
        timed_stage(cfg, &sl, with_head, &w);
    return w;
}

/* Parameters the busiest rank's optimizer updates (its ZeRO rows, over
 * the dp x cp replicas, and its experts' over theirs). */
static double optimizer_elements(const Config *cfg, int world)
{
    /* the routed experts' rows shard over their own replicas, dp / ep x cp */
    double experts = (double)params_local_expert_count(cfg, 0, 0);
    double dense = (double)params_local_count(cfg, 0, 0) - experts;
    int replicas = plan_replicas(cfg, world);
    int expert_replicas = replicas / (cfg->parallel.ep > 0 ? cfg->parallel.ep : 1);
    if (zero_stage(cfg->parallel.zero, replicas) >= 1)
        dense /= replicas;
    if (zero_stage(cfg->parallel.zero, expert_replicas) >= 1)
        experts /= expert_replicas;
    return dense + experts;
}

/* Seconds of the optimizer step: AdamW reads and writes master, m and v
 * and reads the gradient (28 B per element), the norm reads the gradient
 * again, a separate compute copy adds its write; the CPU profile times
 * that instead (where offload changes nothing). Offloaded, the device
 * only reads the gradient for the norm, and the step takes the longer of
 * the transfers (4 B down per element, the copy's bytes up at the same
 * time) and the host's AdamW, which overlap (offload.h). */
static double optimizer_seconds(const Config *cfg, int world, const Hardware *hw, double mem)
{
    ops_dtype d = model_dtype(cfg->train.precision);
    double n = optimizer_elements(cfg, world), a = (double)ops_dtype_size(d);
    if (hw->shared)
        return n * kernel_times_adamw(d) * world; /* the ranks share the cores */
    if (plan_offloads(cfg))
        return 4.0 * n / mem + fmax(4.0 * n / hw->pcie_bw, (28.0 + a) * n / hw->host_bw);
    return n * (32.0 + (d != OPS_F32 ? a : 0.0)) / mem;
}

/* ---- the prediction ----------------------------------------------------- */

/* Bandwidth of a group of `size` consecutive-ish world ranks: in-node when
 * it fits in one node, else the cross-node links. */
static double group_bw(const Hardware *hw, int span)
{
    return span <= hw->per_node ? hw->intra_bw : hw->inter_bw;
}

/* One microbatch as the schedule simulator's f, b, w: the GEMMs by the
 * stage's shares; elementwise ops a third forward, two thirds backward
 * (LayerNorm and bias gradients stay in B); transfers half each way. */
static StageCost microbatch_cost(const StageWork *w, double gemm, double elem, double comm)
{
    StageCost c;
    c.f = w->gemm_f * gemm + elem / 3.0 + comm / 2.0;
    c.w = w->gemm_w * gemm;
    c.b = gemm + elem + comm - c.f - c.w;
    return c;
}

Prediction roofline_predict(const Config *cfg, int world, const Hardware *hw)
{
    Prediction p;
    memset(&p, 0, sizeof p);
    int tp = cfg->parallel.tp, pp = cfg->parallel.pp, cp = cfg->parallel.cp;
    int dp = layout_resolve_dp(&cfg->parallel, world);
    int m = cfg->train.grad_accum;
    StageWork w = stage_work(cfg, hw);
    PlanComm c = plan_communication(cfg, world);
    double ranks_sharing = hw->shared ? world : 1.0; /* a shared machine splits its rates */
    double gemm_rate = peak(hw, cfg) / ranks_sharing, mem = hw->mem_bw / ranks_sharing;
    double gemm_mb = hw->shared ? w.gemm_seconds * ranks_sharing : w.gemm_flops / gemm_rate;
    double elem_mb = hw->shared ? w.elem_seconds * ranks_sharing : w.elem_bytes / mem;
    double tp_per_mb = c.tp / m / (group_bw(hw, tp) / ranks_sharing);
    double pp_per_mb = c.pp / m / (group_bw(hw, tp * cp * dp * pp) / ranks_sharing);
    p.gemm = m * gemm_mb;
    p.elementwise = m * elem_mb;
    p.tp = m * tp_per_mb;
    p.pp = m * pp_per_mb;
    /* the cp group spans tp x cp consecutive ranks (cp sits outside tp).
     * trident's attention over the group all-gathers before it computes
     * and reduce-scatters after (model_cp.c): nothing overlaps it, so all
     * of it is exposed. The attention's own time is printed beside it:
     * what a ring overlapped with the blocks of attention could hide. */
    p.cp_link = group_bw(hw, tp * cp) / ranks_sharing;
    p.cp_total = c.cp / p.cp_link;
    p.attention = m * w.attention_flops / gemm_rate;
    p.cp_exposed = p.cp_total;
    double cp_per_mb = p.cp_exposed / m;
    /* the experts' all-to-alls run between the ep group's ranks, ep DP
     * ranks tp x cp apart; the layer waits for them (nothing overlaps) */
    p.ep_link = group_bw(hw, plan_moe_ep_span(cfg)) / ranks_sharing;
    p.ep = c.ep / p.ep_link;
    cp_per_mb += p.ep / m;
    /* the busiest stage does m microbatches; the schedule's idle time on
     * top, simulated with that stage's forward, backward and weight pass
     * (1F1B and GPipe: (pp-1) microbatch times; interleaved (pp-1)/v) */
    StageCost cost = microbatch_cost(&w, gemm_mb, elem_mb, tp_per_mb + pp_per_mb + cp_per_mb);
    double makespan;
    schedule_simulate(cfg->parallel.schedule, pp, cfg->parallel.virtual_stages, m, cost,
                      &makespan);
    p.bubble = makespan - m * (cost.f + cost.b + cost.w);
    if (p.bubble < 0.0) /* rounding */
        p.bubble = 0.0;
    p.optimizer = optimizer_seconds(cfg, world, hw, mem);
    p.dp_total = c.dp / (group_bw(hw, tp * cp * dp) / ranks_sharing);
    /* with overlap the reduction runs behind the backward (about two
     * thirds of the compute); a shared CPU has no idle resource to hide
     * it behind */
    double hideable = cfg->parallel.overlap && !hw->shared ? (2.0 / 3.0) * (p.gemm + p.elementwise) : 0.0;
    p.dp_exposed = p.dp_total > hideable ? p.dp_total - hideable : 0.0;
    p.step = p.gemm + p.elementwise + p.tp + p.pp + p.cp_exposed + p.ep + p.bubble
             + p.optimizer + p.dp_exposed;
    double tokens = (double)cfg->train.micro_batch * m * dp * cfg->model.seq_len;
    p.tokens_per_s = tokens / p.step;
    double flops = 3.0 * model_forward_flops(&cfg->model, tokens);
    p.mfu = flops / p.step / (world * peak(hw, cfg) / hw->gemm_efficiency / ranks_sharing);
    PlanMemory mm = plan_largest_rank(cfg, world, plan_head_budget(cfg, hw->mem_gib), NULL);
    p.memory_gib = (mm.weights + mm.grads + mm.optimizer + mm.activations) / GIB;
    p.host_gib = mm.host / GIB;
    return p;
}

void roofline_print(const Config *cfg, int world, const Hardware *hw, const Prediction *p,
                    FILE *out)
{
    const char *dtype = ops_dtype_name(model_dtype(cfg->train.precision));
    if (hw->shared)
        fprintf(out, "hardware: %s (MFU is against it)\n"
                "predicted step on %d x %s (the model's %s kernels timed here; square GEMM %.2f TFLOP/s, %.0f%% of the peak, memory %.1f GB/s):\n",
                hw->how, world, hw->name, dtype, peak(hw, cfg) / 1e12,
                100.0 * hw->gemm_efficiency, hw->mem_bw / 1e9);
    else
        fprintf(out, "predicted step on %d x %s (%s GEMMs at %.1f TFLOP/s sustained, memory %.1f GB/s):\n",
                world, hw->name, dtype, peak(hw, cfg) / 1e12, hw->mem_bw / 1e9);
    /* a dense model's printout has no experts' row */
    int moe = cfg->model.n_expert > 0;
    const struct { const char *what; double s; int shown; } terms[] = {
        {hw->shared ? "GEMMs (timed)" : "GEMMs", p->gemm, 1},
        {hw->shared ? "elementwise ops (timed)" : "elementwise ops (memory-bound)", p->elementwise, 1},
        {"tensor-parallel all-reduces", p->tp, 1}, {"pipeline transfers", p->pp, 1},
        {"context-parallel traffic (exposed)", p->cp_exposed, 1},
        {"expert all-to-alls (exposed)", p->ep, moe},
        {"pipeline bubble", p->bubble, 1},
        {plan_offloads(cfg) && !hw->shared ? "optimizer (offloaded, overlapped)" : "optimizer",
         p->optimizer, 1},
        {"data-parallel reduction (exposed)", p->dp_exposed, 1},
    };
    for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++)
        if (terms[i].shown)
            fprintf(out, "  %-36s %10.2f ms  %5.1f%%\n", terms[i].what, 1e3 * terms[i].s,
                    100.0 * terms[i].s / p->step);
    fprintf(out, "  %-36s %10.2f ms  (DP reduction in all: %.2f ms)\n", "step", 1e3 * p->step,
            1e3 * p->dp_total);
    if (cfg->parallel.cp > 1)
        fprintf(out, "  cp traffic %.4g GB/step, %.2f ms at link %.4g GB/s, attention %.2f ms: "
                "exposed (the all-gather does not overlap; a ring overlapped with attention "
                "would %s) (cp %d over the %s link)\n",
                plan_communication(cfg, world).cp / 1e9, 1e3 * p->cp_total, p->cp_link / 1e9,
                1e3 * p->attention, p->cp_total > p->attention ? "not hide it" : "hide it",
                cfg->parallel.cp,
                cfg->parallel.tp * cfg->parallel.cp <= hw->per_node ? "in-node" : "cross-node");
    if (cfg->parallel.ep > 1)
        fprintf(out, "  expert all-to-alls %.4g GB/step, %.2f ms at link %.4g GB/s: exposed (no "
                "overlap with compute is built) (ep %d over the %s link)\n",
                plan_communication(cfg, world).ep / 1e9, 1e3 * p->ep, p->ep_link / 1e9,
                cfg->parallel.ep, plan_moe_ep_span(cfg) <= hw->per_node ? "in-node" : "cross-node");
    fprintf(out, "  tokens/s %.4g, MFU %.1f%%, largest rank %.1f GiB", p->tokens_per_s,
            100.0 * p->mfu, p->memory_gib);
    if (plan_offloads(cfg) && !hw->shared)
        fprintf(out, " (and %.1f GiB offloaded to host memory)", p->host_gib);
    fprintf(out, "\n");
}

typedef struct {
    const Hardware *hw;
    int world, found;
    Config best;
    Prediction pred;
    double least_cp1_gib;   /* the least memory of a layout at cp 1, fitting or not */
    double least_ep1_gib;   /* ... and at ep 1 */
} Search;

static void consider(const Config *c, void *ctx)
{
    Search *s = ctx;
    Prediction p = roofline_predict(c, s->world, s->hw);
    /* on the CPU profile the device is the host: offloading frees nothing */
    double need = p.memory_gib + (s->hw->shared ? p.host_gib : 0.0);
    if (c->parallel.cp == 1 && (s->least_cp1_gib == 0.0 || need < s->least_cp1_gib))
        s->least_cp1_gib = need;
    if (c->parallel.ep == 1 && (s->least_ep1_gib == 0.0 || need < s->least_ep1_gib))
        s->least_ep1_gib = need;
    if (s->hw->mem_gib > 0 && need > s->hw->mem_gib)
        return;
    if (!s->found || p.step < s->pred.step) {
        s->best = *c;
        s->pred = p;
        s->found = 1;
    }
}

int roofline_recommend(const Config *cfg, int world, const Hardware *hw, Config *best,
                       Prediction *pred, double *least_cp1_gib, double *least_ep1_gib)
{
    Search s = {.hw = hw, .world = world};
    plan_each_layout(cfg, world, hw->per_node, consider, &s);
    *best = s.best;
    *pred = s.pred;
    if (least_cp1_gib)
        *least_cp1_gib = s.least_cp1_gib;
    if (least_ep1_gib)
        *least_ep1_gib = s.least_ep1_gib;
    return s.found ? 0 : 1;
}

int roofline_print_plan(const Config *cfg, int world, const char *hw_name, Config *advice,
                        FILE *out, FILE *err)
{
    Hardware hw;
    TRI_TRY(roofline_hardware(hw_name, world, model_dtype(cfg->train.precision), &hw, err));
    Config on_hw = *cfg; /* a GPU profile predicts for its GPUs */
    if (!hw.shared)
        plan_assume_gpu(&on_hw);
    cfg = &on_hw;
    Prediction p = roofline_predict(cfg, world, &hw);
    fprintf(out, "\n");
    roofline_print(cfg, world, &hw, &p, out);
    Config best;
    Prediction bp;
    double least_cp1_gib, least_ep1_gib;
    if (roofline_recommend(cfg, world, &hw, &best, &bp, &least_cp1_gib, &least_ep1_gib) == 0) {
        *advice = best;
        fprintf(out, "\nfastest layout on %d x %s that fits %.3g GiB: dp %d x pp %d x cp %d x tp %d, grad_accum %d, zero %d, recompute %s, schedule %s (%d chunk%s a stage), sequence_parallel %s, offload %s\n",
                world, hw.name, hw.mem_gib, best.parallel.dp, best.parallel.pp, best.parallel.cp,
                best.parallel.tp,
                best.train.grad_accum, best.parallel.zero,
                best.train.recompute == RECOMPUTE_FULL ? "full" : "none",
                schedule_name(best.parallel.schedule), best.parallel.virtual_stages,
                best.parallel.virtual_stages > 1 ? "s" : "",
                best.parallel.sequence_parallel ? "true" : "false",
                plan_offloads(&best) ? "optimizer" : "none");
        plan_print_cp_reason(&best, least_cp1_gib, hw.mem_gib, "faster", out);
        plan_print_ep_reason(&best, least_ep1_gib, hw.mem_gib, "faster", out);
        roofline_print(&best, world, &hw, &bp, out);
    } else {
        fprintf(out, "\nno layout of %d x %s fits %.3g GiB per device\n", world, hw.name,
                hw.mem_gib);
    }
    return 0;
}
