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

#include "alloc.h"
#include "arch.h"
#include "config_load.h"
#include "fail.h"
#include "layout.h"
#include "model.h"
#include "params.h"
#include "params_stage.h"
#include "plan_moe.h"
#include "plan_reason.h"
#include "schedule.h"
#include "zero.h"
#include "ops.h"

#define MIB (1024.0 * 1024.0)

/* ---- memory ------------------------------------------------------------ */

/* The trainer's choice of device, where plan can know it: auto takes a
 * GPU when one is visible (device.c), asked once. */
static int on_gpu(const Config *cfg)
{
    static int visible = -1;
    if (cfg->parallel.device != DEVICE_AUTO)
        return cfg->parallel.device == DEVICE_CUDA;
    if (visible < 0)
        visible = ops_device_count(OPS_CUDA) > 0;
    return visible;
}

int plan_offloads(const Config *cfg)
{
    return cfg->train.offload == OFFLOAD_OPTIMIZER && on_gpu(cfg);
}

void plan_assume_gpu(Config *cfg)
{
    if (cfg->parallel.device == DEVICE_AUTO)
        cfg->parallel.device = DEVICE_CUDA;
}

/* zero.c's arenas for the stage's table with its first max_layers blocks. */
static ZeroBytes state_bytes(const Config *cfg, const Layout *layout, const ZeroLayout *l,
                             int max_layers)
{
    ParamSet ps;
    params_build_layers(&ps, cfg, layout, max_layers);
    ZeroBytes b = zero_state_bytes(&ps, l);
    params_free(&ps);
    return b;
}

/* b1 + (n - 1) (b2 - b1): the bytes of n alike blocks from those of one
 * and two. zero_state_bytes is a sum over the parameters (each sharded on
 * its own) plus maxima over parameters and units, which one block already
 * reaches; so this is exact, and costs two small tables, not n_layer. */
static int64_t per_block(int64_t one, int64_t two, int n) { return one + (n - 1) * (two - one); }

/* zero.c's arenas: full or owned weights, gradients and Adam state, as
 * zero_state_bytes sizes them, over the rank's replicas (dp x cp: the
 * ranks that hold the same weights and reduce their gradients together).
 * Overlap assumes host buffers (a CPU run). */
static void parameter_memory(const Config *cfg, const Layout *layout, PlanMemory *mem)
{
    ZeroLayout l;
    /* ZeRO shards over the replicas (dp x cp ranks), as zero.c does */
    int replicas = layout_replicas(layout), replica = layout_replica_rank(layout);
    l.stage = zero_stage(cfg->parallel.zero, replicas);
    l.dp = replicas;
    l.dtype = model_dtype(cfg->train.precision);
    /* over the nodes node_size pretends (plan assumes one node unless it
     * says), as comm_dp.c checks the trainer's; the rank's block is its
     * place in comm_dp_order, its replica rank over one level */
    l.places = layout_dp_places(layout);
    LayoutDpSpot at = layout_dp_spot(layout, replica);
    l.dp_rank = l.places ? layout_dp_block(at.place, at.node, replicas / l.places) : replica;
    l.overlap = zero_overlaps(cfg->parallel.overlap, l.stage, replicas, l.places, OPS_CPU);
    l.offload = plan_offloads(cfg);
    /* routed experts' state is shared by the replicas with their ep rank */
    l.edp = layout_expert_replicas(layout);
    l.edp_rank = layout_expert_replica_rank(layout);
    int layers = params_stage_layers(cfg, layout);
    /* where dense and MoE layers alternate, the blocks differ: all built */
    int alike = params_blocks_alike(&cfg->model);
    ZeroBytes b = state_bytes(cfg, layout, &l, layers < 2 || !alike ? layers : 1);
    if (layers > 1 && alike) {
        ZeroBytes two = state_bytes(cfg, layout, &l, 2);
        b.weights = per_block(b.weights, two.weights, layers);
        b.grads = per_block(b.grads, two.grads, layers);
        b.optimizer = per_block(b.optimizer, two.optimizer, layers);
        b.host = per_block(b.host, two.host, layers);
    }
    mem->weights = b.weights;
    mem->grads = b.grads;
    mem->optimizer = b.optimizer;
    mem->host = b.host;
}

