/*
 * gpu_wait.c - polling for the GPU with a timeout; see gpu_wait.h.
 */
#include "gpu_wait.h"

#include <time.h>

#include "timer.h"

GpuWaitVerdict gpu_wait_decide(double waited_s, int gpu_done, int peer_failed,
                               double timeout_s)
{
    if (peer_failed)
        return GPU_WAIT_PEER_FAILED;
    if (gpu_done)
        return GPU_WAIT_DONE;
    if (timeout_s > 0 && waited_s >= timeout_s)
        return GPU_WAIT_TIMED_OUT;
    return GPU_WAIT_POLL;
}

long gpu_wait_next_pause_ns(long pause_ns)
{
    if (pause_ns < GPU_WAIT_FIRST_PAUSE_NS / 2)
        return GPU_WAIT_FIRST_PAUSE_NS;
    if (pause_ns >= GPU_WAIT_MAX_PAUSE_NS / 2)
        return GPU_WAIT_MAX_PAUSE_NS;
    return 2 * pause_ns;
}

GpuWaitVerdict gpu_wait_poll(const GpuWaitProbe *probe, double timeout_s,
                             double *waited_s)
{
    double t0 = timer_now(), waited = 0.0;
    long pause_ns = 0;
    GpuWaitVerdict v;
    for (int polls = 1;; polls++) {
        /* the failure first: a done event says nothing of the peers */
        int failed = probe->peer_failed(probe->user);
        int done = !failed && probe->gpu_done(probe->user);
        waited = timer_now() - t0;
        v = gpu_wait_decide(waited, done, failed, timeout_s);
        if (v != GPU_WAIT_POLL)
            break;
        /* a short wait (one kernel, under [log] profile) ends within a
         * poll: Linux rounds a sleep up by its 50 us timer slack */
        if (polls < GPU_WAIT_SPIN_POLLS)
            continue;
        pause_ns = gpu_wait_next_pause_ns(pause_ns);
        struct timespec pause = {0, pause_ns};
        nanosleep(&pause, NULL);
    }
    if (waited_s)
        *waited_s = waited;
    return v;
}
