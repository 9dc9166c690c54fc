/*
 * affinity.c - cores and OpenMP threads per rank; see affinity.h.
 */
#include "affinity.h"

#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc.h"
#include "fail.h"

static Affinity chosen;

/* Every online CPU that the kernel lets this process use. */
static int widen_to_node(cpu_set_t *mask)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t all;
    CPU_ZERO(&all);
    for (long c = 0; c < online && c < CPU_SETSIZE; c++)
        CPU_SET((int)c, &all);
    if (sched_setaffinity(0, sizeof all, &all) != 0)
        return 0; /* a cpuset (Slurm's cgroup) forbids it: keep what we have */
    return sched_getaffinity(0, sizeof *mask, mask) == 0;
}

int affinity_fair_threads(const cpu_set_t *masks, int n, int me)
{
    double share = 0.0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &masks[me]))
            continue;
        int sharers = 0;
        for (int r = 0; r < n; r++)
            sharers += CPU_ISSET(c, &masks[r]) != 0;
        share += 1.0 / sharers;
    }
    /* rounded down: a thread too few leaves part of a core idle, a thread
     * too many makes every barrier of the step wait for a descheduled one */
    int threads = (int)(share + 1e-9);
    return threads > 0 ? threads : 1;
}

/* The masks of the node's ranks, gathered on the node: NULL on failure. */
static cpu_set_t *node_masks(MPI_Comm node, const cpu_set_t *mine, int n)
{
    cpu_set_t *all = TRI_MALLOC((size_t)n * sizeof *all, "the node's core masks");
    TRI_CHECK_MPI(MPI_Allgather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine,
                                MPI_BYTE, node));
    return all;
}

static int union_count(const cpu_set_t *masks, int n)
{
    cpu_set_t u;
    CPU_ZERO(&u);
    for (int r = 0; r < n; r++)
        CPU_OR(&u, &u, &masks[r]);
    return CPU_COUNT(&u);
}

void affinity_setup(MPI_Comm world)
{
    MPI_Comm node;
    int rank, local = 1;
    MPI_Comm_rank(world, &rank);
    TRI_CHECK_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    MPI_Comm_size(node, &local);

    cpu_set_t mask;
    int have_mask = sched_getaffinity(0, sizeof mask, &mask) == 0;
    if (!have_mask) { /* no mask to read: treat every online CPU as ours */
        CPU_ZERO(&mask);
        for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; c++)
            CPU_SET((int)c, &mask);
    }
    int before = CPU_COUNT(&mask), widened = 0;
    if (have_mask && local == 1 && before < sysconf(_SC_NPROCESSORS_ONLN))
        widened = widen_to_node(&mask);

    cpu_set_t *masks = node_masks(node, &mask, local);
    int node_rank;
    MPI_Comm_rank(node, &node_rank);
    const char *env = getenv("OMP_NUM_THREADS");
    chosen.from_env = env && *env;
    if (!chosen.from_env)
        omp_set_num_threads(affinity_fair_threads(masks, local, node_rank));
    chosen.threads = omp_get_max_threads();
    chosen.rank_cores = CPU_COUNT(&mask);
    chosen.node_ranks = local;
    chosen.node_cores = union_count(masks, local);
    free(masks);
    chosen.node_threads = chosen.threads;
    TRI_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &chosen.node_threads, 1, MPI_INT, MPI_SUM, node));
    MPI_Comm_free(&node);

    if (rank != 0)
        return;
    if (widened)
        printf("affinity: the only rank on this node was bound to %d core%s; it now uses all %d\n",
               before, before == 1 ? "" : "s", chosen.rank_cores);
    if (chosen.from_env && chosen.threads > chosen.rank_cores)
        printf("warning: OMP_NUM_THREADS=%d but rank 0 may run on %d core%s, so its threads share cores; bind each rank to %d cores (mpirun --map-by slot:PE=%d, or --bind-to none) or lower OMP_NUM_THREADS\n",
               chosen.threads, chosen.rank_cores, chosen.rank_cores == 1 ? "" : "s",
               chosen.threads, chosen.threads);
    else if (chosen.from_env && chosen.node_threads > chosen.node_cores)
        printf("warning: OMP_NUM_THREADS=%s gives the %d ranks of rank 0's node %d threads on %d core%s, so they time-share the cores and every OpenMP barrier waits; unset it and trident sizes each rank's pool to its share\n",
               env, local, chosen.node_threads, chosen.node_cores,
               chosen.node_cores == 1 ? "" : "s");
}

const Affinity *affinity_get(void)
{
    return &chosen;
}

void affinity_print(FILE *out)
{
    const Affinity *a = &chosen;
    fprintf(out, "threads: %d OpenMP thread%s per rank (%s; rank 0's node: %d rank%s on %d core%s)\n",
            a->threads, a->threads == 1 ? "" : "s",
            a->from_env ? "OMP_NUM_THREADS" : "its share of the cores it may run on",
            a->node_ranks, a->node_ranks == 1 ? "" : "s", a->node_cores,
            a->node_cores == 1 ? "" : "s");
}
