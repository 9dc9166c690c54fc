/*
 * comm_link.c - the pipeline links' ring arithmetic; see comm_link.h.
 */
#include "comm_link.h"

Link comm_link_of(CommLink kind, int out)
{
    if (kind == LINK_ACTIVATION)
        return out ? LINK_ACT_OUT : LINK_ACT_IN;
    return out ? LINK_GRAD_OUT : LINK_GRAD_IN;
}

LinkEnd comm_link_end(Link link, int stage, int pp)
{
    int next = (stage + 1) % pp, prev = (stage + pp - 1) % pp;
    LinkEnd e;
    e.kind = link == LINK_ACT_OUT || link == LINK_ACT_IN ? LINK_ACTIVATION : LINK_GRADIENT;
    e.sends = link == LINK_ACT_OUT || link == LINK_GRAD_OUT;
    /* activations flow to the next stage, gradients to the previous */
    e.peer = link == LINK_ACT_OUT || link == LINK_GRAD_IN ? next : prev;
    /* a link is named by its kind and its sending stage */
    int sender = e.sends ? stage : e.peer;
    e.key = (e.kind == LINK_ACTIVATION ? 0 : pp) + sender;
    return e;
}

void comm_link_order(int stage, int pp, Link order[N_LINKS])
{
    for (int i = 0; i < N_LINKS; i++) { /* insertion sort of four */
        Link l = (Link)i;
        int k = i, key = comm_link_end(l, stage, pp).key;
        for (; k > 0 && comm_link_end(order[k - 1], stage, pp).key > key; k--)
            order[k] = order[k - 1];
        order[k] = l;
    }
}
