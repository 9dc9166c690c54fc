/*
 * cli.c - command-line parsing; see cli.h.
 */
#include "cli.h"

#include <string.h>

#include "cli_options.h"
#include "fail.h"
#include "ops.h"

void cli_usage(FILE *out)
{
    fputs("usage: trident train   [--config FILE] [--set section.key=value ...] [--print-config]\n"
          "       trident plan    --config FILE --world N [--mem GIB [--all]] [--hw h100|h200|a100|cpu]\n"
          "                       [--set section.key=value ...] [--print-config]\n"
          "       trident inspect CKPT.h5|RUN_CKPT_DIR\n"
          "       trident sample  --ckpt CKPT.h5|RUN_CKPT_DIR [--prompt TEXT] [--tokens N]\n"
          "                       [--tokenizer FILE|none]\n"
          "       trident export  CKPT.h5|RUN_CKPT_DIR --format hf DIR [--dtype fp32|bf16]\n"
          "                       [--max-shard-size SIZE] [--force]\n"
          "       trident tokenize --tokenizer FILE --input FILE... --output PREFIX\n"
          "                       [--jsonl-key KEY] [--delimiter STR] [--eod NAME] [--skip-bad] [--force] [--progress S]\n"
          "       trident --version | --help\n"
          "\n"
          "Run under MPI: mpirun -np N trident train --config jobs/configs/tiny.ini\n"
          "Without --config, train runs the built-in jobs/configs/tiny.ini.\n"
          "--print-config prints every key of the config as it would run, and stops.\n"
          "See trident(1) and doc/guide.md.\n", out);
}

void cli_version(FILE *out)
{
    const char *warning;
    fprintf(out, "trident %s\nbackends: cpu (%s)%s%s\n", PACKAGE_VERSION, ops_gemm_info(&warning),
            TRI_HAVE_CUDA ? ", cuda" : "", TRI_HAVE_NCCL ? ", nccl" : "");
    if (!TRI_HAVE_CUDA)
        fputs("cuda: not built (reconfigure with --with-cuda)\n", out);
}

static int parse_command(CliArgs *a, const char *word, FILE *err)
{
    static const struct { const char *name; CliCommand cmd; } commands[] = {
        {"train", CLI_TRAIN}, {"plan", CLI_PLAN}, {"inspect", CLI_INSPECT},
        {"sample", CLI_SAMPLE}, {"export", CLI_EXPORT}, {"tokenize", CLI_TOKENIZE},
        {"--help", CLI_HELP}, {"-h", CLI_HELP},
        {"help", CLI_HELP}, {"--version", CLI_VERSION}, {"version", CLI_VERSION},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(word, commands[i].name) == 0) {
            a->command = commands[i].cmd;
            return 0;
        }
    }
    return cli_options_fail(err, "unknown command '%s' (train, plan, inspect, sample, export or tokenize)",
                            word);
}

/* --hw names a profile; roofline_hardware says which exist. An empty one
 * used to be taken as no --hw at all. */
static int parse_hardware(const char *value, void *to)
{
    if (!*value)
        return 1;
    *(const char **)to = value;
    return 0;
}

/* train, plan, inspect and sample share one table: an option of one of
 * them given to another is refused by name. */
static int parse_options(CliArgs *a, int argc, char **argv, FILE *err)
{
    static const char *const names[] = {"train", "plan", "inspect", "sample"};
    CliCommand c = a->command;
    int config = c == CLI_TRAIN || c == CLI_PLAN, plan = c == CLI_PLAN;
    int sample = c == CLI_SAMPLE, help = 0;
    CliOption options[] = {
        {.name = "config", .takes = CLI_ONE, .to = &a->config, .elsewhere = !config,
         .needed = plan ? "FILE" : NULL},
        {.name = "set", .takes = CLI_REPEAT, .to = a->sets, .count = &a->n_sets,
         .max = CLI_MAX_SETS, .invalid = "too many --set options (at most 256)",
         .elsewhere = !config},
        {.name = "print-config", .takes = CLI_FLAG, .to = &a->print_config, .elsewhere = !config},
        {.name = "world", .takes = CLI_ONE, .check = CLI_POSITIVE, .to = &a->world,
         .invalid = "--world %s: expected a number of ranks from 1 to 2147483647 (INT_MAX, the largest MPI world)",
         .elsewhere = !plan, .needed = plan ? "N" : NULL},
        {.name = "mem", .takes = CLI_ONE, .check = CLI_REAL, .to = &a->mem_gib,
         .invalid = "--mem '%s': expected a positive, finite number of GiB", .elsewhere = !plan},
        {.name = "hw", .takes = CLI_ONE, .check = CLI_CUSTOM, .parse = parse_hardware,
         .to = &a->hw, .elsewhere = !plan,
         .invalid = "--hw '%s': expected a hardware profile (h100, h200, a100, cpu)"},
        {.name = "all", .takes = CLI_FLAG, .to = &a->all, .elsewhere = !plan},
        {.name = "ckpt", .takes = CLI_ONE, .to = &a->ckpt, .elsewhere = !sample,
         .needed = sample ? "CKPT.h5" : NULL},
        {.name = "prompt", .takes = CLI_ONE, .to = &a->prompt, .elsewhere = !sample},
        {.name = "tokens", .takes = CLI_ONE, .check = CLI_POSITIVE, .to = &a->tokens,
         .invalid = "--tokens %s: expected a positive integer", .elsewhere = !sample},
        {.name = "tokenizer", .takes = CLI_ONE, .to = &a->tokenizer, .elsewhere = !sample},
        {.name = "help", .letter = 'h', .takes = CLI_STOP, .to = &help},
    };
    CliSpec spec = {
        .command = names[c], .options = options,
        .n_options = (int)(sizeof options / sizeof options[0]),
        .positional = {&a->ckpt}, .n_positional = c == CLI_INSPECT,
        .missing = "inspect needs a checkpoint file",
    };
    TRI_TRY(cli_options_parse(&spec, argc, argv, err));
    if (a->all && !help && !(a->mem_gib > 0))
        return cli_options_fail(err, "%s: it lists every layout that fits --mem GIB, and no --mem was given",
                                "--all");
    if (help)
        a->command = CLI_HELP;
    return 0;
}

int cli_parse(CliArgs *a, int argc, char **argv, FILE *err)
{
    memset(a, 0, sizeof *a);
    a->tokens = 200;
    if (argc < 2) {
        cli_usage(err);
        return TRI_EXIT_USAGE;
    }
    TRI_TRY(parse_command(a, argv[1], err));
    if (a->command == CLI_HELP || a->command == CLI_VERSION)
        return 0;
    /* export.c and tokenize.c declare their own tables (cli_options.h) */
    if (a->command == CLI_EXPORT || a->command == CLI_TOKENIZE) {
        a->argc = argc - 1;
        a->argv = argv + 1;
        return 0;
    }
    return parse_options(a, argc - 1, argv + 1, err);
}
