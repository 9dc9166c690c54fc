/*
 * t_grid.c - the process grid on 1, 2, 4 and 8 ranks: every layout that
 * fits the world (pp x dp x cp x tp), TP innermost then CP, groups of the
 * right sizes and members (dp_comm the replicas, dp x cp), the bad layouts
 * refused with their reason, and when DP reduces in two levels; with ep,
 * the expert-parallel groups (ep_comm, edp_comm) and their arithmetic.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "comm.h"
#include "config_load.h"
#include "device.h"
#include "grid.h"
#include "nccl_env.h"
#include "tap.h"

/* Member i of each of this rank's groups, by the contract's arithmetic
 * (tp_rank = r % tp, cp_rank = (r / tp) % cp, dp_rank = (r / (tp cp)) % dp,
 * pp_stage = r / (tp cp dp)), written out here rather than taken from
 * layout.c, so that the test can disagree with it. */
static int rank_of(const Layout *l, int pp_stage, int dp_rank, int cp_rank, int tp_rank)
{
    return ((pp_stage * l->dp + dp_rank) * l->cp + cp_rank) * l->tp + tp_rank;
}

/* Whether member i of comm is world rank want(l, i) for every i. */
static int members_are(MPI_Comm comm, const Layout *l, int (*want)(const Layout *, int))
{
    int size, me = l->rank;
    MPI_Comm_size(comm, &size);
    int *got = malloc(sizeof *got * (size_t)size), ok = 1;
    MPI_Allgather(&me, 1, MPI_INT, got, 1, MPI_INT, comm);
    for (int i = 0; i < size; i++)
        ok &= got[i] == want(l, i);
    free(got);
    return ok;
}

static int tp_member(const Layout *l, int i)
{
    return rank_of(l, l->pp_stage, l->dp_rank, l->cp_rank, i);
}
static int cp_member(const Layout *l, int i)
{
    return rank_of(l, l->pp_stage, l->dp_rank, i, l->tp_rank);
}
/* the replicas, ranked by dp_rank * cp + cp_rank */
static int dp_member(const Layout *l, int i)
{
    return rank_of(l, l->pp_stage, i / l->cp, i % l->cp, l->tp_rank);
}
static int pp_member(const Layout *l, int i)
{
    return rank_of(l, i, l->dp_rank, l->cp_rank, l->tp_rank);
}
/* ep consecutive DP ranks, ranked by ep_rank = dp_rank % ep */
static int ep_member(const Layout *l, int i)
{
    return rank_of(l, l->pp_stage, l->dp_rank / l->ep * l->ep + i, l->cp_rank, l->tp_rank);
}
/* the replicas with this ep_rank, ranked by (dp_rank / ep) * cp + cp_rank */
static int edp_member(const Layout *l, int i)
{
    return rank_of(l, l->pp_stage, i / l->cp * l->ep + l->ep_rank, i % l->cp, l->tp_rank);
}

/* Expert parallelism's place and groups: ep_rank, the expert replicas,
 * ep_comm and edp_comm's sizes, ranks and members, and comm.h's names for
 * them. */
static int check_ep(const Grid *g, int ep)
{
    const Layout *l = &g->layout;
    int edp = l->dp / ep * l->cp, s, r;
    int ok = l->ep == ep && l->ep_rank == l->dp_rank % ep;
    ok &= layout_expert_replicas(l) == edp
          && layout_expert_replica_rank(l) == l->dp_rank / ep * l->cp + l->cp_rank;
    MPI_Comm_size(g->ep_comm, &s); ok &= s == ep;
    MPI_Comm_size(g->edp_comm, &s); ok &= s == edp;
    MPI_Comm_rank(g->ep_comm, &r); ok &= r == l->ep_rank;
    MPI_Comm_rank(g->edp_comm, &r); ok &= r == layout_expert_replica_rank(l);
    ok &= members_are(g->ep_comm, l, ep_member) && members_are(g->edp_comm, l, edp_member);
    ok &= comm_mpi(g, COMM_EP) == g->ep_comm && comm_size(g, COMM_EP) == ep;
    ok &= comm_mpi(g, COMM_EDP) == g->edp_comm && comm_size(g, COMM_EDP) == edp;
    return ok;
}

