/*
 * watchdog.c - a thread that ends a job whose rank stopped making
 * progress; see watchdog.h.
 *
 * The main thread only stores: the phase's two pointers and the step, then
 * one atomic add to a progress counter (release). It reads no clock: the
 * watchdog thread notes when it first sees each counter value, so "no
 * progress for T s" is measured by the thread that waits, to within one of
 * its wake-ups. Once the counter has stood still for the timeout, the
 * writer last stored the phase more than that long ago, so the thread's
 * acquire load of the counter makes the phase it reads the one in force.
 *
 * A leaf of src/: it includes only exit_codes.h, and the rank and host
 * its default expiry names come from fail_init (watchdog_set_rank), so
 * fail.c, whose agreements are phases of this record, is above it.
 */
#include "watchdog.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exit_codes.h"

/* The phase a process starts in, before it names any other. The message
 * names it as such ("waiting in start-up"), never as the phase an inner
 * one was entered from: "training (in start-up, step 12)" misled. */
static const char start_up[] = "start-up";
static _Atomic(const char *) phase_operation = start_up;
static _Atomic(const char *) phase_detail;
static _Atomic(const char *) phase_within;
static atomic_int phase_peer = -1;
static atomic_long phase_step;
static atomic_ulong progress;
static atomic_int warmed_up;

/* Who this rank is, for the default expiry's line (watchdog_set_rank). */
/* Atomic: fail_init sets them while the watchdog armed before MPI_Init
 * runs. */
static atomic_int origin_rank = -1;
static _Atomic(const char *) origin_host = "?";

static struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int running, stopping;
    _Atomic double timeout_s;
    WatchdogExpiry expiry;
    void *user;
} dog = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void made_progress(void)
{
    atomic_fetch_add_explicit(&progress, 1, memory_order_release);
}

/* Set on a thread whose phases are not the rank's (the asynchronous
 * checkpoint writer): its collectives and datasets would overwrite the
 * main thread's record, and its progress would hide the main thread's
 * stall. */
static _Thread_local int not_watched;

void watchdog_ignore_this_thread(void) { not_watched = 1; }

WatchdogPhase watchdog_enter_peer(const char *operation, const char *detail, int peer)
{
    if (not_watched)
        return (WatchdogPhase){NULL, NULL, NULL, -1};
    WatchdogPhase outer = {
        atomic_load_explicit(&phase_operation, memory_order_relaxed),
        atomic_load_explicit(&phase_detail, memory_order_relaxed),
        atomic_load_explicit(&phase_within, memory_order_relaxed),
        atomic_load_explicit(&phase_peer, memory_order_relaxed),
    };
    atomic_store_explicit(&phase_operation, operation, memory_order_relaxed);
    atomic_store_explicit(&phase_detail, detail, memory_order_relaxed);
    atomic_store_explicit(&phase_within, outer.operation == start_up ? NULL : outer.operation,
                          memory_order_relaxed);
    atomic_store_explicit(&phase_peer, peer, memory_order_relaxed);
    made_progress();
    return outer;
}

WatchdogPhase watchdog_enter(const char *operation, const char *detail)
{
    return watchdog_enter_peer(operation, detail, -1);
}

void watchdog_leave(WatchdogPhase outer)
{
    if (not_watched)
        return;
    atomic_store_explicit(&phase_operation, outer.operation, memory_order_relaxed);
    atomic_store_explicit(&phase_detail, outer.detail, memory_order_relaxed);
    atomic_store_explicit(&phase_within, outer.within, memory_order_relaxed);
    atomic_store_explicit(&phase_peer, outer.peer, memory_order_relaxed);
    made_progress();
}

void watchdog_step(long step)
{
    if (not_watched)
        return;
    atomic_store_explicit(&phase_step, step, memory_order_relaxed);
    made_progress();
}

void watchdog_progress(void)
{
    if (!not_watched)
        made_progress();
}

void watchdog_set_rank(int rank, const char *host)
{
    atomic_store(&origin_rank, rank);
    atomic_store(&origin_host, host);
}