int64_t plan_head_budget(const Config *cfg, double device_gib)
{
    int gpu = cfg->parallel.device == DEVICE_CUDA && device_gib > 0;
    return model_head_logit_budget(gpu ? (int64_t)(device_gib * MIB * 1024.0) : 0);
}

int plan_rank_seq_len(const Config *cfg)
{
    return cfg->model.seq_len / cfg->parallel.cp;
}

int plan_replicas(const Config *cfg, int world)
{
    Layout l = layout_at(&cfg->parallel, layout_resolve_dp(&cfg->parallel, world), 0, 0, 0);
    return layout_replicas(&l);
}

/* The memory of the rank at layout's place, its head holding head_budget
 * logits at once. */
static PlanMemory layout_memory(const Config *cfg, const Layout *layout, int64_t head_budget)
{
    PlanMemory mem = {0};
    parameter_memory(cfg, layout, &mem);
    int slots = schedule_stage_slots(cfg->parallel.schedule, cfg->parallel.pp,
                                     cfg->parallel.virtual_stages, layout->pp_stage,
                                     cfg->train.grad_accum);
    /* the model's own count: its seq_len / cp tokens of each row, and at
     * cp > 1 the whole-sequence buffers of attention over the group */
    mem.activations = model_planned_activation_bytes(cfg, layout->tp, layout->pp_stage, slots,
                                                     head_budget);
    return mem;
}

PlanMemory plan_rank_memory(const Config *cfg, int world, int stage, int dp_rank, int tp_rank,
                            int64_t head_budget)
{
    Layout layout = layout_at(&cfg->parallel, layout_resolve_dp(&cfg->parallel, world), stage,
                              dp_rank, tp_rank);
    return layout_memory(cfg, &layout, head_budget);
}

static int64_t total(PlanMemory m) { return m.weights + m.grads + m.optimizer + m.activations; }

/* The largest rank: the first stage (embeddings, the most microbatches in
 * flight), stage 1 (a middle stage with the most layers: earlier stages
 * take the spare ones) and the last (the head); the first and last
 * replica (the last ZeRO block may be short); TP rank 0 (TP ranks hold the
 * same sizes). */
