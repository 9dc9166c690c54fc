/*
 * moe_ep.c - expert parallelism's dispatch; see moe_ep.h.
 *
 * The all-to-all delivers an owner's rows source-major (every row from ep
 * rank 0, then from 1, ...; within a source by global expert, as the
 * source ordered them). The experts want them expert-major, so the
 * receive lands in a staging buffer and is regrouped into place, one block
 * per (local expert, source); moe_ep_return regroups first and sends from
 * the staging buffer. With one local expert (El = 1) the two orders are
 * one, and the all-to-all runs straight between the caller's buffers.
 *
 * The staging buffer is one per device, grown to the largest exchange
 * seen and never shrunk, so the steps after the first allocate nothing
 * (comm.c's scratch for 16-bit reductions does the same). It is reused by
 * every layer and slot: each use is over before its function returns.
 */
#include "moe_ep.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "comm.h"
#include "fail.h"

struct MoeRoute {
    int ep, E, El;
    int64_t *to_expert;    /* E: the rows this rank sends each global expert */
    int64_t *from_source;  /* ep x El: [s * El + j], rows ep rank s sends this
                              rank's local expert j */
    int64_t *out_rows;     /* ep: rows this rank sends each ep rank */
    int64_t *in_rows;      /* ep: rows it receives from each */
    int32_t *in_offsets;   /* El + 1: the owner's expert-major offsets */
    int64_t R, R_in;       /* rows sent (all of this rank's), rows received */
};

MoeRoute *moe_route_create(const Model *m)
{
    int ep = m->grid->layout.ep > 0 ? m->grid->layout.ep : 1, E = m->cfg->model.n_expert;
    if (E < 1 || E % ep != 0)
        fail_abort("moe_route_create: n_expert must be a positive multiple of ep",
                   __FILE__, __LINE__);
    MoeRoute *r = TRI_CALLOC(1, sizeof *r, "a MoE route");
    r->ep = ep;
    r->E = E;
    r->El = E / ep;
    r->to_expert = TRI_CALLOC((size_t)E, sizeof *r->to_expert, "a MoE route's counts");
    r->from_source = TRI_CALLOC((size_t)E, sizeof *r->from_source, "a MoE route's counts");
    r->out_rows = TRI_CALLOC((size_t)ep, sizeof *r->out_rows, "a MoE route's counts");
    r->in_rows = TRI_CALLOC((size_t)ep, sizeof *r->in_rows, "a MoE route's counts");
    r->in_offsets = TRI_CALLOC((size_t)r->El + 1, sizeof *r->in_offsets, "a MoE route's offsets");
    return r;
}

void moe_route_destroy(MoeRoute *r)
{
    if (!r)
        return;
    free(r->to_expert);
    free(r->from_source);
    free(r->out_rows);
    free(r->in_rows);
    free(r->in_offsets);
    free(r);
}

/* ---- the route ------------------------------------------------------------ */

/* The owner's expert-major offsets from what each source sends each of
 * its experts; R_in is their total. */
static void owner_offsets(MoeRoute *r)
{
    r->in_offsets[0] = 0;
    int64_t at = 0;
    for (int j = 0; j < r->El; j++) {
        for (int s = 0; s < r->ep; s++)
            at += r->from_source[s * r->El + j];
        if (at > INT32_MAX)
            fail_abort("moe_ep_route: an owner's rows exceed int32 offsets", __FILE__, __LINE__);
        r->in_offsets[j + 1] = (int32_t)at;
    }
    r->R_in = at;
}

int64_t moe_ep_route(Model *m, MoeRoute *r, const int32_t *offsets, int32_t *in_offsets)
{
    if (offsets[0] != 0)
        fail_abort("moe_ep_route: offsets must start at 0", __FILE__, __LINE__);
    for (int e = 0; e < r->E; e++) {
        if (offsets[e + 1] < offsets[e])
            fail_abort("moe_ep_route: offsets must not decrease", __FILE__, __LINE__);
        r->to_expert[e] = offsets[e + 1] - offsets[e];
    }
    r->R = offsets[r->E];
    if (r->ep == 1) {
        memcpy(r->from_source, r->to_expert, (size_t)r->E * sizeof *r->from_source);
    } else {
        /* peer q's block of to_expert is its El experts' counts: one
         * exchange tells each owner what each source sends each expert */
        comm_alltoall_int64(m->grid, COMM_EP, r->to_expert, r->from_source, r->El);
    }
    for (int q = 0; q < r->ep; q++) {
        r->out_rows[q] = r->in_rows[q] = 0;
        for (int j = 0; j < r->El; j++) {
            r->out_rows[q] += r->to_expert[q * r->El + j];
            r->in_rows[q] += r->from_source[q * r->El + j];
        }
    }
    owner_offsets(r);
    memcpy(in_offsets, r->in_offsets, (size_t)(r->El + 1) * sizeof *in_offsets);
    return r->R_in;
}

