/*
 * start_up_watchdog.c - the watchdog armed before MPI_Init; see
 * start_up_watchdog.h.
 */
#include "start_up_watchdog.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "config_load.h"
#include "watchdog.h"

/* The last valid `--set fault.timeout=S`, else the key's default. */
static double command_line_timeout(int argc, char **argv)
{
    static Config cfg; /* large: not on the stack */
    config_defaults(&cfg);
    /* the command line as `train` reads it, silently: rank 0 reports its
     * errors once MPI runs, and config_load its values' */
    FILE *quiet = fopen("/dev/null", "w");
    CliArgs a;
    if (!quiet)
        return cfg.fault.timeout;
    /* every --set is applied as config_load applies it, so that the
     * start-up reads fault.timeout exactly as the run will; only the
     * timeout is kept */
    if (cli_parse(&a, argc, argv, quiet) == 0)
        for (int i = 0; i < a.n_sets; i++) {
            double before = cfg.fault.timeout;
            if (config_apply_override(&cfg, a.sets[i], quiet))
                cfg.fault.timeout = before; /* an invalid value: config_load refuses it */
        }
    fclose(quiet);
    return cfg.fault.timeout;
}

/* The rank the launcher's environment names, -1 when none does. */
static int rank_from_environment(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                        "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

void start_up_watchdog_arm(int argc, char **argv)
{
    static char host[256] = "?";
    gethostname(host, sizeof host - 1);
    watchdog_set_rank(rank_from_environment(), host);
    if (watchdog_set_timeout(command_line_timeout(argc, argv)))
        fputs("trident: warning: cannot start the watchdog thread before MPI_Init: a rank stopped"
              " while the job starts is not detected until the config is read\n", stderr);
}
