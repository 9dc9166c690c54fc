/*
 * model.h - the model on one pipeline stage and one TP shard, whatever its
 * architecture ([model] arch; arch.h holds what the architectures do
 * differently).
 *
 * A stage runs its part of the network for one microbatch at a time:
 * stage 0 embeds tokens, every stage runs its transformer blocks, and the
 * last stage runs the final LayerNorm, the LM head and the loss. The loss
 * layer's backward runs right away on the last stage (it needs only the
 * logits it just made), so logits never outlive a chunk of rows, and what
 * the last stage keeps for its backward is the gradient at its blocks'
 * output.
 *
 * Under the interleaved schedule a stage holds v chunks of layers that are
 * not adjacent (chunk c of stage s is virtual stage c*pp + s,
 * layout_chunk_layers); the forward and backward run one chunk, stage 0's
 * chunk 0 embedding and the last stage's chunk v-1 ending in the head.
 * With v = 1 the one chunk is the stage.
 *
 * Activations live in `slots`, one per (microbatch, chunk) in flight (the
 * schedule says how many), so 1F1B keeps at most pp microbatches per
 * stage. A slot holds one chunk's activations; which chunk is the
 * executor's choice at each forward, so the slots are one pool for all
 * chunks (every chunk has as many layers).
 * Tensor-parallel all-reduces happen inside the forward and backward, on
 * the grid's tp group; pipeline sends and receives are the executor's job
 * (pipeline.c), through model_stage_input/output/grad.
 */
#ifndef TRI_SRC_MODEL_H
#define TRI_SRC_MODEL_H

#include <mpi.h>
#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "grid.h"
#include "params.h"
#include "ops.h"

typedef enum {
    UNIT_BEFORE_FORWARD, UNIT_AFTER_FORWARD,
    UNIT_BEFORE_BACKWARD, UNIT_AFTER_BACKWARD
} UnitEvent;

/* Called around each unit's compute; ZeRO-3 gathers weights there and
 * ZeRO-2/3 reduce gradients. `final` is the pass's ModelPass.final: the
 * unit's gradients are final after this pass. */
typedef void (*UnitHook)(void *ctx, int unit, UnitEvent event, int final);

/* What the executor tells each pass, as an argument: nothing of a step
 * lives in the model between passes. */
typedef struct {
    int final;          /* the step's last microbatch's last pass over the
                           gradients (its W under zb1, else B; the head's
                           forward, where its backward runs): the units'
                           gradients become final, so the overlapped DP
                           reduction may start */
    float grad_scale;   /* d loss_sum multiplier of a training forward:
                           the loss scale / the step's tokens */
} ModelPass;

typedef struct BlockActs BlockActs;
typedef struct Model Model;

/* A block's parameters, as indices into the ParamSet; -1 when the
 * architecture has none (llama: biases). The descriptor's block_roles
 * fills it: llama's q, o, gate and down sit in qkvw, projw, fcw and
 * mprojw; kw, vw and upw are llama's alone. */
typedef struct BlockParams {
    int ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, mprojw, mprojb;
    int kw, vw, upw;
    int layer;              /* the block's global index */
    /* A MoE layer (arch_layer_is_moe; moe.c) in place of the MLP: the
     * router; local expert i's gate, up, down at expert0 + 3i + 0, 1, 2,
     * n_local_experts of them (global indices from ep_rank x that count);
     * the shared expert's gate, up, down and sigmoid gate (0 without). */
    int moe, router, expert0, n_local_experts;
    int shared_gate, shared_up, shared_down, shared_gatew;
} BlockParams;

