/*
 * timer_cpu.c - a device timer's mark on the CPU: the monotonic clock, the
 * one src/base/timer.h reads, so the CPU's step figures keep their meaning.
 */
#include "cpu.h"

#include <time.h>

double clock_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
