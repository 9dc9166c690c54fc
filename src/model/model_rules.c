/*
 * model_rules.c - the model's pure rules from the config, which model.c
 * allocates by and plan (and moe.c) count by: the compute dtype, which
 * layers recompute, and how many logit rows the head holds at once.
 * Nothing here touches a Model, so any file may ask without a call
 * circle through model.c.
 */
#include "model.h"

#include "layout.h"

ops_dtype model_dtype(Precision precision)
{
    switch (precision) {
    case PRECISION_FP32: return OPS_F32;
    case PRECISION_BF16: return OPS_BF16;
    case PRECISION_FP16: return OPS_F16;
    }
    return OPS_F32;
}

int model_layer_recomputes(const TrainConfig *t, int layer)
{
    switch (t->recompute) {
    case RECOMPUTE_NONE: return 0;
    case RECOMPUTE_FULL: return 1;
    case RECOMPUTE_EVERY: return layer % t->recompute_every == 0;
    }
    return 0;
}

/* Counted, not walked, so that plan's cost does not grow with n_layer:
 * every:K recomputes the multiples of K, of which [0, b) holds
 * ceil(b / K). */
int model_recomputed_layers(const TrainConfig *t, int first, int count)
{
    switch (t->recompute) {
    case RECOMPUTE_NONE: return 0;
    case RECOMPUTE_FULL: return count;
    case RECOMPUTE_EVERY: {
        int64_t k = t->recompute_every, end = (int64_t)first + count;
        return (int)((end + k - 1) / k - (first + k - 1) / k);
    }
    }
    return 0;
}

int model_slot_input_only(const Config *cfg, int stage, int j)
{
    const ParallelConfig *p = &cfg->parallel;
    int keeps_input = 1;
    for (int c = 0; c < p->virtual_stages; c++) {
        int first, count;
        layout_chunk_layers(cfg->model.n_layer, p->pp, p->virtual_stages, stage, c, &first, &count);
        keeps_input &= model_layer_recomputes(&cfg->train, first + j);
    }
    return keeps_input;
}

int model_stage_recomputes(const Config *cfg, int stage, int *layers)
{
    const ParallelConfig *p = &cfg->parallel;
    int held = 0, recomputed = 0;
    for (int c = 0; c < p->virtual_stages; c++) {
        int first, count;
        layout_chunk_layers(cfg->model.n_layer, p->pp, p->virtual_stages, stage, c, &first, &count);
        held += count;
        recomputed += model_recomputed_layers(&cfg->train, first, count);
    }
    if (layers)
        *layers = held;
    return recomputed;
}

/* A sixteenth of a GPU's memory, rounded down to a power of two first:
 * GPT-2 small's whole head (3.3 GB of fp32 logits) on an 80 GB card (4 GiB
 * of logits), a 1B Llama's 128k-word head at T 2048 in four chunks, and
 * room left for the weights and activations beside it. The rounding makes
 * cards of one class whose memory differs a little (80 and 94 GB H100s,
 * what the driver reserves) cut the same chunks, as TP ranks must. Never
 * below the CPU's budget. */
int64_t model_head_logit_budget(int64_t device_bytes)
{
    int64_t pow2 = 1;
    while (device_bytes > 0 && pow2 <= device_bytes / 2)
        pow2 *= 2;
    int64_t gpu = device_bytes > 0 ? pow2 / 16 / (int64_t)sizeof(float) : 0;
    return gpu > MODEL_HEAD_CPU_LOGITS ? gpu : MODEL_HEAD_CPU_LOGITS;
}

/* Logit rows held at once: at most budget floats, so the 50k-word head
 * never holds more than the device affords, and the N rows cut into
 * chunks of even size: 1,024 rows of GPT-2's head on the CPU are 4 chunks
 * of 256, not 3 of 333 and one of 25, whose GEMMs ran at a fraction of the
 * others' rate. */
int model_head_chunk_rows(int64_t N, int Vl, int64_t budget)
{
    int64_t most = budget / (Vl > 0 ? Vl : 1);
    if (most < 1)
        most = 1;
    if (N <= most)
        return (int)(N > 0 ? N : 1);
    int64_t chunks = (N + most - 1) / most;
    return (int)((N + chunks - 1) / chunks);
}