/* This rank's place and its groups on a grid of dp x pp x cp x tp, ep
 * of the DP ranks splitting the experts. */
static int check_layout(int dp, int pp, int cp, int tp, int node_size, int ep)
{
    Config cfg;
    config_defaults(&cfg);
    cfg.model.n_layer = 8;
    cfg.model.n_head = 8;
    cfg.model.n_embd = 64;
    cfg.parallel.dp = dp;
    cfg.parallel.pp = pp;
    cfg.parallel.cp = cp;
    cfg.parallel.tp = tp;
    cfg.parallel.node_size = node_size;
    cfg.parallel.ep = ep;
    cfg.model.n_expert = ep > 1 ? 2 * ep : 0;
    Grid g;
    grid_create(&g, &cfg, MPI_COMM_WORLD);
    const Layout *l = &g.layout;
    int replicas = l->dp * cp;
    int ok_ep = check_ep(&g, ep);
    int ok = l->dp * l->pp * l->cp * l->tp == l->size && l->cp == cp;
    ok &= l->rank == rank_of(l, l->pp_stage, l->dp_rank, l->cp_rank, l->tp_rank);
    ok &= l->tp_rank == l->rank % tp && l->cp_rank == (l->rank / tp) % cp; /* TP, then CP */
    ok &= l->dp_rank == (l->rank / (tp * cp)) % l->dp && l->pp_stage == l->rank / (tp * cp * l->dp);
    ok &= layout_replicas(l) == replicas && layout_replica_rank(l) == l->dp_rank * cp + l->cp_rank;
    ok &= l->rank == layout_replica_world_rank(l, l->pp_stage, layout_replica_rank(l), l->tp_rank);
    ok &= layout_world_rank(l, l->pp_stage, l->dp_rank, l->tp_rank)
          == rank_of(l, l->pp_stage, l->dp_rank, 0, l->tp_rank);
    Layout at = layout_at(&cfg.parallel, l->dp, l->pp_stage, l->dp_rank, l->tp_rank);
    ok &= at.cp == cp && at.cp_rank == 0 && at.rank == rank_of(l, l->pp_stage, l->dp_rank, 0, l->tp_rank);
    int s;
    MPI_Comm_size(g.tp_comm, &s); ok &= s == l->tp;
    MPI_Comm_size(g.cp_comm, &s); ok &= s == cp;
    MPI_Comm_size(g.dp_comm, &s); ok &= s == replicas;
    MPI_Comm_size(g.pp_comm, &s); ok &= s == l->pp;
    /* pp_comm rank is the stage, cp_comm's the cp rank, dp_comm's the replica rank */
    int r;
    MPI_Comm_rank(g.pp_comm, &r); ok &= r == l->pp_stage;
    MPI_Comm_rank(g.cp_comm, &r); ok &= r == l->cp_rank;
    MPI_Comm_rank(g.dp_comm, &r); ok &= r == layout_replica_rank(l);
    MPI_Comm_rank(g.tp_comm, &r); ok &= r == l->tp_rank;
    ok &= members_are(g.tp_comm, l, tp_member) && members_are(g.cp_comm, l, cp_member);
    ok &= members_are(g.dp_comm, l, dp_member) && members_are(g.pp_comm, l, pp_member);
    /* comm.h reaches cp_comm as COMM_CP */
    ok &= comm_mpi(&g, COMM_CP) == g.cp_comm && comm_size(&g, COMM_CP) == cp;
    /* a sum over each group counts its members */
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, g.tp_comm); ok &= sum == tp;
    ok &= g.dp_node_size * g.dp_cross_size == replicas;
    if (node_size > 0)
        ok &= g.n_nodes == g.layout.size / node_size && g.node == g.layout.rank / node_size;
    grid_destroy(&g);
    return ok && ok_ep;
}

