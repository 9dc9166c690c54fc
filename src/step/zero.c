/*
 * zero.c - ZeRO stages 0 to 3 over the DP group; see zero.h.
 *
 * Every collective runs in place, one parameter at a time. Rank r owns
 * block k of every tensor's rows, where k is r's place in the order the
 * DP reduction lists blocks in (comm_dp_order: DP rank order over one
 * level; over two, grouped by place in the node, then by node, as
 * layout_dp_block numbers them). So a
 * tensor's gradients are already every rank's block in that order: each
 * is reduce-scattered straight from its gradients (zero 2/3: the unit's
 * transient ones) into its owned rows (zero 2/3: into a buffer of one
 * parameter's share, then added), and all-gathered where its weights live
 * (zero 3: the unit's gather buffer). Nothing is packed, and no buffer the
 * size of a unit sits between: a pack and a receive buffer were two of
 * the largest unit's gradients per rank (the tied embedding: 2 x 154 MB
 * for GPT-2 small, 2 x 2.1 GB for Llama 3 8B at tp 1). Checkpoints and
 * the optimizer find a rank's rows through zrow0, whatever block it is.
 * A bucket is the parameters whose gradients are final together (a unit).
 * A routed expert's tensor (Param.expert) goes through the same steps over
 * COMM_EDP instead, flat, its blocks in EDP rank order (zero_state.c's
 * zero_param_rows); what a rank holds is counted there.
 *
 * Overlap (zero 0 and 1, one level, host or GPU): a bucket's reduction
 * starts, nonblocking, as soon as the last microbatch's backward has made
 * all its gradients final, so it runs while earlier layers still compute
 * their backward; every bucket may fly at once (a flight holds no buffer:
 * the collectives run in place), and each unit's hook gives MPI a chance
 * to progress them (on a GPU it only asks whether the reduction's
 * event has passed). On a GPU the reduction runs on the DP communicator's
 * stream (comm_nccl.h) and nothing here blocks the host: completing a
 * flight makes the compute stream wait for it. The buffers stay safe
 * because the gradients a flight reads are final, and the owned rows it
 * writes are read by the optimizer, and the gradients zeroed by the next
 * step, only after zero_reduce_grads has completed every flight (on a
 * GPU, queued on the compute stream behind that wait). So the seconds
 * the backward waited (`exposed`) are measured on the compute stream
 * (ops_timer): a host clock would read nothing there.
 */
#include "zero.h"
#include "zero_state.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "comm.h"
#include "comm_dp.h"
#include "fail.h"
#include "fault.h"
#include "layout.h"
#include "prof.h"
#include "timer.h"

typedef struct {
    int n;
    int *idx;                 /* as many as its unit's parameters */
    int64_t numel;            /* units: elements of the full local blocks */
} Bucket;

/* A bucket's reduction in flight: a request per parameter. */
typedef struct {
    CommRequest *req;         /* as many as the bucket's parameters */
    int n_req;
    double started;
} Flight;

struct Zero {
    Model *m;
    const Config *cfg;
    const Grid *g;
    int stage;
    int dp;                   /* the replicas sharing the state (layout_replicas) */
    int block;                /* the block of rows this rank owns: its place in
                                 comm_dp_order (its DP rank over one level) */
    int edp, eblock;          /* routed experts' tensors: the ranks sharing
                                 their state (COMM_EDP), this rank's block */
    Bucket *buckets;          /* zero 0/1: units, each parameter once */
    int n_buckets;
    Bucket *units;            /* zero 2/3: units as the model uses them */
    int *param_counts;        /* per parameter, per DP rank: its owned rows'
                                 elements (the collectives' counts, which MPI
                                 reads until a request completes) */
    CommDp *reduction;        /* how DP reduces: flat or two levels */
    ops_tensor recv;          /* zero 2/3: one parameter's share, received */
    ops_tensor mid;           /* two levels: comm_dp's scratch */
    ops_tensor work_w;        /* zero 3: the gathered unit's weights */
    ops_tensor work_g;        /* zero 2/3: the unit's transient gradients */
    ops_tensor *arenas;       /* everything allocated, for freeing */
    int n_arenas;
    int gathered_unit;        /* zero 3: which unit work_w holds, or -1 */
    ZeroBytes bytes;
    int overlap;              /* reductions start during the backward */
    int *units_of;            /* per parameter: units that use it */
    int *units_left;          /* ... that have not run their final backward */
    char *bucket_started;     /* per bucket */
    Flight *flights;          /* per bucket, in the order they started */
    int n_flights;            /* started this step */
    Offload *offload;         /* [train] offload on a GPU (or fault offload_cpu), else NULL */
    double span;              /* host seconds from starting flights to completing them */
    ops_timer exposed;        /* the compute stream waiting for them */
};

