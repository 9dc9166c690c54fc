/*
 * fused_cuda.cu - TRIDENT_FUSED, the run-time switch of issue 34's fused
 * GPU kernels, so that one GPU session can measure them against the
 * kernels they replace and fall back if one is wrong (doc/gpu.md).
 *
 * TRIDENT_FUSED=0 restores the unfused kernels (the cross-entropy's fp32
 * dlogits and the head's blocked rounding pass, the one-load-at-a-time
 * embedding backward, and what other fused kernels name it); unset or 1
 * runs the fused ones. The switch is read and checked with the others at
 * start-up (switches.h), so a run cannot switch midway.
 */
#include "cuda_common.h"

int fused_enabled_cuda(void)
{
    return ops_switch_is(OPS_SWITCH_FUSED, "1");
}
