/*
 * zero_state.c - what a rank's ZeRO state holds, from its parameter table
 * and layout alone (zero_state_bytes, zero_state.h), and the rules that
 * choose the stage and whether reductions overlap; the allocator and the
 * collectives are zero.c's.
 *
 * Each parameter's rows are cut among the ranks that share its state:
 * the replicas (dp x cp, COMM_DP) for a dense tensor, the replicas
 * holding the same experts (COMM_EDP, layout_expert_replicas) for a
 * routed expert's (Param.expert), so zero_param_rows is the one rule both
 * the sizes here and zero.c's views follow.
 */
#include "zero_state.h"

#include "layout.h"
#include "offload.h"

void zero_partition(int64_t rows, int dp, int block, int64_t *row0, int64_t *n)
{
    int64_t each = (rows + dp - 1) / dp;
    int64_t start = each * block;
    if (start > rows)
        start = rows;
    int64_t end = start + each;
    if (end > rows)
        end = rows;
    *row0 = start;
    *n = end - start;
}

/* ---- sizes ------------------------------------------------------------- */

int zero_stage(int zero, int dp)
{
    /* with one DP rank there is nothing to shard or reduce: every stage is
     * stage 0, with no copies and no collectives */
    return dp == 1 ? 0 : zero;
}

int zero_overlaps(int overlap, int stage, int dp, int hierarchical, ops_device device)
{
    (void)device; /* the host's MPI and a GPU's NCCL both overlap */
    return overlap && stage <= 1 && dp > 1 && !hierarchical;
}

CommGroup zero_param_group(const Param *p, const ZeroLayout *l, int *size, int *block)
{
    /* edp = 0: a layout that says nothing of experts (ep = 1), where the
     * experts' replicas are the replicas */
    if (p->expert && l->edp > 0) {
        *size = l->edp;
        *block = l->edp_rank;
        return COMM_EDP;
    }
    *size = l->dp;
    *block = l->dp_rank;
    return COMM_DP;
}

void zero_param_rows(const Param *p, const ZeroLayout *l, int64_t *row0, int64_t *rows)
{
    int size, block;
    zero_param_group(p, l, &size, &block);
    zero_partition(p->lrows, size, block, row0, rows);
}

static int64_t larger(int64_t a, int64_t b) { return a > b ? a : b; }

/* The elements of p that comm_dp's scratch holds over two levels for the
 * rank owning `block`: its place's share inside the node. Blocks go by
 * place, then by node (layout_dp_block, comm_dp_order), so a place's share
 * of a reduce-scatter or all-gather is its nodes' run of blocks; of zero
 * 0's all-reduce, its part of the elements (comm_dp.c). */
static int64_t node_share(const Param *p, const ZeroLayout *l)
{
    int nodes = l->dp / l->places, place = layout_dp_block_place(l->dp_rank, nodes);
    int64_t first, n, last, m;
    if (l->stage == 0) { /* the elements cut as rows are (comm_dp.c's part_count) */
        zero_partition(params_local_numel(p), l->places, place, &first, &n);
        return n;
    }
    zero_partition(p->lrows, l->dp, layout_dp_block(place, 0, nodes), &first, &n);
    zero_partition(p->lrows, l->dp, layout_dp_block(place, nodes - 1, nodes), &last, &m);
    return (last + m - first) * p->lcols;
}

ZeroCounts zero_counts(const ParamSet *ps, const ZeroLayout *l)
{
    ZeroCounts c = {0};
    for (int i = 0; i < ps->n; i++) {
        const Param *p = &ps->p[i];
        int64_t row0, rows;
        int size, block;
        CommGroup group = zero_param_group(p, l, &size, &block);
        zero_partition(p->lrows, size, block, &row0, &rows);
        c.full += params_local_numel(p);
        c.owned += rows * p->lcols;
        c.share = larger(c.share, rows * p->lcols);
        /* experts reduce flat over edp: no share of the scratch */
        if (l->places && group == COMM_DP)
            c.scratch = larger(c.scratch, node_share(p, l));
    }
    c.share = larger(c.share, 1);
    c.scratch = larger(c.scratch, 1);
    c.update = l->stage == 0 ? c.full : c.owned;
    for (int u = 0; u < ps->n_units; u++) {
        int64_t n = 0;
        for (int i = 0; i < ps->units[u].n; i++)
            n += params_local_numel(&ps->p[ps->units[u].idx[i]]);
        c.unit = larger(c.unit, n);
    }
    return c;
}

/* fp32 master rows of their own: the weights are another dtype, or only
 * owned weights exist (zero 3, where the master rows are the weights), or
 * the master lives in host memory (offload). */
int zero_separate_master(const ZeroLayout *l)
{
    return l->dtype != OPS_F32 || l->stage == 3 || l->offload;
}

/* fp32 buffers beside the gradients and owned rows:
 *  - zero 2/3: the unit's transient gradients (unit-sized), and one
 *    parameter's share to receive its reduction into before adding it;
 *  - two levels: comm_dp's scratch for a node-level share of one
 *    parameter (the collectives go parameter by parameter). */
static int64_t buffer_elements(const ZeroCounts *n, const ZeroLayout *l)
{
    return (l->stage >= 2 ? n->unit + n->share : 0) + (l->places ? n->scratch : 0);
}

ZeroBytes zero_state_bytes(const ParamSet *ps, const ZeroLayout *l)
{
    ZeroCounts n = zero_counts(ps, l);
    int64_t w = (int64_t)ops_dtype_size(l->dtype), f32 = (int64_t)sizeof(float);
    int64_t master = zero_separate_master(l) ? n.update * f32 : 0;
    ZeroBytes b = {0};
    /* zero 3: the owned master rows (unless offloaded), and the buffer a
     * unit is gathered into */
    b.weights = l->stage < 3 || l->offload ? 0 : master;
    b.weights += l->stage < 3 ? n.full * w : n.unit * w;
    b.grads = ((l->stage < 2 ? n.full : 0) + (l->stage > 0 ? n.owned : 0)
               + buffer_elements(&n, l)) * f32;
    int64_t optimizer = (l->stage < 3 || l->offload ? master : 0) + 2 * n.update * f32;
    if (l->offload)
        b.host = optimizer + offload_staging_bytes(l->dtype, OFFLOAD_CHUNK);
    else
        b.optimizer = optimizer;
    return b;
}
