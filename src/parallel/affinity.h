/*
 * affinity.h - the cores each rank computes on, and its OpenMP threads.
 *
 * Two ways a node's cores go to waste or get fought over:
 *  - mpirun binds each rank to a core by default when it starts two or
 *    fewer ranks (Open MPI's "bind to core"), so a lone rank's threads
 *    would share one core of a many-core node. A rank alone on its node
 *    therefore widens its affinity to every core it is allowed.
 *  - Above two ranks Open MPI binds to the socket, and oversubscribed it
 *    binds nothing, so every rank may run on every core of its socket or
 *    node. A pool per rank sized to the cores it may use would put
 *    ranks x cores threads on the cores; their OpenMP barriers spin, and a
 *    tiny model ran 11x slower with 4 ranks on 2 cores (500x with 8).
 * So each rank's pool gets its fair share of the cores it may use: for
 * each core in its mask, 1 / (the node's ranks whose masks hold that
 * core), summed, rounded down, at least 1. Masks are compared over the
 * node (MPI_COMM_TYPE_SHARED). OMP_NUM_THREADS, where set, wins; a warning
 * says when it puts more threads than cores on the node.
 */
#ifndef TRI_SRC_AFFINITY_H
#define TRI_SRC_AFFINITY_H

#include <mpi.h>
#include <sched.h>
#include <stdio.h>

typedef struct {
    int threads;        /* this rank's OpenMP pool */
    int from_env;       /* OMP_NUM_THREADS chose it */
    int rank_cores;     /* cores this rank may run on */
    int node_ranks;     /* world ranks on this node */
    int node_cores;     /* distinct cores the node's ranks may run on */
    int node_threads;   /* the node's ranks' threads, summed */
} Affinity;

/* Call before any OpenMP region (threads inherit the affinity they are
 * created with). Sets this rank's pool; rank 0 prints only when it widened
 * a binding or OMP_NUM_THREADS oversubscribes the cores (affinity_print
 * reports the choice). Collective on world. */
void affinity_setup(MPI_Comm world);

/* What affinity_setup decided (all zeros before it). Not collective. */
const Affinity *affinity_get(void);

/* One line: the threads per rank and why. Not collective. */
void affinity_print(FILE *out);

/* The fair share of rank `me` among the n masks of a node's ranks (see
 * above): at least 1. Pure; not collective. */
int affinity_fair_threads(const cpu_set_t *masks, int n, int me);

#endif
