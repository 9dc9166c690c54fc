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

#include "alloc.h"
#include "ckpt.h"
#include "ckpt_pick.h"
#include "comm.h"
#include "device.h"
#include "fail.h"
#include "zero.h"
#include "pipeline.h"
#include "rng.h"
#include "tokenizer_load.h"

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

static void emit(FILE *out, int token, int V, const Bpe *bpe)
{
    size_t n;
    const char *bytes = bpe ? bpe_token_bytes(bpe, token, &n) : NULL;
    if (bytes)
        fwrite(bytes, 1, n, out);
    else if (V == 256)
        fputc(token, out);
    else
        fprintf(out, "<%d>", token); /* an id the tokenizer lacks: padding */
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
        comm_gather_bytes(g, COMM_TP, local, sizeof *local * (size_t)m->Vl, full, 0);
        if (g->layout.tp_rank == 0)
            token = draw(full, m->V, temperature, u);
    }
    int root = layout_world_rank(&g->layout, g->layout.pp - 1, 0, 0);
    comm_bcast_bytes(g, COMM_WORLD, &token, sizeof token, root);
    return token;
}

void sample_generate(Pipeline *p, const int32_t *prompt, int prompt_len,
                     int n_tokens, double temperature, uint64_t seed, const Bpe *bpe, FILE *out)
{
    Model *m = p->m;
    /* Only the last T tokens are ever looked at: keep those, not the
     * whole text, so any --tokens count runs in fixed memory. */
    int T = m->T;
    int have = prompt_len < T ? prompt_len : T;
    int32_t *recent = TRI_CALLOC((size_t)T, sizeof *recent, "sampling");
    int32_t *window = TRI_CALLOC((size_t)T + 1, sizeof *window, "sampling");
    float *local = TRI_MALLOC((size_t)m->Vl * sizeof(float), "sampling");
    float *full = TRI_MALLOC((size_t)m->V * sizeof(float), "sampling");
    /* one microbatch through every chunk of the stage */
    Action *forwards = TRI_MALLOC(sizeof *forwards * (size_t)m->n_chunks, "sampling");
    memcpy(recent, prompt + (prompt_len - have), (size_t)have * sizeof *recent);
    uint64_t key = rng_key(seed, "sample");
    int n_forwards = schedule_forwards(m->cfg->parallel.schedule, m->grid->layout.pp, m->n_chunks, 1,
                                       forwards);
    PipelineTimes times = {0};
    int rank = m->grid->layout.rank;
    int64_t total = (int64_t)prompt_len + n_tokens;
    for (int64_t len = prompt_len; len < total; len++) {
        memset(window, 0, (size_t)(T + 1) * sizeof *window);
        memcpy(window, recent, (size_t)have * sizeof *window);
        pipeline_run(p, forwards, n_forwards, window, 1, FORWARD_ONLY, 1.0f, &times);
        int32_t token = next_token(m, have - 1, local, full, temperature,
                                   rng_uniform(key, (uint64_t)len));
        if (have == T)
            memmove(recent, recent + 1, (size_t)(T - 1) * sizeof *recent);
        else
            have++;
        recent[have - 1] = token;
        if (rank == 0)
            emit(out, token, m->V, bpe);
    }
    free(recent);
    free(window);
    free(local);
    free(full);
    free(forwards);
}

typedef struct {
    int32_t *ids;
    int n, cap;
} Ids;

static void collect(void *ctx, const int32_t *ids, size_t n)
{
    Ids *c = ctx;
    for (size_t i = 0; i < n; i++) {
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 64;
            c->ids = TRI_REALLOC(c->ids, (size_t)c->cap * sizeof *c->ids, "the encoded prompt");
        }
        c->ids[c->n++] = ids[i];
    }
}

/* The prompt through the tokenizer; an empty one is the end-of-document
 * token, after which the training data's documents begin. */
