/*
 * model_rig.h - a model on one rank for the gradient tests (t_model_grad,
 * t_moe_grad): its grid, pipeline, ZeRO with initialised weights, and a
 * batch of seeded tokens, built from a config the test fills.
 */
#ifndef TRI_TESTS_MODEL_RIG_H
#define TRI_TESTS_MODEL_RIG_H

#include <stdint.h>

#include "config.h"
#include "grid.h"
#include "model.h"
#include "pipeline.h"
#include "schedule.h"
#include "zero.h"

typedef struct {
    Config cfg;
    Grid grid;
    Model model;
    Pipeline pipe;
    Zero *zero;
    Action acts[16];
    int n_acts;
    int32_t *batch;
} Rig;

/* Builds everything from r->cfg (one rank, its schedule) and fills the
 * batch with tokens keyed by seed. */
void rig_build(Rig *r, uint64_t seed);
void rig_destroy(Rig *r);

#endif
