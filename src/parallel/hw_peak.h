/*
 * hw_peak.h - the hardware's peak FLOP/s of a run: MFU's denominator.
 *
 * MFU compares what the model computes with what the hardware could, so
 * runs on different systems can be compared: the dense datasheet peak of
 * each GPU (989 TFLOP/s bf16 on an H100), and on CPUs the measured rate of
 * their widest multiply-add instruction times its lanes times the cores
 * (kernels' ops_hardware_peak_on). The GEMM library's own measured rate is
 * a second, separate figure ("of GEMM peak"): it says how far the step is
 * from what the library reaches, not from the machine.
 *
 * On a CPU node the ranks measure at the same time, each on its OpenMP
 * pool, so ranks that share cores split them; the node's sum is scaled from
 * the threads that ran to the distinct cores the node's ranks may use
 * (affinity.h), so a run that leaves cores idle is charged for them.
 */
#ifndef TRI_SRC_HW_PEAK_H
#define TRI_SRC_HW_PEAK_H

#include "ops.h"
#include "grid.h"

typedef struct {
    double flops;        /* the world's peak, FLOP/s; 0: unknown */
    char how[256];       /* what it is, as measured on rank 0 */
} HardwarePeak;

/* Measures (CPU) or looks up (GPU) the peak in dtype over the world; every
 * rank gets the same result. Collective on world. */
void hw_peak_measure(const Grid *g, ops_dtype dtype, HardwarePeak *out);

/* This process's CPU peak scaled to the cores of its node, for a program
 * that runs alone (plan --hw cpu); *cores receives their count. Not
 * collective. */
double hw_peak_cpu_node(ops_dtype dtype, double seconds, int *cores, char *how,
                        size_t how_size);

#endif
