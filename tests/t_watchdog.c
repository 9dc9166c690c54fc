/*
 * t_watchdog.c - the watchdog of src/base/watchdog.c with its expiry replaced
 * by a callback that records the message, so the test sees it fire
 * instead of exiting: it fires once per stall and names the phase, the
 * step and the limit; it never fires while progress is made; the start-up
 * allowance holds until the first step is done; leaving a phase restores
 * the one it replaced; a new timeout replaces the running one's; a full
 * standard output is named; the whole process stopped and continued is
 * no stall; a timeout of 0 watches nothing; stopping joins the
 * thread at once; the watchdog armed before MPI_Init reads the command
 * line's timeout as the run does; a phase that waits for one known peer
 * names it, and leaving it forgets the peer. On 2 ranks, rank 0 waits in
 * comm_barrier for a rank that is late, and its watchdog names that
 * collective and its group; then for a pipeline message from a rank that
 * is late, and its watchdog names the message, the link's group and the
 * peer.
 */
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include "comm.h"
#include "grid.h"
#include "start_up_watchdog.h"
#include "tap.h"
#include "timer.h"
#include "watchdog.h"

static atomic_int fired;
static char last_message[1024];

static void record(const char *message, void *user)
{
    (void)user;
    if (atomic_load(&fired) == 0)
        snprintf(last_message, sizeof last_message, "%s", message);
    atomic_fetch_add(&fired, 1);
}

