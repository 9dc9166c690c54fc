/*
 * stop_signal.h - SIGTERM and SIGUSR1 (Slurm's time limit, scancel,
 * sbatch --signal) turned into a flag that the training loop polls at
 * step boundaries.
 *
 * The two signals are blocked in every thread, before MPI_Init so that
 * the threads of MPI, OpenMP, oneDNN and the data loader inherit the
 * mask, and one thread of ours takes them with sigwait. No computing
 * thread is ever interrupted: a handler running on a thread inside
 * dnnl_sgemm corrupted the heap now and then (glibc aborted in its
 * free). A signal that comes while the job starts waits, pending, until
 * the thread takes it.
 */
#ifndef TRIDENT_STOP_SIGNAL_H
#define TRIDENT_STOP_SIGNAL_H

/* Blocks SIGTERM and SIGUSR1 in the calling thread (and every thread it
 * creates from now on). Call first thing in main. Not collective. */
void stop_signals_block(void);

/* For `train`: starts the thread that takes the signals. 0 on success.
 * Not collective. */
int stop_signals_take(void);

/* For every other command: the default actions again (the process ends).
 * Not collective. */
void stop_signals_default(void);

/* 0, or the number of the first stop signal received. Not collective. */
int stop_signal_received(void);

/* "SIGTERM" or "SIGUSR1" as this rank received it, for messages; another
 * rank's signal when this rank got none (the ranks agree to stop when any
 * one did). Not collective. */
const char *stop_signal_name(void);

#endif
