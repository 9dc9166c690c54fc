/*
 * model_head.c - how many logit rows the head holds at once: the budget
 * of logits a device affords and the even chunks of rows it cuts (pure
 * functions model.c allocates by and plan sizes by; model.h).
 */
#include "model.h"

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
