/*
 * moe_ep.h - expert parallelism's dispatch: a MoE layer's rows sent to
 * the ranks that hold their experts, and their outputs brought back.
 *
 * ep consecutive DP ranks (the grid's ep_comm, COMM_EP; layout.h) split
 * each MoE layer's E experts: ep rank q holds the El = E / ep experts
 * [q El, (q + 1) El). Every rank routes its own tokens (ops_moe_permute
 * orders its (token, slot) rows by global expert, offsets[e] the first of
 * expert e's), so the rows bound for rank q are one contiguous run, and
 * one all-to-all over COMM_EP moves them all. The owner's rows are
 * expert-major, then by source ep rank, then in the source's order: an
 * expert's GEMM sees its rows in an order fixed by the routing alone,
 * whatever the timing, so a run is deterministic. moe_ep_return is the
 * exact inverse (the experts' outputs back to their sources' order).
 *
 * A MoeRoute is one (slot, MoE layer)'s counts: moe_ep_route fills it in
 * the forward (exchanging the counts, El per peer, over COMM_EP), and
 * the backward moves the gradients with the same route. At ep = 1 there
 * is no communication: the route is the offsets, a send is a copy.
 */
#ifndef TRI_SRC_MOE_EP_H
#define TRI_SRC_MOE_EP_H

#include <stdint.h>

#include "config.h"
#include "model.h"
#include "ops.h"

typedef struct MoeRoute MoeRoute;

/* A route for m's layout (its ep and n_expert), empty until
 * moe_ep_route. Not collective. */
MoeRoute *moe_route_create(const Model *m);
/* Not collective; NULL is fine. */
void moe_route_destroy(MoeRoute *r);

/* From this rank's expert-ordered rows' offsets (E + 1, host int32, from
 * ops_moe_permute), exchanges the counts over COMM_EP and fills r;
 * returns R_in, the rows this rank's El experts receive, and fills
 * in_offsets (El + 1, host) with their expert-major offsets. ep = 1:
 * R_in = offsets[E], in_offsets = offsets, no communication. Collective
 * on ep. */
int64_t moe_ep_route(Model *m, MoeRoute *r, const int32_t *offsets, int32_t *in_offsets);

/* src (R, width): this rank's rows in global expert order -> dst (R_in,
 * width) on the owners, expert-major, within an expert by source ep rank,
 * then the source's order. dst and src share a dtype and device and may
 * not overlap. ep = 1: a copy (none when dst is src). Collective on ep. */
void moe_ep_send(Model *m, const MoeRoute *r, ops_tensor dst, ops_tensor src, int64_t width);
/* The inverse: the owner's rows src (R_in, width) back to their sources,
 * dst (R, width) in the source's global expert order. Collective on ep. */
void moe_ep_return(Model *m, const MoeRoute *r, ops_tensor dst, ops_tensor src,
                   int64_t width);

/* The most rows one rank's experts can receive for N local tokens (the
 * size of the buffers a MoE layer allocates at set-up): ep x N x
 * min(top_k, El) dropless (a token sends each expert one row at most);
 * with a capacity factor, ep x El x ceil(factor x N x top_k / E), each
 * source's rows per expert capped. Pure; not collective. */
int64_t moe_ep_max_rows(const ModelConfig *mc, int ep, int64_t N);

#endif