static void start(double timeout_s)
{
    atomic_store(&fired, 0);
    last_message[0] = '\0';
    if (watchdog_start(timeout_s, record, NULL))
        tap_diag("watchdog_start failed");
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Stays in one phase, but reports progress every `every` seconds. */
static void busy_with_progress(double seconds, double every)
{
    double t0 = timer_now();
    while (timer_now() - t0 < seconds) {
        sleep_s(every);
        watchdog_progress();
    }
}

/* watchdog_set_timeout replaces the limit of the running watchdog (the
 * config's value after the command line's of the start-up), and 0 stops
 * it. */
static void rearmed(void)
{
    start(100);
    watchdog_warmed_up();
    watchdog_set_timeout(0.3);
    WatchdogPhase outer = watchdog_enter("rearmed_phase", NULL);
    sleep_s(1.5);
    int n = atomic_load(&fired);
    tap_ok(n == 1 && strstr(last_message, "[fault] timeout = 0.3 s") != NULL,
           "a watchdog started at 100 s and set to 0.3 s fires at 0.3 s (fired %d: %s)", n,
           last_message);
    watchdog_set_timeout(0);
    tap_ok(watchdog_limit_s() == 0.0, "a timeout set to 0 stops the watchdog");
    watchdog_leave(outer);
}

/* The watchdog armed before MPI_Init takes `--set fault.timeout` as
 * config_load takes it, blanks around each part included: a value the run
 * accepts must not leave the start-up at the default timeout (it did: a
 * rank stopped in MPI_Init then hung the job for 3 x the default). */
static void start_up_reads_the_set_as_the_run_does(void)
{
    char prog[] = "trident", cmd[] = "train", set[] = "--set", value[] = " fault . timeout = 2 ";
    char *argv[] = {prog, cmd, set, value, NULL};
    watchdog_stop();
    start_up_watchdog_arm(4, argv);
    double limit = watchdog_limit_s();
    watchdog_stop();
    tap_ok(limit == WATCHDOG_STARTUP_FACTOR * 2.0,
           "the start-up watchdog reads --set ' fault . timeout = 2 ' as the run does: a limit "
           "of %d x 2 s (got %g s)", WATCHDOG_STARTUP_FACTOR, limit);
}

/* A standard output that nobody drains (a pipe filled to the brim, as a
 * stopped launcher leaves it): the message says the rank is blocked
 * writing to it. */
static void full_stdout(void)
{
    int fds[2], saved = dup(STDOUT_FILENO);
    fflush(stdout);
    if (saved < 0 || pipe(fds) != 0) {
        tap_ok(0, "cannot make a pipe for the full-stdout check");
        return;
    }
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    char block[4096] = {0};
    while (write(fds[1], block, sizeof block) > 0) {
    }
    dup2(fds[1], STDOUT_FILENO);
    start(0.3);
    watchdog_warmed_up();
    WatchdogPhase outer = watchdog_enter("writing_phase", NULL);
    sleep_s(1.5);
    watchdog_leave(outer);
    watchdog_stop();
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(fds[0]);
    close(fds[1]);
    int n = atomic_load(&fired);
    tap_ok(n == 1 && strstr(last_message, "this rank is blocked writing to its standard output, "
                                          "which the launcher (mpirun, srun) no longer reads")
                     != NULL,
           "a full standard output is named as the cause (fired %d: %s)", n, last_message);
}

/* The whole process stopped for 3 s (SIGSTOP from a helper, then
 * SIGCONT, as a suspended job is) while the main thread reports progress
 * every 0.2 s under a 2 s timeout: resumed, the main thread is mid-step
 * (0.5 s to its next report) while the watchdog thread, whose wait ran out
 * during the stop, checks at once. The stop is not a stall. */
static void process_stopped(void)
{
    char script[128];
    snprintf(script, sizeof script, "sleep 0.5; kill -STOP %d; sleep 3; kill -CONT %d",
             (int)getpid(), (int)getpid());
    char *argv[] = {"sh", "-c", script, NULL};
    start(2.0);
    watchdog_warmed_up();
    WatchdogPhase outer = watchdog_enter("suspended_phase", NULL);
    pid_t helper;
    int spawned = posix_spawn(&helper, "/bin/sh", NULL, NULL, argv, environ) == 0;
    double t0 = timer_now(), last = t0;
    while (spawned && timer_now() - t0 < 5.0) {
        sleep_s(0.2);
        if (timer_now() - last > 1.0) /* resumed */
            sleep_s(0.5);
        last = timer_now();
        watchdog_progress();
    }
    if (spawned)
        waitpid(helper, NULL, 0);
    watchdog_leave(outer);
    watchdog_stop();
    int n = atomic_load(&fired);
    tap_ok(spawned && n == 0,
           "the whole process stopped for 3 s (SIGSTOP, SIGCONT) under a 2 s timeout does"
           " not fire (fired %d%s%s)", n, n ? ": " : "", n ? last_message : "");
}

/* A stall of 1.5 s under the running 0.3 s watchdog, which it then
 * stops: whether it fired once, naming expected. */
static int stall_names(const char *expected)
{
    sleep_s(1.5);
    int n = atomic_load(&fired);
    watchdog_stop();
    return n == 1 && strstr(last_message, expected) != NULL;
}

/* A phase that waits for one known peer names it; leaving it forgets it. */
static void peer_phases(void)
{
    start(0.3);
    watchdog_warmed_up();
    watchdog_step(5);
    WatchdogPhase outer = watchdog_enter_peer("link_wait", "pp", 3);
    tap_ok(stall_names("waiting in link_wait on pp, peer pp rank 3 (step 5)"),
           "a phase waiting for one peer names it, in its group: %s", last_message);
    watchdog_leave(outer);

    start(0.3);
    watchdog_warmed_up();
    outer = watchdog_enter("outer_phase", "dp");
    watchdog_leave(watchdog_enter_peer("inner_phase", "pp", 1));
    tap_ok(stall_names("waiting in outer_phase on dp (step 5)"),
           "leaving a phase with a peer restores the one without: %s", last_message);
    watchdog_leave(outer);
}

static void local_checks(void)
{
    start(0.3);
    watchdog_warmed_up();
    watchdog_step(7);
    WatchdogPhase outer = watchdog_enter("test_phase", "group_x");
    sleep_s(1.5);
    int n = atomic_load(&fired);
    tap_ok(n == 1, "a stall of 1.5 s with a 0.3 s timeout fires once (fired %d)", n);
    tap_ok(strstr(last_message, "watchdog: no progress for ") != NULL
           && strstr(last_message, "waiting in test_phase on group_x (step 7) since ")
              != NULL
           && strstr(last_message, "[fault] timeout = 0.3 s") != NULL,
           "the message names the phase, its detail, the step and the limit: %s", last_message);
    watchdog_leave(outer);
    watchdog_stop();

    start(0.3);
    watchdog_warmed_up();
    outer = watchdog_enter("long_save", NULL);
    busy_with_progress(1.5, 0.05);
    n = atomic_load(&fired);
    tap_ok(n == 0, "1.5 s in one phase with progress every 0.05 s does not fire (fired %d)", n);
    watchdog_leave(outer);
    watchdog_stop();

    start(0.3);
    watchdog_step(0);
    outer = watchdog_enter("first_step", NULL);
    sleep_s(0.6);
    int early = atomic_load(&fired);
    sleep_s(1.4);
    n = atomic_load(&fired);
    tap_ok(early == 0 && n == 1 && strstr(last_message, "waiting in first_step (before the first step)")
           && strstr(last_message, "start-up: 3 x [fault] timeout = 0.9 s"),
           "before the first step is done the limit is 3 x the timeout (0.6 s: fired %d;"
           " 2 s: fired %d: %s)", early, n, last_message);
    watchdog_leave(outer);
    watchdog_stop();

    start(0.3);
    watchdog_warmed_up();
    outer = watchdog_enter("outer_phase", NULL);
    WatchdogPhase inner = watchdog_enter("inner_phase", "dp");
    watchdog_leave(inner);
    sleep_s(1.5);
    n = atomic_load(&fired);
    tap_ok(n == 1 && strstr(last_message, "waiting in outer_phase (before the first step) since ") != NULL,
           "leaving a phase restores the one it replaced: %s", last_message);
    watchdog_leave(outer);
    watchdog_stop();

    peer_phases();
    rearmed();
    full_stdout();
    process_stopped();

    start(0);
    sleep_s(0.5);
    tap_ok(atomic_load(&fired) == 0, "a timeout of 0 watches nothing");
    watchdog_stop();

    start(100);
    sleep_s(0.1);
    double t0 = timer_now();
    watchdog_stop();
    double took = timer_now() - t0;
    tap_ok(took < 0.5, "watchdog_stop wakes and joins the thread at once (%.3f s)", took);
}

/* A helper thread that ignores the watchdog (the asynchronous checkpoint
 * writer) and makes "progress" all the time. */
static void *busy_ignored_thread(void *unused)
{
    (void)unused;
    watchdog_ignore_this_thread();
    WatchdogPhase outer = watchdog_enter("writer_phase", NULL);
    busy_with_progress(1.5, 0.02);
    watchdog_leave(outer);
    return NULL;
}

/* The main thread stalls while an ignored thread keeps busy: the watchdog
 * still fires, and names the main thread's phase. */
static void ignored_thread(void)
{
    start(0.3);
    watchdog_warmed_up();
    WatchdogPhase outer = watchdog_enter("main_phase", NULL);
    pthread_t helper;
    int made = pthread_create(&helper, NULL, busy_ignored_thread, NULL) == 0;
    sleep_s(1.5);
    if (made)
        pthread_join(helper, NULL);
    int n = atomic_load(&fired);
    tap_ok(made && n == 1 && strstr(last_message, "waiting in main_phase") != NULL,
           "a helper thread that ignores the watchdog neither hides a stall nor replaces "
           "the phase (fired %d: %s)", n, last_message);
    watchdog_leave(outer);
    watchdog_stop();
}

/* Rank 1 comes late to a barrier; rank 0's watchdog names it. */
static void collective_named(void)
{
    Grid g;
    grid_world_only(&g, MPI_COMM_WORLD);
    if (tap_rank() == 0) {
        start(0.3);
        watchdog_warmed_up();
    }
    if (tap_rank() == 1)
        sleep_s(2.0);
    comm_barrier(&g, COMM_WORLD);
    if (tap_rank() == 0)
        watchdog_stop();
    int ok = tap_rank() != 0
             || (atomic_load(&fired) == 1
                 && strstr(last_message, "waiting in comm_barrier on world") != NULL);
    tap_ok(ok, "rank 0 waiting in a barrier for a late rank 1: the watchdog names it (%s)",
           tap_rank() == 0 ? last_message : "");
}

/* Rank 1 sends a pipeline message late; rank 0's watchdog, waiting for
 * it, names the message, the link's group and rank 1 as the peer (a
 * two-rank world standing for pp 2). */
static void peer_named(void)
{
    Grid g;
    grid_world_only(&g, MPI_COMM_WORLD);
    g.pp_comm = MPI_COMM_WORLD;
    float value = 1.0f;
    ops_tensor buf = {&value, 1, OPS_F32, OPS_CPU};
    CommRequest req;
    if (tap_rank() == 0) {
        start(0.3);
        watchdog_warmed_up();
        comm_link_recv(&g, LINK_ACTIVATION, buf, 1, 1, &req);
    } else {
        sleep_s(2.0);
        comm_link_send(&g, LINK_ACTIVATION, buf, 1, 0, &req);
    }
    comm_wait(&req);
    if (tap_rank() == 0)
        watchdog_stop();
    int ok = tap_rank() != 0
             || (atomic_load(&fired) == 1
                 && strstr(last_message, "waiting in comm_wait for a receive of activations on "
                                         "pp, peer pp rank 1") != NULL);
    tap_ok(ok, "rank 0 waiting for a message from a late rank 1: the watchdog names the message "
           "and its peer (%s)", tap_rank() == 0 ? last_message : "");
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(tap_size() > 1 ? 17 : 15);
    local_checks();
    start_up_reads_the_set_as_the_run_does();
    ignored_thread();
    if (tap_size() > 1) {
        collective_named();
        peer_named();
    }
    return tap_done();
}
