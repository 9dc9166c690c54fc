/*
 * grid.c - the process grid: the communicators of a rank's layout; see
 * grid.h, and layout.h for the rank order and why.
 */
#include "grid.h"

#include <string.h>

#include "arch_sizes.h"
#include "fail.h"

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
    int rank = g->layout.rank;
    TRI_CHECK_MPI(MPI_Comm_split_type(g->world, MPI_COMM_TYPE_SHARED, rank,
                                      MPI_INFO_NULL, &g->host_comm));
    MPI_Comm_rank(g->host_comm, &g->host_rank);
    MPI_Comm_size(g->host_comm, &g->host_size);
    int leader = g->host_rank == 0 ? rank : -1, node = 0;
    /* Number real nodes by their lowest world rank. */
    int is_leader = leader >= 0, before = 0;
    TRI_CHECK_MPI(MPI_Exscan(&is_leader, &before, 1, MPI_INT, MPI_SUM, g->world));
    if (rank == 0)
        before = 0;
    node = before + is_leader - 1;
    TRI_CHECK_MPI(MPI_Bcast(&node, 1, MPI_INT, 0, g->host_comm));
    if (cfg->parallel.node_size > 0)
        node = rank / cfg->parallel.node_size;
    g->node_comm = split(g->world, node, rank);
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
    int rank, size;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    g->layout = layout_of_rank(&cfg->parallel, size, rank);
    const Layout *l = &g->layout;

    /* a replica is (dp_rank, cp_rank): the groups key on its rank */
    int replicas = layout_replicas(l), replica = layout_replica_rank(l);
    g->tp_comm = split(world, l->pp_stage * replicas + replica, l->tp_rank);
    g->cp_comm = split(world, (l->pp_stage * l->dp + l->dp_rank) * l->tp + l->tp_rank,
                       l->cp_rank);
    g->dp_comm = split(world, l->pp_stage * l->tp + l->tp_rank, replica);
    g->pp_comm = split(world, replica * l->tp + l->tp_rank, l->pp_stage);
    /* expert parallelism: ep consecutive DP ranks split the experts */
    g->ep_comm = split(world, ((l->pp_stage * l->dp + l->dp_rank / l->ep) * l->cp + l->cp_rank)
                                  * l->tp + l->tp_rank, l->ep_rank);
    g->edp_comm = split(world, (l->pp_stage * l->ep + l->ep_rank) * l->tp + l->tp_rank,
                        layout_expert_replica_rank(l));
    int ends = l->pp_stage == 0 || l->pp_stage == l->pp - 1;
    g->embed_comm = split(world, ends ? replica * l->tp + l->tp_rank : MPI_UNDEFINED,
                          l->pp_stage);

    /* Replicas of a key/value head are consecutive TP ranks (arch_sizes.h). */
    int kv_replicas = arch_kv_replicas(&cfg->model, l->tp);
    g->kv_comm = kv_replicas > 1 ? split(g->tp_comm, l->tp_rank / kv_replicas, l->tp_rank)
                                 : MPI_COMM_NULL;

    find_node(g, cfg);
    /* Replicas that share a node, and one replica per node. */
    g->dp_node = split(g->dp_comm, g->node, replica);
    MPI_Comm_rank(g->dp_node, &g->dp_node_rank);
    MPI_Comm_size(g->dp_node, &g->dp_node_size);
    g->dp_cross = split(g->dp_comm, g->dp_node_rank, replica);
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
    free_comm(&g->cp_comm);
    free_comm(&g->dp_comm);
    free_comm(&g->pp_comm);
    free_comm(&g->ep_comm);
    free_comm(&g->edp_comm);
    free_comm(&g->embed_comm);
    free_comm(&g->kv_comm);
    free_comm(&g->dp_node);
    free_comm(&g->dp_cross);
    free_comm(&g->node_comm);
    free_comm(&g->host_comm);
}

