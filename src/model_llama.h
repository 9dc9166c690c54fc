/*
 * model_llama.h - the Llama transformer block on one TP shard: RMSNorm,
 * q/k/v projections with rotary embeddings and grouped-query attention,
 * SwiGLU MLP, no biases (doc/guide.md, "Training a Llama model").
 */
#ifndef TRI_SRC_MODEL_LLAMA_H
#define TRI_SRC_MODEL_LLAMA_H

#include "model.h"

/* Forward of block p on a's input, into out (B,T,C). Collective on tp. */
void llama_block_forward(Model *m, const BlockParams *p, BlockActs *a,
                         ops_tensor out, int rows);
/* Backward: dres holds the gradient at the block output on entry, at its
 * input on exit; parameter gradients accumulate (under zb1 the linear
 * layers' wait in a->kept for llama_block_weights). Collective on tp, and on
 * the key/value replica group when key/value heads are replicated. */
void llama_block_backward(Model *m, const BlockParams *p, BlockActs *a,
                          ops_tensor dres, int rows);
/* zb1's weight pass: the parameter gradients of the linear layers from
 * what llama_block_backward kept in a->kept; dres is unused. Not
 * collective. */
void llama_block_weights(Model *m, const BlockParams *p, BlockActs *a,
                         ops_tensor dres, int rows);

#endif
