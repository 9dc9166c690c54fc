/*
 * t_affinity.c - each rank's OpenMP pool is its fair share of the cores it
 * may use (affinity.h): the rule on fixed masks, then this run's ranks,
 * which mpitap starts unbound (--bind-to none) with OMP_NUM_THREADS unset
 * here; and the hardware peak (hw_peak.h) that MFU divides by.
 */
#include "affinity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grid.h"
#include "hw_peak.h"
#include "tap.h"

/* masks[r] = cores [first, first + count) */
static void span(cpu_set_t *m, int first, int count)
{
    CPU_ZERO(m);
    for (int c = first; c < first + count; c++)
        CPU_SET(c, m);
}

static void fixed_masks(void)
{
    cpu_set_t m[4];
    for (int r = 0; r < 4; r++)
        span(&m[r], 0, 2);
    tap_ok(affinity_fair_threads(m, 4, 0) == 1 && affinity_fair_threads(m, 4, 3) == 1,
           "4 unbound ranks on 2 cores: 1 thread each, not 2");
    span(&m[0], 0, 1);
    span(&m[1], 1, 1);
    tap_ok(affinity_fair_threads(m, 2, 0) == 1 && affinity_fair_threads(m, 2, 1) == 1,
           "2 ranks bound to a core each: 1 thread each");
    span(&m[0], 0, 16);
    tap_ok(affinity_fair_threads(m, 1, 0) == 16, "1 rank on 16 cores: 16 threads");
    span(&m[0], 0, 8);
    span(&m[1], 0, 8);
    span(&m[2], 8, 8);
    span(&m[3], 8, 8);
    tap_ok(affinity_fair_threads(m, 4, 0) == 4 && affinity_fair_threads(m, 4, 2) == 4,
           "4 ranks bound to the socket, 2 per 8-core socket: 4 threads each (16 in all)");
    for (int r = 0; r < 4; r++)
        span(&m[r], 0, 16);
    tap_ok(affinity_fair_threads(m, 4, 1) == 4, "4 unbound ranks on 16 cores: 4 threads each");
    for (int r = 0; r < 3; r++)
        span(&m[r], 0, 4);
    tap_ok(affinity_fair_threads(m, 3, 0) == 1,
           "3 ranks on 4 cores: 1 thread each (4/3 rounded down: never more threads than cores)");
    span(&m[0], 0, 2);
    span(&m[1], 1, 1);
    tap_ok(affinity_fair_threads(m, 2, 0) == 1 && affinity_fair_threads(m, 2, 1) == 1,
           "overlapping masks {0,1} and {1}: 1.5 and 0.5 cores' worth, 1 thread each");
}

int main(int argc, char **argv)
{
    unsetenv("OMP_NUM_THREADS"); /* before the first OpenMP region */
    tap_init(&argc, &argv);
    tap_plan(11);
    fixed_masks();

    affinity_setup(MPI_COMM_WORLD);
    const Affinity *a = affinity_get();
    /* every rank has the same mask (unbound), perhaps a cgroup's cpuset */
    long cores = a->rank_cores;
    int ranks = tap_size(); /* one node */
    int want = (int)(cores / ranks) > 0 ? (int)(cores / ranks) : 1;
    tap_diag("%d ranks, %ld cores each may use: %d threads per rank, %d in all on %d cores", ranks,
             cores, a->threads, a->node_threads, a->node_cores);
    tap_ok(!a->from_env && a->threads == want && a->node_ranks == ranks &&
               a->node_cores == (int)cores,
           "this run's unbound ranks: %d thread%s each (cores / ranks, at least 1)", want,
           want == 1 ? "" : "s");
    tap_ok(a->node_threads <= (cores > ranks ? cores : ranks),
           "no more threads than cores on the node, unless there are more ranks than cores");

    Grid g;
    grid_world_only(&g, MPI_COMM_WORLD);
    g.device = OPS_CPU;
    HardwarePeak peak;
    hw_peak_measure(&g, OPS_F32, &peak);
    tap_diag("%s: %.1f GFLOP/s", peak.how, peak.flops / 1e9);
    tap_ok(isfinite(peak.flops) && peak.flops > 1e8, "the hardware peak is measured (%.1f GFLOP/s)",
           peak.flops / 1e9);
    tap_ok(strstr(peak.how, ops_cpu_name()) && (strstr(peak.how, "vfmadd") ||
                                                strstr(peak.how, "scalar")),
           "and says what it is: the CPU, the instruction, the cores (%s)", peak.how);
    return tap_done();
}
