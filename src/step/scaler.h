/*
 * scaler.h - dynamic loss scaling for fp16.
 *
 * fp16 gradients underflow to zero below 2^-24 and overflow above 65504;
 * scaling the loss by S shifts them into range. S starts at 2^16, doubles
 * after `window` clean steps, and when a step overflows (inf or nan in any
 * rank's gradients: the global norm is not finite) that step is skipped;
 * after `hysteresis` overflows S halves. Below `min` the run stops with a
 * message rather than skipping forever. bf16 and fp32 keep S = 1.
 */
#ifndef TRI_SRC_SCALER_H
#define TRI_SRC_SCALER_H

#include <stdint.h>

#include "config.h"

typedef struct {
    double scale;
    int64_t good_steps;      /* clean steps since the scale last changed */
    int32_t overflows;       /* overflows since the scale last halved */
    int dynamic;             /* fp16 */
    int window, hysteresis;
    double min;
} Scaler;

/* A fresh scaler for cfg's precision. Not collective. */
void scaler_init(Scaler *s, const TrainConfig *t);

typedef enum { SCALER_STEP, SCALER_SKIP, SCALER_GIVE_UP } ScalerVerdict;

/* Records whether this step's gradients were finite and says what to do:
 * apply the step, skip it, or stop the run: the fp16 scale fell below min,
 * or fp32/bf16 gradients are not finite (nothing to back off there).
 * Every rank calls it with the same value (the global norm's finiteness),
 * so all agree without more communication. Not collective. */
ScalerVerdict scaler_update(Scaler *s, int finite);

#endif
