/*
 * attention_route.c - which kernel runs a GPU's whole-sequence causal
 * attention: trident's own (cuda/attention_cuda.cu and
 * attention_mma_cuda.cu, always built, the reference) or cuDNN's fused
 * scaled-dot-product attention (cuda/attention_cudnn_cuda.cu, built with
 * configure --with-cudnn-frontend=DIR).
 *
 * The switch TRIDENT_ATTENTION chooses (switches.h, read and checked at
 * start-up with the others): trident, cudnn, or unset/empty for the
 * default (cuDNN when this build has it). cuDNN runs only where it takes
 * the shape and dtype (bf16 and fp16; attention_cudnn_fwd_cuda says);
 * everything else, the context-parallel row windows included, runs
 * trident's kernel. Host code, so the CPU tests check it.
 */
#include <stdio.h>

#include "ops.h"
#if TRI_HAVE_CUDNN
#include "cuda/cuda.h"
#endif

#define ATTENTION_ENV "TRIDENT_ATTENTION"

/* a test's choice in place of the switch's */
static int pinned;
static ops_attention_route pinned_route;

void ops_attention_route_set(ops_attention_route r)
{
    pinned_route = r;
    pinned = 1;
}

ops_attention_route ops_attention_route_get(void)
{
    if (pinned)
        return pinned_route;
    return ops_switch_is(OPS_SWITCH_ATTENTION, "cudnn") ? OPS_ATTENTION_CUDNN
                                                        : OPS_ATTENTION_TRIDENT;
}

const char *ops_attention_info_on(ops_device dev, ops_dtype dt)
{
    static char line[256];
    if (dev != OPS_CUDA) {
        snprintf(line, sizeof line, "trident's fused kernel (CPU; %s chooses among GPU kernels)",
                 ATTENTION_ENV);
        return line;
    }
    ops_attention_route route_now = ops_attention_route_get();
    if (route_now == OPS_ATTENTION_TRIDENT) {
        snprintf(line, sizeof line, "trident's fused kernel (%s)",
                 TRI_HAVE_CUDNN ? ATTENTION_ENV "=trident" : "this build has no cuDNN");
        return line;
    }
    if (dt == OPS_F32) {
        snprintf(line, sizeof line, "trident's fused kernel (cuDNN's takes bf16 and fp16, "
                 "not fp32)");
        return line;
    }
#if TRI_HAVE_CUDNN /* else the route is trident's (ops_attention_route_parse) */
    snprintf(line, sizeof line, "cuDNN fused SDPA (%s), deterministic backward; "
             "context-parallel windows and head sizes it does not take on trident's kernel; "
             ATTENTION_ENV "=trident for trident's", attention_cudnn_version_cuda());
#endif
    return line;
}
