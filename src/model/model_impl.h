/*
 * model_impl.h - what the stage machinery (model.c) shares with the
 * architectures' blocks (arch_gpt2.c, arch_llama.c): a block's
 * activations, the stage's scratch, and the helpers every block calls
 * (model_tp.c, and model_cp.c's positions and attention). Only those
 * files include it; everything else goes through model.h.
 *
 * llama reuses gpt2's activation slots where the meaning carries over:
 * ln1/ln2 hold the RMSNorm outputs (no mean), qkv the rotated q and the
 * expanded k and v in the attention ops' layout, fc the gate and up
 * projections side by side (each (B,T,Fl)), fcg SwiGLU's product.
 */
#ifndef TRI_SRC_MODEL_IMPL_H
#define TRI_SRC_MODEL_IMPL_H

#include "model.h"

/* Under sequence parallelism x, ln1, xmid, ln2 and the norms' statistics
 * hold this rank's 1/tp slice of the B*T tokens (model_local_rows). */
struct BlockActs {
    ops_tensor x;                          /* input (B,T,C), always kept */
    ops_tensor ln1, ln1_mean, ln1_rstd;    /* (B,T,C), (B,T), (B,T) */
    ops_tensor qkv;                        /* (B,T,3Cl) */
    ops_tensor lse;                        /* (B,NHl,T) fp32 softmax log-sum-exp */
    ops_tensor atty;                       /* (B,T,Cl) */
    ops_tensor xmid;                       /* (B,T,C) after attention */
    ops_tensor ln2, ln2_mean, ln2_rstd;
    ops_tensor fc, fcg;                    /* gpt2: (B,T,4Cl) before/after GELU;
                                              llama: gate|up (2 x (B,T,Fl)), (B,T,Fl) */
    ops_tensor kept;                       /* zb1: the linear layers' output
                                              gradients, (B,T,model_kept_grad_width) */
    struct MoeActs *moe;                   /* a MoE layer's routing and expert
                                              activations (moe.c); NULL for a
                                              dense one */
};

typedef struct ModelScratch {
    BlockActs recomputed;    /* where recomputed blocks put activations */
    ops_tensor tmp;          /* (B,T,C) row-parallel partial sums; under
                                sequence parallelism also the gathered
                                gradient at a row-parallel output */
    ops_tensor gathered;     /* sequence parallelism: (B,T,C) a norm's
                                output gathered for a column-parallel GEMM */
    ops_tensor slice;        /* sequence parallelism: (B*T/tp, C) what a
                                reduce-scatter leaves this rank */
    ops_tensor d_ln;         /* (B,T,C) gradient at a LayerNorm output */
    ops_tensor d_fc;         /* gpt2 (B,T,4Cl); llama d(fcg)|dgate|dup, 3 x (B,T,Fl) */
    ops_tensor d_atty;       /* (B,T,Cl) */
    ops_tensor d_qkv;        /* (B,T,3Cl) */
    ops_tensor qkv_raw;      /* llama: q|k|v before expansion, then their
                                gradients: (B,T,(NHl + 2 NKVl) hs) */
    ops_tensor lnf, lnf_mean, lnf_rstd, d_lnf;   /* head, last stage */
    ops_tensor logits;       /* (chunk, Vl) */
    ops_tensor rowmax, stats, losses;  /* chunk; stats = sumexp | target */
    int chunk;               /* rows of logits held at once */
    /* context parallelism (model_cp.c), each B x seq_len tokens of 3Cl:
     * the cp group's qkv as gathered (rank-major; in the backward then
     * the whole dqkv), the sequence's qkv in natural order (in the
     * backward then the rank-major dqkv); and the collectives' counts */
    ops_tensor cp_gathered, cp_sequence;
    int *cp_counts;
} ModelScratch;

/* The first n elements of t, so each op sees exactly its shape. */
static inline ops_tensor head_of(ops_tensor t, int64_t n) { return ops_view(t, 0, n); }

static inline ops_tensor W(Model *m, int idx) { return m->ps.p[idx].w; }
static inline ops_tensor G(Model *m, int idx) { return m->ps.p[idx].g; }

/* The next n elements of a's kept output gradients, from *at on (which
 * advances); OPS_NONE when the backward is not split. The backward and
 * the weight pass take the views in the same order. Not collective. */
