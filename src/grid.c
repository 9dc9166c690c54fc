/*
 * grid.c - the process grid; see grid.h for the rank order and why.
 */
#include "grid.h"

#include <stdlib.h>
#include <string.h>

#include "arch_sizes.h"
#include "fail.h"

int grid_resolve_dp(const ParallelConfig *p, int world)
{
    return p->dp ? p->dp : world / (p->pp * p->tp);
}

int grid_check(const Config *cfg, int world, FILE *err)
{
    const ParallelConfig *p = &cfg->parallel;
    const ModelConfig *m = &cfg->model;
    int dp = grid_resolve_dp(p, world);
    if (p->dp == 0 && world % (p->pp * p->tp) != 0) {
        fprintf(err, "trident: [parallel] dp = 0: the world size %d is not a multiple of pp * tp = %d * %d\n",
                world, p->pp, p->tp);
        return 1;
    }
    if (dp * p->pp * p->tp != world) {
        fprintf(err, "trident: [parallel] dp * pp * tp = %d * %d * %d = %d, but %d ranks were started\n",
                dp, p->pp, p->tp, dp * p->pp * p->tp, world);
        return 1;
    }
    if (m->n_head % p->tp != 0) {
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
    if (m->vocab_size % p->tp != 0) {
        fprintf(err, "trident: [parallel] tp = %d: vocab_size (%d) is not divisible by tp; the embedding and LM head are split by vocabulary rows\n",
                p->tp, m->vocab_size);
        return 1;
    }
    if (m->n_layer < p->pp) {
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

void grid_stage_layers(int n_layer, int pp, int stage, int *first, int *count)
{
    int base = n_layer / pp, extra = n_layer % pp;
    *count = base + (stage < extra ? 1 : 0);
    *first = stage * base + (stage < extra ? stage : extra);
}

void grid_chunk_layers(int n_layer, int pp, int v, int stage, int chunk, int *first,
                       int *count)
{
    grid_stage_layers(n_layer, pp * v, chunk * pp + stage, first, count);
}

int grid_world_rank(const Grid *g, int pp_stage, int dp_rank, int tp_rank)
{
    return (pp_stage * g->dp + dp_rank) * g->tp + tp_rank;
}

static MPI_Comm split(MPI_Comm comm, int color, int key)
{
    MPI_Comm out;
    TRI_CHECK_MPI(MPI_Comm_split(comm, color, key, &out));
    if (out != MPI_COMM_NULL)
        TRI_CHECK_MPI(MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN));
    return out;
}

/* The node index of every rank: from the shared-memory split, or the
 * pretended node_size. Ranks of one node must be consecutive world ranks
 * for the hierarchy to match the hardware; mpirun's default by-slot mapping
 * gives that. */
static void find_node(Grid *g, const Config *cfg)
{
    TRI_CHECK_MPI(MPI_Comm_split_type(g->world, MPI_COMM_TYPE_SHARED, g->rank,
                                      MPI_INFO_NULL, &g->host_comm));
    MPI_Comm_rank(g->host_comm, &g->host_rank);
    MPI_Comm_size(g->host_comm, &g->host_size);
    int leader = g->host_rank == 0 ? g->rank : -1, node = 0;
    /* Number real nodes by their lowest world rank. */
    int is_leader = leader >= 0, before = 0;
    TRI_CHECK_MPI(MPI_Exscan(&is_leader, &before, 1, MPI_INT, MPI_SUM, g->world));
    if (g->rank == 0)
        before = 0;
    node = before + is_leader - 1;
    TRI_CHECK_MPI(MPI_Bcast(&node, 1, MPI_INT, 0, g->host_comm));
    if (cfg->parallel.node_size > 0)
        node = g->rank / cfg->parallel.node_size;
    g->node_comm = split(g->world, node, g->rank);
    g->node = node;
    TRI_CHECK_MPI(MPI_Allreduce(&node, &g->n_nodes, 1, MPI_INT, MPI_MAX, g->world));
    g->n_nodes += 1;
    MPI_Comm_rank(g->node_comm, &g->local_rank);
    MPI_Comm_size(g->node_comm, &g->local_size);
}

void grid_create(Grid *g, const Config *cfg, MPI_Comm world)
{
    memset(g, 0, sizeof *g);
    g->world = world;
    MPI_Comm_rank(world, &g->rank);
    MPI_Comm_size(world, &g->size);
    g->pp = cfg->parallel.pp;
    g->tp = cfg->parallel.tp;
    g->dp = grid_resolve_dp(&cfg->parallel, g->size);
    g->tp_rank = g->rank % g->tp;
    g->dp_rank = (g->rank / g->tp) % g->dp;
    g->pp_stage = g->rank / (g->tp * g->dp);

    g->tp_comm = split(world, g->pp_stage * g->dp + g->dp_rank, g->tp_rank);
    g->dp_comm = split(world, g->pp_stage * g->tp + g->tp_rank, g->dp_rank);
    g->pp_comm = split(world, g->dp_rank * g->tp + g->tp_rank, g->pp_stage);
    int ends = g->pp_stage == 0 || g->pp_stage == g->pp - 1;
    g->embed_comm = split(world, ends ? g->dp_rank * g->tp + g->tp_rank : MPI_UNDEFINED,
                          g->pp_stage);

    /* Replicas of a key/value head are consecutive TP ranks (arch_sizes.h). */
    int kv_replicas = arch_kv_replicas(&cfg->model, g->tp);
    g->kv_comm = kv_replicas > 1 ? split(g->tp_comm, g->tp_rank / kv_replicas, g->tp_rank)
                                 : MPI_COMM_NULL;

    find_node(g, cfg);
    /* DP ranks that share a node, and one DP rank per node. */
    g->dp_node = split(g->dp_comm, g->node, g->dp_rank);
    MPI_Comm_rank(g->dp_node, &g->dp_node_rank);
    MPI_Comm_size(g->dp_node, &g->dp_node_size);
    g->dp_cross = split(g->dp_comm, g->dp_node_rank, g->dp_rank);
    MPI_Comm_rank(g->dp_cross, &g->dp_cross_rank);
    MPI_Comm_size(g->dp_cross, &g->dp_cross_size);
}

static void free_comm(MPI_Comm *c)
{
    if (*c != MPI_COMM_NULL && *c != MPI_COMM_WORLD)
        MPI_Comm_free(c);
    *c = MPI_COMM_NULL;
}

void grid_destroy(Grid *g)
{
    free_comm(&g->tp_comm);
    free_comm(&g->dp_comm);
    free_comm(&g->pp_comm);
    free_comm(&g->embed_comm);
    free_comm(&g->kv_comm);
    free_comm(&g->dp_node);
    free_comm(&g->dp_cross);
    free_comm(&g->node_comm);
    free_comm(&g->host_comm);
}

static void print_group(FILE *out, const char *name, const Grid *g,
                        int n_groups, int group_size, int (*member)(const Grid *, int, int))
{
    fprintf(out, "  %-3s groups:", name);
    for (int k = 0; k < n_groups; k++) {
        fprintf(out, " [");
        for (int i = 0; i < group_size; i++)
            fprintf(out, i ? " %d" : "%d", member(g, k, i));
        fprintf(out, "]");
        if (k == 7 && n_groups > 9) {
            fprintf(out, " ... (%d more)", n_groups - 8);
            break;
        }
    }
    fprintf(out, "\n");
}

void grid_world_only(Grid *g, MPI_Comm world)
{
    memset(g, 0, sizeof *g);
    g->world = world;
    MPI_Comm_rank(world, &g->rank);
    MPI_Comm_size(world, &g->size);
    g->tp_comm = g->dp_comm = g->pp_comm = MPI_COMM_NULL;
    g->dp_node = g->dp_cross = g->embed_comm = g->node_comm = MPI_COMM_NULL;
    g->kv_comm = g->host_comm = MPI_COMM_NULL;
    g->device = OPS_CPU;
}

static int by_value(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int grid_dp_two_level(const int *node_of, int dp)
{
    if (dp < 4) /* two nodes of two at least */
        return 0;
    int *sorted = malloc(sizeof *sorted * (size_t)dp);
    if (!sorted)
        fail_abort("out of memory", __FILE__, __LINE__);
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
    return same && per_node > 1 && per_node < dp;
}

static int tp_member(const Grid *g, int k, int i) { return k * g->tp + i; }
static int dp_member(const Grid *g, int k, int i)
{
    return grid_world_rank(g, k / g->tp, i, k % g->tp);
}
static int pp_member(const Grid *g, int k, int i)
{
    return grid_world_rank(g, i, k / g->tp, k % g->tp);
}

void grid_print(const Grid *g, FILE *out)
{
    fprintf(out, "layout: %d ranks = dp %d x pp %d x tp %d (TP innermost), %d node%s of %d rank%s\n",
            g->size, g->dp, g->pp, g->tp, g->n_nodes, g->n_nodes > 1 ? "s" : "",
            g->local_size, g->local_size > 1 ? "s" : "");
    print_group(out, "tp", g, g->dp * g->pp, g->tp, tp_member);
    print_group(out, "dp", g, g->tp * g->pp, g->dp, dp_member);
    print_group(out, "pp", g, g->dp * g->tp, g->pp, pp_member);
}
