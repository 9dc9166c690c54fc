/*
 * nccl_env.c - the environment trident gives NCCL; see nccl_env.h.
 */
#include "nccl_env.h"

#include <stdlib.h>

/* Why implicit launch order: a rank of trident drives up to ten NCCL
 * communicators on its one GPU (tp, the DP groups, embed, kv, the four
 * pipeline links), each on its own stream, and several are in flight at
 * once (the DP reduction overlapped with the backward, a pipeline send
 * beside a TP all-reduce). NCCL's kernels wait on the GPU for their
 * peers; without implicit ordering, NCCL's documentation asks that
 * concurrent communicators be launched in one consistent order on every
 * rank, or two ranks can each wait inside a kernel for a peer whose
 * matching kernel is queued behind the other one: a deadlock no timeout
 * of NCCL's ends. With NCCL_LAUNCH_ORDER_IMPLICIT=1 NCCL orders the
 * kernels of a device's communicators in the order the host launched
 * them, so the GPU adds no order of its own to the program's, which is
 * the one the CPU's MPI path runs and its tests check. (A user's value
 * in the environment stays; one in nccl.conf does not, since NCCL lets
 * the environment override its files.) */
int nccl_env_defaults(void)
{
    if (getenv("NCCL_LAUNCH_ORDER_IMPLICIT"))
        return 0;
    setenv("NCCL_LAUNCH_ORDER_IMPLICIT", "1", 0);
    return 1;
}

static void print_version(FILE *out, int code)
{
    fprintf(out, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
}

void nccl_env_print(FILE *out, int loaded, int built, int order_set)
{
    const char *order = getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
    fputs("nccl: ", out);
    print_version(out, loaded);
    fputs(" loaded (built against ", out);
    print_version(out, built);
    fprintf(out, "); NCCL_LAUNCH_ORDER_IMPLICIT=%s (%s)\n", order ? order : "",
            order_set ? "trident's default" : "yours");
}