static inline ops_tensor kept_next(const BlockActs *a, int64_t *at, int64_t n)
{
    if (!a->kept.data)
        return OPS_NONE;
    *at += n;
    return ops_view(a->kept, *at - n, n);
}

/* The input half of the backward of y = x . W^T (+ b): dinp = dout . W.
 * The weight half, dW += dout^T . x and db, runs now, or, with `kept`
 * (zb1), later in model_linear_weights from dout copied into kept.
 * Not collective. */
void model_linear_bwd(Model *m, ops_tensor dinp, int w, int b, ops_tensor dout, ops_tensor inp,
                      ops_tensor kept, int64_t N, int64_t out, int64_t in);
/* model_linear_bwd for the layer after a GELU whose input was pre (GPT-2's
 * MLP down): dinp is the gradient at pre, gelu'(pre) * (dout . W), in one
 * op (ops_matmul_dgelu_bwd). Not collective. */
void model_linear_bwd_gelu(Model *m, ops_tensor dinp, int w, int b, ops_tensor dout,
                           ops_tensor inp, ops_tensor kept, ops_tensor pre, int64_t N,
                           int64_t out, int64_t in);
/* The weight half from the kept output gradient. Not collective. */
void model_linear_weights(Model *m, int w, int b, ops_tensor kept, ops_tensor inp, int64_t N,
                          int64_t out, int64_t in);

/* Rows of the residual stream this rank holds of N tokens: all N, or
 * under sequence parallelism its slice [tp_rank N/tp, (tp_rank+1) N/tp)
 * of the flattened tokens. */
static inline int64_t model_local_rows(const Model *m, int64_t N)
{
    return m->sp ? N / m->grid->layout.tp : N;
}

/* Sum over the TP group. Collective on tp. */
void model_tp_allreduce(Model *m, ops_tensor t, int64_t n);
/* dst (N rows of C) = every TP rank's slice src (N/tp rows), in rank
 * order. Collective on tp. */
void model_gather_rows(Model *m, ops_tensor dst, ops_tensor src, int64_t N);
/* full (N rows of partial sums) summed over TP: in place, or this rank's
 * slice of the sum in the scratch's slice under sequence parallelism.
 * Returns the local rows. Collective on tp. */
ops_tensor model_sum_rows(Model *m, ops_tensor full, int64_t N);
/* All N rows of a tensor this rank holds the local rows of: local itself,
 * or under sequence parallelism gathered into `into`. Collective on tp. */
ops_tensor model_all_rows(Model *m, ops_tensor local, ops_tensor into, int64_t N);
/* The row-parallel output: x . W^T summed over TP ranks, plus the bias
 * (b >= 0) once, for this rank's model_local_rows of the N rows (an
 * all-reduce, or a reduce-scatter under sequence parallelism). Returns a
 * scratch view that the next row-parallel call overwrites. Collective on
 * tp. */
ops_tensor model_row_parallel(Model *m, ops_tensor x, int w, int b, int64_t N,
                              int64_t in_local);
/* The input of a column-parallel GEMM from a norm's output ln (the local
 * rows): ln itself, or all N rows gathered under sequence parallelism
 * (in a scratch the next call overwrites). Collective on tp. */
ops_tensor model_column_input(Model *m, ops_tensor ln, int64_t N);
/* The gradient at a row-parallel output for its backward, from dres at
 * the local rows: dres, or all N rows gathered. Collective on tp. */
ops_tensor model_row_parallel_grad(Model *m, ops_tensor dres, int64_t N);
/* The gradient at a norm's output: d_ln (N rows of partial sums from the
 * column-parallel layers after it) summed over TP, for the local rows
 * (all-reduce, or reduce-scatter). Collective on tp. */
ops_tensor model_norm_output_grad(Model *m, int64_t N);

/* ---- context parallelism (model_cp.c) ------------------------------------
 *
 * Only three things know where a token sits: the microbatch load
 * (pipeline.c, through model_cp_chunk_start), the positions (RoPE and the
 * learned position table) and attention, below. At cp = 1 each makes
 * exactly the call the model made before cp existed, so training is
 * bitwise unchanged. */

/* Causal attention of this rank's query tokens over the whole sequence:
 * out (rows * m->T, NHl*hs) and lse (2 chunks of (rows, NHl, Tc)) from
 * the local qkv (rows * m->T, 3 NHl hs), chunk-major. At cp > 1 the
 * cp group's qkv is gathered into the scratch first. Collective on cp. */
