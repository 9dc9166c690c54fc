/*
 * offload.c - AdamW on the host over state in host memory; see offload.h.
 *
 * The schedule is a list, as the pipeline's is (schedule.c): written by a
 * pure function the tests check action by action, run by one loop that
 * only dispatches. Each slot has two host buffers, the gradient chunk that
 * comes down and the weight chunk that goes up, so a slot's download can
 * start while its previous upload is still in flight; what a slot must
 * wait for before its update overwrites the weights is that upload.
 */
#include "offload.h"

#include <stdlib.h>

#include "alloc.h"
#include "fail.h"

struct Offload {
    ops_device dev;
    int64_t chunk;
    ops_tensor grad[OFFLOAD_SLOTS];   /* fp32, host, page-locked on a GPU */
    ops_tensor weights[OFFLOAD_SLOTS];/* compute dtype, host */
};

int offload_active(OffloadKind kind, ops_device device)
{
    return kind == OFFLOAD_OPTIMIZER && device != OPS_CPU;
}

/* ---- the schedule ------------------------------------------------------- */

/* A walk over the chunks of the segments, in order. */
typedef struct {
    const int64_t *seg_n;
    int n_seg;
    int64_t chunk;
    int seg;
    int64_t off;
} ChunkWalk;

/* The next chunk into *c (its seg, off, n); 0 when there is none. Empty
 * segments have no chunk. */
static int next_chunk(ChunkWalk *w, OffloadStep *c)
{
    while (w->seg < w->n_seg && w->off >= w->seg_n[w->seg]) {
        w->seg++;
        w->off = 0;
    }
    if (w->seg >= w->n_seg)
        return 0;
    int64_t left = w->seg_n[w->seg] - w->off;
    c->seg = w->seg;
    c->off = w->off;
    c->n = left < w->chunk ? left : w->chunk;
    w->off += c->n;
    return 1;
}

static void emit(OffloadStep *out, int64_t *k, OffloadAct act, int slot, OffloadStep c)
{
    if (out)
        out[*k] = (OffloadStep){act, slot, c.seg, c.off, c.n};
    (*k)++;
}

int64_t offload_schedule(const int64_t *seg_n, int n_seg, int64_t chunk, OffloadStep *out)
{
    if (chunk < 1)
        fail_abort("offload_schedule: chunk must be positive", __FILE__, __LINE__);
    ChunkWalk w = {seg_n, n_seg, chunk, 0, 0};
    OffloadStep cur = {0}, next = {0}, before[OFFLOAD_SLOTS] = {{0}}; /* the slot's last chunk */
    int64_t k = 0, i = 0;
    int have_next = next_chunk(&w, &next);
    if (have_next)
        emit(out, &k, OFFLOAD_DOWN, 0, next);
    for (; have_next; i++) {
        int slot = (int)(i % OFFLOAD_SLOTS);
        cur = next;
        have_next = next_chunk(&w, &next);
        if (have_next) /* the next chunk comes down while this one is updated */
            emit(out, &k, OFFLOAD_DOWN, (slot + 1) % OFFLOAD_SLOTS, next);
        emit(out, &k, OFFLOAD_WAIT_DOWN, slot, cur);
        if (i >= OFFLOAD_SLOTS) /* the slot's weights buffer is free again */
            emit(out, &k, OFFLOAD_WAIT_UP, slot, before[slot]);
        emit(out, &k, OFFLOAD_UPDATE, slot, cur);
        emit(out, &k, OFFLOAD_UP, slot, cur);
        before[slot] = cur;
    }
    /* the last uploads, oldest first: the step ends with the weights in place */
    for (int64_t j = i < OFFLOAD_SLOTS ? 0 : i - OFFLOAD_SLOTS; j < i; j++)
        emit(out, &k, OFFLOAD_WAIT_UP, (int)(j % OFFLOAD_SLOTS), before[j % OFFLOAD_SLOTS]);
    return k;
}

/* ---- the executor ------------------------------------------------------- */

Offload *offload_create(ops_device dev, ops_dtype wdt, int64_t chunk)
{
    Offload *o = TRI_CALLOC(1, sizeof *o, "the offload");
    o->dev = dev;
    o->chunk = chunk;
    for (int s = 0; s < OFFLOAD_SLOTS; s++) {
        o->grad[s] = ops_alloc_host(OPS_F32, chunk, dev);
        o->weights[s] = ops_alloc_host(wdt, chunk, dev);
    }
    return o;
}

void offload_destroy(Offload *o)
{
    if (!o)
        return;
    for (int s = 0; s < OFFLOAD_SLOTS; s++) {
        ops_free_host(&o->grad[s], o->dev);
        ops_free_host(&o->weights[s], o->dev);
    }
    free(o);
}

int64_t offload_staging_bytes(ops_dtype wdt, int64_t chunk)
{
    return OFFLOAD_SLOTS * chunk * (int64_t)(sizeof(float) + ops_dtype_size(wdt));
}

/* Lanes of ops_copy_async: slot s's downloads on lane s, its uploads on
 * lane OFFLOAD_SLOTS + s, so waiting for one never waits for the other. */
static int down_lane(int slot) { return slot; }
static int up_lane(int slot) { return OFFLOAD_SLOTS + slot; }

static void run_step(Offload *o, const OffloadSeg *seg, const OffloadStep *st,
                     ops_adamw_args *a)
{
    const OffloadSeg *s = &seg[st->seg];
    ops_tensor g = ops_view(o->grad[st->slot], 0, st->n);
    ops_tensor w = s->wcopy.data ? ops_view(o->weights[st->slot], 0, st->n) : OPS_NONE;
    switch (st->act) {
    case OFFLOAD_DOWN:
        ops_copy_async(g, ops_view(s->grad, st->off, st->n), down_lane(st->slot));
        break;
    case OFFLOAD_WAIT_DOWN:
        ops_copy_wait(o->dev, down_lane(st->slot));
        break;
    case OFFLOAD_WAIT_UP:
        ops_copy_wait(o->dev, up_lane(st->slot));
        break;
    case OFFLOAD_UPDATE:
        a->weight_decay = s->weight_decay;
        ops_adamw(ops_view(s->master, st->off, st->n), g, ops_view(s->m, st->off, st->n),
                  ops_view(s->v, st->off, st->n), w, st->n, a);
        break;
    case OFFLOAD_UP:
        if (w.data)
            ops_copy_async(ops_view(s->wcopy, st->off, st->n), w, up_lane(st->slot));
        break;
    }
}

void offload_adamw(Offload *o, const OffloadSeg *seg, int n_seg, const ops_adamw_args *a)
{
    int64_t *seg_n = TRI_MALLOC(sizeof *seg_n * (size_t)(n_seg > 0 ? n_seg : 1), "the offload's segments");
    for (int i = 0; i < n_seg; i++)
        seg_n[i] = seg[i].master.n;
    int64_t n = offload_schedule(seg_n, n_seg, o->chunk, NULL);
    OffloadStep *steps = TRI_MALLOC(sizeof *steps * (size_t)(n > 0 ? n : 1), "the offload's schedule");
    offload_schedule(seg_n, n_seg, o->chunk, steps);
    ops_adamw_args args = *a;
    for (int64_t k = 0; k < n; k++)
        run_step(o, seg, &steps[k], &args);
    free(steps);
    free(seg_n);
}
