/*
 * scaler.c - dynamic loss scaling; see scaler.h.
 */
#include "scaler.h"

#include <string.h>

void scaler_init(Scaler *s, const TrainConfig *t)
{
    memset(s, 0, sizeof *s);
    s->dynamic = t->precision == PRECISION_FP16;
    s->scale = s->dynamic ? 65536.0 : 1.0;
    s->window = t->loss_scale_window;
    s->hysteresis = t->loss_scale_hysteresis;
    s->min = t->loss_scale_min;
}

ScalerVerdict scaler_update(Scaler *s, int finite)
{
    if (!s->dynamic)
        return finite ? SCALER_STEP : SCALER_GIVE_UP;
    if (finite) {
        if (++s->good_steps >= s->window) {
            s->scale *= 2.0;
            s->good_steps = 0;
            s->overflows = 0;
        }
        return SCALER_STEP;
    }
    s->good_steps = 0;
    if (++s->overflows >= s->hysteresis) {
        s->scale /= 2.0;
        s->overflows = 0;
    }
    return s->scale < s->min ? SCALER_GIVE_UP : SCALER_SKIP;
}
