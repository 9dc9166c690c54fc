/*
 * sample.c - generation through the pipeline; see sample.h.
 *
 * There is no KV cache: each token reruns the window of the last T tokens.
 * For the model sizes one samples from at the end of a run that costs
 * little, and it reuses the training forward exactly.
 */
#include "sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "fail.h"
#include "pipeline.h"
#include "rng.h"

/* Index drawn from softmax(logits / temperature) with uniform u. */
static int draw(const float *logits, int V, double temperature, double u)
{
    double most = -INFINITY;
    for (int i = 0; i < V; i++)
        if (logits[i] > most)
            most = logits[i];
    double sum = 0.0;
    for (int i = 0; i < V; i++)
        sum += exp((logits[i] - most) / temperature);
    double target = u * sum, acc = 0.0;
    for (int i = 0; i < V; i++) {
        acc += exp((logits[i] - most) / temperature);
        if (acc >= target)
            return i;
    }
    return V - 1;
}

static void emit(FILE *out, int token, int V)
{
    if (V == 256)
        fputc(token, out);
    else
        fprintf(out, "<%d>", token);
    fflush(out);
}

/* The last stage's TP rank 0 draws; returns the token on every rank. */
static int next_token(Model *m, int t, float *local, float *full, double temperature,
                      double u)
{
    const Grid *g = m->grid;
    int token = 0;
    if (m->is_last) {
        model_logits_at(m, 0, 0, t, local);
        TRI_CHECK_MPI(MPI_Gather(local, m->Vl, MPI_FLOAT, full, m->Vl, MPI_FLOAT, 0,
                                 g->tp_comm));
        if (g->tp_rank == 0)
            token = draw(full, m->V, temperature, u);
    }
    int root = grid_world_rank(g, g->pp - 1, 0, 0);
    TRI_CHECK_MPI(MPI_Bcast(&token, 1, MPI_INT, root, g->world));
    return token;
}

void sample_generate(Model *m, const int32_t *prompt, int prompt_len,
                     int n_tokens, double temperature, uint64_t seed, FILE *out)
{
    int T = m->T, total = prompt_len + n_tokens;
    int32_t *seq = calloc((size_t)total, sizeof *seq);
    int32_t *window = calloc((size_t)T + 1, sizeof *window);
    float *local = malloc((size_t)m->Vl * sizeof(float));
    float *full = malloc((size_t)m->V * sizeof(float));
    if (!seq || !window || !local || !full)
        fail_abort("out of memory for sampling", __FILE__, __LINE__);
    memcpy(seq, prompt, (size_t)prompt_len * sizeof *seq);
    uint64_t key = rng_key(seed, "sample");
    Action forward = {ACTION_FORWARD, 0};
    PipelineTimes times = {0};
    int rank = m->grid->rank;
    for (int len = prompt_len; len < total; len++) {
        int start = len > T ? len - T : 0, n = len - start;
        memset(window, 0, (size_t)(T + 1) * sizeof *window);
        memcpy(window, seq + start, (size_t)n * sizeof *window);
        pipeline_run(m, &forward, 1, window, 1, FORWARD_ONLY, &times);
        seq[len] = next_token(m, n - 1, local, full, temperature,
                              rng_uniform(key, (uint64_t)len));
        if (rank == 0)
            emit(out, seq[len], m->V);
    }
    free(seq);
    free(window);
    free(local);
    free(full);
}