void zero_update_rows(const Zero *z, const Param *p, int64_t *row0, int64_t *rows)
{
    if (z->stage == 0) {
        *row0 = 0;
        *rows = p->lrows;
    } else {
        *row0 = p->zrow0;
        *rows = p->zrows;
    }
}

static ZeroLayout layout_of(const Zero *z)
{
    int places = comm_dp_two_level(z->reduction) ? z->g->dp_node_size : 0;
    ZeroLayout l = {z->stage, z->dp, z->block, z->m->act_dtype, places, z->overlap,
                    z->offload != NULL, z->edp, z->eblock};
    return l;
}

/* On the rank's device, or in host memory near it (the offloaded state). */
static ops_tensor arena_on(Zero *z, int host, ops_dtype dtype, int64_t n, int64_t *bytes)
{
    int64_t len = n > 0 ? n : 1;
    ops_tensor t = host ? ops_alloc_host(dtype, len, z->g->device)
                        : ops_alloc(dtype, z->g->device, len);
    z->arenas = TRI_REALLOC(z->arenas, (size_t)(z->n_arenas + 1) * sizeof *z->arenas, "ZeRO's arenas");
    z->arenas[z->n_arenas++] = t;
    *bytes += n * (int64_t)ops_dtype_size(dtype);
    return t;
}

static ops_tensor arena(Zero *z, ops_dtype dtype, int64_t n, int64_t *bytes)
{
    return arena_on(z, 0, dtype, n, bytes);
}

/* Buckets for zero 0/1: each unit, skipping parameters an earlier unit
 * already holds (the tied wte sits in both embed and head on one stage). */
static void build_buckets(Zero *z)
{
    ParamSet *ps = &z->m->ps;
    char *seen = TRI_CALLOC((size_t)ps->n + 1, 1, "ZeRO's buckets");
    z->buckets = TRI_CALLOC((size_t)ps->n_units + 1, sizeof *z->buckets, "ZeRO's buckets");
    z->units = TRI_CALLOC((size_t)ps->n_units + 1, sizeof *z->units, "ZeRO's buckets");
    for (int u = 0; u < ps->n_units; u++) {
        Bucket *b = &z->buckets[z->n_buckets], *unit = &z->units[u];
        size_t n = (size_t)ps->units[u].n + 1;
        unit->idx = TRI_CALLOC(n, sizeof *unit->idx, "ZeRO's buckets");
        /* b may be an empty bucket the last unit left (b->n = 0) */
        b->idx = TRI_REALLOC(b->idx, n * sizeof *b->idx, "ZeRO's buckets");
        for (int i = 0; i < ps->units[u].n; i++) {
            int idx = ps->units[u].idx[i];
            unit->idx[unit->n++] = idx;
            unit->numel += params_local_numel(&ps->p[idx]);
            if (!seen[idx]) {
                seen[idx] = 1;
                b->idx[b->n++] = idx;
            }
        }
        if (b->n)
            z->n_buckets++;
    }
    free(seen);
}

/* Lays out weights, gradients and optimizer state per the ZeRO stage, in
 * the sizes zero_state_bytes gives; what it allocated must be what that
 * says, so plan's figures and the trainer's report cannot part. */
