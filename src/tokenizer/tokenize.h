/*
 * tokenize.h - `trident tokenize`: text or JSON Lines to a Megatron-LM
 * indexed dataset, on any number of ranks.
 *
 *   trident tokenize --tokenizer FILE --input FILE... --output PREFIX
 *                    [--jsonl-key KEY] [--delimiter STR] [--eod NAME]
 *                    [--skip-bad] [--force] [--progress SECONDS]
 *
 * The inputs, taken as one stream of bytes in the order given, are cut
 * into as many byte ranges as there are ranks; each rank tokenizes the
 * documents that start in its range, and the ranks write one dataset
 * together (indexed_write.h), byte for byte the one a single rank writes.
 */
#ifndef TRI_SRC_TOKENIZE_H
#define TRI_SRC_TOKENIZE_H

#include <mpi.h>

/* argv[0] is "tokenize". Returns the exit code (0, TRI_EXIT_ERROR after a
 * message, TRI_EXIT_USAGE for a bad command line). Collective on world;
 * every rank passes the same arguments. */
int tokenize_main(int argc, char **argv, MPI_Comm world);

#endif
