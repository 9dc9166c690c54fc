/*
 * fail.h - the two kinds of failure, and how every rank learns of them.
 *
 * 1. Bad input (a config key, a missing file, a mismatched checkpoint):
 *    functions return an int (0 = ok), pass it up with TRI_TRY, and the
 *    ranks agree with fail_agree (an MPI_Allreduce MAX) before exiting, so
 *    every rank exits non-zero and none is left waiting in a collective.
 * 2. A library failing mid-run (MPI, HDF5, CUDA, NCCL, out of memory): the
 *    peers are already inside collectives, so we print the call, file:line,
 *    rank and host, and MPI_Abort.
 *
 * fail.c is above watchdog.c: its agreements are named phases of the
 * watchdog's record, and fail_init tells the watchdog the rank and host
 * its last line names (as it gives the kernels their fatal hook), so
 * watchdog.c needs nothing of this file and the two make no circle
 * (tests/t_deps.sh).
 */
#ifndef TRI_SRC_FAIL_H
#define TRI_SRC_FAIL_H

#include <mpi.h>
#include <stdio.h>

#include "exit_codes.h"   /* TRI_EXIT_*, which fail.h's callers use */

#define TRI_TRY(expr)                                                      \
    do {                                                                   \
        int tri_rc_ = (expr);                                              \
        if (tri_rc_)                                                       \
            return tri_rc_;                                                \
    } while (0)

#define TRI_CHECK_MPI(call) fail_mpi_((call), #call, __FILE__, __LINE__)

/* Remembers the world rank and host for messages (and hands them to the
 * watchdog, watchdog_set_rank), installs the kernels' fatal handler, and
 * sets MPI_ERRORS_RETURN on MPI_COMM_WORLD so that TRI_CHECK_MPI can name
 * the failing call. Not collective. */
void fail_init(void);

/* Collective on comm: returns the largest rc of any rank (0 if all ok). */
int fail_agree(MPI_Comm comm, int rc);

/* Collective on comm: agrees on rc like fail_agree, and makes sure the
 * failure is reported once: by rank 0 of comm if it failed (msg is its
 * message), else by each failing rank, prefixed "[rank R host]". msg may be
 * NULL or empty. Returns the agreed rc. */
int fail_report(MPI_Comm comm, int rc, const char *msg);

/* Prints "[rank R host] fatal: what at file:line" and MPI_Abort()s. */
void fail_abort(const char *what, const char *file, int line)
    __attribute__((noreturn));

void fail_mpi_(int err, const char *call, const char *file, int line);

/* Bad input that one rank finds mid-run, alone (a data file rewritten or
 * truncated under the run): its peers are already inside collectives and
 * would never join an agreement, so print msg (one line, "trident: ...")
 * prefixed "[rank R host]" and MPI_Abort with TRI_EXIT_ERROR, which ends
 * every rank. Not collective. */
void fail_input_abort(const char *msg) __attribute__((noreturn));

/* A run this rank must end mid-step with a status of its own (a GPU wait
 * that saw a peer fail, or outlasted [fault] timeout: TRI_EXIT_WATCHDOG):
 * prints msg (one line, "trident: ...") prefixed "[rank R host]" and
 * MPI_Aborts with status, which ends every rank. Not collective. */
void fail_stop(int status, const char *msg) __attribute__((noreturn));

/* stderr when speak is true, else a stream that discards: where every rank
 * checks the same input, only rank 0 needs to say what is wrong.
 * Not collective. */
FILE *fail_stream(int speak);

/* World rank and host name, as fail_init recorded them. */
int fail_rank(void);
const char *fail_host(void);

#endif