static void allocate_state(Zero *z)
{
    ParamSet *ps = &z->m->ps;
    ops_dtype wdt = z->m->act_dtype;
    ZeroLayout l = layout_of(z);
    ZeroCounts n = zero_counts(ps, &l);
    for (int i = 0; i < ps->n; i++) {
        Param *p = &ps->p[i];
        zero_param_rows(p, &l, &p->zrow0, &p->zrows);
    }
    int keep_full_weights = z->stage < 3, keep_full_grads = z->stage < 2;
    int own_master = zero_separate_master(&l);
    ops_tensor w = keep_full_weights ? arena(z, wdt, n.full, &z->bytes.weights) : OPS_NONE;
    ops_tensor g = keep_full_grads ? arena(z, OPS_F32, n.full, &z->bytes.grads) : OPS_NONE;
    ops_tensor og = z->stage == 0 ? OPS_NONE : arena(z, OPS_F32, n.owned, &z->bytes.grads);
    /* with offload, the update rows' master and moments live in host memory */
    int host = l.offload;
    int64_t *opt_bytes = host ? &z->bytes.host : &z->bytes.optimizer;
    int64_t *master_bytes = !keep_full_weights && !host ? &z->bytes.weights : opt_bytes;
    ops_tensor master = own_master ? arena_on(z, host, OPS_F32, n.update, master_bytes) : OPS_NONE;
    ops_tensor mom = arena_on(z, host, OPS_F32, n.update, opt_bytes);
    ops_tensor vel = arena_on(z, host, OPS_F32, n.update, opt_bytes);
    if (host)
        z->bytes.host += offload_staging_bytes(wdt, OFFLOAD_CHUNK);

    int64_t off_full = 0, off_upd = 0, off_own = 0;
    for (int i = 0; i < ps->n; i++) {
        Param *p = &ps->p[i];
        int64_t full = params_local_numel(p), r0, nr;
        zero_update_rows(z, p, &r0, &nr);
        int64_t upd = nr * p->lcols;
        p->w = keep_full_weights ? ops_view(w, off_full, full) : OPS_NONE;
        p->g = keep_full_grads ? ops_view(g, off_full, full) : OPS_NONE;
        p->og = z->stage == 0 ? p->g : ops_view(og, off_own, p->zrows * p->lcols);
        p->master = own_master ? ops_view(master, off_upd, upd)
                               : ops_view(p->w, r0 * p->lcols, upd);
        p->m = ops_view(mom, off_upd, upd);
        p->v = ops_view(vel, off_upd, upd);
        off_full += full;
        off_upd += upd;
        off_own += p->zrows * p->lcols;
    }
    if (l.places)
        z->mid = arena(z, OPS_F32, n.scratch, &z->bytes.grads);
    if (z->stage >= 2) {
        z->work_g = arena(z, OPS_F32, n.unit, &z->bytes.grads);
        z->recv = arena(z, OPS_F32, n.share, &z->bytes.grads);
    }
    if (z->stage == 3)
        z->work_w = arena(z, wdt, n.unit, &z->bytes.weights);
    ZeroBytes stated = zero_state_bytes(ps, &l);
    if (z->bytes.weights != stated.weights || z->bytes.grads != stated.grads
        || z->bytes.optimizer != stated.optimizer || z->bytes.host != stated.host)
        fail_abort("zero.c allocated other sizes than zero_state_bytes states",
                   __FILE__, __LINE__);
}

/* The block of rows DP rank `rank` owns: its place in comm_dp_order (over
 * two levels layout_dp_block of its place and node, which comm_dp.c
 * numbered the order by). */
static int block_of(const CommDp *d, int dp, int rank)
{
    const int *order = comm_dp_order(d);
    for (int k = 0; k < dp; k++)
        if (order[k] == rank)
            return k;
    fail_abort("a DP rank missing from comm_dp_order", __FILE__, __LINE__);
}

/* Each parameter's elements per rank of its group, its owned rows' (DP
 * rank order[k] owns block k; an expert's EDP rank k, block k): the counts
 * of its collectives. MPI counts are ints. */
