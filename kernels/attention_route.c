/*
 * attention_route.c - which kernel runs a GPU's whole-sequence causal
 * attention: trident's own (cuda/attention_cuda.cu and
 * attention_mma_cuda.cu, always built, the reference) or cuDNN's fused
 * scaled-dot-product attention (cuda/attention_cudnn_cuda.cu, built with
 * configure --with-cudnn-frontend=DIR).
 *
 * The environment variable TRIDENT_ATTENTION chooses, read once per
 * process: trident, cudnn, or unset/empty for the default (cuDNN when
 * this build has it). cuDNN runs only where it takes the shape and dtype
 * (bf16 and fp16; attention_cudnn_fwd_cuda says); everything else, the
 * context-parallel row windows included, runs trident's kernel. Host code,
 * so the CPU tests check the parsing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "fatal.h"
#if TRI_HAVE_CUDNN
#include "cuda/cuda.h"
#endif

#define ATTENTION_ENV "TRIDENT_ATTENTION"

int ops_attention_route_parse(const char *value, int have_cudnn, ops_attention_route *route,
                              char *err, size_t err_size)
{
    if (value == NULL || value[0] == '\0') {
        *route = have_cudnn ? OPS_ATTENTION_CUDNN : OPS_ATTENTION_TRIDENT;
        return 0;
    }
    if (strcmp(value, "trident") == 0) {
        *route = OPS_ATTENTION_TRIDENT;
        return 0;
    }
    if (strcmp(value, "cudnn") == 0 && have_cudnn) {
        *route = OPS_ATTENTION_CUDNN;
        return 0;
    }
    if (strcmp(value, "cudnn") == 0)
        snprintf(err, err_size, "%s=cudnn: this build has no cuDNN attention (configure "
                 "--with-cuda --with-cudnn-frontend=DIR); %s=trident or unset runs trident's",
                 ATTENTION_ENV, ATTENTION_ENV);
    else
        snprintf(err, err_size, "%s=%s: expected trident or cudnn (or unset: cuDNN where "
                 "built, else trident)", ATTENTION_ENV, value);
    return -1;
}

/* once per process: every call of a step asks */
static int chosen_known;
static ops_attention_route chosen;

void ops_attention_route_set(ops_attention_route r)
{
    chosen = r;
    chosen_known = 1;
}

ops_attention_route ops_attention_route_get(void)
{
    if (!chosen_known) {
        char err[256];
        if (ops_attention_route_parse(getenv(ATTENTION_ENV), TRI_HAVE_CUDNN, &chosen, err,
                                      sizeof err) != 0)
            ops_fatalf(__FILE__, __LINE__, "%s", err);
        chosen_known = 1;
    }
    return chosen;
}

const char *ops_attention_info_on(ops_device dev, ops_dtype dt)
{
    static char line[256];
    /* first, on every device: a value it refuses stops a CPU run too */
    ops_attention_route route_now = ops_attention_route_get();
    if (dev != OPS_CUDA) {
        snprintf(line, sizeof line, "trident's fused kernel (CPU; %s chooses among GPU kernels)",
                 ATTENTION_ENV);
        return line;
    }
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
