/*
 * layout.c - the layout of a run and its rules; see layout.h for the rank
 * order and why. Each rule is tested once here: the world-free ones
 * (layout_rules_check, layout_sequence_rules_check) hand config_validate
 * the key to name and why, in the words its messages have always had;
 * layout_check words what it shares with them for the world it checks.
 */
#include "layout.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "arch_sizes.h"
#include "fail.h"
#include "reason.h"

int layout_resolve_dp(const ParallelConfig *p, int world)
{
    return p->dp ? p->dp : world / (p->pp * p->cp * p->tp);
}

/* The rules layout_check and layout_rules_check share, each stated once
 * and worded by each. */
static int heads_split(const ModelConfig *m, int tp) { return m->n_head % tp == 0; }
static int stages_hold_layers(const ModelConfig *m, int pp) { return pp <= m->n_layer; }

static int refuse(ConfigKeyProblem *p, const char *section, const char *key)
{
    p->section = section;
    p->key = key;
    return 1;
}

/* The interleaved schedule's rules (Megatron's): each stage holds
 * virtual_stages equal chunks of layers, and microbatches go round the
 * ring of stages in groups of pp. */
static int virtual_stages_check(const Config *c, ConfigKeyProblem *p)
{
    const ParallelConfig *pl = &c->parallel;
    if (pl->schedule != SCHED_INTERLEAVED) {
        if (pl->virtual_stages == 1)
            return 0;
        reason_set(p->why, sizeof p->why, "applies to schedule = interleaved only (this "
                   "config's schedule is %s)", pl->schedule == SCHED_GPIPE ? "gpipe" : "1f1b");
        return refuse(p, "parallel", "virtual_stages");
    }
    if (pl->virtual_stages < 2) {
        reason_set(p->why, sizeof p->why, "schedule = interleaved needs virtual_stages >= 2 "
                   "(the chunks of layers each stage holds)");
        return refuse(p, "parallel", "virtual_stages");
    }
    if (pl->pp < 2) {
        reason_set(p->why, sizeof p->why, "schedule = interleaved needs pp >= 2 (it shrinks "
                   "the bubble between pipeline stages)");
        return refuse(p, "parallel", "pp");
    }
    long long chunks = (long long)pl->pp * pl->virtual_stages;
    if (c->model.n_layer % chunks) {
        reason_set(p->why, sizeof p->why, "n_layer (%d) is not divisible by pp * "
                   "virtual_stages = %lld (every chunk holds the same number of layers)",
                   c->model.n_layer, chunks);
        return refuse(p, "parallel", "virtual_stages");
    }
    if (c->train.grad_accum % pl->pp) {
        reason_set(p->why, sizeof p->why, "schedule = interleaved runs microbatches in groups "
                   "of pp: grad_accum must be a multiple of pp (%d)", pl->pp);
        return refuse(p, "train", "grad_accum");
    }
    return 0;
}

/* Products of layout sizes are ints everywhere (layout_check, MPI): none
 * may exceed the largest MPI world, INT_MAX ranks. The largest size is the
 * key to change; cp is named where it is more than 1, so the words of a
 * run without context parallelism stay as they were. */
