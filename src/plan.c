/*
 * plan.c - the cost of a run, without running it; see plan.h.
 *
 * Memory is the trainer's: zero_state_bytes of the rank's parameter table
 * (params_build) for parameter state, and model.c's allocation rules,
 * restated as arithmetic, for activations. Communication volume is the bytes
 * each rank sends per step: an all-reduce of S bytes over p ranks sends
 * 2 (p-1)/p S (ring), a reduce-scatter or all-gather (p-1)/p S.
 */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "fail.h"
#include "grid.h"
#include "model.h"
#include "params.h"
#include "schedule.h"
#include "zero.h"
#include "kernels/ops.h"

#define MIB (1024.0 * 1024.0)

/* A grid describing one rank, enough for params_build. */
static Grid plan_grid(const Config *cfg, int world, int stage, int dp_rank, int tp_rank)
{
    Grid g;
    memset(&g, 0, sizeof g);
    g.size = world;
    g.pp = cfg->parallel.pp;
    g.tp = cfg->parallel.tp;
    g.dp = grid_resolve_dp(&cfg->parallel, world);
    g.pp_stage = stage;
    g.dp_rank = dp_rank;
    g.tp_rank = tp_rank;
    return g;
}

/* ---- memory ------------------------------------------------------------ */

/* Whether the DP group of (stage, tp rank) reduces in two levels, by the
 * trainer's rule (grid_dp_two_level: every node holds the same number of the
 * group's ranks, more than one and fewer than all) over the nodes
 * [parallel] node_size makes. (Real node boundaries are not known before the
 * run; plan assumes one node unless node_size says.)
 * Counted, not listed: the group's DP rank d is world rank
 * (stage dp + d) tp + tp_rank, and node_size is a multiple of tp
 * (grid_check), so d sits on node (stage dp + d) / q with q = node_size / tp:
 * the group fills a first node partly, then whole nodes of q, then a last
 * partial one. A list of dp entries would cost gigabytes and minutes at the
 * worlds plan accepts (up to INT_MAX ranks). */
static int dp_hierarchical(const Config *cfg, const Grid *g)
{
    int ns = cfg->parallel.node_size;
    if (ns <= 0 || g->dp < 4) /* two nodes of two at least */
        return 0;
    int64_t q = ns / g->tp, dp = g->dp;
    int64_t first = q - ((int64_t)g->pp_stage * dp) % q;
    if (first >= dp)
        return 0; /* one node holds the whole group */
    int64_t rest = dp - first, whole = rest / q, last = rest % q;
    int same = (whole == 0 || q == first) && (last == 0 || last == first);
    return same && first > 1;
}

/* zero.c's arenas: full or owned weights, gradients and Adam state, as
 * zero_state_bytes sizes them. Overlap assumes host buffers (a CPU run). */
static void parameter_memory(const ParamSet *ps, const Config *cfg, const Grid *g,
                             PlanMemory *mem)
{
    ZeroLayout l;
    l.stage = zero_stage(cfg->parallel.zero, g->dp);
    l.dp = g->dp;
    l.dp_rank = g->dp_rank;
    l.dtype = model_dtype(cfg->train.precision);
    l.hierarchical = dp_hierarchical(cfg, g);
    l.overlap = zero_overlaps(cfg->parallel.overlap, l.stage, g->dp, l.hierarchical, OPS_CPU);
    ZeroBytes b = zero_state_bytes(ps, &l);
    mem->weights = b.weights;
    mem->grads = b.grads;
    mem->optimizer = b.optimizer;
}

