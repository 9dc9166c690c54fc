/*
 * sample.h - text generation with the distributed model.
 *
 * Every rank takes part: the sequence runs through the pipeline like a
 * one-row microbatch, the last stage's TP ranks gather their vocabulary
 * shards, its TP rank 0 draws the next token, and the world learns it by
 * broadcast. So any layout can generate, including the end of a run.
 */
#ifndef TRI_SRC_SAMPLE_H
#define TRI_SRC_SAMPLE_H

#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

#include "bpe.h"
#include "model.h"
#include "pipeline.h"

/* The prompt of a generation that has no text and no tokenizer to start
 * from: a newline for a byte-level model (vocab_size 256), else GPT-2's
 * end-of-text id (50256, wrapped into a smaller vocabulary), after which
 * documents begin. Not collective. */
int32_t sample_default_prompt(int vocab_size);

/* Generates n_tokens after the prompt (prompt_len tokens; at least one)
 * with temperature sampling seeded by seed, writing each token to out as it
 * comes (its bytes when bpe is given and has it, bytes when vocab_size is
 * 256, else "<id>"), on world rank 0, running the model through its
 * executor p. Collective on world. */
void sample_generate(Pipeline *p, const int32_t *prompt, int prompt_len,
                     int n_tokens, double temperature, uint64_t seed, const Bpe *bpe, FILE *out);

/* `trident sample`: loads the model of a checkpoint (given: a file, or a
 * run's checkpoint directory or its latest, for its newest checkpoint:
 * ckpt_pick.h; its stored config, laid out as pure data parallelism over
 * the world) and generates n_tokens after the prompt. The tokenizer is
 * tokenizer (a file, tokenizer_load.h), or with NULL the one the stored
 * config names ([data] tokenizer), or with "none" or where none is known
 * no tokenizer; rank 0 says on stderr which. With one, the prompt is text
 * it encodes (empty: its end-of-document token) and the output is decoded;
 * one whose vocabulary exceeds the checkpoint's vocab_size is refused.
 * Without one, the output is text for byte models and "<id>" per token
 * otherwise, and the prompt bytes or token ids separated by spaces (NULL:
 * a newline, or token 50256); text there is refused, suggesting
 * --tokenizer. Returns the exit code. Collective on world. */
int sample_main(const char *ckpt, const char *prompt, int n_tokens, const char *tokenizer,
                MPI_Comm world);

#endif