/* ---- moving rows ------------------------------------------------------------ */

/* n elements of dtype on device, in the staging buffer (moe_ep.c's top). */
static ops_tensor staging(ops_device device, ops_dtype dtype, int64_t n)
{
    static ops_tensor buf[OPS_CUDA + 1];   /* fp32 elements, reinterpreted */
    int64_t words = (n * (int64_t)ops_dtype_size(dtype) + 3) / 4;
    if (buf[device].n < words) {
        ops_free(&buf[device]);
        buf[device] = ops_alloc(OPS_F32, device, words > 0 ? words : 1);
    }
    return (ops_tensor){buf[device].data, n, dtype, device};
}

/* The rows of both sides in elements of width, per peer. */
static void element_counts(const MoeRoute *r, int64_t width, int64_t *out, int64_t *in)
{
    for (int q = 0; q < r->ep; q++) {
        out[q] = r->out_rows[q] * width;
        in[q] = r->in_rows[q] * width;
    }
}

/* Copies each (local expert j, source s) block between the owner's
 * source-major rows (as the all-to-all delivers them) and its
 * expert-major rows (as the experts use them), in the direction asked. */
static void regroup(const MoeRoute *r, ops_tensor expert_major, ops_tensor source_major,
                    int64_t width, int to_expert_major)
{
    int64_t src_at = 0;   /* source-major: source s's rows follow s - 1's */
    for (int s = 0; s < r->ep; s++) {
        for (int j = 0; j < r->El; j++) {
            int64_t rows = r->from_source[s * r->El + j];
            int64_t exp_at = r->in_offsets[j];
            for (int t = 0; t < s; t++)
                exp_at += r->from_source[t * r->El + j];
            if (rows > 0) {
                ops_tensor e = ops_view(expert_major, exp_at * width, rows * width);
                ops_tensor x = ops_view(source_major, src_at * width, rows * width);
                ops_copy(to_expert_major ? e : x, to_expert_major ? x : e);
            }
            src_at += rows;
        }
    }
}

/* moe_ep_send (to the owners) and moe_ep_return (back), which differ in
 * which side is the owner's and in the order of the all-to-all and the
 * regrouping. */
static void exchange(Model *m, const MoeRoute *r, ops_tensor dst, ops_tensor src,
                     int64_t width, int to_owner)
{
    int64_t src_rows = to_owner ? r->R : r->R_in, dst_rows = to_owner ? r->R_in : r->R;
    if (src.n < src_rows * width || dst.n < dst_rows * width || !src.data || !dst.data)
        fail_abort(to_owner ? "moe_ep_send: a buffer holds fewer than the route's rows"
                            : "moe_ep_return: a buffer holds fewer than the route's rows",
                   __FILE__, __LINE__);
    if (r->ep == 1) { /* a copy, none when the caller passes one buffer as both */
        if (r->R > 0 && dst.data != src.data)
            ops_copy(ops_view(dst, 0, r->R * width), ops_view(src, 0, r->R * width));
        return;
    }
    int64_t out[r->ep], in[r->ep];
    element_counts(r, width, out, in);
    const int64_t *sends = to_owner ? out : in, *receives = to_owner ? in : out;
    if (r->El == 1) {
        comm_alltoallv(m->grid, COMM_EP, src, sends, dst, receives);
        return;
    }
    ops_tensor stage = staging(src.device, src.dtype, r->R_in * width);
    if (to_owner) {
        comm_alltoallv(m->grid, COMM_EP, src, sends, stage, receives);
        regroup(r, dst, stage, width, 1);
    } else {
        regroup(r, src, stage, width, 0);
        comm_alltoallv(m->grid, COMM_EP, stage, sends, dst, receives);
    }
}

void moe_ep_send(Model *m, const MoeRoute *r, ops_tensor dst, ops_tensor src, int64_t width)
{
    exchange(m, r, dst, src, width, 1);
}

void moe_ep_return(Model *m, const MoeRoute *r, ops_tensor dst, ops_tensor src, int64_t width)
{
    exchange(m, r, dst, src, width, 0);
}

int64_t moe_ep_max_rows(const ModelConfig *mc, int ep, int64_t N)
{
    int E = mc->n_expert, k = mc->top_k;
    if (E < 1 || ep < 1)
        return 0;
    int El = E / ep;
    if (mc->moe_capacity > 0) {
        double cap = mc->moe_capacity * (double)N * k / E;
        int64_t per_expert = (int64_t)cap;
        if ((double)per_expert < cap)
            per_expert++;
        return (int64_t)ep * El * per_expert;
    }
    return (int64_t)ep * N * (k < El ? k : El);
}
