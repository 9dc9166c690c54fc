/*
 * affinity.h - the cores each rank computes on.
 *
 * mpirun binds each rank to a core by default when it starts two or fewer
 * ranks (Open MPI's "bind to core"), so a lone rank's OpenMP threads would
 * share one core of a many-core node and run at a fraction of its speed,
 * with no word to the user. A rank alone on its node therefore widens its
 * affinity to every core it is allowed, and each rank sizes its OpenMP
 * pool to its cores unless OMP_NUM_THREADS says otherwise; when
 * OMP_NUM_THREADS asks for more threads than the rank's cores, a warning
 * says how to fix the binding.
 */
#ifndef TRI_SRC_AFFINITY_H
#define TRI_SRC_AFFINITY_H

#include <mpi.h>

/* Call before any OpenMP region (threads inherit the affinity they are
 * created with). Rank 0 prints what it decided when it changed anything.
 * Collective on world. */
void affinity_setup(MPI_Comm world);

#endif
