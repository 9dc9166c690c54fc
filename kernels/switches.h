/*
 * switches.h - the measurement switches: environment variables that choose
 * between a kernel and the one it replaced, so that a run can measure old
 * against new and fall back if new is wrong (doc/gpu.md, "The measurement
 * switches", has the table).
 *
 * One table holds every switch (its name, its values, its default, the
 * device whose kernels it switches, one line of what it does) and one
 * parser reads them all. ops_switches_check reads and checks every switch
 * at start-up, on every device, so a misspelt value stops a CPU run as it
 * would a GPU's, instead of being ignored because no kernel asked for it.
 * A switch is read once per process: the value a run checked at start-up
 * is the one its kernels see. Unset or empty: the default.
 *
 * ops.h includes it. Not collective.
 */
#ifndef TRI_KERNELS_SWITCHES_H
#define TRI_KERNELS_SWITCHES_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    OPS_SWITCH_ATTENTION,       /* TRIDENT_ATTENTION: trident | cudnn */
    OPS_SWITCH_ATTENTION_D,     /* TRIDENT_ATTENTION_D: out | sweep */
    OPS_SWITCH_ATTENTION_ASYNC, /* TRIDENT_ATTENTION_ASYNC: 0 | 1 */
    OPS_SWITCH_LT_EPILOGUE,     /* TRIDENT_LT_EPILOGUE: none | bias | all */
    OPS_SWITCH_FUSED,           /* TRIDENT_FUSED: 0 | 1 */
    OPS_SWITCH_CPU_BF16_GEMM,   /* TRIDENT_CPU_BF16_GEMM: auto | library | trident | widened */
    OPS_SWITCH_COUNT
} ops_switch;

#define OPS_SWITCH_MAX_VALUES 4

typedef struct {
    const char *name;                          /* the environment variable */
    const char *values[OPS_SWITCH_MAX_VALUES]; /* its words; unused slots NULL */
    const char *default_value;                 /* unset or empty means this */
    int gpu;                                   /* 1: switches GPU kernels; 0: the CPU's */
    const char *what;                          /* one line: what it switches */
    const char *lacking;     /* a value this build cannot run (NULL: none) */
    const char *lacking_why; /* and why, with what would build it */
} ops_switch_spec;

/* The table's row for s. */
const ops_switch_spec *ops_switch_spec_of(ops_switch s);

/* The table's own string among spec's values that equals word, or NULL
 * when spec takes no such value. Pure. */
const char *ops_switch_value_named(const ops_switch_spec *spec, const char *word);
/* Parses value (NULL or empty: the default) against spec: 0 and *word
 * set to the table's own string, or -1 with err naming the variable, the
 * value and the values it takes (or why this build lacks it). Pure. */
int ops_switch_parse(const ops_switch_spec *spec, const char *value, const char **word,
                     char *err, size_t err_size);

/* The word in force for s: read from the environment on the first call
 * (or by ops_switches_check), then the same for the whole process. A
 * value ops_switch_parse refuses is fatal (ops_fatal), naming it. */
const char *ops_switch_word(ops_switch s);
/* Whether s's word in force is word, which must be one of its values
 * (ops_switch_value_named; another is a programming error: fatal). */
int ops_switch_is(ops_switch s, const char *word);

/* Reads and checks every switch, for a run whose kernels are a GPU's
 * (on_gpu) or the CPU's: 0, or non-zero with err naming the first bad
 * variable, its value and the values it takes. Writes to notes (NULL:
 * nowhere) one line per switch that is set but switches the other
 * device's kernels, saying that it has no effect on this run. Call once
 * at start-up, before the device is set up. */
int ops_switches_check(int on_gpu, FILE *notes, char *err, size_t err_size);
/* "NAME=value NAME=value" of the switches set in the environment (in
 * force, read as ops_switch_word), or "" when none is; in a static
 * buffer. */
const char *ops_switches_set(void);

#ifdef __cplusplus
}
#endif
#endif
