/*
 * affinity.c - cores and OpenMP threads per rank; see affinity.h.
 */
#include "affinity.h"

#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fail.h"

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

void affinity_setup(MPI_Comm world)
{
    MPI_Comm node;
    int rank, local = 1;
    MPI_Comm_rank(world, &rank);
    TRI_CHECK_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);

    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0)
        return;
    int before = CPU_COUNT(&mask), widened = 0;
    if (local == 1 && before < sysconf(_SC_NPROCESSORS_ONLN))
        widened = widen_to_node(&mask);
    int cores = CPU_COUNT(&mask);
    const char *env = getenv("OMP_NUM_THREADS");
    if (!env || !*env)
        omp_set_num_threads(cores);
    int threads = omp_get_max_threads();
    if (rank != 0)
        return;
    if (widened)
        printf("affinity: the only rank on this node was bound to %d core%s; it now uses all %d\n",
               before, before == 1 ? "" : "s", cores);
    if (threads > cores)
        printf("warning: OMP_NUM_THREADS=%d but rank 0 may run on %d core%s, so its threads share cores; bind each rank to %d cores (mpirun --map-by slot:PE=%d, or --bind-to none) or lower OMP_NUM_THREADS\n",
               threads, cores, cores == 1 ? "" : "s", threads, threads);
}
