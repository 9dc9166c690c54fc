/*
 * fused_cuda.cu - TRIDENT_FUSED, the run-time switch of issue 34's fused
 * GPU kernels, so that one GPU session can measure them against the
 * kernels they replace and fall back if one is wrong (doc/gpu.md).
 *
 * TRIDENT_FUSED=0 restores the unfused kernels (the cross-entropy's fp32
 * dlogits and the head's blocked rounding pass, the one-load-at-a-time
 * embedding backward, and what other fused kernels name it); unset or 1
 * runs the fused ones. Any other value is an error, not a silent default.
 * Read once, on the first call (set-up), so a run cannot switch midway.
 */
#include "cuda_common.h"

#include <stdlib.h>

int fused_parse_cuda(const char *value)
{
    if (!value || strcmp(value, "1") == 0)
        return 1;
    return strcmp(value, "0") == 0 ? 0 : -1;
}

int fused_enabled_cuda(void)
{
    static int enabled = -1;
    if (enabled < 0) {
        const char *v = getenv("TRIDENT_FUSED");
        enabled = fused_parse_cuda(v);
        if (enabled < 0)
            ops_fatalf(__FILE__, __LINE__,
                       "TRIDENT_FUSED=%s: expected 0 (the unfused GPU kernels) or 1", v);
    }
    return enabled;
}