static int rejects(int world, int dp, int pp, int cp, int tp, int n_layer, const char *needle)
{
    Config cfg;
    config_defaults(&cfg);
    cfg.model.n_layer = n_layer;
    cfg.model.n_head = 4;
    cfg.model.vocab_size = 256;
    cfg.parallel.dp = dp;
    cfg.parallel.pp = pp;
    cfg.parallel.cp = cp;
    cfg.parallel.tp = tp;
    char msg[512] = "";
    FILE *f = fmemopen(msg, sizeof msg, "w");
    int rc = layout_check(&cfg, world, f);
    fclose(f);
    return rc != 0 && strstr(msg, needle) != NULL;
}

/* layout_dp_two_level on a table of node layouts of a DP group. */
static int two_level_table(void)
{
    static const struct {
        int dp, node_of[8], want;
    } cases[] = {
        {4, {0, 0, 1, 1}, 1},               /* two nodes of two */
        {4, {0, 1, 0, 1}, 1},               /* nodes interleaved in DP order */
        {6, {7, 7, 3, 3, 5, 5}, 1},         /* any numbering */
        {8, {0, 0, 0, 0, 1, 1, 1, 1}, 1},
        {1, {0}, 0},
        {2, {0, 1}, 0},
        {4, {0, 0, 0, 0}, 0},               /* one node */
        {4, {0, 1, 2, 3}, 0},               /* one rank per node */
        {4, {0, 0, 0, 1}, 0},               /* unequal nodes */
        {6, {0, 0, 1, 1, 1, 1}, 0},
        {5, {0, 0, 1, 1, 2}, 0},
        {6, {0, 0, 0, 1, 1, 2}, 0},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = layout_dp_two_level(cases[i].node_of, cases[i].dp);
        if (got != cases[i].want) {
            tap_diag("case %zu: dp %d gives %d, want %d", i, cases[i].dp, got, cases[i].want);
            ok = 0;
        }
    }
    return ok;
}

/* layout_dp_spot and layout_dp_places of the DP group (the replicas, dp x
 * cp ranks) at stage s and TP rank t of p, against its nodes listed rank
 * by rank (world rank / node_size) and layout_dp_two_level on that list. */
static int group_nodes_counted(const ParallelConfig *p, int s, int t)
{
    int ok = 1, node_of[48], place_of[48], replicas = p->dp * p->cp, ns = p->node_size;
    Layout l = layout_at(p, p->dp, s, 0, t);
    for (int d = 0; d < replicas; d++) {
        node_of[d] = rank_of(&l, s, d / p->cp, d % p->cp, t) / ns;
        place_of[d] = d == 0 || node_of[d] != node_of[d - 1] ? 0 : place_of[d - 1] + 1;
        LayoutDpSpot at = layout_dp_spot(&l, d);
        if (at.node != node_of[d] - node_of[0] || at.place != place_of[d]) {
            tap_diag("world %d tp %d cp %d pp %d node_size %d stage %d: DP rank %d at node %d "
                     "place %d, counted %d %d", l.size, p->tp, p->cp, p->pp, ns, s, d,
                     node_of[d] - node_of[0], place_of[d], at.node, at.place);
            ok = 0;
        }
    }
    int want = layout_dp_two_level(node_of, replicas) ? place_of[replicas - 1] + 1 : 0;
    if (layout_dp_places(&l) != want) {
        tap_diag("world %d tp %d cp %d pp %d node_size %d stage %d: places %d, listed %d",
                 l.size, p->tp, p->cp, p->pp, ns, s, layout_dp_places(&l), want);
        ok = 0;
    }
    return ok;
}

/* group_nodes_counted on every DP group of every layout of up to 48
 * ranks with cp 1, 2 or 4, and every node_size that keeps TP on a node. */
