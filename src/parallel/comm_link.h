/*
 * comm_link.h - who talks to whom over the pipeline's links on a GPU.
 *
 * On a GPU each pipeline stage has four NCCL communicators of two ranks,
 * its links (comm_nccl.h): activations out to the next stage in the ring
 * and in from the previous one, gradients out to the previous stage and
 * in from the next. This file is the pure arithmetic of that ring: each
 * link's peer, which end sends, and a key that names the communicator the
 * same way at both ends, so that every rank connects and destroys its
 * links in one global order (a stage's own order would let each rank of
 * the ring wait on its neighbour in a different communicator for ever).
 * It needs no GPU, so tests/t_comm_link.c checks it on the CPU.
 */
#ifndef TRI_SRC_COMM_LINK_H
#define TRI_SRC_COMM_LINK_H

#include "comm_group.h"

typedef enum {
    LINK_ACT_OUT,   /* activations to the next stage in the ring */
    LINK_ACT_IN,    /* activations from the previous stage */
    LINK_GRAD_OUT,  /* gradients to the previous stage */
    LINK_GRAD_IN,   /* gradients from the next stage */
    N_LINKS
} Link;

/* One end of a link, as stage `stage` of a ring of pp > 1 stages sees it. */
typedef struct {
    CommLink kind;  /* what it carries */
    int sends;      /* 1: this end only sends (NCCL rank 0), 0: only receives (rank 1) */
    int peer;       /* the pp rank at the other end */
    int key;        /* the communicator's place in the world's order of
                       links, 0 .. 2 pp - 1: the same at both ends */
} LinkEnd;

/* Pure; not collective. */
LinkEnd comm_link_end(Link link, int stage, int pp);
/* The link a message of kind goes out on (out = 1) or comes in on. Pure;
 * not collective. */
Link comm_link_of(CommLink kind, int out);
/* order[0..N_LINKS) := a stage's links by their key: the order in which it
 * takes them whenever each step waits for the peer. Pure; not collective. */
void comm_link_order(int stage, int pp, Link order[N_LINKS]);

#endif