void watchdog_warmed_up(void) { atomic_store(&warmed_up, 1); }

/* The limit now: the timeout, or its start-up multiple. */
static double limit_s(void)
{
    double timeout = atomic_load(&dog.timeout_s);
    return atomic_load(&warmed_up) ? timeout : WATCHDOG_STARTUP_FACTOR * timeout;
}

double watchdog_limit_s(void)
{
    return dog.running ? limit_s() : 0.0;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether a write to fd would block now: a pipe or terminal that its
 * reader no longer drains is full. A file, or a closed fd, never blocks. */
static int write_would_block(int fd, int wait_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, wait_ms) == 0;
}

static void default_expiry(const char *message, void *user)
{
    (void)user;
    char line[1024];
    int n = snprintf(line, sizeof line, "[rank %d %s] %s", atomic_load(&origin_rank),
                     atomic_load(&origin_host), message);
    if (n > (int)sizeof line - 1)
        n = (int)sizeof line - 1;
    /* write(2), not stdio: the main thread may hold stderr's lock where it
     * is stuck. A stderr nobody drains (the launcher stopped) would block
     * the write and keep the rank alive: past the timeout the line is
     * dropped and the rank ends all the same. */
    int wait_ms = (int)(1000 * atomic_load(&dog.timeout_s));
    if (!write_would_block(STDERR_FILENO, wait_ms)) {
        ssize_t ignored = write(STDERR_FILENO, line, (size_t)n);
        (void)ignored;
    }
    _exit(TRI_EXIT_WATCHDOG);
}

/* Why the rank may have stopped making progress. A full standard output
 * or error is the likeliest: the main thread blocks in its next write
 * there, and the launcher that relays it (a Ctrl-Z'd mpirun) is stopped. */
static const char *likely_cause(void)
{
    if (write_would_block(STDOUT_FILENO, 0))
        return "this rank is blocked writing to its standard output, which the launcher"
               " (mpirun, srun) no longer reads: the launcher may be stopped (Ctrl-Z?)";
    if (write_would_block(STDERR_FILENO, 0))
        return "this rank is blocked writing to its standard error, which the launcher"
               " (mpirun, srun) no longer reads: the launcher may be stopped (Ctrl-Z?)";
    return "a rank may be stopped, its node dead or its file system stuck";
}

/* The line the watchdog prints: the operation, its step, since when, why. */
static void describe(char *buf, size_t size, double stalled_s, time_t since)
{
    const char *op = atomic_load_explicit(&phase_operation, memory_order_relaxed);
    const char *detail = atomic_load_explicit(&phase_detail, memory_order_relaxed);
    const char *within = atomic_load_explicit(&phase_within, memory_order_relaxed);
    int peer = atomic_load_explicit(&phase_peer, memory_order_relaxed);
    long step = atomic_load_explicit(&phase_step, memory_order_relaxed);
    double timeout = atomic_load(&dog.timeout_s);
    struct tm tm;
    localtime_r(&since, &tm);
    char at_step[160], limit[96], peer_of[64] = "";
    if (peer >= 0)
        snprintf(peer_of, sizeof peer_of, ", peer %s%srank %d", detail ? detail : "",
                 detail ? " " : "", peer);
    int n = within ? snprintf(at_step, sizeof at_step, "in %s, ", within) : 0;
    if (step > 0)
        snprintf(at_step + n, sizeof at_step - (size_t)n, "step %ld", step);
    else
        snprintf(at_step + n, sizeof at_step - (size_t)n, "before the first step");
    if (atomic_load(&warmed_up))
        snprintf(limit, sizeof limit, "[fault] timeout = %g s", timeout);
    else
        snprintf(limit, sizeof limit, "start-up: %d x [fault] timeout = %g s",
                 WATCHDOG_STARTUP_FACTOR, WATCHDOG_STARTUP_FACTOR * timeout);
    snprintf(buf, size,
             "trident: watchdog: no progress for %.*f s: waiting in %s%s%s%s (%s) since %02d:%02d:%02d;"
             " %s: ending the job with exit %d (%s)\n",
             stalled_s < 10 ? 1 : 0, stalled_s, op ? op : "?", detail ? " on " : "",
             detail ? detail : "", peer_of, at_step, tm.tm_hour, tm.tm_min, tm.tm_sec, likely_cause(),
             TRI_EXIT_WATCHDOG, limit);
}

