/*
 * optim.c - LR schedule, norm, clipping and AdamW; see optim.h.
 */
#include "optim.h"

#include <math.h>
#include <stdlib.h>

#include "alloc.h"
#include "comm.h"

double optim_lr(const TrainConfig *t, int step)
{
    if (step < t->warmup)
        return t->lr * (double)(step + 1) / (double)t->warmup;
    int end = t->decay_steps > 0 ? t->decay_steps : t->steps;
    int decay_steps = end - t->warmup;
    if (decay_steps <= 1)
        return t->lr;
    double progress = (double)(step - t->warmup) / (double)(decay_steps - 1);
    if (progress > 1.0)
        progress = 1.0;
    double cosine = 0.5 * (1.0 + cos(M_PI * progress));
    return t->min_lr + (t->lr - t->min_lr) * cosine;
}

void optim_clip_value(Model *m, Zero *z, float c)
{
    for (int i = 0; i < m->ps.n; i++) {
        Param *p = &m->ps.p[i];
        if (p->og.data)
            ops_clip_value(p->og, c, p->og.n);
    }
}

/* A one-element fp64 accumulator on the model's device, made once. */
static ops_tensor norm_accumulator(ops_device dev)
{
    static ops_tensor acc;
    if (!acc.data || acc.device != dev) {
        ops_free(&acc);
        acc = ops_alloc(OPS_F64, dev, 1);
    }
    ops_zero(acc);
    return acc;
}

double optim_grad_norm(Model *m, Zero *z)
{
    double local = 0.0;
    ops_tensor acc = norm_accumulator(m->grid->device);
    ops_tensor *parts = TRI_MALLOC(sizeof *parts * (size_t)(m->ps.n > 0 ? m->ps.n : 1),
                                   "the gradient norm's tensors");
    int n = 0;
    for (int i = 0; i < m->ps.n; i++) {
        Param *p = &m->ps.p[i];
        if (!p->counts_in_norm || p->zrows == 0)
            continue;
        int64_t r0, nr;
        zero_update_rows(z, p, &r0, &nr);
        parts[n++] = ops_view(p->og, (p->zrow0 - r0) * p->lcols, p->zrows * p->lcols);
    }
    ops_sumsq_multi(acc, parts, n); /* in this order: the loop's bits on a CPU */
    free(parts);
    ops_copy((ops_tensor){&local, 1, OPS_F64, OPS_CPU}, acc); /* the step's wait */
    comm_allreduce_scalars(m->grid, COMM_WORLD, &local, 1, COMM_DOUBLE, COMM_SUM);
    return sqrt(local);
}

/* The rows AdamW writes besides the master: the compute copy's, when the
 * master is separate from it (OPS_NONE otherwise, and under zero 3, where
 * the master rows are the weights). */
static ops_tensor compute_copy_rows(const Param *p, int64_t r0, int64_t nr)
{
    int separate = p->w.data && p->master.data != (char *)p->w.data
                   + r0 * p->lcols * ops_dtype_size(p->w.dtype);
    return separate ? ops_view(p->w, r0 * p->lcols, nr * p->lcols) : OPS_NONE;
}

/* The rows each parameter's AdamW updates, with its weight decay, into
 * seg; returns how many parameters have rows here. */
static int update_segments(Model *m, Zero *z, const TrainConfig *t, OffloadSeg *seg)
{
    int n = 0;
    for (int i = 0; i < m->ps.n; i++) {
        Param *p = &m->ps.p[i];
        int64_t r0, nr;
        zero_update_rows(z, p, &r0, &nr);
        if (nr == 0)
            continue;
        seg[n++] = (OffloadSeg){p->master, p->m, p->v, p->og, compute_copy_rows(p, r0, nr),
                                p->decay ? (float)t->weight_decay : 0.0f};
    }
    return n;
}

void optim_step(Model *m, Zero *z, const TrainConfig *t, int step, double lr,
                float grad_scale)
{
    ops_adamw_args a = {
        .lr = (float)lr, .beta1 = (float)t->beta1, .beta2 = (float)t->beta2,
        .eps = (float)t->eps, .grad_scale = grad_scale, .step = step,
    };
    OffloadSeg *seg = TRI_MALLOC(sizeof *seg * (size_t)(m->ps.n > 0 ? m->ps.n : 1), "the update's segments");
    int n = update_segments(m, z, t, seg);
    if (zero_offload(z)) { /* the same update, on the host (offload.h) */
        offload_adamw(zero_offload(z), seg, n, &a);
    } else { /* one launch on a GPU; ops_adamw segment by segment on a CPU */
        ops_adamw_multi(seg, n, &a);
    }
    free(seg);
}
