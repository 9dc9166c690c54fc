/*
 * data_sampler.h - the data module's samples: which window of which blend
 * part training sample g is, a pure function of (seed, g), and the
 * reading of training samples and validation windows. data.h declares
 * its public calls; this header the one the loader thread adds, which
 * walks the blend with the thread's own BlendWalk. Not collective.
 */
#ifndef TRI_SRC_DATA_SAMPLER_H
#define TRI_SRC_DATA_SAMPLER_H

#include <stdint.h>

#include "blend.h"
#include "data.h"

/* data_train_sample with the caller's walk of the blend (blend.h), which
 * makes a run of increasing g cheap: training sample g >= 0 into out
 * (seq_len+1 tokens). Returns 0, or 1 with the reason in *why (which may
 * be NULL). */
int data_sampler_read(const Dataset *ds, BlendWalk *walk, uint64_t seed, int64_t g,
                      int32_t *out, DataError *why);

#endif