static void count_owned_rows(Zero *z)
{
    ParamSet *ps = &z->m->ps;
    const int *order = comm_dp_order(z->reduction);
    ZeroLayout l = layout_of(z);
    z->param_counts = TRI_CALLOC((size_t)ps->n * (size_t)z->dp + 1, sizeof *z->param_counts,
                                 "ZeRO's per-rank counts");
    for (int i = 0; i < ps->n; i++) {
        const Param *p = &ps->p[i];
        int size, mine;
        CommGroup group = zero_param_group(p, &l, &size, &mine);
        for (int k = 0; k < size; k++) {
            int r = group == COMM_DP ? order[k] : k;
            int64_t row0, n;
            zero_partition(p->lrows, size, k, &row0, &n);
            if (n * p->lcols > INT_MAX) {
                char what[160];
                snprintf(what, sizeof what, "parameter %s: a DP rank's %lld elements "
                         "exceed an MPI count; raise dp or tp", p->name,
                         (long long)(n * p->lcols));
                fail_abort(what, __FILE__, __LINE__);
            }
            z->param_counts[(size_t)i * (size_t)z->dp + (size_t)r] = (int)(n * p->lcols);
        }
    }
}

static const int *owned_counts(const Zero *z, int param)
{
    return z->param_counts + (size_t)param * (size_t)z->dp;
}

/* ---- the collectives, parameter by parameter ---------------------------- */

/* Parameter idx's gradients, summed over DP (a routed expert's over the
 * ranks holding it, flat): this rank's owned rows of the sum into `into`
 * (its owned rows, or zero 2/3's receive buffer). */
static void reduce_scatter_param(Zero *z, int idx, ops_tensor into)
{
    Param *p = &z->m->ps.p[idx];
    if (p->expert)
        PROF(PROF_DP_COMM, comm_reduce_scatter(z->g, COMM_EDP, p->g, into,
                                               owned_counts(z, idx)));
    else
        PROF(PROF_DP_COMM, comm_dp_reduce_scatter(z->reduction, p->g, into,
                                                  owned_counts(z, idx), z->mid));
}

/* zero 2/3: parameter idx's gradients (a unit's transient ones), summed
 * over DP, added into its owned rows. */
static void reduce_add_param(Zero *z, int idx)
{
    Param *p = &z->m->ps.p[idx];
    ops_tensor part = ops_view(z->recv, 0, p->og.n);
    reduce_scatter_param(z, idx, part);
    ops_accumulate(p->og, part, p->og.n);
}

/* Every rank's owned rows of parameter idx's weights gathered where they
 * live, this rank's first cast from its master rows when those are
 * separate. */
static void gather_param(Zero *z, int idx, int from_master)
{
    Param *p = &z->m->ps.p[idx];
    ops_tensor mine = ops_view(p->w, p->zrow0 * p->lcols, p->zrows * p->lcols);
    if (from_master)
        ops_cast(mine, p->master);
    if (p->expert)
        PROF(PROF_DP_COMM, comm_allgather(z->g, COMM_EDP, mine, p->w, owned_counts(z, idx)));
    else
        PROF(PROF_DP_COMM, comm_dp_allgather(z->reduction, mine, p->w, owned_counts(z, idx),
                                             z->mid));
}

/* ---- overlapping the reduction with the backward pass ------------------- */

static void flight_complete(Zero *z, Flight *f)
{
    ops_timer_start(&z->exposed);
    for (int i = 0; i < f->n_req; i++)
        comm_wait(&f->req[i]);
    ops_timer_stop(&z->exposed);
    z->span += timer_now() - f->started;
    f->n_req = 0;
}

/* Starts bucket b's reduction. Every bucket may fly at once: a flight
 * holds no buffer of its own (the collectives run in place), so nothing
 * waits for an older one to land until zero_reduce_grads. */
