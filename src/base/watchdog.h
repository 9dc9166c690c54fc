/*
 * watchdog.h - ends a job whose rank has stopped making progress.
 *
 * A rank that stops (SIGSTOP, a dead node, a stuck file system) leaves
 * every other rank waiting in its next collective, at full CPU, for ever.
 * The stopped rank cannot say so; the ranks waiting for it can. So the
 * main thread names what it does at every phase boundary (each collective
 * of comm.c, each step, each checkpoint dataset, the wait for a batch) in
 * a record that costs a few atomic stores, and a background thread wakes
 * about once a second: when the record has not changed for `[fault]
 * timeout` seconds, it prints which operation the rank waits in, at which
 * step and since when, and ends the job with TRI_EXIT_WATCHDOG (76).
 *
 * The timeout is on no progress, not on a phase's length: a long save
 * reports each dataset, a long step each collective, so only a phase that
 * itself exceeds the timeout (a stall) trips it. Time this process itself
 * did not run (the whole job suspended with SIGSTOP and resumed) is no
 * stall: a wake-up of the thread far later than it asked for is not
 * counted. When the rank's standard output or error is full (the
 * launcher that drains it is stopped), the message says so. One watchdog
 * per process.
 */
#ifndef TRI_SRC_WATCHDOG_H
#define TRI_SRC_WATCHDOG_H

/* What the watchdog does when it expires: message is one line, ending in
 * a newline. The default (NULL) prints it on stderr, prefixed
 * "[rank R host] ", and _exit()s with TRI_EXIT_WATCHDOG, so mpiexec ends
 * the other ranks. Tests pass their own, which may return: the watchdog
 * then fires again only after progress and a new stall. */
typedef void (*WatchdogExpiry)(const char *message, void *user);

/* The rank and host the default expiry's line names. fail_init passes
 * its own: fail.c is above this file (its agreements are phases of the
 * record below), and the watchdog calls nothing of it. Until then rank -1
 * and host "?", as fail.c has them before it knows (main.c's start-up
 * watchdog passes the launcher's rank first). host must outlive the
 * watchdog; may be called while it runs. Not collective. */
void watchdog_set_rank(int rank, const char *host);

/* The phase a rank is in: an operation, an optional detail (the group of
 * a collective) and the operation it was entered from (the message says
 * "comm_allreduce on dp (in train_step, ...)"): string literals, never
 * freed. peer: the one rank of the detail's group that the operation
 * waits for, where it is known (a pipeline message's other end: "on pp,
 * peer pp rank 1"), else -1 (a collective waits for every member, and
 * cannot tell which one is missing). */
typedef struct {
    const char *operation, *detail, *within;
    int peer;
} WatchdogPhase;

/* Starts the watchdog thread: after timeout_s seconds without progress it
 * calls expiry (NULL: the default). timeout_s <= 0 starts nothing (the
 * phase calls below still work and cost the same). Returns non-zero if
 * the thread cannot be created. Not collective. */
int watchdog_start(double timeout_s, WatchdogExpiry expiry, void *user);
/* Sets the timeout of the running watchdog: main.c arms one before
 * MPI_Init with the command line's `--set fault.timeout` (or the
 * default), since no config is read yet; the config's value replaces it
 * once read. Starts a watchdog with the default expiry if none runs;
 * timeout_s <= 0 stops it. Returns non-zero if the thread cannot be
 * created. Not collective. */
int watchdog_set_timeout(double timeout_s);
/* Until this is called, the limit is WATCHDOG_STARTUP_FACTOR times the
 * timeout: start-up (the device, NCCL, mapping the data, loading a
 * checkpoint) and the first step (warm-up, first-call set-up of the
 * libraries) may legitimately take long. Call it once the first step is
 * done. Not collective. */
#define WATCHDOG_STARTUP_FACTOR 3
void watchdog_warmed_up(void);
/* The limit in force now, in seconds (the timeout, or its start-up
 * multiple); 0 when no watchdog runs. For waits that time out by
 * themselves (a GPU wait, which can also abort NCCL) at the same limit.
 * Not collective. */
double watchdog_limit_s(void);
/* Stops and joins the thread; safe when none runs. Not collective. */
void watchdog_stop(void);

/* Enters a phase (progress); returns the one it replaces, for
 * watchdog_leave. The hot path: atomic stores only, no lock, no clock.
 * Not collective. */
WatchdogPhase watchdog_enter(const char *operation, const char *detail);
/* watchdog_enter for a wait on one known peer, peer's rank in the group
 * detail names (-1: none, as watchdog_enter). Not collective. */
WatchdogPhase watchdog_enter_peer(const char *operation, const char *detail, int peer);
/* Returns to the phase watchdog_enter replaced (progress). Not collective. */
void watchdog_leave(WatchdogPhase outer);
/* The step now running (1-based; progress). Not collective. */
void watchdog_step(long step);
/* Progress inside the current phase (one dataset of a long save). Not
 * collective. */
void watchdog_progress(void);
/* From now on the calling thread's phases and progress are not the
 * rank's: the calls above do nothing on it. For a helper thread that runs
 * collectives or I/O of its own (the asynchronous checkpoint writer).
 * Not collective. */
void watchdog_ignore_this_thread(void);

#endif