/* model.c's buffers for one stage. */
static int64_t activation_memory(const Config *cfg, const Grid *g, int n_local, int layer0)
{
    const ModelConfig *mc = &cfg->model;
    int64_t a = (int64_t)ops_dtype_size(model_dtype(cfg->train.precision));
    int64_t B = cfg->train.micro_batch, T = mc->seq_len, C = mc->n_embd, N = B * T;
    int64_t Cl = C / g->tp, NHl = mc->n_head / g->tp, Vl = mc->vocab_size / g->tp;
    /* sequence parallelism: x, ln1, xmid, ln2, the norms' statistics and
     * the stage buffers hold n of the N tokens */
    int sp = cfg->parallel.sequence_parallel && g->tp > 1;
    int64_t n = sp ? N / g->tp : N;
    int64_t lse = 4 * B * NHl * T; /* attention keeps no T x T matrix */
    int64_t block = a * (4 * n * C + 3 * N * Cl + N * Cl + 8 * N * Cl) + 4 * 4 * n + lse;
    /* gpt2: fc, fcg (4Cl each) and their gradient d_fc; LayerNorm keeps mean
     * and rstd, llama's RMSNorm rstd only */
    int64_t d_fc = 4 * Cl, stats = 8, extra = 0;
    if (mc->arch == ARCH_LLAMA) {
        int64_t Fl = arch_ffn_dim(mc) / g->tp;
        int64_t KVl = (int64_t)arch_kv_heads_local(mc, g->tp) * (C / mc->n_head);
        block = a * (4 * n * C + 3 * N * Cl + N * Cl + 3 * N * Fl) + 2 * 4 * n + lse;
        d_fc = 3 * Fl - 4 * Cl; /* d(fcg), dgate, dup in place of d_fc's 4Cl */
        stats = 4;
        extra = a * N * (Cl + 2 * KVl); /* q|k|v before the expansion */
    }
    int first = g->pp_stage == 0, last = g->pp_stage == g->pp - 1;
    int ga = cfg->train.grad_accum;
    Action *acts = malloc(sizeof(Action) * (size_t)schedule_length(cfg->parallel.schedule, 1, ga));
    int slots = schedule_max_in_flight(acts, schedule_build(cfg->parallel.schedule, g->pp, 1,
                                                            g->pp_stage, ga, acts));
    free(acts);
    int64_t per_slot = 2 * a * n * C + (first ? 4 * N : 0) + (last ? 4 * N : 0), any = 0;
    for (int l = layer0; l < layer0 + n_local; l++) {
        int keep_input = model_layer_recomputes(&cfg->train, l);
        per_slot += keep_input ? a * n * C : block;
        any |= keep_input;
    }
    int64_t scratch = (any ? block - a * n * C : 0) + 2 * a * N * C + a * N * 8 * Cl;
    if (sp) /* the gathered norm output and the reduce-scatter's slice */
        scratch += a * N * C + a * n * C;
    if (mc->arch == ARCH_LLAMA)
        scratch += a * N * d_fc + extra;
    if (last) {
        int64_t chunk = (16LL << 20) / (Vl > 0 ? Vl : 1);
        chunk = chunk < 1 ? 1 : chunk > N ? N : chunk;
        scratch += 2 * a * N * C + stats * n + 4 * chunk * Vl + 16 * chunk;
    }
    return slots * per_slot + scratch;
}

PlanMemory plan_rank_memory(const Config *cfg, int world, int stage, int dp_rank, int tp_rank)
{
    Grid g = plan_grid(cfg, world, stage, dp_rank, tp_rank);
    ParamSet ps;
    params_build(&ps, cfg, &g);
    PlanMemory mem = {0};
    parameter_memory(&ps, cfg, &g, &mem);
    int layer0, n_local;
    grid_stage_layers(cfg->model.n_layer, g.pp, stage, &layer0, &n_local);
    mem.activations = activation_memory(cfg, &g, n_local, layer0);
    params_free(&ps);
    return mem;
}

static int64_t total(PlanMemory m) { return m.weights + m.grads + m.optimizer + m.activations; }

/* The largest rank: the first stage (embeddings, the most microbatches in
 * flight), stage 1 (a middle stage with the most layers: earlier stages
 * take the spare ones) and the last (the head); the first and last DP rank
 * (the last ZeRO block may be short); TP rank 0 (TP ranks hold the same
 * sizes). */
PlanMemory plan_largest_rank(const Config *cfg, int world, int *stage_out)
{
    PlanMemory best = {0};
    int dp = grid_resolve_dp(&cfg->parallel, world), pp = cfg->parallel.pp;
    int stages[3] = {0, pp > 2 ? 1 : 0, pp - 1};
    int dp_ranks[2] = {0, dp - 1};
    for (int k = 0; k < 3; k++) {
        int s = stages[k];
        for (int j = 0; j < (dp > 1 ? 2 : 1); j++) {
            PlanMemory m = plan_rank_memory(cfg, world, s, dp_ranks[j], 0);
            if (total(m) > total(best)) {
                best = m;
                if (stage_out)
                    *stage_out = s;
            }
        }
    }
    return best;
}

/* ---- FLOPs, bubble, communication --------------------------------------- */

static double ring_allreduce(double bytes, int p) { return p > 1 ? 2.0 * (p - 1) / p * bytes : 0; }
static double ring_share(double bytes, int p) { return p > 1 ? (double)(p - 1) / p * bytes : 0; }

