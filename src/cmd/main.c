/*
 * main.c - trident's entry point: MPI start-up, the command line, and the
 * dispatch to each command.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "affinity.h"
#include "ckpt.h"
#include "ckpt_io.h"
#include "cli.h"
#include "config.h"
#include "config_load.h"
#include "export.h"
#include "fail.h"
#include "inspect.h"
#include "plan.h"
#include "roofline.h"
#include "sample.h"
#include "start_up_watchdog.h"
#include "stop_signal.h"
#include "timer.h"
#include "tokenize.h"
#include "train.h"
#include "watchdog.h"

static double process_started;

/* The config as the run starts: the keys that differ from the defaults
 * (doc/guide.md's table), and for training what they leave off; or with
 * --print-config every key, under a comment, so that the output loads
 * back as the same config. */
static void print_config(const Config *cfg, int every_key, int training)
{
    char text[16384];
    if (every_key) {
        config_to_ini(cfg, text, sizeof text);
        printf("# trident %s: config %s, every key\n%s", PACKAGE_VERSION, cfg->source, text);
    } else {
        int n = config_to_ini_changed(cfg, text, sizeof text);
        printf("trident %s: config %s, %s:\n%s", PACKAGE_VERSION, cfg->source,
               n ? "the keys not at their defaults (--print-config shows every key)"
                 : "every key at its default", text);
        /* the defaults leave these off: say so rather than run without them */
        if (training && config_off(cfg, text, sizeof text))
            printf("off, as the config does not ask for them: %s\n", text);
    }
    fflush(stdout);
}

/* Rank 0 reads the config; every rank learns whether that worked. */
static int load_config(Config *cfg, const CliArgs *a, int rank)
{
    WatchdogPhase outer = watchdog_enter("reading the config", NULL);
    int rc = 0;
    if (rank == 0) {
        rc = config_load(cfg, a->config, a->sets, a->n_sets, stderr);
        if (!rc)
            print_config(cfg, a->print_config, a->command == CLI_TRAIN);
    }
    rc = fail_agree(MPI_COMM_WORLD, rc);
    watchdog_leave(outer);
    return rc;
}

/* `trident plan`: the costs, then (--hw) the predicted step, then the
 * options that train what plan advises. */
static int plan(const Config *cfg, const CliArgs *a)
{
    static Config advice;
    TRI_TRY(plan_print(cfg, a->world, a->mem_gib, a->all, &advice, stdout, stderr));
    if (a->hw)
        TRI_TRY(roofline_print_plan(cfg, a->world, a->hw, &advice, stdout, stderr));
    plan_print_advice(cfg, &advice, a->sets, a->n_sets, stdout);
    return 0;
}

static int run(const CliArgs *a, int rank)
{
    static Config cfg;
    switch (a->command) {
    case CLI_HELP:
        if (rank == 0)
            cli_usage(stdout);
        return TRI_EXIT_OK;
    case CLI_VERSION:
        if (rank == 0)
            cli_version(stdout);
        return TRI_EXIT_OK;
    case CLI_TRAIN:
        if (load_config(&cfg, a, rank))
            return TRI_EXIT_ERROR;
        if (a->print_config) /* printed: nothing more was asked */
            return TRI_EXIT_OK;
        return train_run(&cfg, MPI_COMM_WORLD, process_started);
    case CLI_INSPECT: {
        int rc = rank == 0 ? inspect_checkpoint(a->ckpt, stdout, stderr) : 0;
        return fail_agree(MPI_COMM_WORLD, rc) ? TRI_EXIT_ERROR : TRI_EXIT_OK;
    }
    case CLI_EXPORT:
        return export_main(a->argc, a->argv, MPI_COMM_WORLD);
    case CLI_SAMPLE:
        return sample_main(a->ckpt, a->prompt, a->tokens, a->tokenizer, MPI_COMM_WORLD);
    case CLI_TOKENIZE:
        return tokenize_main(a->argc, a->argv, MPI_COMM_WORLD);
    case CLI_PLAN: {
        if (load_config(&cfg, a, rank))
            return TRI_EXIT_ERROR;
        if (a->print_config)
            return TRI_EXIT_OK;
        int rc = rank == 0 ? plan(&cfg, a) : 0;
        return fail_agree(MPI_COMM_WORLD, rc) ? TRI_EXIT_ERROR : TRI_EXIT_OK;
    }
    }
    return TRI_EXIT_ERROR;
}

int main(int argc, char **argv)
{
    process_started = timer_now();
    stop_signals_block(); /* before any thread exists: see stop_signal.h */
    /* a rank stopped in MPI_Init or before the config is read must not
     * hang the others: the watchdog starts now (start_up_watchdog.h) */
    start_up_watchdog_arm(argc, argv);
    ckpt_io_ignore_file_size_signal(); /* `ulimit -f`: a failed save, not a core */
    /* MPI_THREAD_MULTIPLE: asynchronous checkpoints write from a thread of
     * their own on a communicator of their own (ckpt_async.h); a library
     * that gives less is refused only when async = true asks for it */
    int provided;
    WatchdogPhase outer = watchdog_enter("MPI_Init", NULL);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    watchdog_leave(outer);
    fail_init();
    affinity_setup(MPI_COMM_WORLD);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CliArgs args;
    /* every rank parses, only rank 0 speaks */
    int rc = cli_parse(&args, argc, argv, fail_stream(rank == 0));
    /* only `train` stops at a step boundary; the other commands just end */
    if (!rc && args.command == CLI_TRAIN) {
        rc = stop_signals_take() ? TRI_EXIT_ERROR : 0;
    } else {
        stop_signals_default();
        watchdog_stop(); /* it watches training alone, once MPI runs */
    }
    if (!rc)
        rc = run(&args, rank);
    fflush(stdout);
    MPI_Finalize();
    return rc;
}
