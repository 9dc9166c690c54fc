/*
 * init_from.h - `[checkpoint] init_from = PATH`: a new run (step 0, a
 * fresh optimizer) whose weights come from a published model instead of
 * the RNG: a HuggingFace safetensors directory (GPT-2; one file or
 * shards; F32, F16 or BF16) or an llm.c .bin (gpt2_124M.bin's format:
 * version 3, fp32, or 5, bf16).
 *
 * Precedence: init_from starts new runs only. A run whose checkpoint
 * directory holds checkpoints (resume = auto) resumes them and ignores
 * init_from, saying so; resume = none always starts from init_from; resume
 * = PATH with init_from is refused by the config. So a requeued job that
 * started from a published model continues from its own checkpoints.
 *
 * Every rank reads only the block of each tensor it holds (its stage's
 * tensors, its TP rows or columns), straight from the file with pread.
 *
 * Strict: the run gets the model the source holds, all of it, or stops
 * with a message naming the file and what differs. Nothing is dropped
 * without a word (a tensor nothing reads, a tied source's own head unlike
 * its embedding, a config.json field unlike [model]), and no value that
 * cannot train (NaN, infinity) is loaded. doc/interop.md lists the checks.
 */
#ifndef TRI_SRC_INIT_FROM_H
#define TRI_SRC_INIT_FROM_H

#include "config.h"
#include "grid.h"
#include "zero.h"

/* Decides whether this run starts from cfg's init_from (*use, the same on
 * every rank) and, if so, checks the source against cfg: the files, the
 * llm.c header or config.json's fields, every tensor's presence and
 * shape, every tensor of the source read (buffers aside, with a note), a
 * tied head equal to its embedding; naming the file and tensor or field
 * at fault. Call before the weights are allocated. Collective on world;
 * same cfg on all ranks. */
int init_from_check(const Config *cfg, const Grid *g, int *use);

/* Fills every weight this rank holds from init_from (checked by
 * init_from_check), each value checked finite (the first NaN or infinity
 * named by file, tensor and element). Collective on world. */
int init_from_load(Zero *z, const Config *cfg, const Grid *g);

#endif
