/*
 * tap.c - TAP output for MPI test programs; see tap.h.
 */
#include "tap.h"

#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_count;
static int tap_failed;
static int tap_planned = -1;
static int world_rank;
static int world_size = 1;

void tap_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
}

int tap_rank(void) { return world_rank; }
int tap_size(void) { return world_size; }

void tap_plan(int n)
{
    tap_planned = n;
    if (world_rank == 0) {
        printf("1..%d\n", n);
        fflush(stdout);
    }
}

int tap_ok(int ok, const char *fmt, ...)
{
    int mine = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    tap_count++;
    if (!all)
        tap_failed++;
    if (world_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        printf("%s %d - ", all ? "ok" : "not ok", tap_count);
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
        fflush(stdout);
    } else if (!mine) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "[rank %d] failed: ", world_rank);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    return all;
}

void tap_skip_all(const char *why)
{
    if (world_rank == 0) {
        printf("1..0 # SKIP %s\n", why);
        fflush(stdout);
    }
    MPI_Finalize();
    exit(0);
}

void tap_diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (world_rank == 0) {
        printf("# ");
        vprintf(fmt, ap);
        printf("\n");
        fflush(stdout);
    } else {
        fprintf(stderr, "[rank %d] ", world_rank);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
    }
    va_end(ap);
}

int tap_done(void)
{
    int bad = tap_failed > 0;
    if (tap_planned >= 0 && tap_count != tap_planned) {
        if (world_rank == 0)
            printf("# planned %d tests but ran %d\n", tap_planned, tap_count);
        bad = 1;
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}

double tap_max_rel_diff(const float *a, const float *b, long n, double floor)
{
    double worst = 0.0;
    for (long i = 0; i < n; i++) {
        double den = fabs((double)b[i]);
        if (den < floor)
            den = floor;
        double d = fabs((double)a[i] - (double)b[i]) / den;
        if (!(d <= worst)) /* also catches NaN */
            worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

double tap_max_abs_diff(const float *a, const float *b, long n)
{
    double worst = 0.0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst))
            worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

float tap_uniform(uint64_t *state, float lo, float hi)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    uint64_t r = *state * 0x2545f4914f6cdd1dull;
    return lo + (hi - lo) * (float)((r >> 40) * (1.0 / 16777216.0));
}