static void print_group(FILE *out, const char *name, const Layout *l,
                        int n_groups, int group_size, int (*member)(const Layout *, int, int))
{
    fprintf(out, "  %-3s groups:", name);
    for (int k = 0; k < n_groups; k++) {
        fprintf(out, " [");
        for (int i = 0; i < group_size; i++)
            fprintf(out, i ? " %d" : "%d", member(l, k, i));
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
    MPI_Comm_rank(world, &g->layout.rank);
    MPI_Comm_size(world, &g->layout.size);
    g->tp_comm = g->cp_comm = g->dp_comm = g->pp_comm = MPI_COMM_NULL;
    g->ep_comm = g->edp_comm = MPI_COMM_NULL;
    g->dp_node = g->dp_cross = g->embed_comm = g->node_comm = MPI_COMM_NULL;
    g->kv_comm = g->host_comm = MPI_COMM_NULL;
    g->device = OPS_CPU;
}

/* Member i of group k of each kind. A CP group is cp consecutive
 * replicas, tp apart; a replica group (dp_comm) every replica of a stage
 * and TP rank; a pipeline every stage of a replica and TP rank. */
static int tp_member(const Layout *l, int k, int i) { return k * l->tp + i; }
static int cp_member(const Layout *l, int k, int i)
{
    return ((k / l->tp) * l->cp + i) * l->tp + k % l->tp;
}
static int dp_member(const Layout *l, int k, int i)
{
    return layout_replica_world_rank(l, k / l->tp, i, k % l->tp);
}
static int pp_member(const Layout *l, int k, int i)
{
    return layout_replica_world_rank(l, i, k / l->tp, k % l->tp);
}

/* An EP group: ep consecutive DP ranks (dp_rank / ep alike) of one
 * stage, cp rank and TP rank, ranked by ep_rank. Group k counts TP ranks
 * fastest, then cp ranks, then the dp / ep runs, then stages. */
static int ep_member(const Layout *l, int k, int i)
{
    int t = k % l->tp, c = (k / l->tp) % l->cp, runs = l->dp / l->ep;
    int run = (k / (l->tp * l->cp)) % runs, stage = k / (l->tp * l->cp * runs);
    return layout_replica_world_rank(l, stage, (run * l->ep + i) * l->cp + c, t);
}
/* An EDP group: the replicas of one stage and TP rank with one ep_rank,
 * ranked by layout_expert_replica_rank, (dp_rank / ep) x cp + cp_rank.
 * Group k counts TP ranks fastest, then ep ranks, then stages. */
static int edp_member(const Layout *l, int k, int i)
{
    int t = k % l->tp, e = (k / l->tp) % l->ep, stage = k / (l->tp * l->ep);
    return layout_replica_world_rank(l, stage, ((i / l->cp) * l->ep + e) * l->cp + i % l->cp, t);
}

void grid_print(const Grid *g, FILE *out)
{
    const Layout *l = &g->layout;
    int replicas = layout_replicas(l);
    char cp[32] = "", ep[32] = "";
    if (l->cp > 1) /* a run without context parallelism keeps its line */
        snprintf(cp, sizeof cp, " x cp %d", l->cp);
    if (l->ep > 1) /* ep splits dp: no factor of the world of its own */
        snprintf(ep, sizeof ep, " (ep %d)", l->ep);
    fprintf(out, "layout: %d ranks = dp %d%s x pp %d%s x tp %d (TP innermost), %d node%s of %d rank%s\n",
            l->size, l->dp, ep, l->pp, cp, l->tp, g->n_nodes, g->n_nodes > 1 ? "s" : "",
            g->local_size, g->local_size > 1 ? "s" : "");
    print_group(out, "tp", l, replicas * l->pp, l->tp, tp_member);
    if (l->cp > 1)
        print_group(out, "cp", l, l->dp * l->pp * l->tp, l->cp, cp_member);
    print_group(out, "dp", l, l->tp * l->pp, replicas, dp_member);
    print_group(out, "pp", l, replicas * l->tp, l->pp, pp_member);
    if (l->ep > 1) {
        print_group(out, "ep", l, l->pp * l->tp * l->cp * (l->dp / l->ep), l->ep, ep_member);
        print_group(out, "edp", l, l->pp * l->tp * l->ep, layout_expert_replicas(l), edp_member);
    }
}