PlanMemory plan_largest_rank(const Config *cfg, int world, int64_t head_budget, int *stage_out)
{
    PlanMemory best = {0};
    int dp = layout_resolve_dp(&cfg->parallel, world), pp = cfg->parallel.pp;
    int stages[3] = {0, pp > 2 ? 1 : 0, pp - 1};
    int last_replica = plan_replicas(cfg, world) > 1;
    for (int k = 0; k < 3; k++) {
        int s = stages[k];
        for (int j = 0; j <= last_replica; j++) {
            Layout l = layout_at(&cfg->parallel, dp, s, j ? dp - 1 : 0, 0);
            if (j)
                l.cp_rank = l.cp - 1;
            PlanMemory m = layout_memory(cfg, &l, head_budget);
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

/* Context parallelism's bytes per layer and microbatch: each collective
 * moves the q|k|v of a whole sequence's B x T tokens, 3C/tp wide (the
 * heads' k and v expanded: model_cp.c gathers the attention's input),
 * and a ring sends (cp-1)/cp of it. */
static double cp_layer_bytes(const Config *cfg)
{
    const ModelConfig *mc = &cfg->model;
    double a = (double)ops_dtype_size(model_dtype(cfg->train.precision));
    double qkv = (double)cfg->train.micro_batch * mc->seq_len * 3.0 * mc->n_embd
                 / cfg->parallel.tp * a;
    return ring_share(qkv, cfg->parallel.cp);
}

/* Bytes a rank sends per step to reduce n fp32 gradients over `group`
 * ranks and, under ZeRO, gather their a-byte weights. */
static double dp_bytes(int zero, double n, int group, int ga, double a)
{
    switch (zero) {
    case 1: return ring_share(4 * n, group) + ring_share(a * n, group);
    case 2: return ga * ring_share(4 * n, group) + ring_share(a * n, group);
    case 3: return ga * ring_share(4 * n, group) + 2.0 * ga * ring_share(a * n, group);
    }
    return ring_allreduce(4 * n, group);
}

PlanComm plan_communication(const Config *cfg, int world)
{
    const ModelConfig *mc = &cfg->model;
    const TrainConfig *t = &cfg->train;
    PlanComm c = {0};
    int tp = cfg->parallel.tp, pp = cfg->parallel.pp;
    /* the DP reduction runs over the replicas: dp x cp ranks */
    int group = plan_replicas(cfg, world);
    int ga = t->grad_accum, zero = zero_stage(cfg->parallel.zero, group);
    double a = (double)ops_dtype_size(model_dtype(cfg->train.precision));
    /* a microbatch's local tokens: 1/cp of each sequence */
    double tokens = (double)t->micro_batch * plan_rank_seq_len(cfg);
    double act = tokens * mc->n_embd * a;
    int layers, recomputed = model_stage_recomputes(cfg, 0, &layers);
    /* per block: two all-reduces forward, two backward, two more when the
     * block is recomputed; the embedding's and the head's come on top.
     * Sequence parallelism turns each into a reduce-scatter and an
     * all-gather (the same bytes) and gathers the norms' outputs again
     * in the backward: two all-gathers, half an all-reduce each, more. */
    int sp = cfg->parallel.sequence_parallel && tp > 1;
    double per_mb = ((sp ? 5.0 : 4.0) * layers + 2.0 * recomputed + 2.0) * act;
    c.tp = ga * ring_allreduce(per_mb, tp);
    if (sp) /* the norms' gradients, once a step (zero.c) */
        c.tp += ring_allreduce(4.0 * layers * (arch_of(mc)->norm_bias ? 4 : 2) * mc->n_embd, tp);
    /* replicated key/value heads: dk and dv summed over the replicas in
     * every block's backward (arch_llama.c) */
    int replicas = arch_kv_replicas(mc, tp);
    if (replicas > 1) {
        double kv = tokens * (mc->n_embd / mc->n_head) * a;
        c.tp += ga * layers * 2.0 * ring_allreduce(kv, replicas);
    }
    /* attention over the cp group: three collectives a layer, one more
     * where the layer's forward runs again (recompute) */
    c.cp_layer = cp_layer_bytes(cfg);
    c.cp = ga * (3.0 * layers + recomputed) * c.cp_layer;
    /* an activation out and a gradient back per microbatch and chunk, a
     * slice each under sequence parallelism */
    c.pp = pp > 1 ? 2.0 * ga * cfg->parallel.virtual_stages * act / (sp ? tp : 1) : 0.0;
    /* the routed experts reduce over their own replicas, dp / ep x cp */
    double experts = (double)params_local_expert_count(cfg, 0, 0);
    double dense = (double)params_local_count(cfg, 0, 0) - experts;
    int ep = cfg->parallel.ep > 0 ? cfg->parallel.ep : 1, expert_group = group / ep;
    c.dp = dp_bytes(zero, dense, group, ga, a)
           + dp_bytes(zero_stage(cfg->parallel.zero, expert_group), experts, expert_group, ga, a);
    c.ep_layer = plan_moe_alltoall_bytes(cfg);
    c.ep = ga * plan_moe_alltoalls(cfg, 0) * c.ep_layer;
    if (pp > 1 && mc->tie_embeddings)
        c.embed = ring_allreduce(4.0 * mc->vocab_size / tp * mc->n_embd / group, 2);
    return c;
}

/* ---- schedules ---------------------------------------------------------- */

static Config with_schedule(const Config *cfg, ScheduleKind kind, int v)
{
    Config c = *cfg;
    c.parallel.schedule = kind;
    c.parallel.virtual_stages = v;
    return c;
}

/* Whether a candidate passes config_validate's cross-key rules, which
 * apply the one statement of the layout's (layout.c: the interleaved
 * schedule's divisibility, sequence parallelism's equal slices), so plan
 * never offers what the trainer refuses. */
static int allowed(const Config *c)
{
    return config_validate(c, fail_stream(0)) == 0;
}

/* Whether cfg's layout can run the interleaved schedule with v chunks a
 * stage. */
static int interleaves(const Config *cfg, int v)
{
    Config c = with_schedule(cfg, SCHED_INTERLEAVED, v);
    return allowed(&c);
}

int plan_schedules(const Config *cfg, Config *out, int max)
{
    int n = 0;
    if (n < max)
        out[n++] = with_schedule(cfg, SCHED_1F1B, 1);
    if (n < max)
        out[n++] = with_schedule(cfg, SCHED_GPIPE, 1);
    for (int v = 2; v <= PLAN_MAX_CHUNKS && n < max; v++)
        if (interleaves(cfg, v))
            out[n++] = with_schedule(cfg, SCHED_INTERLEAVED, v);
    if (n < max)
        out[n++] = with_schedule(cfg, SCHED_ZB1, 1);
    return n;
}

/* The bubble with equal stages and f = b = w: what the schedule itself
 * costs, before the hardware's split of the work (the roofline's). */
double plan_bubble(const Config *cfg)
{
    const ParallelConfig *p = &cfg->parallel;
    return schedule_simulate(p->schedule, p->pp, p->virtual_stages, cfg->train.grad_accum,
                             (StageCost){1.0, 1.0, 1.0}, NULL);
}

/* Among the candidates whose largest rank fits mem_gib (all, when it is
 * not positive): the smallest simulated bubble, then the least memory.
 * The interleaved schedule's extra messages are left to the roofline,
 * which prices them. */
static int recommend(const Config *cands, int n, int world, double mem_gib)
{
    int best = -1;
    double best_bubble = 0.0, best_gib = 0.0;
    for (int i = 0; i < n; i++) {
        double gib = total(plan_largest_rank(&cands[i], world, plan_head_budget(&cands[i], mem_gib),
                                             NULL)) / (MIB * 1024.0);
        double bubble = plan_bubble(&cands[i]);
        if (mem_gib > 0 && gib > mem_gib)
            continue;
        if (best < 0 || bubble < best_bubble - 1e-12
            || (bubble < best_bubble + 1e-12 && gib < best_gib)) {
            best = i;
            best_bubble = bubble;
            best_gib = gib;
        }
    }
    return best;
}

/* Every schedule on this layout: its bubble, the largest rank's memory
 * and the pipeline messages of a step; then the one to use, which goes to
 * *advice (left alone when none fits). */
static void print_schedules(const Config *cfg, int world, double mem_gib, Config *advice,
                            FILE *out)
{
    Config cands[PLAN_MAX_CHUNKS + 3];
    int n = plan_schedules(cfg, cands, PLAN_MAX_CHUNKS + 3);
    fprintf(out, "schedules (equal stages, f = b = w, simulated; memory of the largest rank):\n");
    fprintf(out, "  %-12s %2s %8s %16s %12s %9s\n", "schedule", "v", "bubble", "activations MiB",
            "total MiB", "messages");
    for (int i = 0; i < n; i++) {
        const Config *c = &cands[i];
        PlanMemory m = plan_largest_rank(c, world, plan_head_budget(c, mem_gib), NULL);
        fprintf(out, "  %-12s %2d %7.1f%% %16.3f %12.3f %9lld\n",
                schedule_name(c->parallel.schedule), c->parallel.virtual_stages,
                100.0 * plan_bubble(c), m.activations / MIB, total(m) / MIB,
                schedule_messages(c->parallel.schedule, c->parallel.pp,
                                  c->parallel.virtual_stages, c->train.grad_accum));
    }
    int best = recommend(cands, n, world, mem_gib);
    if (best < 0) {
        fprintf(out, "recommended schedule: none fits %.1f GiB\n", mem_gib);
        return;
    }
    const ParallelConfig *p = &cands[best].parallel;
    *advice = cands[best];
    fprintf(out, "recommended schedule: %s", schedule_name(p->schedule));
    if (p->schedule == SCHED_INTERLEAVED)
        fprintf(out, ", virtual_stages = %d", p->virtual_stages);
    fprintf(out, " (the smallest bubble%s)\n", mem_gib > 0 ? " that fits" : "");
}

/* ---- printing ----------------------------------------------------------- */

/* One row of the memory table, as the trainer prints it (train_setup.c). */
static void print_memory_row(PlanMemory m, int host, FILE *out)
{
    fprintf(out, "%10.3f / %10.3f / %10.3f / %10.3f", m.weights / MIB, m.grads / MIB,
            m.optimizer / MIB, m.activations / MIB);
    if (host)
        fprintf(out, " / %10.3f", m.host / MIB);
}

static int same_memory(PlanMemory a, PlanMemory b)
{
    return a.weights == b.weights && a.grads == b.grads && a.optimizer == b.optimizer
           && a.activations == b.activations && a.host == b.host;
}

/* Rows of the memory table, runs of equal ones as one: "rank   3: ..." or
 * "ranks 0-3: ..." (what = "rank"), "stage ..." or "stages ..." with how
 * many ranks each holds. */
static void print_memory_rows(const PlanMemory *rows, int n, const char *what, int ranks_each,
                              int host, FILE *out)
{
    for (int i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && same_memory(rows[i], rows[j]); j++)
            continue;
        if (j - i == 1)
            fprintf(out, "  %s %3d: ", what, i);
        else
            fprintf(out, "  %ss %d-%d: ", what, i, j - 1);
        print_memory_row(rows[i], host, out);
        if (ranks_each)
            fprintf(out, "  (each of %s %d ranks)", j - i == 1 ? "its" : "their", ranks_each);
        fprintf(out, "\n");
    }
}

/* Every rank up to 16 ranks, else every stage (its DP, CP and TP rank 0). */
static void print_memory_table(const Config *cfg, int world, int64_t head_budget, FILE *out)
{
    int host = plan_offloads(cfg);
    fprintf(out, "memory per rank (MiB): weights / grads / optimizer / activations%s\n",
            host ? " / host (offloaded)" : "");
    int dp = layout_resolve_dp(&cfg->parallel, world), tp = cfg->parallel.tp;
    int pp = cfg->parallel.pp, by_rank = world <= 16, n = by_rank ? world : pp;
    PlanMemory *rows = TRI_MALLOC((size_t)n * sizeof *rows, "plan's memory table");
    for (int i = 0; i < n; i++) {
        Layout l = by_rank ? layout_of_rank(&cfg->parallel, world, i)
                           : layout_at(&cfg->parallel, dp, i, 0, 0);
        rows[i] = layout_memory(cfg, &l, head_budget);
    }
    print_memory_rows(rows, n, by_rank ? "rank" : "stage",
                      by_rank ? 0 : plan_replicas(cfg, world) * tp, host, out);
    free(rows);
}

static void print_costs(const Config *cfg, int world, FILE *out)
{
    const ModelConfig *mc = &cfg->model;
    const TrainConfig *t = &cfg->train;
    int dp = layout_resolve_dp(&cfg->parallel, world), pp = cfg->parallel.pp;
    double seqs = (double)t->micro_batch * t->grad_accum * dp, tokens = seqs * mc->seq_len;
    double flops = 3.0 * model_forward_flops(mc, tokens);
    int v = cfg->parallel.virtual_stages;
    fprintf(out, "model: %.3fM parameters; %.0f sequences, %.0f tokens per step\n",
            params_logical_count(mc) / 1e6, seqs, tokens);
    fprintf(out, "flops per step: %.4g (model, 3 x forward), %.4g per rank\n", flops,
            flops / world);
    fprintf(out, "pipeline bubble (%s, %d microbatches, %d chunk%s a stage, f = b = w): %.1f%%; "
            "%lld pipeline messages a step\n",
            schedule_name(cfg->parallel.schedule), t->grad_accum, v, v > 1 ? "s" : "",
            100.0 * plan_bubble(cfg),
            schedule_messages(cfg->parallel.schedule, pp, v, t->grad_accum));
    PlanComm c = plan_communication(cfg, world);
    fprintf(out, "communication per step, bytes sent by one rank: tp %.4g, dp %.4g (zero %d), pp %.4g in %d messages, tied embedding %.4g, cp %.4g\n",
            c.tp, c.dp, cfg->parallel.zero, c.pp, pp > 1 ? 2 * t->grad_accum : 0, c.embed, c.cp);
    plan_moe_print(cfg, c.ep, out);
    if (cfg->parallel.cp > 1)
        fprintf(out, "context parallelism: cp %d, %d tokens of each sequence a rank; per layer and "
                "microbatch %.4g bytes in each of 3 collectives over cp (q|k|v all-gathered "
                "forward, again and its gradient reduce-scattered backward), attention 1/%d of "
                "the causal work a rank (zigzag chunks)\n",
                cfg->parallel.cp, plan_rank_seq_len(cfg), c.cp_layer, cfg->parallel.cp);
}

/* Whether sequence parallelism slices anything on cfg's tp, and the
 * layout's rules allow it there (layout_sequence_rules_check, through
 * config_validate). */
static int sequence_parallel_fits(const Config *cfg)
{
    Config c = *cfg;
    c.parallel.sequence_parallel = 1;
    return c.parallel.tp > 1 && allowed(&c);
}

/* One layout and schedule with each ZeRO stage, recompute none and full,
 * offload where it frees device memory, and sequence parallelism off and
 * (where it applies) on. */
static int visit_options(Config c, int offloads, PlanVisit visit, void *ctx)
{
    int visited = 0, sps = sequence_parallel_fits(&c);
    for (int z = 0; z <= 3; z++)
        for (int rc = 0; rc <= 1; rc++)
            for (int off = 0; off <= offloads; off++)
                for (int sp = 0; sp <= sps; sp++) {
                    c.parallel.zero = z;
                    c.train.recompute = rc ? RECOMPUTE_FULL : RECOMPUTE_NONE;
                    c.train.offload = off ? OFFLOAD_OPTIMIZER : OFFLOAD_NONE;
                    c.parallel.sequence_parallel = sp;
                    visit(&c, ctx);
                    visited++;
                }
    return visited;
}

/* Every option of c's layout with the schedules worth trying: GPipe
 * never beats 1F1B (the same bubble, more memory); two chunks take most
 * of what interleaving gives. With one stage 1F1B is every schedule's
 * step in the least memory. */
static int visit_schedules(const Config *c, int pp, int offloads, PlanVisit visit, void *ctx)
{
    int visited = visit_options(*c, offloads, visit, ctx);
    if (pp > 1)
        visited += visit_options(with_schedule(c, SCHED_ZB1, 1), offloads, visit, ctx);
    if (interleaves(c, 2))
        visited += visit_options(with_schedule(c, SCHED_INTERLEAVED, 2), offloads, visit, ctx);
    return visited;
}

/* Every schedule and option of the layout dp x pp x cp x tp, if the
 * layout's rules and the config's accept it at the global batch. */
/* Where the layout cannot generate (layout_sample_fits: cp > 1, ep > 1)
 * the run samples nothing, as config_load makes [log] sample_tokens =
 * auto there. */
static void no_sample_where_unfit(Config *c)
{
    if (!layout_sample_fits(c))
        c->log.sample_tokens = 0;
}

static int visit_layout(const Config *cfg, int world, int64_t global, int pp, int cp, int tp,
                        int offloads, PlanVisit visit, void *ctx)
{
    int64_t mb = cfg->train.micro_batch;
    int dp = world / (tp * cp * pp);
    if (world % (tp * cp * pp) || global % (mb * dp))
        return 0;
    Config c = with_schedule(cfg, SCHED_1F1B, 1);
    c.parallel.tp = tp;
    c.parallel.cp = cp;
    c.parallel.pp = pp;
    c.parallel.dp = dp;
    c.parallel.sequence_parallel = 0;
    c.train.grad_accum = (int)(global / (mb * dp));
    c.parallel.ep = 1;
    no_sample_where_unfit(&c);
    /* cp's own rules (seq_len a multiple of 2 cp) are the config's */
    if (layout_check(&c, world, fail_stream(0)) != 0 || (cp > 1 && !allowed(&c)))
        return 0;
    /* experts split over ep of the dp ranks: 1, 2, 4, ... while ep divides
     * dp and n_expert (where one does not, neither do its multiples);
     * ep's own rules are the config's */
    int visited = 0, experts = cfg->model.n_expert;
    for (int ep = 1; ep == 1 || (experts > 0 && dp % ep == 0 && experts % ep == 0); ep *= 2) {
        c.parallel.ep = ep;
        no_sample_where_unfit(&c);
        if (ep > 1 && (layout_check(&c, world, fail_stream(0)) != 0 || !allowed(&c)))
            continue;
        visited += visit_schedules(&c, pp, offloads, visit, ctx);
    }
    return visited;
}

int plan_each_layout(const Config *cfg, int world, int max_tp, PlanVisit visit, void *ctx)
{
    int64_t mb = cfg->train.micro_batch;
    int64_t global = mb * cfg->train.grad_accum * layout_resolve_dp(&cfg->parallel, world);
    int visited = 0, offloads = on_gpu(cfg); /* on the CPU offload frees nothing */
    for (int tp = 1; tp <= max_tp && tp <= world; tp *= 2)
        for (int cp = 1; cp <= PLAN_MAX_CP && cp <= world / tp; cp *= 2)
            /* pp <= n_layer (layout_check), which also keeps the product
             * from overflowing at a world near INT_MAX */
            for (int pp = 1; pp <= world / (tp * cp) && pp <= cfg->model.n_layer; pp++)
                visited += visit_layout(cfg, world, global, pp, cp, tp, offloads, visit, ctx);
    return visited;
}

/* A layout of the --mem search that fits, and what it is sorted by. */
typedef struct {
    Config c;
    double gib, bubble;
    double work;   /* compute with its bubble, against the unpipelined step */
} Fit;

typedef struct {
    int world, n, cap;
    double mem_gib;
    double least_cp1_gib;   /* the least memory of a layout at cp 1, fitting or not */
    double least_ep1_gib;   /* ... and at ep 1 */
    Fit *fits;
    /* the last bubble simulated, and the pipeline it is of: the options
     * of one layout and schedule (visit_options) share it, and the
     * simulation is most of the search's time (the more so at cp > 1,
     * whose fewer DP ranks take more microbatches) */
    ParallelConfig bubble_of;
    int bubble_ga;
    double bubble;
} FitList;

/* plan_bubble(c), simulated again only when c's pipeline differs from the
 * last one's. */
static double fit_bubble(FitList *t, const Config *c)
{
    const ParallelConfig *p = &c->parallel, *last = &t->bubble_of;
    if (t->bubble_ga != c->train.grad_accum || last->schedule != p->schedule
        || last->pp != p->pp || last->virtual_stages != p->virtual_stages) {
        t->bubble = plan_bubble(c);
        t->bubble_of = *p;
        t->bubble_ga = c->train.grad_accum;
    }
    return t->bubble;
}

/* The work of a step relative to one without recompute or bubble: full
 * recompute runs the forward twice (4 passes of work for 3), and the
 * bubble idles the rest. */
static double relative_work(const Config *c, double bubble)
{
    return (c->train.recompute == RECOMPUTE_NONE ? 1.0 : 4.0 / 3.0) / (1.0 - bubble);
}

static void collect_fit(const Config *c, void *ctx)
{
    FitList *t = ctx;
    double gib = total(plan_largest_rank(c, t->world, plan_head_budget(c, t->mem_gib), NULL))
                 / (MIB * 1024.0);
    if (c->parallel.cp == 1 && (t->least_cp1_gib == 0.0 || gib < t->least_cp1_gib))
        t->least_cp1_gib = gib;
    if (c->parallel.ep == 1 && (t->least_ep1_gib == 0.0 || gib < t->least_ep1_gib))
        t->least_ep1_gib = gib;
    if (gib > t->mem_gib)
        return;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->fits = TRI_REALLOC(t->fits, (size_t)t->cap * sizeof *t->fits, "plan's layouts");
    }
    double bubble = fit_bubble(t, c);
    t->fits[t->n++] = (Fit){*c, gib, bubble, relative_work(c, bubble)};
}

static int compare_int(int a, int b) { return (a > b) - (a < b); }

/* Best first: the least relative work, then without offload (its
 * transfers are not in the work), then less context, tensor and expert
 * parallelism and a lower ZeRO stage (less communication), then the least
 * memory. */
static int better_fit(const void *pa, const void *pb)
{
    const Fit *a = pa, *b = pb;
    if (fabs(a->work - b->work) > 1e-9)
        return a->work < b->work ? -1 : 1;
    int by = compare_int(plan_offloads(&a->c), plan_offloads(&b->c));
    if (!by)
        by = compare_int(a->c.parallel.cp, b->c.parallel.cp);
    if (!by)
        by = compare_int(a->c.parallel.tp, b->c.parallel.tp);
    if (!by)
        by = compare_int(a->c.parallel.ep, b->c.parallel.ep);
    if (!by)
        by = compare_int(a->c.parallel.zero, b->c.parallel.zero);
    if (!by)
        by = (a->gib > b->gib) - (a->gib < b->gib);
    return by;
}

static void print_fit(const Fit *f, FILE *out)
{
    const Config *c = &f->c;
    int v = c->parallel.virtual_stages;
    char ep[16] = "";
    if (c->parallel.ep > 1)
        snprintf(ep, sizeof ep, " ep=%d", c->parallel.ep);
    fprintf(out, "  %5d %5d %5d %3d %4d %4d %9s %9s %10.2f %5.1f%% %s%s%s%s\n", c->parallel.dp,
            c->parallel.pp, c->parallel.tp, c->parallel.cp, c->train.grad_accum, c->parallel.zero,
            c->train.recompute == RECOMPUTE_FULL ? "full" : "none",
            plan_offloads(c) ? "optimizer" : "none", f->gib, 100.0 * f->bubble,
            schedule_name(c->parallel.schedule), v > 1 ? " v=2" : "",
            c->parallel.sequence_parallel ? " sp" : "", ep);
}

/* The layouts of plan_each_layout (tp up to 8) that fit mem_gib, best
 * first, the first PLAN_FITS_SHOWN of them unless all; the best goes to
 * *advice (left alone when none fits), with why it has cp > 1 if so. */
static void print_fits(const Config *cfg, int world, double mem_gib, int all, Config *advice,
                       FILE *out)
{
    int64_t global = (int64_t)cfg->train.micro_batch * cfg->train.grad_accum
                     * layout_resolve_dp(&cfg->parallel, world);
    fprintf(out, "\nlayouts of %d ranks within %.1f GiB per device, global batch %lld (largest rank), "
            "best first (least work with recompute and bubble, then no offload, less cp, less "
            "tp%s, lower zero, less memory):\n", world, mem_gib, (long long)global,
            cfg->model.n_expert > 0 ? ", less ep" : "");
    fprintf(out, "  %5s %5s %5s %3s %4s %4s %9s %9s %10s %6s %s\n", "dp", "pp", "tp", "cp", "ga",
            "zero", "recompute", "offload", "GiB", "bubble", "schedule");
    FitList t = {.world = world, .mem_gib = mem_gib};
    Config gpu = *cfg;
    plan_assume_gpu(&gpu);
    plan_each_layout(&gpu, world, 8, collect_fit, &t);
    if (!t.n)
        fprintf(out, "  none: more ranks, a smaller micro_batch, or more memory\n");
    else
        qsort(t.fits, (size_t)t.n, sizeof *t.fits, better_fit);
    int shown = all || t.n <= PLAN_FITS_SHOWN ? t.n : PLAN_FITS_SHOWN;
    for (int i = 0; i < shown; i++)
        print_fit(&t.fits[i], out);
    if (shown < t.n)
        fprintf(out, "  ... and %d more (--all shows them)\n", t.n - shown);
    if (t.n) {
        *advice = t.fits[0].c;
        plan_print_cp_reason(advice, t.least_cp1_gib, mem_gib, "less work", out);
        plan_print_ep_reason(advice, t.least_ep1_gib, mem_gib, "less work", out);
    }
    free(t.fits);
}

int plan_print(const Config *cfg, int world, double mem_gib, int all, Config *advice, FILE *out,
               FILE *err)
{
    if (layout_check(cfg, world, err))
        return 1;
    int dp = layout_resolve_dp(&cfg->parallel, world), stage = 0;
    *advice = *cfg;
    fprintf(out, "plan: %d ranks = dp %d x pp %d x cp %d x tp %d, zero %d, %s, recompute %s%s\n",
            world, dp, cfg->parallel.pp, cfg->parallel.cp, cfg->parallel.tp, cfg->parallel.zero,
            ops_dtype_name(model_dtype(cfg->train.precision)),
            cfg->train.recompute == RECOMPUTE_NONE ? "none"
            : cfg->train.recompute == RECOMPUTE_FULL ? "full" : "every:K",
            plan_offloads(cfg) ? ", offload optimizer" : "");
    print_costs(cfg, world, out);
    print_schedules(cfg, world, mem_gib, advice, out);
    int64_t head_budget = plan_head_budget(cfg, mem_gib);
    print_memory_table(cfg, world, head_budget, out);
    PlanMemory big = plan_largest_rank(cfg, world, head_budget, &stage);
    fprintf(out, "largest rank: %.2f GiB (stage %d)", total(big) / (MIB * 1024.0), stage);
    if (plan_offloads(cfg))
        fprintf(out, " on its device, and %.2f GiB of host memory (offload)",
                big.host / (MIB * 1024.0));
    fprintf(out, "\n");
    if (mem_gib > 0)
        print_fits(cfg, world, mem_gib, all, advice, out);
    return 0;
}