PlanComm plan_communication(const Config *cfg, int world)
{
    const ModelConfig *mc = &cfg->model;
    const TrainConfig *t = &cfg->train;
    PlanComm c = {0};
    int tp = cfg->parallel.tp, pp = cfg->parallel.pp;
    int dp = grid_resolve_dp(&cfg->parallel, world);
    int ga = t->grad_accum, zero = zero_stage(cfg->parallel.zero, dp);
    double a = (double)ops_dtype_size(model_dtype(cfg->train.precision));
    double act = (double)t->micro_batch * mc->seq_len * mc->n_embd * a;
    int first, layers;
    grid_stage_layers(mc->n_layer, pp, 0, &first, &layers);
    /* per block: two all-reduces forward, two backward, two more when the
     * block is recomputed; the embedding's and the head's come on top.
     * Sequence parallelism turns each into a reduce-scatter and an
     * all-gather (the same bytes) and gathers the norms' outputs again
     * in the backward: two all-gathers, half an all-reduce each, more. */
    int recomputed = model_recomputed_layers(t, first, layers);
    int sp = cfg->parallel.sequence_parallel && tp > 1;
    double per_mb = ((sp ? 5.0 : 4.0) * layers + 2.0 * recomputed + 2.0) * act;
    c.tp = ga * ring_allreduce(per_mb, tp);
    if (sp) /* the norms' gradients, once a step (zero.c) */
        c.tp += ring_allreduce(4.0 * layers * (mc->arch == ARCH_LLAMA ? 2 : 4) * mc->n_embd, tp);
    /* replicated key/value heads: dk and dv summed over the replicas in
     * every block's backward (model_llama.c) */
    int replicas = arch_kv_replicas(mc, tp);
    if (replicas > 1) {
        double kv = (double)t->micro_batch * mc->seq_len * (mc->n_embd / mc->n_head) * a;
        c.tp += ga * layers * 2.0 * ring_allreduce(kv, replicas);
    }
    c.pp = pp > 1 ? 2.0 * ga * act / (sp ? tp : 1) : 0.0; /* a slice each */
    double n = (double)params_local_count(cfg, 0, 0);
    switch (zero) {
    case 0: c.dp = ring_allreduce(4 * n, dp); break;
    case 1: c.dp = ring_share(4 * n, dp) + ring_share(a * n, dp); break;
    case 2: c.dp = ga * ring_share(4 * n, dp) + ring_share(a * n, dp); break;
    case 3: c.dp = ga * ring_share(4 * n, dp) + 2.0 * ga * ring_share(a * n, dp); break;
    }
    if (pp > 1 && mc->tie_embeddings)
        c.embed = ring_allreduce(4.0 * mc->vocab_size / tp * mc->n_embd / dp, 2);
    return c;
}

/* ---- printing ----------------------------------------------------------- */

static void print_memory_table(const Config *cfg, int world, FILE *out)
{
    fprintf(out, "memory per rank (MiB): weights / grads / optimizer / activations\n");
    int dp = grid_resolve_dp(&cfg->parallel, world), tp = cfg->parallel.tp;
    if (world <= 16) {
        for (int r = 0; r < world; r++) {
            PlanMemory m = plan_rank_memory(cfg, world, r / (tp * dp), (r / tp) % dp, r % tp);
            fprintf(out, "  rank %3d: %10.3f / %10.3f / %10.3f / %10.3f\n", r, m.weights / MIB,
                    m.grads / MIB, m.optimizer / MIB, m.activations / MIB);
        }
        return;
    }
    for (int s = 0; s < cfg->parallel.pp; s++) {
        PlanMemory m = plan_rank_memory(cfg, world, s, 0, 0);
        fprintf(out, "  stage %3d: %10.3f / %10.3f / %10.3f / %10.3f  (each of its %d ranks)\n", s,
                m.weights / MIB, m.grads / MIB, m.optimizer / MIB, m.activations / MIB, dp * tp);
    }
}

static void print_costs(const Config *cfg, int world, FILE *out)
{
    const ModelConfig *mc = &cfg->model;
    const TrainConfig *t = &cfg->train;
    int dp = grid_resolve_dp(&cfg->parallel, world), pp = cfg->parallel.pp;
    double seqs = (double)t->micro_batch * t->grad_accum * dp, tokens = seqs * mc->seq_len;
    double flops = 3.0 * model_forward_flops(mc, tokens);
    double bubble = (double)(pp - 1) / (t->grad_accum + pp - 1);
    fprintf(out, "model: %.3fM parameters; %.0f sequences, %.0f tokens per step\n",
            params_logical_count(mc) / 1e6, seqs, tokens);
    fprintf(out, "flops per step: %.4g (model, 3 x forward), %.4g per rank\n", flops,
            flops / world);
    fprintf(out, "pipeline bubble (%s, %d microbatches): %.1f%% = (pp-1)/(m+pp-1)\n",
            schedule_name(cfg->parallel.schedule), t->grad_accum, 100.0 * bubble);
    PlanComm c = plan_communication(cfg, world);
    fprintf(out, "communication per step, bytes sent by one rank: tp %.4g, dp %.4g (zero %d), pp %.4g, tied embedding %.4g\n",
            c.tp, c.dp, cfg->parallel.zero, c.pp, c.embed);
}

