/*
 * model_rig.c - see model_rig.h.
 */
#include "model_rig.h"

#include <stdlib.h>

#include "rng.h"

void rig_build(Rig *r, uint64_t seed)
{
    Config *c = &r->cfg;
    ScheduleKind sched = c->parallel.schedule;
    grid_create(&r->grid, c, MPI_COMM_SELF);
    r->n_acts = schedule_build(sched, 1, 1, 0, c->train.grad_accum, r->acts);
    model_create(&r->model, c, &r->grid, schedule_max_in_flight(r->acts, r->n_acts));
    pipeline_create(&r->pipe, &r->model);
    r->zero = zero_create(&r->model, c, &r->grid);
    zero_init_weights(r->zero);
    int n = c->train.grad_accum * c->train.micro_batch * (c->model.seq_len + 1);
    r->batch = malloc((size_t)n * sizeof *r->batch);
    uint64_t key = rng_key(seed, "tokens");
    for (int i = 0; i < n; i++)
        r->batch[i] = (int32_t)(rng_u64(key, (uint64_t)i) % (uint64_t)c->model.vocab_size);
}

void rig_destroy(Rig *r)
{
    zero_destroy(r->zero);
    pipeline_destroy(&r->pipe);
    model_destroy(&r->model);
    grid_destroy(&r->grid);
    free(r->batch);
}
