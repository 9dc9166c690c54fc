/*
 * hw_peak.c - the hardware's peak FLOP/s of a run; see hw_peak.h.
 */
#include "hw_peak.h"

#include <stdio.h>
#include <string.h>

#include "affinity.h"
#include "comm.h"

/* Seconds each CPU rank runs the probe: long enough for the scheduler to
 * share the cores fairly between ranks that share them (its slices are a
 * few ms), short beside start-up. */
#define PROBE_SECONDS 0.1

/* From the threads that ran the probe to the cores the node may use. */
static double node_scale(const Affinity *a)
{
    int ran = a->node_threads < a->node_cores ? a->node_threads : a->node_cores;
    return ran > 0 ? (double)a->node_cores / ran : 1.0;
}

/* This process's probe. Where the node's threads do not outnumber its
 * cores, the best of a few windows, so a window another process took part
 * of does not set the peak. Where they do, one window: ranks that share a
 * core must each see their share, and a short window can catch a rank with
 * more than its share (4 ranks on 2 cores read 1.23x high that way). */
static double probe(const Affinity *a, ops_dtype dtype, double seconds, char *how,
                    size_t how_size)
{
    int windows = a->node_threads <= a->node_cores ? 4 : 1;
    double best = 0.0;
    for (int w = 0; w < windows; w++) {
        double f = ops_hardware_peak_on(OPS_CPU, dtype, seconds / windows, how, how_size);
        best = f > best ? f : best;
    }
    return best;
}

double hw_peak_cpu_node(ops_dtype dtype, double seconds, int *cores, char *how,
                        size_t how_size)
{
    const Affinity *a = affinity_get();
    double flops = probe(a, dtype, seconds, how, how_size);
    *cores = a->node_cores;
    return flops * node_scale(a);
}

void hw_peak_measure(const Grid *g, ops_dtype dtype, HardwarePeak *out)
{
    const Affinity *a = affinity_get();
    char how[160] = "";
    memset(out, 0, sizeof *out);
    double mine;
    if (g->device == OPS_CPU) {
        comm_barrier(g, COMM_WORLD); /* start together: shared cores split fairly */
        mine = probe(a, dtype, PROBE_SECONDS, how, sizeof how) * node_scale(a);
    } else {
        mine = ops_hardware_peak_on(g->device, dtype, 0.0, how, sizeof how);
    }
    /* a GPU missing from the datasheet table leaves MFU unknown (0), never
     * a guess; every rank learns whether any is missing */
    double sums[2] = {mine, mine > 0.0 ? 0.0 : 1.0};
    comm_allreduce_scalars(g, COMM_WORLD, sums, 2, COMM_DOUBLE, COMM_SUM);
    out->flops = sums[1] > 0.0 ? 0.0 : sums[0];
    if (g->device == OPS_CPU)
        snprintf(out->how, sizeof out->how, "%s: %s on each of %d rank%s of rank 0's node, %d core%s",
                 ops_cpu_name(), how, a->node_ranks, a->node_ranks == 1 ? "" : "s",
                 a->node_cores, a->node_cores == 1 ? "" : "s");
    else
        snprintf(out->how, sizeof out->how, "%s, %d GPU%s", how, g->layout.size, g->layout.size == 1 ? "" : "s");
}