static int layout_products_check(const ParallelConfig *pl, ConfigKeyProblem *p)
{
    long long pct = (long long)pl->pp * pl->cp * pl->tp, world = pct * (pl->dp ? pl->dp : 1);
    if (pct <= INT_MAX && world <= INT_MAX)
        return 0;
    const char *key = "tp";
    int largest = pl->tp;
    const struct { const char *key; int size; } others[] = {
        {"pp", pl->pp}, {"cp", pl->cp}, {"dp", pl->dp},
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        if (others[i].size > largest) {
            key = others[i].key;
            largest = others[i].size;
        }
    char names[32] = "", values[64] = "";
    if (pl->dp) {
        snprintf(names, sizeof names, "dp * ");
        snprintf(values, sizeof values, "%d * ", pl->dp);
    }
    size_t nn = strlen(names), nv = strlen(values);
    snprintf(names + nn, sizeof names - nn, pl->cp > 1 ? "pp * cp * tp" : "pp * tp");
    if (pl->cp > 1)
        snprintf(values + nv, sizeof values - nv, "%d * %d * %d", pl->pp, pl->cp, pl->tp);
    else
        snprintf(values + nv, sizeof values - nv, "%d * %d", pl->pp, pl->tp);
    reason_set(p->why, sizeof p->why, "%s = %s = %lld is more ranks than an MPI world holds "
               "(at most %d)", names, values, pl->dp ? world : pct, INT_MAX);
    return refuse(p, "parallel", key);
}

/* Expert parallelism splits each MoE layer's n_expert experts over ep of
 * the data-parallel ranks (layout.h), so ep needs experts, divides them,
 * and divides dp: the dp given, or, from layout_check, the world's (0:
 * not known yet). Context parallelism with experts is not built. */
static int experts_check(const Config *c, int dp, ConfigKeyProblem *p)
{
    const ParallelConfig *pl = &c->parallel;
    int experts = c->model.n_expert;
    if (pl->ep > 1 && experts == 0) {
        reason_set(p->why, sizeof p->why, "applies to n_expert > 0 only (this config's "
                   "n_expert is 0: a dense model has no experts to split)");
        return refuse(p, "parallel", "ep");
    }
    if (experts % pl->ep) {
        reason_set(p->why, sizeof p->why, "n_expert (%d) is not divisible by ep: each ep rank "
                   "holds n_expert / ep experts of every MoE layer", experts);
        return refuse(p, "parallel", "ep");
    }
    if (dp % pl->ep) {
        reason_set(p->why, sizeof p->why, "dp (%d) is not divisible by ep: the expert-parallel "
                   "ranks are carved out of the data-parallel ones", dp);
        return refuse(p, "parallel", "ep");
    }
    if (pl->cp > 1 && experts > 0) {
        reason_set(p->why, sizeof p->why, "context parallelism with a mixture of experts "
                   "(n_expert = %d) is not built: MoE models train at cp = 1", experts);
        return refuse(p, "parallel", "cp");
    }
    return 0;
}

int layout_rules_check(const Config *c, ConfigKeyProblem *p)
{
    const ModelConfig *m = &c->model;
    const ParallelConfig *pl = &c->parallel;
    if (!stages_hold_layers(m, pl->pp)) {
        reason_set(p->why, sizeof p->why, "more pipeline stages than layers (n_layer = %d)",
                   m->n_layer);
        return refuse(p, "parallel", "pp");
    }
    if (layout_products_check(pl, p))
        return 1;
    if (!heads_split(m, pl->tp)) {
        reason_set(p->why, sizeof p->why, "n_head (%d) is not divisible by tp (heads are split "
                   "across TP ranks)", m->n_head);
        return refuse(p, "parallel", "tp");
    }
    if (experts_check(c, pl->dp, p))
        return 1;
    return virtual_stages_check(c, p);
}

int layout_sample_fits(const Config *c)
{
    /* generation runs one whole row at a time (no cp rank holds one):
     * T tokens sliced over TP */
    return c->parallel.cp == 1 && c->parallel.ep == 1
        && (!c->parallel.sequence_parallel || c->model.seq_len % c->parallel.tp == 0);
}

int layout_sample_why(const Config *c, char *why, size_t n)
{
    if (c->parallel.cp > 1)
        return reason_set(why, n, "generation needs [parallel] cp = 1 (this config's is %d): it "
                          "runs whole rows of seq_len tokens, which context parallelism cuts "
                          "over cp ranks", c->parallel.cp);
    if (c->parallel.ep > 1)
        return reason_set(why, n, "generation needs [parallel] ep = 1 (this config's is %d): it "
                          "runs without the all-to-all that sends tokens to the experts "
                          "expert parallelism splits over ep ranks", c->parallel.ep);
    return reason_set(why, n, "generation with sequence_parallel needs [model] seq_len (%d) "
                      "divisible by tp (%d)", c->model.seq_len, c->parallel.tp);
}

/* Context parallelism cuts each sequence into 2 cp chunks, two for each
 * cp rank (the first and the mirrored last, so that every rank does the
 * same share of causal attention's work); cp = 1 cuts nothing. */
static int chunks_check(const Config *c, ConfigKeyProblem *p)
{
    long long chunks = 2LL * c->parallel.cp;
    if (c->parallel.cp == 1 || c->model.seq_len % chunks == 0)
        return 0;
    reason_set(p->why, sizeof p->why, "needs [model] seq_len (%d) divisible by 2 * cp = %lld: "
               "each sequence is cut into 2 cp chunks, two for each cp rank",
               c->model.seq_len, chunks);
    return refuse(p, "parallel", "cp");
}

/* Each TP rank's slice of the microbatch's flattened tokens (model.c):
 * with context parallelism, of this cp rank's share of them. */
static int slices_check(const Config *c, ConfigKeyProblem *p)
{
    const ParallelConfig *pl = &c->parallel;
    long long tokens = (long long)c->train.micro_batch * c->model.seq_len / pl->cp;
    if (!pl->sequence_parallel || tokens % pl->tp == 0)
        return 0;
    if (pl->cp > 1)
        reason_set(p->why, sizeof p->why, "needs [train] micro_batch * [model] seq_len / "
                   "[parallel] cp = %d * %d / %d = %lld divisible by tp (%d): each TP rank holds "
                   "an equal slice of its cp rank's tokens of the microbatch",
                   c->train.micro_batch, c->model.seq_len, pl->cp, tokens, pl->tp);
    else
        reason_set(p->why, sizeof p->why, "needs [train] micro_batch * [model] seq_len = %d * "
                   "%d = %lld divisible by tp (%d): each TP rank holds an equal slice of the "
                   "microbatch's tokens", c->train.micro_batch, c->model.seq_len, tokens, pl->tp);
    return refuse(p, "parallel", "sequence_parallel");
}

int layout_sequence_rules_check(const Config *c, ConfigKeyProblem *p)
{
    if (chunks_check(c, p) || slices_check(c, p))
        return 1;
    if (c->log.sample_tokens > 0 && !layout_sample_fits(c)) {
        char why[sizeof p->why];
        layout_sample_why(c, why, sizeof why);
        /* the sequence-parallel reason says why a row matters */
        reason_set(p->why, sizeof p->why, "%s%s", why,
                   c->parallel.cp > 1 || c->parallel.ep > 1 ? ""
                                                            : ": it runs one row of seq_len tokens");
        return refuse(p, "log", "sample_tokens");
    }
    return 0;
}

int layout_check(const Config *cfg, int world, FILE *err)
{
    const ParallelConfig *p = &cfg->parallel;
    const ModelConfig *m = &cfg->model;
    int dp = layout_resolve_dp(p, world);
    /* cp is named where it is more than 1: the messages of a run without
     * context parallelism stay as they were */
    int cp_named = p->cp > 1;
    char cp_key[16] = "", cp_value[24] = "";
    if (cp_named) {
        snprintf(cp_key, sizeof cp_key, "cp * ");
        snprintf(cp_value, sizeof cp_value, "%d * ", p->cp);
    }
    if (p->dp == 0 && world % (p->pp * p->cp * p->tp) != 0) {
        fprintf(err, "trident: [parallel] dp = 0: the world size %d is not a multiple of pp * %stp = %d * %s%d\n",
                world, cp_key, p->pp, cp_value, p->tp);
        return 1;
    }
    if (dp * p->pp * p->cp * p->tp != world) {
        fprintf(err, "trident: [parallel] dp * pp * %stp = %d * %d * %s%d = %d, but %d ranks were started\n",
                cp_key, dp, p->pp, cp_value, p->tp, dp * p->pp * p->cp * p->tp, world);
        return 1;
    }
    if (!heads_split(m, p->tp)) {
        fprintf(err, "trident: [parallel] tp = %d: n_head (%d) is not divisible by tp; attention heads are split across TP ranks\n",
                p->tp, m->n_head);
        return 1;
    }
    int kv = arch_kv_heads(m);
    if (kv % p->tp != 0 && p->tp % kv != 0) {
        fprintf(err, "trident: [parallel] tp = %d: neither divides nor is divided by n_kv_head (%d); key/value heads are split across TP ranks or replicated on tp / n_kv_head of them\n",
                p->tp, kv);
        return 1;
    }
    if (arch_ffn_dim(m) % p->tp != 0) {
        fprintf(err, "trident: [parallel] tp = %d: ffn_dim (%d) is not divisible by tp; the MLP is split across TP ranks\n",
                p->tp, arch_ffn_dim(m));
        return 1;
    }
    if (m->n_expert > 0 && arch_moe_ffn_dim(m) % p->tp != 0) {
        fprintf(err, "trident: [parallel] tp = %d: moe_ffn_dim (%d) is not divisible by tp; each expert is split across TP ranks\n",
                p->tp, arch_moe_ffn_dim(m));
        return 1;
    }
    ConfigKeyProblem experts;
    if (experts_check(cfg, dp, &experts)) {
        fprintf(err, "trident: [parallel] %s = %d: %s\n", experts.key,
                strcmp(experts.key, "cp") ? p->ep : p->cp, experts.why);
        return 1;
    }
    if (m->vocab_size % p->tp != 0) {
        fprintf(err, "trident: [parallel] tp = %d: vocab_size (%d) is not divisible by tp; the embedding and LM head are split by vocabulary rows\n",
                p->tp, m->vocab_size);
        return 1;
    }
    if (!stages_hold_layers(m, p->pp)) {
        fprintf(err, "trident: [parallel] pp = %d: only %d layers, and every pipeline stage needs at least one\n",
                p->pp, m->n_layer);
        return 1;
    }
    if (p->node_size > 0 && (p->node_size % p->tp != 0 || world % p->node_size != 0)) {
        fprintf(err, "trident: [parallel] node_size = %d: must divide the world size (%d) and be a multiple of tp (%d), so TP groups stay inside a node\n",
                p->node_size, world, p->tp);
        return 1;
    }
    return 0;
}

/* The layout of the rank at (pp_stage, dp_rank, cp_rank, tp_rank). */
static Layout layout_place(const ParallelConfig *p, int dp, int pp_stage, int dp_rank,
                           int cp_rank, int tp_rank)
{
    Layout l = {.size = dp * p->pp * p->cp * p->tp, .dp = dp, .pp = p->pp, .tp = p->tp,
                .cp = p->cp, .dp_rank = dp_rank, .pp_stage = pp_stage, .tp_rank = tp_rank,
                .cp_rank = cp_rank, .node_size = p->node_size,
                .ep = p->ep > 0 ? p->ep : 1};
    l.ep_rank = dp_rank % l.ep;
    l.rank = layout_replica_world_rank(&l, pp_stage, layout_replica_rank(&l), tp_rank);
    return l;
}

Layout layout_at(const ParallelConfig *p, int dp, int pp_stage, int dp_rank, int tp_rank)
{
    return layout_place(p, dp, pp_stage, dp_rank, 0, tp_rank);
}

Layout layout_of_rank(const ParallelConfig *p, int world, int rank)
{
    int dp = layout_resolve_dp(p, world), tp = p->tp, cp = p->cp;
    Layout l = layout_place(p, dp, rank / (tp * cp * dp), (rank / (tp * cp)) % dp,
                            (rank / tp) % cp, rank % tp);
    l.size = world;
    return l;
}

int layout_replicas(const Layout *l)
{
    return l->dp * l->cp;
}

int layout_replica_rank(const Layout *l)
{
    return l->dp_rank * l->cp + l->cp_rank;
}

int layout_expert_replicas(const Layout *l)
{
    return l->dp / l->ep * l->cp;
}

int layout_expert_replica_rank(const Layout *l)
{
    return l->dp_rank / l->ep * l->cp + l->cp_rank;
}

int layout_replica_world_rank(const Layout *l, int pp_stage, int replica_rank, int tp_rank)
{
    return (pp_stage * layout_replicas(l) + replica_rank) * l->tp + tp_rank;
}

int layout_world_rank(const Layout *l, int pp_stage, int dp_rank, int tp_rank)
{
    return layout_replica_world_rank(l, pp_stage, dp_rank * l->cp, tp_rank);
}

void layout_stage_layers(int n_layer, int pp, int stage, int *first, int *count)
{
    int base = n_layer / pp, extra = n_layer % pp;
    *count = base + (stage < extra ? 1 : 0);
    *first = stage * base + (stage < extra ? stage : extra);
}

void layout_chunk_layers(int n_layer, int pp, int v, int stage, int chunk, int *first,
                         int *count)
{
    layout_stage_layers(n_layer, pp * v, chunk * pp + stage, first, count);
}

static int by_value(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The two-level rule, on nodes that each hold per_node of a group's dp
 * ranks when `equal` (else their counts differ): more than one node, more
 * than one rank on each. */
static int two_levels(int64_t dp, int64_t per_node, int equal)
{
    return equal && per_node > 1 && per_node < dp;
}

int layout_dp_two_level(const int *node_of, int dp)
{
    if (dp < 4) /* two nodes of two at least */
        return 0;
    int *sorted = TRI_MALLOC(sizeof *sorted * (size_t)dp, "the DP ranks' nodes");
    memcpy(sorted, node_of, sizeof *sorted * (size_t)dp);
    qsort(sorted, (size_t)dp, sizeof *sorted, by_value);
    /* the runs of equal values are the nodes: all as long as the first */
    int per_node = 1;
    while (per_node < dp && sorted[per_node] == sorted[0])
        per_node++;
    int same = dp % per_node == 0;
    for (int start = 0; same && start < dp; start += per_node)
        same = sorted[start] == sorted[start + per_node - 1]
            && (start + per_node == dp || sorted[start + per_node] != sorted[start]);
    free(sorted);
    return two_levels(dp, per_node, same);
}

/* A DP group's rank d (a replica: dp x cp of them) is world rank
 * (pp_stage replicas + d) tp + tp_rank, and a node holds node_size / tp
 * whole TP groups (layout_check), so d sits on world node
 * (pp_stage replicas + d) / (node_size / tp). */
LayoutDpSpot layout_dp_spot(const Layout *l, int dp_rank)
{
    LayoutDpSpot s = {0, dp_rank};
    if (l->node_size <= 0)
        return s;
    int64_t q = l->node_size / l->tp, start = (int64_t)l->pp_stage * layout_replicas(l);
    int64_t at = start + dp_rank, node = at / q;
    s.node = (int)(node - start / q);
    s.place = (int)(at - (s.node == 0 ? start : node * q));
    return s;
}

int layout_dp_places(const Layout *l)
{
    if (l->node_size <= 0)
        return 0;
    int64_t q = l->node_size / l->tp, dp = layout_replicas(l);
    int64_t first = q - ((int64_t)l->pp_stage * dp) % q; /* the group's ranks on its first node */
    if (first > dp)
        first = dp;
    int64_t rest = dp - first, whole = rest / q, last = rest % q;
    int equal = (whole == 0 || q == first) && (last == 0 || last == first);
    return two_levels(dp, first, equal) ? (int)first : 0;
}

int layout_dp_block(int place, int node, int nodes)
{
    return place * nodes + node;
}

int layout_dp_block_place(int block, int nodes)
{
    return block / nodes;
}
