/*
 * t_gpu_wait.c - the host's wait for the GPU (src/parallel/gpu_wait.c), on the CPU:
 * the decision table (a peer's failure wins over done, done over the
 * timeout, a timeout of 0 never expires), the pause's back-off, and the
 * polling loop driven by fake probes: work that completes after k polls
 * returns DONE after exactly k polls and well before any timeout; a peer
 * failing at poll j stops the wait at poll j even though the work never
 * completes; work that never completes times out after the timeout and
 * not long after it. The GPU probes themselves (cudaEventQuery,
 * ncclCommGetAsyncError) are src/parallel/comm_nccl.c's and need a GPU.
 */
#include "gpu_wait.h"
#include "tap.h"

typedef struct {
    int polls;        /* gpu_done calls so far */
    int done_at;      /* gpu_done is true from this poll on (0: never) */
    int fail_at;      /* peer_failed is true from this poll on (0: never) */
    int failed_polls; /* peer_failed calls so far */
} Fake;

static int fake_done(void *user)
{
    Fake *f = user;
    f->polls++;
    return f->done_at > 0 && f->polls >= f->done_at;
}

static int fake_failed(void *user)
{
    Fake *f = user;
    f->failed_polls++;
    return f->fail_at > 0 && f->failed_polls >= f->fail_at;
}

static void decisions(void)
{
    tap_ok(gpu_wait_decide(0.0, 1, 0, 10) == GPU_WAIT_DONE, "done at once: DONE");
    tap_ok(gpu_wait_decide(5.0, 0, 0, 10) == GPU_WAIT_POLL, "not done within the timeout: POLL");
    tap_ok(gpu_wait_decide(10.0, 0, 0, 10) == GPU_WAIT_TIMED_OUT,
           "not done at the timeout: TIMED_OUT");
    tap_ok(gpu_wait_decide(99.0, 1, 0, 10) == GPU_WAIT_DONE,
           "done, even past the timeout: DONE (the work finished)");
    tap_ok(gpu_wait_decide(0.0, 1, 1, 10) == GPU_WAIT_PEER_FAILED,
           "a peer failed though the work is done: PEER_FAILED");
    tap_ok(gpu_wait_decide(99.0, 0, 1, 10) == GPU_WAIT_PEER_FAILED,
           "a peer failed past the timeout: PEER_FAILED, the better message");
    tap_ok(gpu_wait_decide(1e9, 0, 0, 0) == GPU_WAIT_POLL, "timeout 0: no timeout");
}

static void backoff(void)
{
    long p = gpu_wait_next_pause_ns(0), prev = 0;
    int steps = 1, doubling = p == GPU_WAIT_FIRST_PAUSE_NS;
    while (p < GPU_WAIT_MAX_PAUSE_NS && steps < 100) {
        prev = p;
        p = gpu_wait_next_pause_ns(p);
        doubling &= p == 2 * prev || p == GPU_WAIT_MAX_PAUSE_NS;
        steps++;
    }
    tap_ok(doubling && p == GPU_WAIT_MAX_PAUSE_NS && steps < 20,
           "the pause doubles from %ld ns to %ld ns in %d steps", (long)GPU_WAIT_FIRST_PAUSE_NS,
           p, steps);
    tap_ok(gpu_wait_next_pause_ns(GPU_WAIT_MAX_PAUSE_NS) == GPU_WAIT_MAX_PAUSE_NS,
           "and stays there");
}

static void loop(void)
{
    Fake f = {.done_at = 5};
    GpuWaitProbe probe = {fake_done, fake_failed, &f};
    double waited = -1;
    GpuWaitVerdict v = gpu_wait_poll(&probe, 10.0, &waited);
    tap_ok(v == GPU_WAIT_DONE && f.polls == 5 && waited >= 0 && waited < 1.0,
           "work done at poll 5: DONE after %d polls, %.2g s", f.polls, waited);

    f = (Fake){.done_at = GPU_WAIT_SPIN_POLLS};
    v = gpu_wait_poll(&probe, 10.0, &waited);
    tap_ok(v == GPU_WAIT_DONE && f.polls == GPU_WAIT_SPIN_POLLS && waited < 0.01,
           "work done at poll %d: DONE without sleeping (%.2g s; the pauses would take 0.09 s)",
           GPU_WAIT_SPIN_POLLS, waited);

    f = (Fake){.done_at = 1};
    v = gpu_wait_poll(&probe, 0.0, &waited);
    tap_ok(v == GPU_WAIT_DONE && f.polls == 1 && waited < 0.1,
           "work already done: DONE at the first poll, without sleeping (%.2g s)", waited);

    f = (Fake){.fail_at = 3};
    v = gpu_wait_poll(&probe, 0.0, &waited);
    tap_ok(v == GPU_WAIT_PEER_FAILED && f.failed_polls == 3,
           "a peer failing at poll 3 stops a wait with no timeout: PEER_FAILED at poll %d",
           f.failed_polls);

    f = (Fake){.done_at = 2, .fail_at = 2};
    v = gpu_wait_poll(&probe, 10.0, &waited);
    tap_ok(v == GPU_WAIT_PEER_FAILED, "failure and completion at the same poll: PEER_FAILED");

    f = (Fake){0};
    v = gpu_wait_poll(&probe, 0.05, &waited);
    tap_ok(v == GPU_WAIT_TIMED_OUT && waited >= 0.05 && waited < 1.0,
           "work that never completes: TIMED_OUT after %.3f s of a 0.05 s timeout (%d polls)",
           waited, f.polls);
    /* 100 polls, then 0.05 s of pauses growing to 1 ms: about 160 polls,
     * not a busy spin */
    tap_ok(f.polls > 3 && f.polls < 2000, "polled %d times in 0.05 s: backing off", f.polls);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(16);
    decisions();
    backoff();
    loop();
    return tap_done();
}