void model_cp_attention_fwd(Model *m, ops_tensor out, ops_tensor lse, ops_tensor qkv, int rows);
/* Its backward: dqkv (the local tokens', overwritten) from dout, and the
 * forward's qkv, out and lse. At cp > 1 qkv is gathered again (never
 * kept whole, so activations stay 1/cp) and each rank's key and value
 * gradients, which every later chunk's queries add to, are summed over
 * the group by a reduce-scatter. Collective on cp. */
void model_cp_attention_bwd(Model *m, ops_tensor dqkv, ops_tensor dout, ops_tensor qkv,
                            ops_tensor out, ops_tensor lse, int rows);

/* Rotary embeddings in place on x (rows * m->T, H heads of hs), each
 * local chunk at its true positions; and their backward. Not collective. */
void model_cp_rope_fwd(const Model *m, ops_tensor x, int rows, int H, double theta);
void model_cp_rope_bwd(const Model *m, ops_tensor dx, int rows, int H, double theta);

/* x (rows * m->T, C) += the position table's rows of each local chunk's
 * positions; and the backward into the table's gradient dwpe. Not
 * collective. */
void model_cp_position_fwd(const Model *m, ops_tensor x, ops_tensor wpe, int rows);
void model_cp_position_bwd(const Model *m, ops_tensor dwpe, ops_tensor dx, int rows);

/* Stops (an internal error) unless the Model's cp is the config's and
 * seq_len cuts into 2 cp chunks, which config_validate words for the
 * user, or if a rank's qkv passes the int counts of the collectives. Not
 * collective. */
void model_cp_check(const Model *m);

/* Elements of each of the two scratch buffers attention over the cp
 * group needs (the gathered qkv and the whole sequence's qkv, and in the
 * backward its gradient natural and rank-major): micro_batch x seq_len
 * tokens of 3 NH/tp heads; 0 at cp = 1. Not collective. */
int64_t model_cp_scratch_elems(const Config *cfg, int tp);

/* ---- mixture of experts (moe.c) -----------------------------------------
 *
 * A MoE layer (issue 38) in place of a Llama block's MLP: the router, the
 * routed SwiGLU experts (grouped GEMMs over this ep rank's experts, rows
 * moved by moe_ep.h), the shared expert with its sigmoid gate, the
 * load-balancing and z losses, and the statistics the metrics read
 * (model.h's MoeStats). Shapes: N tokens (all of the microbatch's,
 * gathered over TP under sequence parallelism), E experts, k per token,
 * El on this ep rank, Fml = moe_ffn_dim / tp, Fsl = the shared width / tp.
 * A layer's activations live in its slot's BlockActs (a->moe), sized at
 * set-up by the worst case moe_ep_max_rows gives. */

/* Allocates the MoE activations of the slots' and the recompute buffers'
 * MoE layers, the stage's MoE scratch and statistics (m->moe); nothing
 * when the stage holds no MoE layer. After the dense activations (the
 * slots keeping only their input share the recompute buffers' MoE part).
 * Not collective. */
void moe_create(Model *m);
/* Frees what moe_create allocated. Not collective. */
void moe_destroy(Model *m);
/* Bytes of device memory moe_create allocated. Not collective. */
int64_t moe_activation_bytes(const Model *m);
/* The same as a pure function of the config, for stage `stage` on one of
 * tp ranks with n_slots slots: what model_planned_activation_bytes adds.
 * Not collective. */
int64_t moe_planned_activation_bytes(const Config *cfg, int tp, int stage, int n_slots);

/* The MoE layer's output for the rank's local rows of the N tokens, from
 * h (N, C), the post-attention norm's output on all N rows
 * (model_column_input's): the experts' and shared expert's sum over TP
 * (all-reduce, or reduce-scatter under sequence parallelism), in a
 * scratch view the next layer overwrites. Collective on tp and ep. */
ops_tensor moe_forward(Model *m, const BlockParams *p, BlockActs *a,
                       ops_tensor h, int64_t N);
/* Its backward from dout (N, C) (model_row_parallel_grad's) and h:
 * overwrites d_ln (N, C) with this TP rank's share of the gradient at h,
 * and accumulates every MoE weight's gradient now (also under zb1: the
 * layer defers nothing). Collective on tp and ep. */
void moe_backward(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dout, ops_tensor h,
                  ops_tensor d_ln, int64_t N);

#endif
