/*
 * fuzz_ckpt.c - fuzz target for the checkpoint loader's validation path
 * (src/ckpt/ckpt.c, src/ckpt/inspect.c): the input is written as a file and handed to
 * what reads an untrusted checkpoint: inspect_checkpoint, ckpt_read_config
 * (what `trident sample` starts with) and ckpt_load (format version, model
 * shape, every dataset's presence, type and shape, then the reads and the
 * checksums), on a one-rank world and a tiny model built once.
 *
 * HDF5's own parser is exercised too. A crash inside libhdf5 on a garbage
 * file is an HDF5 bug (note it upstream); a crash in src/ is ours.
 * The seeds (tests/fuzz/corpus/ckpt) are checkpoints of this model, made
 * by tests/fuzz/make-corpus.sh, some of them damaged.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "config_load.h"
#include "fail.h"
#include "fuzz.h"
#include "grid.h"
#include "inspect.h"
#include "model.h"
#include "zero.h"

static Config cfg;
static Grid grid;
static Model model;
static Zero *zero;

static void finish(void)
{
    zero_destroy(zero);
    model_destroy(&model);
    grid_destroy(&grid);
    MPI_Finalize();
}

/* The model of tests/fuzz/make-corpus.sh. */
static void tiny_config(Config *c)
{
    config_defaults(c);
    c->model.n_layer = 1;
    c->model.n_embd = 8;
    c->model.n_head = 2;
    c->model.seq_len = 8;
    c->model.vocab_size = 256;
    c->train.micro_batch = 1;
    c->parallel.dp = 1;
    snprintf(c->data.train, sizeof c->data.train, "unused");
}

/* Open MPI loads its MPI-IO plugins at the first MPI_File_open and keeps
 * what they allocate until exit; done here, that is not taken for a leak
 * of the first input that reaches ckpt_load. */
static void warm_up_mpi_io(void)
{
    const char *path = fuzz_scratch(1, "", 0);
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS)
        MPI_File_close(&fh);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    fail_init();
    warm_up_mpi_io();
    tiny_config(&cfg);
    if (config_validate(&cfg, stderr))
        abort();
    grid_create(&grid, &cfg, MPI_COMM_WORLD);
    model_create(&model, &cfg, &grid, 1);
    zero = zero_create(&model, &cfg, &grid);
    atexit(finish);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Config stored;
    const char *path = fuzz_scratch(0, data, size);
    FILE *quiet = fuzz_quiet();
    inspect_checkpoint(path, quiet, quiet);
    ckpt_read_config(path, &stored, quiet);
    TrainState st;
    memset(&st, 0, sizeof st);
    ckpt_load(&model, zero, &cfg, path, 1, &st, quiet);
    return 0;
}