static void encode_prompt(Bpe *bpe, int32_t eod, const char *text, int32_t **out, int *n)
{
    Ids c = {0};
    if (text && *text) {
        bpe_doc_begin(bpe);
        bpe_doc_feed(bpe, text, strlen(text), collect, &c);
        if (bpe_doc_end(bpe, collect, &c))
            fprintf(stderr, "trident: sample: the tokenizer's pattern backtracks too much on the prompt; it is cut short\n");
    } else {
        collect(&c, &eod, 1);
    }
    *out = c.ids;
    *n = c.n;
}

/* The tokenizer that decodes: --tokenizer FILE; none with --tokenizer
 * none; else the one the checkpoint's stored config names ([data]
 * tokenizer), if any. Says which on note; *setting names it for messages. */
static const char *tokenizer_chosen(const char *option, const Config *cfg, const char **setting,
                                    FILE *note)
{
    if (option && strcmp(option, "none") == 0)
        return NULL;
    if (option) {
        *setting = "sample --tokenizer ";
        fprintf(note, "sample: decoding with --tokenizer %s\n", option);
        return option;
    }
    if (!cfg->data.tokenizer[0])
        return NULL;
    *setting = "[data] tokenizer (the checkpoint's stored config) = ";
    fprintf(note, "sample: decoding with the tokenizer the checkpoint's stored config names, "
            "[data] tokenizer = %s (--tokenizer FILE for another, --tokenizer none for token "
            "ids)\n", cfg->data.tokenizer);
    return cfg->data.tokenizer;
}

int32_t sample_default_prompt(int vocab_size)
{
    return vocab_size == 256 ? '\n' : 50256 % vocab_size;
}

/* The prompt as tokens without a tokenizer: bytes for a byte-level model,
 * else token ids; text there is refused, suggesting --tokenizer (why_none:
 * why no tokenizer is known). */
static int parse_prompt(const char *text, int vocab, const char *why_none, int32_t **out, int *n,
                        FILE *err)
{
    size_t len = text ? strlen(text) : 0;
    int32_t *tok = TRI_MALLOC((len + 2) * sizeof *tok, "the prompt");
    *n = 0;
    if (!text || !len) {
        tok[(*n)++] = sample_default_prompt(vocab);
    } else if (vocab == 256) {
        for (size_t i = 0; i < len; i++)
            tok[(*n)++] = (unsigned char)text[i];
    } else {
        for (char *p = (char *)text, *end; *p; p = end) {
            long id = strtol(p, &end, 10);
            if (end == p) {
                fprintf(err, "trident: sample --prompt '%s': the prompt is text, but no "
                        "tokenizer is known to encode it (%s): name the tokenizer file the "
                        "data was tokenized with, --tokenizer FILE, or give the prompt as "
                        "token ids below %d separated by spaces\n", text, why_none, vocab);
                free(tok);
                return 1;
            }
            if (id < 0 || id >= vocab) {
                fprintf(err, "trident: --prompt: expected token ids below %d separated by spaces, got '%s'\n",
                        vocab, p);
                free(tok);
                return 1;
            }
            tok[(*n)++] = (int32_t)id;
            while (*end == ' ')
                end++;
        }
    }
    *out = tok;
    return 0;
}

/* The prompt's tokens, and the tokenizer that decodes (NULL: none); rank
 * 0 says which. Returns 0, or 1 with the reason on err. */
static int prepare_prompt(const Config *cfg, const char *option, const char *prompt, int rank,
                          Bpe **bpe, int32_t **tokens, int *n)
{
    FILE *say = fail_stream(rank == 0);
    const char *setting = NULL;
    const char *path = tokenizer_chosen(option, cfg, &setting, say);
    if (!path) {
        const char *why = option ? "--tokenizer none"
                                 : "the checkpoint's stored config names no [data] tokenizer";
        return parse_prompt(prompt, cfg->model.vocab_size, why, tokens, n, say);
    }
    char msg[2048];
    int32_t eod = 0;
    if (tokenizer_for_model(path, cfg->model.vocab_size, setting, bpe, &eod, msg, sizeof msg)) {
        fputs(msg, say);
        if (!option)
            fprintf(say, "trident: sample: give the tokenizer with --tokenizer FILE, or "
                    "--tokenizer none for token ids\n");
        return 1;
    }
    encode_prompt(*bpe, eod, prompt, tokens, n);
    return 0;
}

