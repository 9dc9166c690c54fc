/*
 * optim.c - LR schedule, norm, clipping and AdamW; see optim.h.
 */
#include "optim.h"

#include <math.h>

#include "comm.h"
#include "fail.h"

double optim_lr(const TrainConfig *t, int step)
{
    if (step < t->warmup)
        return t->lr * (double)(step + 1) / (double)t->warmup;
    int decay_steps = t->steps - t->warmup;
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
    for (int i = 0; i < m->ps.n; i++) {
        Param *p = &m->ps.p[i];
        if (!p->counts_in_norm || p->zrows == 0)
            continue;
        int64_t r0, nr;
        zero_update_rows(z, p, &r0, &nr);
        ops_tensor part = ops_view(p->og, (p->zrow0 - r0) * p->lcols, p->zrows * p->lcols);
        ops_sumsq_accumulate(acc, part, part.n);
    }
    ops_copy((ops_tensor){&local, 1, OPS_F64, OPS_CPU}, acc); /* the step's wait */
    comm_allreduce_scalars(m->grid, COMM_WORLD, &local, 1, COMM_DOUBLE, COMM_SUM);
    return sqrt(local);
}

void optim_step(Model *m, Zero *z, const TrainConfig *t, int step, double lr,
                float grad_scale)
{
    ops_adamw_args a = {
        .lr = (float)lr, .beta1 = (float)t->beta1, .beta2 = (float)t->beta2,
        .eps = (float)t->eps, .grad_scale = grad_scale, .step = step,
    };
    for (int i = 0; i < m->ps.n; i++) {
        Param *p = &m->ps.p[i];
        int64_t r0, nr;
        zero_update_rows(z, p, &r0, &nr);
        if (nr == 0)
            continue;
        a.weight_decay = p->decay ? (float)t->weight_decay : 0.0f;
        /* with a separate fp32 master, the compute copy gets the new rows */
        int separate = p->w.data && p->master.data != (char *)p->w.data
                       + r0 * p->lcols * ops_dtype_size(p->w.dtype);
        ops_tensor wcopy = separate ? ops_view(p->w, r0 * p->lcols, nr * p->lcols) : OPS_NONE;
        ops_adamw(p->master, p->og, p->m, p->v, wcopy, nr * p->lcols, &a);
    }
}