struct Model {
    const Config *cfg;
    const Grid *grid;
    int B, T, C, NH, V, hs;       /* B: microbatch rows; T: the tokens of
                                     a row this rank holds, seq_len / cp */
    int seq_len, cp, cp_rank;     /* the whole row, and this rank's place
                                     in its cp group (model_cp.c) */
    int NHl, Vl, v0;              /* local heads, local vocab rows and start */
    const struct Arch *arch;      /* [model] arch's descriptor (arch.h) */
    int NKVl;                     /* local key/value heads (llama) */
    int Fl;                       /* local MLP width: 4C/tp (gpt2), ffn_dim/tp */
    int kv_replicas;              /* TP ranks sharing each key/value head */
    int sp;                       /* sequence parallelism in effect: the
                                     norms and residuals hold 1/tp of the
                                     tokens (tp > 1 and the config's key) */
    int layer0, n_local;          /* global index of local block 0; the
                                     stage's layers over all its chunks */
    int n_chunks, chunk_len;      /* v chunks of chunk_len layers: local
                                     block c * chunk_len + j is layer j of
                                     chunk c */
    int is_first, is_last;
    ops_dtype act_dtype;
    ParamSet ps;
    BlockParams *blocks;          /* n_local */
    int unit_embed, unit_head;    /* -1 when not on this stage */
    int unit_block0;              /* unit of local block 0 */
    int p_wte, p_wpe, p_lnfw, p_lnfb, p_lm;  /* -1 when absent */
    int *recompute;               /* per local block: keep only the input */

    int rows;                     /* rows of the latest forward */
    int n_slots;
    BlockActs *acts;              /* [slot * chunk_len + j] */
    int *input_only;              /* per j: slots keep only layer j's input,
                                     as every chunk's layer j recomputes */
    ops_tensor *out;              /* per slot: stage output (B,T,C) */
    ops_tensor *grad;             /* per slot: gradient at the stage output,
                                     then at its input (B,T,C) */
    ops_tensor *tokens, *targets; /* per slot: (B,T) int32 */
    struct ModelScratch *scratch;

    ops_tensor loss_acc;          /* fp64 sum of token losses since the last
                                     model_reset_loss, on the device */
    int64_t loss_count;
    int64_t head_budget;          /* logits the head may hold at once:
                                     model_head_logit_budget of the device */

    UnitHook hook;                /* model_set_unit_hook's */
    void *hook_ctx;
    ModelPass pass;               /* the running pass's, from its arguments */
    int defer_weights;            /* schedule = zb1: model_backward leaves
                                     the weight GEMMs and the embedding's
                                     backward to model_backward_weights */
    struct MoeState *moe;         /* MoE layers' scratch and statistics
                                     (moe.c); NULL without MoE layers here */
};

/* Builds the parameter table and allocates activations for n_slots
 * microbatches of B rows. Parameter memory (weights, grads, optimizer
 * state) is zero.c's. Not collective. */
void model_create(Model *m, const Config *cfg, const Grid *g, int n_slots);
void model_destroy(Model *m);
/* The hook called around every unit's passes (ZeRO's). Not collective. */
void model_set_unit_hook(Model *m, UnitHook fn, void *ctx);

typedef enum {
    FORWARD_TRAIN,   /* loss, and the loss backward on the last stage */
    FORWARD_EVAL,    /* loss only */
    FORWARD_ONLY     /* no loss: generation reads logits afterwards */
} ForwardMode;

/* Forward of one microbatch through chunk `chunk` (0 .. n_chunks-1) of
 * this stage, with its activations in slot `slot`. Stage 0's chunk 0 reads
 * m->tokens[slot], other chunks their input (filled by the executor
 * through model_stage_input). The last stage's last chunk adds the loss of
 * m->targets[slot] to loss_sum and, in FORWARD_TRAIN, also runs the loss
 * backward, leaving the gradient in m->grad[slot]. rows <= B lets
 * generation run one sequence. Collective on tp. */
void model_forward(Model *m, int chunk, int slot, int rows, ForwardMode mode, ModelPass pass);
/* Backward of one microbatch through chunk `chunk`, whose forward used
 * `slot`: from m->grad[slot] (gradient at the chunk's output) down to the
 * gradient at its input, left in m->grad[slot] (stage 0's chunk 0 instead
 * finishes with the embedding backward). Parameter gradients accumulate.
 * Under m->defer_weights it computes only what the previous stage waits
 * for: the input gradients, and the norms' parameter gradients (their
 * backward yields both at once); each linear layer keeps its output
 * gradient in the slot for model_backward_weights instead of its weight
 * GEMM, and stage 0 leaves the embedding. Collective on tp. */
