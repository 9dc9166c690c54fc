/*
 * export.h - `trident export CKPT.h5 --format hf DIR [--dtype fp32|bf16]
 * [--max-shard-size SIZE] [--force]`: a checkpoint's weights as a
 * HuggingFace model directory (model.safetensors, or shards and
 * model.safetensors.index.json past SIZE, and config.json), through the
 * tables of hf_map.h; with [data] tokenizer in the stored config, its
 * tokenizer files too (tokenizer_hf.h). CKPT may be a run's checkpoint
 * directory (ckpt_pick.h). doc/interop.md describes the result.
 *
 * A checkpoint holds logical tensors, so any layout's checkpoint exports
 * alike. Rank 0 does the work; the others wait for its verdict.
 */
#ifndef TRI_SRC_EXPORT_H
#define TRI_SRC_EXPORT_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#define EXPORT_DEFAULT_SHARD 5000000000ull  /* transformers' "5GB" */

typedef struct {
    const char *ckpt, *dir;
    int bf16;                 /* --dtype bf16 */
    uint64_t max_shard;       /* bytes of tensor data per file */
    int force;                /* write into a non-empty DIR */
} ExportArgs;

/* Parses export's own arguments (argv[0] is "export"). Returns 0, or
 * TRI_EXIT_USAGE with the problem on err. Not collective. */
int export_parse(ExportArgs *a, int argc, char **argv, FILE *err);

/* Writes the directory. Returns 0, or 1 with one line naming the file,
 * the tensor or the directory on err. Not collective (one rank). */
int export_hf(const ExportArgs *a, FILE *out, FILE *err);

/* export_parse and export_hf on rank 0 of world, the verdict agreed.
 * Collective on world. Returns the exit status. */
int export_main(int argc, char **argv, MPI_Comm world);

#endif