static int counted_nodes_are_listed(void)
{
    int ok = 1;
    for (int world = 1; world <= 48; world++)
        for (int tp = 1; tp <= world; tp++)
            for (int cp = 1; cp <= 4; cp *= 2)
                for (int pp = 1; pp * cp * tp <= world; pp++) {
                    if (world % (tp * cp * pp))
                        continue;
                    ParallelConfig p = {.dp = world / (tp * cp * pp), .pp = pp, .tp = tp,
                                        .cp = cp};
                    for (p.node_size = tp; p.node_size <= world; p.node_size += tp)
                        for (int s = 0; world % p.node_size == 0 && s < pp; s++)
                            for (int t = 0; t < tp; t++)
                                ok &= group_nodes_counted(&p, s, t);
                }
    return ok;
}

/* grid_print's lines on a grid of cp context-parallel ranks, ep of the
 * DP ranks splitting the experts, in text. */
static void printed(int cp, int ep, char *text, size_t size)
{
    Config cfg;
    config_defaults(&cfg);
    cfg.model.n_layer = 8;
    cfg.model.n_expert = ep > 1 ? 2 * ep : 0;
    cfg.parallel.cp = cp;
    cfg.parallel.ep = ep;
    Grid g;
    grid_create(&g, &cfg, MPI_COMM_WORLD);
    FILE *f = fmemopen(text, size, "w");
    grid_print(&g, f);
    fclose(f);
    grid_destroy(&g);
}

/* With ep > 1 the layout line says ep and the ep and edp groups are
 * listed; with ep = 1 neither. */
static int print_names_ep(int n)
{
    char text[1024] = "", want[128];
    printed(1, 1, text, sizeof text);
    int ok = !strstr(text, "ep ") && !strstr(text, "edp");
    if (n % 2 == 0) {
        printed(1, 2, text, sizeof text);
        snprintf(want, sizeof want, "layout: %d ranks = dp %d (ep 2) x pp 1 x tp 1 (TP innermost)",
                 n, n);
        ok &= strstr(text, want) && strstr(text, "  ep  groups: [0 1]")
              && strstr(text, n == 2 ? "  edp groups: [0] [1]\n" : "  edp groups: [0 2");
    }
    if (n == 4) /* every group, whole */
        ok &= strstr(text, "  ep  groups: [0 1] [2 3]\n") && strstr(text, "  edp groups: [0 2] [1 3]\n");
    if (n == 8) { /* with cp 2: an ep group keeps its cp rank, an edp group spans both */
        printed(2, 2, text, sizeof text);
        ok &= strstr(text, "  ep  groups: [0 2] [1 3] [4 6] [5 7]\n")
              && strstr(text, "  edp groups: [0 1 4 5] [2 3 6 7]\n");
    }
    if (!ok)
        tap_diag("grid_print:\n%s", text);
    return ok;
}

/* The start-up layout line names cp and lists the cp groups where cp > 1,
 * and is as it was with cp = 1. */
static int print_names_cp(int n)
{
    char text[1024] = "", want[128];
    printed(1, 1, text, sizeof text);
    snprintf(want, sizeof want, "layout: %d ranks = dp %d x pp 1 x tp 1 (TP innermost)", n, n);
    int ok = strstr(text, want) && !strstr(text, "cp");
    if (n % 2 == 0) {
        printed(2, 1, text, sizeof text);
        snprintf(want, sizeof want, "layout: %d ranks = dp %d x pp 1 x cp 2 x tp 1 (TP innermost)",
                 n, n / 2);
        ok &= strstr(text, want) && strstr(text, "  cp  groups: [0 1]") &&
              strstr(text, n == 2 ? "  dp  groups: [0 1]" : "  dp  groups: [0 1 2 3");
    }
    if (!ok)
        tap_diag("grid_print:\n%s", text);
    return ok;
}

/* With node_size 1 every rank is alone on its pretended node, yet all of
 * them are on this one machine: host_rank/host_size (the GPU choice) must
 * say so, or ranks 0, 1, ... would all take GPU 0. */
