/*
 * cli_options.h - the one option parser every command uses: a command
 * declares its options as a table of CliOption (the name, what it takes,
 * where the value goes, how the value is checked, whether it is required)
 * and its positional arguments in a CliSpec, and cli_options_parse reads
 * argv against it.
 *
 * It reads what getopt_long read, so that a command line means what it
 * meant when each command ran getopt itself: `--name VALUE` and
 * `--name=VALUE`, a unique prefix of a name (`--conf`), options and
 * positional arguments in any order, `--` ending the options. What it
 * adds over getopt is the checks and the messages: every usage error of
 * every command is one line `trident: ...` and the hint
 * `(trident --help shows the usage)`, exit code TRI_EXIT_USAGE, and a
 * command's table can hold options of its sibling commands (`elsewhere`),
 * which are then refused by name as not applying instead of unknown.
 *
 * Not collective: every rank parses the same argv; the caller passes
 * rank 0's stream (fail_stream) so that one rank speaks.
 */
#ifndef TRI_SRC_CLI_OPTIONS_H
#define TRI_SRC_CLI_OPTIONS_H

#include <stdio.h>

enum { CLI_MAX_OPTIONS = 32, CLI_MAX_POSITIONAL = 2 };

/* What an option takes from the command line. */
typedef enum {
    CLI_FLAG,    /* --force: *(int *)to = 1 */
    CLI_ONE,     /* --config FILE: one value, the last one given wins */
    CLI_REPEAT,  /* --set A --set B: each value appended to (const char **)to */
    CLI_WORDS,   /* --input A B C: the value and the words after it up to the
                  * next that starts with '-', appended; may repeat */
    CLI_STOP,    /* --help: *(int *)to = 1, and nothing after it is read */
} CliTakes;

/* How a CLI_ONE value is checked, and what *to is. */
typedef enum {
    CLI_TEXT,      /* const char *: the word itself */
    CLI_POSITIVE,  /* int: 1 to INT_MAX, in decimal digits alone */
    CLI_REAL,      /* double: finite, > 0, and at most `most` where most > 0;
                    * digits, '.', 'e' and signs alone (no blanks, inf, nan, hex) */
    CLI_CHOICE,    /* int: the index of the value in `choices` ("fp32|bf16") */
    CLI_CUSTOM,    /* the command's own: parse(value, to) returns 0 if it takes it */
} CliCheck;

typedef struct {
    const char *name;       /* the long name, without "--" */
    char letter;            /* also -LETTER; 0: none */
    CliTakes takes;
    CliCheck check;
    void *to;               /* where the value goes */
    int *count;             /* CLI_REPEAT, CLI_WORDS: the values so far */
    int max;                /* CLI_REPEAT, CLI_WORDS: at most this many */
    double most;            /* CLI_REAL */
    const char *choices;    /* CLI_CHOICE */
    int (*parse)(const char *value, void *to);  /* CLI_CUSTOM */
    /* a refused value's message, a printf format whose %s is the value;
     * for CLI_REPEAT and CLI_WORDS, the message past max */
    const char *invalid;
    /* not NULL: the option is required, and the message names it with
     * this word: "plan needs --world N" */
    const char *needed;
    int elsewhere;          /* an option of another command: refused by name */
} CliOption;

typedef struct {
    const char *command;             /* "plan": the command in messages */
    CliOption *options;
    int n_options;                   /* at most CLI_MAX_OPTIONS */
    /* the positional arguments, all required, in order; more are refused
     * as unexpected, fewer with the message `missing` */
    const char **positional[CLI_MAX_POSITIONAL];
    int n_positional;
    const char *missing;
} CliSpec;

/* Parses argv[1 .. argc - 1] (argv[0] is the command word) against spec:
 * the options in the order given, then the positional arguments, then
 * the required options in table order. Returns 0, or TRI_EXIT_USAGE after
 * writing one problem and the usage hint to err. Not collective. */
int cli_options_parse(const CliSpec *spec, int argc, char **argv, FILE *err);

/* Writes `trident: ` fmt (with arg for its %s) and the usage hint to err;
 * returns TRI_EXIT_USAGE. For the checks a command makes after parsing.
 * Not collective. */
int cli_options_fail(FILE *err, const char *fmt, const char *arg);

#endif