void model_backward(Model *m, int chunk, int slot, int rows, ModelPass pass);
/* The deferred half of the slot's backward (m->defer_weights): every
 * linear layer's weight and bias gradients from the kept output gradients
 * and the layer inputs, and stage 0's embedding backward. Recomputed
 * layers run their forward again first. Unit hooks fire around each unit
 * as in the backward. Collective on tp (recomputed layers' forward). */
void model_backward_weights(Model *m, int chunk, int slot, int rows, ModelPass pass);

/* After the DP reduction, the sums the model's own sharding calls for over
 * the owned gradients (Param.og): the last stage's copy of a tied wte
 * with stage 0's (over embed), and under sequence parallelism the norms'
 * gains and biases, each TP rank's of its slice of the tokens (over tp,
 * as Megatron sums its sequence-parallel parameters; TP ranks own the
 * same rows of these replicated tensors, so the owned gradients line
 * up). Llama's replicated key/value heads are summed in the backward
 * already. Collective on embed (first and last stage) and on tp. */
void model_sum_split_grads(Model *m);

/* The summed token loss (last stage) since model_reset_loss; reading it
 * is the step's one wait for the device. Not collective. */
void model_reset_loss(Model *m);
double model_loss_sum(const Model *m);

/* Buffers the pipeline executor sends and receives: a chunk's input,
 * output and the gradient at either, (B,T,C), or this TP rank's 1/tp
 * slice of its B*T tokens under sequence parallelism. */
ops_tensor model_stage_input(Model *m, int slot);
ops_tensor model_stage_output(Model *m, int slot);
ops_tensor model_stage_grad(Model *m, int slot);
/* Elements of one message between stages for a forward of `rows` rows:
 * the tokens this rank holds times C. Not collective. */
int64_t model_stage_elems(const Model *m, int rows);

/* Context parallelism ([parallel] cp; model_cp.c): each row's seq_len
 * tokens are cut into 2 cp chunks and cp rank i holds chunks i and
 * 2cp-1-i (the zigzag), chunk-major: [local chunk 0: rows x Tc][local
 * chunk 1: rows x Tc], so m->T = seq_len / cp. At cp = 1 the row is one
 * chunk in natural order. */
/* The chunks of each row this rank holds: 1 at cp = 1, else 2. Not
 * collective. */
int model_cp_chunks(const Model *m);
/* Tokens of one local chunk of a row: m->T / model_cp_chunks. Not
 * collective. */
int model_cp_chunk_len(const Model *m);
/* The position in the row (0 .. seq_len-1) of local chunk h's first
 * token: the t0 of RoPE and of the position table, and where pipeline.c
 * cuts the chunk out of the batch. Not collective. */
int64_t model_cp_chunk_start(const Model *m, int h);

/* Last stage only: logits (Vl) of row `row`, position t, after the last
 * forward with rows >= row+1. Collective on tp. */
void model_logits_at(Model *m, int slot, int row, int t, float *logits);

/* The compute dtype of activations, weights and activation gradients
 * under [train] precision. Not collective. */
ops_dtype model_dtype(Precision precision);

/* Whether layer `layer` (global index) keeps only its input and
 * recomputes the rest in the backward, under [train] recompute. The one
 * statement of that rule: the model allocates by it, plan and the
 * roofline count by it. Not collective. */
int model_layer_recomputes(const TrainConfig *t, int layer);
/* Whether layer j of stage's activation slots keeps only its input: a slot
 * serves every chunk of the stage (layout_chunk_layers), so only when every
 * chunk's layer j recomputes. Not collective. */