static void flight_start(Zero *z, int b)
{
    Flight *f = &z->flights[z->n_flights++];
    const Bucket *bk = &z->buckets[b];
    f->n_req = 0;
    f->started = timer_now();
    /* zero 0 all-reduces in place; zero 1 overlaps over one level only,
     * so it reduce-scatters in place (the top of this file); one request
     * per parameter */
    for (int i = 0; i < bk->n; i++) {
        Param *p = &z->m->ps.p[bk->idx[i]];
        CommGroup group = p->expert ? COMM_EDP : COMM_DP;
        if (z->stage == 0)
            comm_iallreduce(z->g, group, p->g, p->g.n, &f->req[f->n_req++]);
        else
            comm_ireduce_scatter(z->g, group, p->g, p->og, owned_counts(z, bk->idx[i]),
                                 &f->req[f->n_req++]);
    }
    z->bucket_started[b] = 1;
}

/* MPI moves nonblocking collectives along only inside its calls. */
static void flights_progress(Zero *z)
{
    for (int k = 0; k < z->n_flights; k++)
        for (int i = 0; i < z->flights[k].n_req; i++)
            comm_test(&z->flights[k].req[i]);
}

/* A unit's backward of the last microbatch is done. A parameter's
 * gradient is final once every unit using it is (the tied wte serves the
 * embedding and the head); start every bucket whose gradients all are. */
static void unit_final(Zero *z, int unit)
{
    const Unit *u = &z->m->ps.units[unit];
    for (int i = 0; i < u->n; i++)
        z->units_left[u->idx[i]]--;
    for (int b = 0; b < z->n_buckets; b++) {
        if (z->bucket_started[b])
            continue;
        int ready = 1;
        for (int i = 0; i < z->buckets[b].n; i++)
            ready &= z->units_left[z->buckets[b].idx[i]] <= 0;
        if (ready)
            flight_start(z, b);
    }
}

static void overlap_hook(Zero *z, int unit, UnitEvent ev, int final)
{
    if (ev == UNIT_AFTER_BACKWARD && final)
        unit_final(z, unit);
    flights_progress(z);
}

/* ---- ZeRO-2/3 unit hooks ----------------------------------------------- */

static void point_unit(Zero *z, const Bucket *u, ops_tensor base, int weights)
{
    ParamSet *ps = &z->m->ps;
    int64_t off = 0;
    for (int i = 0; i < u->n; i++) {
        Param *p = &ps->p[u->idx[i]];
        int64_t n = params_local_numel(p);
        ops_tensor view = base.data ? ops_view(base, off, n) : OPS_NONE;
        if (weights)
            p->w = view;
        else
            p->g = view;
        off += n;
    }
}

static void gather_unit(Zero *z, int unit)
{
    if (z->gathered_unit == unit)
        return;
    const Bucket *u = &z->units[unit];
    ops_tensor into = ops_view(z->work_w, 0, u->numel);
    point_unit(z, u, into, 1);
    for (int i = 0; i < u->n; i++)
        gather_param(z, u->idx[i], 1);
    z->gathered_unit = unit;
}

static void release_unit(Zero *z, int unit)
{
    point_unit(z, &z->units[unit], OPS_NONE, 1);
    z->gathered_unit = -1;
}

static void unit_hook(void *ctx, int unit, UnitEvent ev, int final)
{
    Zero *z = ctx;
    const Bucket *u = &z->units[unit];
    if (z->overlap) {
        overlap_hook(z, unit, ev, final);
        return;
    }
    switch (ev) {
    case UNIT_BEFORE_FORWARD:
        if (z->stage == 3)
            gather_unit(z, unit);
        break;
    case UNIT_AFTER_FORWARD:
        if (z->stage == 3)
            release_unit(z, unit);
        break;
    case UNIT_BEFORE_BACKWARD:
        if (z->stage == 3)
            gather_unit(z, unit);
        ops_zero(ops_view(z->work_g, 0, u->numel));
        point_unit(z, u, ops_view(z->work_g, 0, u->numel), 0);
        break;
    case UNIT_AFTER_BACKWARD:
        for (int i = 0; i < u->n; i++)
            reduce_add_param(z, u->idx[i]);
        point_unit(z, u, OPS_NONE, 0);
        if (z->stage == 3)
            release_unit(z, unit);
        break;
    }
}

