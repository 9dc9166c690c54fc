/*
 * model.h - the model (GPT-2 or Llama, [model] arch) on one pipeline stage
 * and one TP shard.
 *
 * A stage runs its part of the network for one microbatch at a time:
 * stage 0 embeds tokens, every stage runs its transformer blocks, and the
 * last stage runs the final LayerNorm, the LM head and the loss. The loss
 * layer's backward runs right away on the last stage (it needs only the
 * logits it just made), so logits never outlive a chunk of rows, and what
 * the last stage keeps for its backward is the gradient at its blocks'
 * output.
 *
 * Activations live in `slots`, one per microbatch in flight (the schedule
 * says how many), so 1F1B keeps at most pp microbatches per stage.
 * Tensor-parallel all-reduces happen inside the forward and backward, on
 * the grid's tp group; pipeline sends and receives are the executor's job
 * (pipeline.c), through model_stage_input/output/grad.
 */
#ifndef TRI_SRC_MODEL_H
#define TRI_SRC_MODEL_H

#include <mpi.h>
#include <stdint.h>

#include "config.h"
#include "grid.h"
#include "params.h"
#include "kernels/ops.h"

typedef enum {
    UNIT_BEFORE_FORWARD, UNIT_AFTER_FORWARD,
    UNIT_BEFORE_BACKWARD, UNIT_AFTER_BACKWARD
} UnitEvent;

/* Called around each unit's compute; ZeRO-3 gathers weights there and
 * ZeRO-2/3 reduce gradients. */
typedef void (*UnitHook)(void *ctx, int unit, UnitEvent event);

typedef struct BlockActs BlockActs;
typedef struct Model Model;

/* A block's parameters, as indices into the ParamSet; -1 when the
 * architecture has none (llama: biases). llama's q, o, gate and down sit
 * in qkvw, projw, fcw and mprojw; kw, vw and upw are llama's alone. */
typedef struct {
    int ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, mprojw, mprojb;
    int kw, vw, upw;
} BlockParams;

struct Model {
    const Config *cfg;
    const Grid *grid;
    int B, T, C, NH, V, hs;       /* B: microbatch rows */
    int NHl, Vl, v0;              /* local heads, local vocab rows and start */
    int llama;                    /* arch = llama (model_llama.c's blocks) */
    int NKVl;                     /* local key/value heads (llama) */
    int Fl;                       /* local MLP width: 4C/tp (gpt2), ffn_dim/tp */
    int kv_replicas;              /* TP ranks sharing each key/value head */
    int sp;                       /* sequence parallelism in effect: the
                                     norms and residuals hold 1/tp of the
                                     tokens (tp > 1 and the config's key) */
    int layer0, n_local;          /* this stage's layers */
    int is_first, is_last;
    ops_dtype act_dtype;
    ParamSet ps;
    BlockParams *blocks;          /* n_local */
    int unit_embed, unit_head;    /* -1 when not on this stage */
    int unit_block0;              /* unit of local block 0 */
    int p_wte, p_wpe, p_lnfw, p_lnfb, p_lm;  /* -1 when absent */
    int *recompute;               /* per local layer: keep only the input */

    int rows;                     /* rows of the latest forward */
    int n_slots;
    BlockActs *acts;              /* [slot * n_local + l] */
    ops_tensor *out;              /* per slot: stage output (B,T,C) */
    ops_tensor *grad;             /* per slot: gradient at the stage output,
                                     then at its input (B,T,C) */
    ops_tensor *tokens, *targets; /* per slot: (B,T) int32 */
    struct ModelScratch *scratch;

    ops_tensor loss_acc;          /* fp64 sum of token losses since the last
                                     model_reset_loss, on the device */
    int64_t loss_count;
    float grad_scale;             /* d loss_sum multiplier: scale / tokens */

    UnitHook hook;
    void *hook_ctx;
    int final_microbatch;         /* the executor is running the step's last
                                     microbatch: gradients become final */
    MPI_Request *requests;        /* the executor's, 4 x n_slots */
};

/* Builds the parameter table and allocates activations for n_slots
 * microbatches of B rows. Parameter memory (weights, grads, optimizer
 * state) is zero.c's. Not collective. */
void model_create(Model *m, const Config *cfg, const Grid *g, int n_slots);
void model_destroy(Model *m);

typedef enum {
    FORWARD_TRAIN,   /* loss, and the loss backward on the last stage */
    FORWARD_EVAL,    /* loss only */
    FORWARD_ONLY     /* no loss: generation reads logits afterwards */
} ForwardMode;

/* Forward of one microbatch on this stage. Stage 0 reads m->tokens[slot],
 * other stages their input (filled by the executor through
 * model_stage_input). The last stage adds the loss of m->targets[slot] to
 * loss_sum and, in FORWARD_TRAIN, also runs the loss backward, leaving the
 * gradient in m->grad[slot]. rows <= B lets generation run one sequence.
 * Collective on tp. */
void model_forward(Model *m, int slot, int rows, ForwardMode mode);
/* Backward of one microbatch: from m->grad[slot] (gradient at the stage
 * output) down to the gradient at the stage input, left in m->grad[slot]
 * (stage 0 instead finishes with the embedding backward). Parameter
 * gradients accumulate. Collective on tp. */
void model_backward(Model *m, int slot, int rows);

/* The summed token loss (last stage) since model_reset_loss; reading it
 * is the step's one wait for the device. Not collective. */
void model_reset_loss(Model *m);
double model_loss_sum(const Model *m);

/* Buffers the pipeline executor sends and receives: (B,T,C), or this TP
 * rank's 1/tp slice of its B*T tokens under sequence parallelism. */
ops_tensor model_stage_input(Model *m, int slot);
ops_tensor model_stage_output(Model *m, int slot);
ops_tensor model_stage_grad(Model *m, int slot);
/* Elements of one message between stages for a forward of `rows` rows:
 * the tokens this rank holds times C. Not collective. */
int64_t model_stage_elems(const Model *m, int rows);

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
/* How many of layers [first, first + count) recompute. Not collective. */
int model_recomputed_layers(const TrainConfig *t, int first, int count);

/* Bytes of activations this rank allocated. */
int64_t model_activation_bytes(const Model *m);
/* Model FLOPs of one forward over `tokens` tokens, for the whole model
 * (not this shard): GEMMs and attention, 2 per multiply-add. */
double model_forward_flops(const ModelConfig *mc, double tokens);
/* The same for one transformer block (no embeddings, no head). */
double model_layer_flops(const ModelConfig *mc, double tokens);

#endif
