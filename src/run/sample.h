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

/* Generates n_tokens after the prompt (prompt_len tokens; at least one)
 * with temperature sampling seeded by seed, writing each token to out as it
 * comes (its bytes when bpe is given and has it, bytes when vocab_size is
 * 256, else "<id>"), on world rank 0, running the model through its
 * executor p. Collective on world. */
void sample_generate(Pipeline *p, const int32_t *prompt, int prompt_len,
                     int n_tokens, double temperature, uint64_t seed, const Bpe *bpe, FILE *out);

/* `trident sample`: loads the model of a checkpoint (its stored config,
 * laid out as pure data parallelism over the world) and generates
 * n_tokens after the prompt: text for byte models, space-separated token
 * ids otherwise (NULL: a newline, or token 50256). With a tokenizer file
 * (tokenizer_load.h; NULL: none) the prompt is text it encodes (empty: its
 * end-of-document token) and the output is decoded; a tokenizer whose
 * vocabulary exceeds the checkpoint's vocab_size is refused. Returns the
 * exit code. Collective on world. */
int sample_main(const char *ckpt, const char *prompt, int n_tokens, const char *tokenizer,
                MPI_Comm world);

#endif