/* The checkpoint file `given` stands for (ckpt_pick.h), in ckpt on every
 * rank, and its config, run as one full model per rank. */
static int sample_config(Config *cfg, const char *given, char ckpt[CKPT_PICKED_MAX], int rank,
                         MPI_Comm world)
{
    int rc = 0;
    if (rank == 0)
        rc = ckpt_pick(given, "sample", ckpt, CKPT_PICKED_MAX, stderr, stderr)
             || ckpt_read_config(ckpt, cfg, stderr);
    if (fail_agree(world, rc))
        return 1;
    Grid w;
    grid_world_only(&w, world);
    comm_bcast_bytes(&w, COMM_WORLD, ckpt, CKPT_PICKED_MAX, 0);
    comm_bcast_bytes(&w, COMM_WORLD, cfg, sizeof *cfg, 0);
    cfg->parallel.dp = 0;
    cfg->parallel.pp = cfg->parallel.tp = 1;
    cfg->parallel.cp = 1; /* generation runs whole rows (layout_sample_fits) */
    /* and every expert on its rank, without the all-to-all (layout_sample_fits);
     * at the stored ep the rank would build only its ep rank's experts */
    cfg->parallel.ep = 1;
    cfg->parallel.schedule = SCHED_1F1B; /* one stage: nothing to interleave */
    cfg->parallel.virtual_stages = 1;
    cfg->parallel.zero = 0;
    cfg->train.micro_batch = cfg->train.grad_accum = 1;
    cfg->train.recompute = RECOMPUTE_NONE;
    return 0;
}

int sample_main(const char *given, const char *prompt, int n_tokens, const char *tokenizer,
                MPI_Comm world)
{
    static Config cfg;
    char ckpt[CKPT_PICKED_MAX] = "";
    int rank;
    MPI_Comm_rank(world, &rank);
    if (sample_config(&cfg, given, ckpt, rank, world))
        return TRI_EXIT_ERROR;
    int32_t *tokens = NULL;
    int n_prompt = 0;
    Bpe *bpe = NULL;
    int rc = prepare_prompt(&cfg, tokenizer, prompt, rank, &bpe, &tokens, &n_prompt);
    if (fail_agree(world, rc)) {
        bpe_free(bpe);
        free(tokens);
        return TRI_EXIT_ERROR;
    }
    Grid g;
    grid_create(&g, &cfg, world);
    if (device_setup(&g, &cfg)) {
        grid_destroy(&g);
        free(tokens);
        bpe_free(bpe);
        return TRI_EXIT_ERROR;
    }
    Model m;
    model_create(&m, &cfg, &g, 1);
    Pipeline pipe;
    pipeline_create(&pipe, &m);
    Zero *z = zero_create(&m, &cfg, &g);
    TrainState st;
    rc = ckpt_load(&m, z, &cfg, ckpt, 0, &st, fail_stream(rank == 0));
    if (!rc) {
        if (rank == 0) {
            fprintf(stderr, "sample: %s, step %lld, %d tokens\n", ckpt, (long long)st.step, n_tokens);
            if (cfg.model.vocab_size == 256 || bpe)
                fwrite(prompt ? prompt : "", 1, prompt ? strlen(prompt) : 0, stdout);
        }
        sample_generate(&pipe, tokens, n_prompt, n_tokens, 0.8, cfg.train.seed, bpe, stdout);
        if (rank == 0)
            printf("\n");
    }
    zero_destroy(z);
    pipeline_destroy(&pipe);
    model_destroy(&m);
    device_teardown(&g);
    grid_destroy(&g);
    free(tokens);
    bpe_free(bpe);
    return rc ? TRI_EXIT_ERROR : TRI_EXIT_OK;
}