/* A few wake-ups per timeout: at least one a second, at most one per 10 ms. */
static double poll_interval_s(void)
{
    double poll = atomic_load(&dog.timeout_s) / 8;
    return poll > 1.0 ? 1.0 : poll < 0.01 ? 0.01 : poll;
}

/* A wake-up this much later than asked means this process did not run
 * meanwhile: the whole job was suspended (SIGSTOP to every rank, as
 * Slurm's scontrol suspend and gang scheduling do) or the machine starved
 * it. That is no stall of a peer, so the time does not count: after
 * SIGCONT this thread may well run before the main thread does. */
#define WATCHDOG_LATE_WAKE_S 1.0

static void wait_until(double deadline)
{
    struct timespec until;
    until.tv_sec = (time_t)deadline;
    until.tv_nsec = (long)((deadline - (double)until.tv_sec) * 1e9);
    pthread_cond_timedwait(&dog.wake, &dog.lock, &until);
}

/* Wakes every poll interval and fires once per stall: after the callback
 * returns, only new progress re-arms it. */
static void *watch(void *unused)
{
    (void)unused;
    unsigned long seen = atomic_load_explicit(&progress, memory_order_acquire);
    double seen_at = mono_now();
    int fired = 0;
    pthread_mutex_lock(&dog.lock);
    while (!dog.stopping) {
        double deadline = mono_now() + poll_interval_s();
        wait_until(deadline);
        if (dog.stopping)
            break;
        /* the clock first: a stop from here on leaves `now` before it */
        double now = mono_now();
        if (now - deadline > WATCHDOG_LATE_WAKE_S)
            seen_at += now - deadline;
        unsigned long now_seen = atomic_load_explicit(&progress, memory_order_acquire);
        if (now_seen != seen) {
            seen = now_seen;
            seen_at = now;
            fired = 0;
        } else if (!fired && now - seen_at >= limit_s()) {
            fired = 1;
            char msg[768];
            describe(msg, sizeof msg, now - seen_at, time(NULL) - (time_t)(now - seen_at + 0.5));
            pthread_mutex_unlock(&dog.lock);
            dog.expiry(msg, dog.user);
            pthread_mutex_lock(&dog.lock);
        }
    }
    pthread_mutex_unlock(&dog.lock);
    return NULL;
}

int watchdog_start(double timeout_s, WatchdogExpiry expiry, void *user)
{
    if (timeout_s <= 0 || dog.running)
        return 0;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&dog.wake, &attr);
    pthread_condattr_destroy(&attr);
    atomic_store(&dog.timeout_s, timeout_s);
    atomic_store(&warmed_up, 0);
    dog.expiry = expiry ? expiry : default_expiry;
    dog.user = user;
    dog.stopping = 0;
    if (pthread_create(&dog.thread, NULL, watch, NULL) != 0) {
        pthread_cond_destroy(&dog.wake);
        return 1;
    }
    dog.running = 1;
    return 0;
}

int watchdog_set_timeout(double timeout_s)
{
    if (timeout_s <= 0) {
        watchdog_stop();
        return 0;
    }
    if (!dog.running)
        return watchdog_start(timeout_s, NULL, NULL);
    pthread_mutex_lock(&dog.lock);
    atomic_store(&dog.timeout_s, timeout_s);
    pthread_cond_signal(&dog.wake); /* its next wake-up at the new interval */
    pthread_mutex_unlock(&dog.lock);
    return 0;
}

void watchdog_stop(void)
{
    if (!dog.running)
        return;
    pthread_mutex_lock(&dog.lock);
    dog.stopping = 1;
    pthread_cond_signal(&dog.wake);
    pthread_mutex_unlock(&dog.lock);
    pthread_join(dog.thread, NULL);
    pthread_cond_destroy(&dog.wake);
    dog.running = 0;
}