int plan_each_layout(const Config *cfg, int world, int max_tp, PlanVisit visit, void *ctx)
{
    int64_t mb = cfg->train.micro_batch;
    int64_t global = mb * cfg->train.grad_accum * grid_resolve_dp(&cfg->parallel, world);
    int visited = 0;
    for (int tp = 1; tp <= max_tp && tp <= world; tp *= 2) {
        /* pp <= n_layer (grid_check), which also keeps pp * tp from
         * overflowing at a world near INT_MAX */
        for (int pp = 1; pp <= world / tp && pp <= cfg->model.n_layer; pp++) {
            int dp = world / (tp * pp);
            if (world % (tp * pp) || global % (mb * dp))
                continue;
            Config c = *cfg;
            c.parallel.tp = tp;
            c.parallel.pp = pp;
            c.parallel.dp = dp;
            c.train.grad_accum = (int)(global / (mb * dp));
            if (grid_check(&c, world, fail_stream(0)) != 0)
                continue;
            for (int z = 0; z <= 3; z++) {
                for (int rc = 0; rc <= 1; rc++) {
                    c.parallel.zero = z;
                    c.train.recompute = rc ? RECOMPUTE_FULL : RECOMPUTE_NONE;
                    visit(&c, ctx);
                    visited++;
                }
            }
        }
    }
    return visited;
}

typedef struct {
    int world, shown;
    double mem_gib;
    FILE *out;
} FitsTable;

static void print_fit(const Config *c, void *ctx)
{
    FitsTable *t = ctx;
    double gib = total(plan_largest_rank(c, t->world, NULL)) / (MIB * 1024.0);
    if (gib > t->mem_gib)
        return;
    int pp = c->parallel.pp;
    double bubble = (double)(pp - 1) / (c->train.grad_accum + pp - 1);
    fprintf(t->out, "  %5d %5d %5d %4d %4d %9s %10.2f %5.1f%%\n", c->parallel.dp, pp,
            c->parallel.tp, c->train.grad_accum, c->parallel.zero,
            c->train.recompute == RECOMPUTE_FULL ? "full" : "none", gib, 100.0 * bubble);
    t->shown++;
}

/* The layouts of plan_each_layout (tp up to 8) that fit mem_gib. */
static void print_fits(const Config *cfg, int world, double mem_gib, FILE *out)
{
    int64_t global = (int64_t)cfg->train.micro_batch * cfg->train.grad_accum
                     * grid_resolve_dp(&cfg->parallel, world);
    fprintf(out, "\nlayouts of %d ranks within %.1f GiB per device, global batch %lld (largest rank):\n",
            world, mem_gib, (long long)global);
    fprintf(out, "  %5s %5s %5s %4s %4s %9s %10s %6s\n", "dp", "pp", "tp", "ga", "zero", "recompute",
            "GiB", "bubble");
    FitsTable t = {.world = world, .mem_gib = mem_gib, .out = out};
    plan_each_layout(cfg, world, 8, print_fit, &t);
    if (!t.shown)
        fprintf(out, "  none: more ranks, a smaller micro_batch, or more memory\n");
}

int plan_print(const Config *cfg, int world, double mem_gib, FILE *out, FILE *err)
{
    if (grid_check(cfg, world, err))
        return 1;
    int dp = grid_resolve_dp(&cfg->parallel, world), stage = 0;
    fprintf(out, "plan: %d ranks = dp %d x pp %d x tp %d, zero %d, %s, recompute %s\n", world, dp,
            cfg->parallel.pp, cfg->parallel.tp, cfg->parallel.zero,
            ops_dtype_name(model_dtype(cfg->train.precision)),
            cfg->train.recompute == RECOMPUTE_NONE ? "none"
            : cfg->train.recompute == RECOMPUTE_FULL ? "full" : "every:K");
    print_costs(cfg, world, out);
    print_memory_table(cfg, world, out);
    PlanMemory big = plan_largest_rank(cfg, world, &stage);
    fprintf(out, "largest rank: %.2f GiB (stage %d)\n", total(big) / (MIB * 1024.0), stage);
    if (mem_gib > 0)
        print_fits(cfg, world, mem_gib, out);
    return 0;
}
