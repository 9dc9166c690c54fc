/*
 * fail.c - fatal errors and agreement on failure; see fail.h.
 * This is the one file that calls MPI_Abort.
 *
 * Above watchdog.c: fail_agree and fail_report are named phases of its
 * record, and fail_init hands it the rank and host its last line names;
 * the watchdog calls nothing here.
 */
#include "fail.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "watchdog.h"
#include "ops.h"

static int fail_world_rank = -1;
static char fail_hostname[64] = "?";

static void fail_kernel_handler(const char *what, const char *file, int line)
{
    fail_abort(what, file, line);
}

void fail_init(void)
{
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
        MPI_Comm_rank(MPI_COMM_WORLD, &fail_world_rank);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    if (gethostname(fail_hostname, sizeof fail_hostname) != 0)
        strcpy(fail_hostname, "?");
    fail_hostname[sizeof fail_hostname - 1] = '\0';
    watchdog_set_rank(fail_world_rank, fail_hostname);
    ops_set_fatal_handler(fail_kernel_handler);
    /* One failing HDF5 call would otherwise print a stack on every rank;
     * ckpt.c says what failed in a message of its own instead. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

int fail_rank(void) { return fail_world_rank; }

FILE *fail_stream(int speak)
{
    static FILE *null_stream;
    if (speak)
        return stderr;
    if (!null_stream)
        null_stream = fopen("/dev/null", "w");
    return null_stream ? null_stream : stderr;
}
const char *fail_host(void) { return fail_hostname; }

int fail_agree(MPI_Comm comm, int rc)
{
    int all = 0;
    /* where the ranks meet at each step's end: name it for the watchdog */
    WatchdogPhase outer = watchdog_enter("fail_agree (the ranks agree on a status)", NULL);
    TRI_CHECK_MPI(MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, comm));
    watchdog_leave(outer);
    return all;
}

int fail_report(MPI_Comm comm, int rc, const char *msg)
{
    int all = fail_agree(comm, rc);
    if (!all)
        return 0;
    int rank, root_rc = rc;
    MPI_Comm_rank(comm, &rank);
    WatchdogPhase outer = watchdog_enter("fail_report (the ranks agree who reports)", NULL);
    TRI_CHECK_MPI(MPI_Bcast(&root_rc, 1, MPI_INT, 0, comm));
    watchdog_leave(outer);
    if (rc && msg && msg[0]) {
        if (rank == 0)
            fputs(msg, stderr);
        else if (!root_rc)
            fprintf(stderr, "[rank %d %s] %s", fail_world_rank, fail_hostname, msg);
    }
    fflush(stderr);
    return all;
}

/* Ends every rank of the job from this one, once stderr is out. */
static __attribute__((noreturn)) void abort_job(int status)
{
    fflush(stderr);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized)
        MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

void fail_abort(const char *what, const char *file, int line)
{
    fprintf(stderr, "[rank %d %s] trident: fatal: %s at %s:%d\n",
            fail_world_rank, fail_hostname, what, file, line);
    abort_job(TRI_EXIT_ERROR);
}

void fail_stop(int status, const char *msg)
{
    fprintf(stderr, "[rank %d %s] %s\n", fail_world_rank, fail_hostname, msg);
    abort_job(status);
}

void fail_input_abort(const char *msg)
{
    fail_stop(TRI_EXIT_ERROR, msg);
}

void fail_mpi_(int err, const char *call, const char *file, int line)
{
    if (err == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, msg, &len);
    char what[1024 + MPI_MAX_ERROR_STRING];
    snprintf(what, sizeof what, "%s failed: %s", call, msg);
    fail_abort(what, file, line);
}
