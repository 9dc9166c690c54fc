/*
 * nccl_env.h - the environment trident gives NCCL before its first call.
 *
 * NCCL reads its settings from environment variables (NCCL_*) the first
 * time it needs each, so what trident must have set is set here, before
 * the first communicator is created; a variable the user set is left as
 * it is. Compiled in every build (it calls nothing of NCCL's), so the CPU
 * suite tests it.
 */
#ifndef TRI_SRC_NCCL_ENV_H
#define TRI_SRC_NCCL_ENV_H

#include <stdio.h>

/* Sets NCCL_LAUNCH_ORDER_IMPLICIT=1 unless the environment has it (see
 * nccl_env.c for why). Returns 1 when it set it, 0 when the user's value
 * stays. Call before any NCCL call. Not collective. */
int nccl_env_defaults(void);

/* Prints the start-up line "nccl: 2.30.7 loaded (built against 2.28.9);
 * NCCL_LAUNCH_ORDER_IMPLICIT=1 (trident's default)" to out: which NCCL
 * the library path gave this run (bench/gpu_check.sh puts a 2.30 first;
 * several ranks on one GPU need it) and the launch order in force.
 * loaded and built are NCCL version codes (major * 10000 + minor * 100 +
 * patch); order_set is nccl_env_defaults' result. Not collective. */
void nccl_env_print(FILE *out, int loaded, int built, int order_set);

#endif
