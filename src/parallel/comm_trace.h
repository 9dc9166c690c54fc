/*
 * comm_trace.h - the communication trace: every call through comm.h,
 * written down per rank, so that a checker (tests/trace_check.c) can
 * prove from the files alone that the ranks agreed on what they said to
 * each other.
 *
 * Switched on by the environment, not the config, so that tracing a run
 * changes nothing of its config or its digest: TRIDENT_COMM_TRACE=DIR
 * makes each rank write DIR/rank-NNNNN.trace (its world rank, five
 * digits). Unset or empty, nothing is traced and a call pays one branch
 * (comm_tracing). A file that already exists is never overwritten: the
 * run stops with a message naming it.
 *
 * The file is text, one line per event, flushed per line, so that a rank
 * the watchdog ends leaves its trace up to the call it waited in:
 *
 *   # trident comm trace: world rank R of N
 *   comm ID NAME RANK SIZE MEMBERS   a communicator, the first time this
 *                                    rank uses it: its group's name, this
 *                                    rank's place in it, its size and its
 *                                    members' world ranks in group order
 *   coll ID SEQ OPERATION n=COUNT DTYPE root=ROOT DETAIL
 *   a2a ID SEQ send=C0,C1,... recv=C0,C1,...
 *                                    right after an all-to-all's coll line
 *                                    (its n is the group's size, DETAIL
 *                                    "a2a"): the elements this rank sent
 *                                    to and received from each group rank
 *   send ID SEQ KIND PEER n=COUNT DTYPE
 *   recv ID SEQ KIND PEER n=COUNT DTYPE
 *
 * ID names a communicator alike on every member: NAME@W, W the world rank
 * of its rank 0, and #K after it for the K-th (from 0) communicator of
 * the same name and members this rank has met (the asynchronous
 * checkpoint writer's own world is world@0#1). SEQ is the call's place
 * among this rank's collectives on ID, or, for a message, among its
 * messages of KIND to or from PEER (a pp rank) on ID: one pipeline link.
 * DETAIL is the reduction (sum, max, min), a digest of the counts of a
 * reduce-scatter or all-gather (split=HEX: every member must pass the
 * same counts), or -.
 */
#ifndef TRI_SRC_COMM_TRACE_H
#define TRI_SRC_COMM_TRACE_H

#include <mpi.h>
#include <stdint.h>

#include "comm_group.h"

#define COMM_TRACE_ENV "TRIDENT_COMM_TRACE"

/* -1 until the environment is read, then 0 (off) or 1 (on). Read it
 * through comm_tracing only. */
extern int comm_trace_state;

/* Reads the environment on the first call and, when it names a
 * directory, creates it if need be and opens this rank's file (a file
 * that exists, or one that cannot be made, ends the run naming it:
 * fail_input_abort). Returns 1 when tracing. Not collective. */
int comm_trace_start(void);

/* 1 when every call should be traced: one branch once the environment is
 * read. Not collective. */
static inline int comm_tracing(void)
{
    return comm_trace_state != 0 && comm_trace_start();
}

/* Records a collective on comm, the group called name: operation, its
 * element count, the dtype's name, the root (-1: none) and detail (NULL:
 * none). A null comm is not recorded (the call itself fails). Not
 * collective; thread-safe. */
void comm_trace_collective(MPI_Comm comm, const char *name, const char *operation,
                           int64_t count, const char *dtype, int root, const char *detail);

/* Records an all-to-all on comm (comm_alltoallv): its coll line, the
 * same on every member, and its a2a line of this rank's counts per group
 * rank, which differ (the checker pairs them: rank i's send to j is j's
 * receive from i). Not collective; thread-safe. */
void comm_trace_exchange(MPI_Comm comm, const char *name, const char *operation,
                         const char *dtype, const int64_t *send_counts,
                         const int64_t *recv_counts);

/* Records a pipeline message this rank posts on the pp communicator
 * comm: sends (1) or receives (0) count elements of dtype of kind to or
 * from pp rank peer. Not collective; thread-safe. */
void comm_trace_message(MPI_Comm comm, int sends, CommLink kind, int64_t count,
                        const char *dtype, int peer);

/* A digest of a reduce-scatter's or all-gather's counts, for DETAIL
 * ("split=HEX"), written into out (at least 32 bytes). Pure; not
 * collective. */
void comm_trace_split(const int *counts, int n, char *out, int size);

#endif
