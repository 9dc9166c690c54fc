/*
 * cli.c - command-line parsing; see cli.h.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "kernels/ops.h"

void cli_usage(FILE *out)
{
    fputs("usage: trident train   [--config FILE] [--set section.key=value ...]\n"
          "       trident plan    --config FILE --world N [--mem GIB] [--hw h100|h200|a100|cpu]\n"
          "                       [--set section.key=value ...]\n"
          "       trident inspect CKPT.h5\n"
          "       trident sample  --ckpt CKPT.h5 [--prompt TEXT] [--tokens N] [--tokenizer FILE]\n"
          "       trident export  CKPT.h5 --format hf DIR [--dtype fp32|bf16]\n"
          "                       [--max-shard-size SIZE] [--force]\n"
          "       trident tokenize --tokenizer FILE --input FILE... --output PREFIX\n"
          "                       [--jsonl-key KEY] [--delimiter STR] [--eod NAME] [--skip-bad] [--force] [--progress S]\n"
          "       trident --version | --help\n"
          "\n"
          "Run under MPI: mpirun -np N trident train --config jobs/configs/tiny.ini\n"
          "Without --config, train runs the built-in jobs/configs/tiny.ini.\n"
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

static int parse_positive(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 1 || v > INT_MAX)
        return 1;
    *out = (int)v;
    return 0;
}

static int usage_error(FILE *err, const char *fmt, const char *arg)
{
    fputs("trident: ", err);
    fprintf(err, fmt, arg);
    fputs("\n(trident --help shows the usage)\n", err);
    return TRI_EXIT_USAGE;
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
    return usage_error(err, "unknown command '%s' (train, plan, inspect, sample, export or tokenize)",
                       word);
}

/* Options valid for each command. */
static int allowed(CliCommand cmd, int opt)
{
    switch (opt) {
    case 'c': return cmd == CLI_TRAIN || cmd == CLI_PLAN;
    case 's': return cmd == CLI_TRAIN || cmd == CLI_PLAN;
    case 'w': case 'm': case 'H': return cmd == CLI_PLAN;
    case 'k': case 'p': case 't': case 'T': return cmd == CLI_SAMPLE;
    }
    return 1;
}

static int parse_options(CliArgs *a, int argc, char **argv, FILE *err)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'}, {"set", required_argument, NULL, 's'},
        {"world", required_argument, NULL, 'w'},  {"mem", required_argument, NULL, 'm'},
        {"hw", required_argument, NULL, 'H'},
        {"ckpt", required_argument, NULL, 'k'},
        {"prompt", required_argument, NULL, 'p'}, {"tokens", required_argument, NULL, 't'},
        {"tokenizer", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int opt, which = -1;
    while ((opt = getopt_long(argc, argv, ":h", longopts, &which)) != -1) {
        /* the option as the user wrote it: argv[optind - 1] is its value
         * when the value came as a separate word */
        char name[64] = "-h";
        if (which >= 0)
            snprintf(name, sizeof name, "--%s", longopts[which].name);
        which = -1;
        if (opt == '?')
            return usage_error(err, "unknown option '%s'", argv[optind - 1]);
        if (opt == ':')
            return usage_error(err, "option '%s' needs a value", argv[optind - 1]);
        if (!allowed(a->command, opt))
            return usage_error(err, "option '%s' does not apply to this command", name);
        switch (opt) {
        case 'c': a->config = optarg; break;
        case 's':
            if (a->n_sets == CLI_MAX_SETS)
                return usage_error(err, "too many --set options (at most %s)", "256");
            a->sets[a->n_sets++] = optarg;
            break;
        case 'w':
            if (parse_positive(optarg, &a->world))
                return usage_error(err, "--world %s: expected a number of ranks from 1 to 2147483647 (INT_MAX, the largest MPI world)", optarg);
            break;
        case 'm': {
            char *end;
            a->mem_gib = strtod(optarg, &end);
            if (*end || end == optarg || !(a->mem_gib > 0))
                return usage_error(err, "--mem %s: expected a positive number of GiB", optarg);
            break;
        }
        case 'H': a->hw = optarg; break;
        case 'k': a->ckpt = optarg; break;
        case 'p': a->prompt = optarg; break;
        case 'T': a->tokenizer = optarg; break;
        case 't':
            if (parse_positive(optarg, &a->tokens))
                return usage_error(err, "--tokens %s: expected a positive integer", optarg);
            break;
        case 'h': a->command = CLI_HELP; return 0;
        }
    }
    if (a->command == CLI_INSPECT && optind < argc)
        a->ckpt = argv[optind++];
    if (optind < argc)
        return usage_error(err, "unexpected argument '%s'", argv[optind]);
    return 0;
}

static int check_required(const CliArgs *a, FILE *err)
{
    if (a->command == CLI_PLAN && !a->config)
        return usage_error(err, "plan needs --config FILE%s", "");
    if (a->command == CLI_PLAN && a->world == 0)
        return usage_error(err, "plan needs --world N%s", "");
    if (a->command == CLI_INSPECT && !a->ckpt)
        return usage_error(err, "inspect needs a checkpoint file%s", "");
    if (a->command == CLI_SAMPLE && !a->ckpt)
        return usage_error(err, "sample needs --ckpt CKPT.h5%s", "");
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
    /* export.c and tokenize.c parse their own options */
    if (a->command == CLI_EXPORT || a->command == CLI_TOKENIZE) {
        a->argc = argc - 1;
        a->argv = argv + 1;
        return 0;
    }
    /* getopt sees the command's own arguments */
    TRI_TRY(parse_options(a, argc - 1, argv + 1, err));
    return check_required(a, err);
}
