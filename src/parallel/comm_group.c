/*
 * comm_group.c - the groups' names in messages; see comm_group.h.
 */
#include "comm_group.h"

const char *comm_group_name(CommGroup group)
{
    static const char *const names[] = {
        [COMM_WORLD] = "world", [COMM_TP] = "tp", [COMM_DP] = "dp", [COMM_PP] = "pp",
        [COMM_DP_NODE] = "dp_node", [COMM_DP_CROSS] = "dp_cross", [COMM_EMBED] = "embed",
        [COMM_KV] = "kv", [COMM_CP] = "cp", [COMM_EP] = "ep", [COMM_EDP] = "edp",
    };
    return names[group];
}