/* ---- public ------------------------------------------------------------ */

Zero *zero_create(Model *m, const Config *cfg, const Grid *g)
{
    Zero *z = TRI_CALLOC(1, sizeof *z, "ZeRO");
    z->m = m;
    z->cfg = cfg;
    z->g = g;
    /* ZeRO's group is the replicas (dp x cp ranks): they hold the same
     * weights, so they share the optimizer state */
    int replicas = layout_replicas(&g->layout);
    z->stage = zero_stage(cfg->parallel.zero, replicas);
    z->dp = replicas;
    z->gathered_unit = -1;
    z->exposed = ops_timer_on(g->device);
    z->reduction = comm_dp_create(g);
    z->block = block_of(z->reduction, replicas, layout_replica_rank(&g->layout));
    /* a routed expert's tensor lives on the replicas with its ep rank */
    z->edp = layout_expert_replicas(&g->layout);
    z->eblock = layout_expert_replica_rank(&g->layout);
    build_buckets(z);
    count_owned_rows(z);
    z->overlap = zero_overlaps(cfg->parallel.overlap, z->stage, replicas,
                               comm_dp_two_level(z->reduction), g->device);
    z->units_of = TRI_CALLOC((size_t)m->ps.n + 1, sizeof *z->units_of, "ZeRO's unit counts");
    z->units_left = TRI_CALLOC((size_t)m->ps.n + 1, sizeof *z->units_left, "ZeRO's unit counts");
    z->bucket_started = TRI_CALLOC((size_t)z->n_buckets + 1, 1, "ZeRO's unit counts");
    for (int u = 0; u < m->ps.n_units; u++)
        for (int i = 0; i < m->ps.units[u].n; i++)
            z->units_of[m->ps.units[u].idx[i]]++;
    z->flights = TRI_CALLOC((size_t)z->n_buckets + 1, sizeof *z->flights, "ZeRO's buckets in flight");
    for (int b = 0; b < z->n_buckets; b++) /* flights start in any order: each fits any bucket */
        z->flights[b].req = TRI_CALLOC((size_t)m->ps.n + 1, sizeof *z->flights[b].req,
                                       "ZeRO's buckets in flight");
    /* fault offload_cpu: the GPU's offload path run on the CPU, so the
     * tests can train through it (fault.h) */
    if (offload_active(cfg->train.offload, g->device)
        || (cfg->train.offload == OFFLOAD_OPTIMIZER && fault_at("offload_cpu", g->layout.rank, 0)))
        z->offload = offload_create(g->device, m->act_dtype, OFFLOAD_CHUNK);
    allocate_state(z);
    if (z->stage >= 2 || z->overlap)
        model_set_unit_hook(m, unit_hook, z);
    return z;
}

void zero_destroy(Zero *z)
{
    if (!z)
        return;
    for (int i = 0; i < z->n_arenas; i++) {
        if (z->arenas[i].device == OPS_CPU) /* arena_on's host memory */
            ops_free_host(&z->arenas[i], z->g->device);
        else
            ops_free(&z->arenas[i]);
    }
    offload_destroy(z->offload);
    ops_timer_free(&z->exposed);
    free(z->arenas);
    for (int u = 0; u < z->m->ps.n_units; u++) {
        free(z->buckets[u].idx);
        free(z->units[u].idx);
    }
    for (int b = 0; b < z->n_buckets; b++)
        free(z->flights[b].req);
    free(z->buckets);
    free(z->units);
    free(z->param_counts);
    comm_dp_destroy(z->reduction);
    free(z->units_of);
    free(z->units_left);
    free(z->bucket_started);
    free(z->flights);
    free(z);
}

/* In fp32 with full weights, the master rows are the weights' own rows. */
static int master_aliases_weights(const Param *p, int64_t row0)
{
    return p->w.data && p->w.dtype == OPS_F32
        && p->master.data == (char *)p->w.data + row0 * p->lcols * sizeof(float);
}

