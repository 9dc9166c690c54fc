/*
 * ops_timer.c - the device timers of ops.h: intervals opened and closed
 * in turn, read off the host clock (cpu/timer_cpu.c) or CUDA events on
 * the compute stream (cuda/timer_cuda.cu).
 *
 * Not collective.
 */
#include "ops_dispatch.h"

ops_timer ops_timer_on(ops_device device)
{
    return (ops_timer){.device = device};
}

/* Marks alternate, start first: an even count means no interval is open. */
static void timer_mark(ops_timer *t, int opening, const char *fn)
{
    ops_device dev = t->device;
    int open = t->n_marks % 2 != 0;
    if (opening && open)
        FAIL("%s: the timer's interval is already open", fn);
    if (!opening && !open)
        FAIL("%s: no interval is open", fn);
    if (dev != OPS_CPU) {
        ON_CUDA(timer_mark_cuda(t));
        return;
    }
    double now = clock_cpu();
    if (opening)
        t->started = now;
    else
        t->seconds += now - t->started;
    t->n_marks++;
}

void ops_timer_start(ops_timer *t)
{
    timer_mark(t, 1, "ops_timer_start");
}

void ops_timer_stop(ops_timer *t)
{
    timer_mark(t, 0, "ops_timer_stop");
}

double ops_timer_read(ops_timer *t)
{
    static const char fn[] = "ops_timer_read";
    ops_device dev = t->device;
    if (t->n_marks % 2 != 0)
        FAIL("%s: the timer's interval is still open", fn);
    if (dev != OPS_CPU && t->n_marks > 0)
        ON_CUDA(t->seconds = timer_elapsed_cuda(t));
    double s = t->seconds;
    t->seconds = 0.0;
    t->n_marks = 0;
    return s;
}

void ops_timer_free(ops_timer *t)
{
    static const char fn[] = "ops_timer_free";
    ops_device dev = t->device;
    if (t->marks)
        ON_CUDA(timer_free_cuda(t));
    *t = ops_timer_on(dev);
}
