/*
 * cli.h - the command line: `trident COMMAND [options]`. The command
 * word, then each command's options through its table (cli_options.h):
 * train, plan, inspect and sample here, export and tokenize in their own
 * files.
 *
 *   trident train   [--config FILE] [--set section.key=value ...] [--print-config]
 *   trident plan    --config FILE --world N [--mem GIB [--all]] [--hw NAME] [--set ...]
 *                   [--print-config]
 *   trident inspect CKPT.h5|DIR     (DIR: a run's checkpoints, ckpt_pick.h)
 *   trident sample  --ckpt CKPT.h5|DIR [--prompt TEXT] [--tokens N] [--tokenizer FILE|none]
 *   trident export  CKPT.h5 --format hf DIR [...]   (options: export.h)
 *   trident tokenize --tokenizer FILE --input FILE... --output PREFIX [...]
 *   trident --version | --help
 */
#ifndef TRI_SRC_CLI_H
#define TRI_SRC_CLI_H

#include <stdio.h>

#define CLI_MAX_SETS 256

typedef enum {
    CLI_TRAIN, CLI_PLAN, CLI_INSPECT, CLI_SAMPLE, CLI_EXPORT, CLI_TOKENIZE, CLI_HELP, CLI_VERSION
} CliCommand;

typedef struct {
    CliCommand command;
    const char *config;              /* NULL: the built-in tiny.ini */
    const char *sets[CLI_MAX_SETS];  /* "section.key=value" overrides */
    int n_sets;
    int print_config;                /* train, plan: print every key, and stop */
    int world;                       /* plan: ranks to plan for */
    double mem_gib;                  /* plan: memory per device, 0: unset */
    const char *hw;                  /* plan: hardware profile, NULL: none */
    int all;                         /* plan: every layout that fits --mem */
    const char *ckpt;                /* inspect, sample */
    const char *prompt;              /* sample */
    int tokens;                      /* sample */
    const char *tokenizer;           /* sample: decode with this file ("none": ids) */
    int argc;                        /* export, tokenize: their own arguments, */
    char **argv;                     /* from the command word on (export.h, tokenize.h) */
} CliArgs;

/* Parses argv. Returns 0, or TRI_EXIT_USAGE after writing the problem and
 * a usage hint to err. Not collective (every rank parses the same argv). */
int cli_parse(CliArgs *a, int argc, char **argv, FILE *err);

void cli_usage(FILE *out);
void cli_version(FILE *out);

#endif