static int host_stays_real(void)
{
    Config cfg;
    config_defaults(&cfg);
    cfg.model.n_layer = 8;
    cfg.parallel.node_size = 1;
    Grid g;
    grid_create(&g, &cfg, MPI_COMM_WORLD);
    int world_rank, world_size;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    /* mpiexec on one machine: the shared-memory split is the world */
    int ok = g.local_size == 1 && g.local_rank == 0 && g.host_size == world_size &&
             g.host_rank == world_rank && g.n_nodes == world_size;
    grid_destroy(&g);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return ok;
}

static int shared_gpus_found(void)
{
    DeviceId ids[4] = {{0, {1}}, {1, {2}}, {2, {3}}, {3, {2}}};
    int first = -1;
    int dup = device_shared_gpu(ids, 4, &first);
    int distinct = device_shared_gpu(ids, 3, &first) == -1;
    first = -1;
    dup = device_shared_gpu(ids, 4, &first);
    DeviceId late[3] = {{0, {9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
                        {1, {9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}},
                        {2, {9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}};
    int f2 = -1, d2 = device_shared_gpu(late, 3, &f2);
    return distinct && dup == 3 && first == 1 && d2 == 2 && f2 == 0;
}

/* TRIDENT_TEST_SHARE_GPU: 1 lets ranks share a GPU; unset, empty and 0
 * do not; any other value is refused, naming the variable. */
static int share_gpu_values(void)
{
    const char *off[] = {NULL, "", "0"}, *bad[] = {"yes", "true", "2", "1 ", " 1", "01"};
    char err[256];
    int share = -1, ok = !device_share_gpu_parse("1", &share, err, sizeof err) && share == 1;
    for (size_t i = 0; i < sizeof off / sizeof *off; i++)
        ok &= !device_share_gpu_parse(off[i], &share, err, sizeof err) && share == 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        int refused = device_share_gpu_parse(bad[i], &share, err, sizeof err) == 1 &&
                      share == 0 && strstr(err, "TRIDENT_TEST_SHARE_GPU=") &&
                      strstr(err, bad[i]);
        if (!refused)
            tap_diag("TRIDENT_TEST_SHARE_GPU='%s' not refused (%s)", bad[i], err);
        ok &= refused;
    }
    return ok;
}

/* nccl_env_print's line, as rank 0 prints it at start-up, into want. */
static int start_up_line_is(int order_set, const char *want)
{
    FILE *f = tmpfile();
    char line[256] = "";
    if (!f)
        return 0;
    nccl_env_print(f, 23007, 22809, order_set);
    rewind(f);
    int ok = fgets(line, sizeof line, f) && !strcmp(line, want);
    if (!ok)
        tap_diag("start-up line '%s', want '%s'", line, want);
    fclose(f);
    return ok;
}

/* NCCL_LAUNCH_ORDER_IMPLICIT: 1 when unset, the user's value otherwise,
 * and the start-up line says which */
static int launch_order_default(void)
{
    unsetenv("NCCL_LAUNCH_ORDER_IMPLICIT");
    int set = nccl_env_defaults();
    const char *v = getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
    int ok = set == 1 && v && !strcmp(v, "1") &&
             start_up_line_is(set, "nccl: 2.30.7 loaded (built against 2.28.9); "
                              "NCCL_LAUNCH_ORDER_IMPLICIT=1 (trident's default)\n");
    setenv("NCCL_LAUNCH_ORDER_IMPLICIT", "0", 1);
    set = nccl_env_defaults();
    v = getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
    ok &= set == 0 && v && !strcmp(v, "0") &&
          start_up_line_is(set, "nccl: 2.30.7 loaded (built against 2.28.9); "
                           "NCCL_LAUNCH_ORDER_IMPLICIT=0 (yours)\n");
    unsetenv("NCCL_LAUNCH_ORDER_IMPLICIT");
    return ok;
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int n = tap_size();
    tap_plan(18);
    int ok = 1, count = 0;
    for (int tp = 1; tp <= n; tp *= 2)
        for (int cp = 1; cp * tp <= n; cp *= 2)
            for (int pp = 1; pp * cp * tp <= n; pp *= 2)
                for (int ep = 1; n % (tp * cp * pp) == 0 && ep <= n / (tp * cp * pp); ep *= 2)
                    if ((n / (tp * cp * pp)) % ep == 0) {
                        ok &= check_layout(n / (tp * cp * pp), pp, cp, tp, 0, ep);
                        count++;
                    }
    tap_ok(ok, "all %d layouts of %d ranks, cp and ep among them: sizes, members and rank order "
           "(ep and edp groups too)", count, n);
    tap_ok(n < 2 || check_layout(0, 1, 1, 1, 1, 1), "node_size 1 pretends one rank per node");
    tap_ok(n < 4 || check_layout(n / 2, 1, 1, 2, 2, 1), "node_size 2 with tp 2: TP stays on a node");
    tap_ok(rejects(8, 2, 2, 1, 1, 8, "dp * pp * tp = 2 * 2 * 1 = 4")
           && rejects(8, 2, 1, 2, 1, 8, "dp * pp * cp * tp = 2 * 1 * 2 * 1 = 4, but 8"),
           "dp*pp*cp*tp != world is refused, naming cp where it is more than 1");
    tap_ok(rejects(4, 0, 3, 1, 1, 8, "not a multiple of pp * tp = 3 * 1")
           && rejects(4, 0, 1, 3, 1, 8, "not a multiple of pp * cp * tp = 1 * 3 * 1"),
           "dp=0 with world not a multiple of pp*cp*tp");
    tap_ok(rejects(8, 1, 1, 1, 8, 8, "n_head"), "n_head not divisible by tp");
    tap_ok(rejects(8, 1, 8, 1, 1, 4, "layers"), "fewer layers than stages");
    ParallelConfig pc = {.dp = 0, .pp = 2, .tp = 4, .cp = 1};
    int auto_dp = layout_resolve_dp(&pc, 64);
    pc.cp = 2;
    int auto_cp_dp = layout_resolve_dp(&pc, 64);
    pc.dp = 3;
    tap_ok(auto_dp == 8 && auto_cp_dp == 4 && layout_resolve_dp(&pc, 64) == 3,
           "dp = 0 resolves to world / (pp * cp * tp); a set dp stays");
    int first, cnt, all = 1, next = 0;
    for (int s = 0; s < 3; s++) {
        layout_stage_layers(8, 3, s, &first, &cnt);
        all &= first == next && (cnt == 3 || cnt == 2);
        next = first + cnt;
    }
    tap_ok(all && next == 8, "8 layers on 3 stages: 3, 3, 2, contiguous");
    layout_stage_layers(12, 4, 3, &first, &cnt);
    tap_ok(first == 9 && cnt == 3, "12 layers on 4 stages: stage 3 has layers 9..11");
    tap_ok(two_level_table(), "DP is two-level with >1 node, >1 rank per node, equal counts");
    tap_ok(counted_nodes_are_listed(), "node_size's nodes counted (layout_dp_spot, layout_dp_places) as listed");
    tap_ok(print_names_cp(n), "grid_print names cp and its groups where cp > 1, as before "
           "with cp = 1");
    tap_ok(print_names_ep(n), "grid_print says ep and lists the ep and edp groups where ep > 1, "
           "neither with ep = 1");
    tap_ok(host_stays_real(), "node_size pretends nodes, but the GPU choice sees the machine");
    tap_ok(shared_gpus_found(), "two ranks holding one GPU UUID are found, distinct UUIDs pass");
    tap_ok(share_gpu_values(), "TRIDENT_TEST_SHARE_GPU: 1 shares, unset/empty/0 do not, other values are refused");
    tap_ok(launch_order_default(), "NCCL_LAUNCH_ORDER_IMPLICIT: set to 1 when unset, a user's 0 stays; the nccl: line says which");
    return tap_done();
}
