/*
 * model_cp.h - context parallelism in the model ([parallel] cp): which
 * part of each sequence this rank holds, the positions of its tokens, and
 * attention over the whole sequence from the cp group's parts.
 *
 * The seq_len tokens of a row are cut into 2*cp chunks of Tc = seq_len /
 * (2 cp); cp rank i holds chunks i and 2cp-1-i (the "zigzag": an early
 * chunk, cheap under the causal mask, beside a late, dear one, so every
 * rank does the same attention work). The model's local tokens are
 * chunk-major, [local chunk 0: rows x Tc][local chunk 1: rows x Tc], so
 * m->T = seq_len / cp and everything per token (norms, GEMMs, residuals,
 * the loss, sequence parallelism's slices, pipeline messages) runs as at
 * cp = 1. Only three things know where a token sits: the microbatch load
 * (pipeline.c, through model_cp_chunk_start), the positions (RoPE and the
 * learned position table, here) and attention (here).
 *
 * At cp = 1 a rank holds the whole row as one chunk, in natural order, and
 * every function below makes exactly the call the model made before cp
 * existed, so training is bitwise unchanged.
 */
#ifndef TRI_SRC_MODEL_CP_H
#define TRI_SRC_MODEL_CP_H

#include <stdint.h>

#include "model.h"

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

/* Elements of each of the two scratch buffers attention over the cp
 * group needs (the gathered qkv and the whole sequence's qkv, and in the
 * backward its gradient natural and rank-major): micro_batch x seq_len
 * tokens of 3 NH/tp heads; 0 at cp = 1. Not collective. */
int64_t model_cp_scratch_elems(const Config *cfg, int tp);

#endif
