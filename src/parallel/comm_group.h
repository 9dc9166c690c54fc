/*
 * comm_group.h - what both paths of comm.h name: the grid's groups, the
 * reductions, the kinds of pipeline message, and each group's name in
 * messages. Not collective.
 *
 * comm.c moves host buffers over MPI and hands device buffers to
 * comm_nccl.c, which moves them over NCCL and names the groups in its
 * messages as comm.c does. Both take these words from here, a file below
 * both, so that comm.c calls comm_nccl.c and comm_nccl.c never calls back
 * (no circle: tests/t_deps.sh). Callers get them through comm.h.
 */
#ifndef TRI_SRC_COMM_GROUP_H
#define TRI_SRC_COMM_GROUP_H

typedef enum {
    COMM_WORLD, COMM_TP, COMM_DP, COMM_PP, COMM_DP_NODE, COMM_DP_CROSS,
    COMM_EMBED,
    COMM_KV,     /* TP ranks that hold the same key/value heads (llama, arch.h) */
    COMM_CP,     /* the ranks that share each sequence (context parallelism) */
    COMM_EP,     /* the DP ranks that split each MoE layer's experts (ep) */
    COMM_EDP     /* the ranks holding the same experts (layout_expert_replicas) */
} CommGroup;

/* How many groups there are: the size of a table kept per group. */
#define COMM_GROUP_COUNT (COMM_EDP + 1)

typedef enum { COMM_SUM, COMM_MAX, COMM_MIN } CommOp;

/* What a pipeline message carries. Activations go from a stage to the
 * next in the ring, gradients to the previous one. */
typedef enum { LINK_ACTIVATION, LINK_GRADIENT } CommLink;

/* The group's name in messages ("tp", "dp", ...). */
const char *comm_group_name(CommGroup group);

#endif
