/*
 * start_up_watchdog.h - the watchdog armed before MPI_Init.
 *
 * A rank stopped while the job starts (in MPI_Init, or before rank 0 has
 * read the config) leaves every other rank waiting for it; the watchdog
 * that train_run starts from the config would come too late. So main arms
 * one first thing, with the timeout the command line gives (`--set
 * fault.timeout=S`, else the key's default), under the start-up limit of
 * WATCHDOG_STARTUP_FACTOR times it; train_run re-arms it with the
 * config's value (watchdog_set_timeout).
 */
#ifndef TRI_SRC_START_UP_WATCHDOG_H
#define TRI_SRC_START_UP_WATCHDOG_H

/* Starts the watchdog before MPI_Init with the timeout the command line
 * sets for the start-up, before any config is read (the last valid `--set
 * fault.timeout=S`, else the default of [fault] timeout; 0 starts none),
 * naming the rank the launcher's environment gives (Open MPI, PMIx, MPICH,
 * Slurm) until fail_init knows it. Not collective. */
void start_up_watchdog_arm(int argc, char **argv);

#endif