static int fill_from_rng(const Param *p, float *block, void *ctx)
{
    params_init((Param *)p, ctx, block);
    return 0;
}

void zero_init_weights(Zero *z)
{
    zero_fill_weights(z, fill_from_rng, (void *)z->cfg);
}

int zero_fill_weights(Zero *z, ZeroFill fill, void *ctx)
{
    ParamSet *ps = &z->m->ps;
    int64_t most = 0;
    for (int i = 0; i < ps->n; i++)
        if (params_local_numel(&ps->p[i]) > most)
            most = params_local_numel(&ps->p[i]);
    float *block = TRI_MALLOC((size_t)(most > 0 ? most : 1) * sizeof(float), "the weights' initial values");
    int rc = 0;
    for (int i = 0; i < ps->n && !rc; i++) {
        Param *p = &ps->p[i];
        int64_t n = params_local_numel(p), r0, nr;
        if ((rc = fill(p, block, ctx)))
            break;
        zero_update_rows(z, p, &r0, &nr);
        ops_tensor src = {block, n, OPS_F32, OPS_CPU};
        if (p->w.data)
            ops_cast(p->w, src);
        if (!master_aliases_weights(p, r0))
            ops_copy(p->master, ops_view(src, r0 * p->lcols, nr * p->lcols));
    }
    free(block);
    return rc;
}

void zero_begin_step(Zero *z)
{
    ParamSet *ps = &z->m->ps;
    memcpy(z->units_left, z->units_of, sizeof *z->units_of * (size_t)ps->n);
    memset(z->bucket_started, 0, (size_t)z->n_buckets);
    for (int i = 0; i < ps->n; i++) {
        if (ps->p[i].g.data && z->stage < 2)
            ops_zero(ps->p[i].g);
        if (z->stage >= 2)
            ops_zero(ps->p[i].og);
    }
}

void zero_reduce_grads(Zero *z)
{
    if (z->overlap) {
        /* start what the backward did not, then finish everything, oldest
         * first */
        for (int b = 0; b < z->n_buckets; b++)
            if (!z->bucket_started[b])
                flight_start(z, b);
        for (int k = 0; k < z->n_flights; k++)
            flight_complete(z, &z->flights[k]);
        z->n_flights = 0;
    } else if (z->stage == 0) {
        for (int b = 0; b < z->n_buckets; b++) {
            const Bucket *bk = &z->buckets[b];
            for (int i = 0; i < bk->n; i++) {
                const Param *p = &z->m->ps.p[bk->idx[i]];
                if (p->expert)
                    PROF(PROF_DP_COMM, comm_allreduce(z->g, COMM_EDP, p->g, p->g.n, COMM_SUM));
                else
                    PROF(PROF_DP_COMM, comm_dp_allreduce(z->reduction, p->g, z->mid));
            }
        }
    } else if (z->stage == 1) {
        for (int b = 0; b < z->n_buckets; b++) {
            const Bucket *bk = &z->buckets[b];
            for (int i = 0; i < bk->n; i++)
                reduce_scatter_param(z, bk->idx[i], z->m->ps.p[bk->idx[i]].og);
        }
    }
}

void zero_gather_weights(Zero *z)
{
    if (z->stage == 0 || z->stage == 3)
        return;
    /* offload uploaded the new compute copy's rows already */
    int separate_master = z->m->act_dtype != OPS_F32 && !z->offload;
    for (int b = 0; b < z->n_buckets; b++) {
        const Bucket *bk = &z->buckets[b];
        for (int i = 0; i < bk->n; i++)
            gather_param(z, bk->idx[i], separate_master);
    }
}

ZeroBytes zero_bytes(const Zero *z) { return z->bytes; }

Offload *zero_offload(const Zero *z) { return z->offload; }

void zero_overlap_seconds(Zero *z, double *span, double *exposed)
{
    *span = z->span;
    *exposed = ops_timer_read(&z->exposed);
    z->span = 0.0;
}