int model_slot_input_only(const Config *cfg, int stage, int j);
/* How many of stage's layers, over all its chunks, recompute; *layers
 * (if not NULL) receives how many it holds. Not collective. */
int model_stage_recomputes(const Config *cfg, int stage, int *layers);
/* How many of layers [first, first + count) recompute. Not collective. */
int model_recomputed_layers(const TrainConfig *t, int first, int count);

/* Elements per token that a layer keeps between the backward and
 * model_backward_weights (zb1): the output gradients of its linear layers,
 * this TP rank's shard. Not collective. */
int64_t model_kept_grad_width(const ModelConfig *mc, int tp);
/* The fp32 logits the head may hold at once (its budget) on the CPU:
 * 16 Mi, 64 MiB, about what a CPU's caches keep near the GEMM. */
#define MODEL_HEAD_CPU_LOGITS (16LL << 20)
/* The head's budget on a device of device_bytes of memory: the CPU's
 * (device_bytes 0: the CPU, or a GPU whose memory is not known), or, on a
 * GPU, a sixteenth of its memory (rounded down to a power of two) in fp32
 * logits, so that GPT-2 small's
 * head (16 x 1024 rows x 50257 words, 3.3 GB) is one GEMM on a 80 GB
 * card instead of 50 that each re-read the weight gradient. Decided once
 * at set-up from ops_device_memory_bytes (all of the memory, the same on
 * every rank of a job on one kind of GPU, so TP ranks cut the same
 * chunks), and by plan from the hardware's memory. Pure; not
 * collective. */
int64_t model_head_logit_budget(int64_t device_bytes);
/* Rows of logits the head holds at once for N rows over a Vl-word local
 * vocabulary: at most budget logits (model_head_logit_budget), the N rows
 * cut into even chunks. plan.c sizes the same buffer with it. Pure; not
 * collective. */
int model_head_chunk_rows(int64_t N, int Vl, int64_t budget);
/* The global index of local block l (chunk l / chunk_len). Not
 * collective. */
int model_block_layer(const Model *m, int l);

/* The mixture-of-experts statistics since model_moe_reset_stats, for the
 * metrics (issue 38). Counted by training passes only (not evaluation,
 * recompute or zb1's weight pass), alike on every TP rank. */
typedef struct {
    int n_layers;            /* MoE layers on this rank (all chunks) */
    int n_expert;
    const int *layer;        /* their global indices */
    const int64_t *load;     /* n_layers x n_expert: (token, slot) pairs this
                                rank routed to each expert since the reset,
                                dropped ones included */
    int64_t dropped;         /* pairs dropped (capacity) since the reset */
    double aux_sum, z_sum;   /* sum over training forwards and layers of the
                                aux / z value */
    int64_t forwards;        /* how many (microbatch, layer) aux values
                                aux_sum holds */
} MoeStats;
/* Reads the statistics (the aux and z sums wait for the device); out's
 * arrays point into m, valid until the next pass. Not collective. */
void model_moe_stats(const Model *m, MoeStats *out);
/* Zeroes them. Not collective. */
void model_moe_reset_stats(Model *m);

/* Bytes of activations this rank allocated. Not collective. */
int64_t model_activation_bytes(const Model *m);
/* Bytes of activations that stage `stage` of cfg's layout, on one of tp
 * ranks with n_slots activation slots and the head's budget head_budget
 * (model_head_logit_budget), allocates: a pure function of the sizes
 * model_create allocates by, which model_create checks its allocation
 * against and plan calls. Not collective. */
int64_t model_planned_activation_bytes(const Config *cfg, int tp, int stage, int n_slots,
                                       int64_t head_budget);
/* Model FLOPs of one forward over `tokens` tokens, for the whole model
 * (not this shard): GEMMs and attention, 2 per multiply-add. */
double model_forward_flops(const ModelConfig *mc, double tokens);
/* The same for one transformer block (no embeddings, no head). */
double model_layer_flops(const ModelConfig *mc, double tokens);

#endif
