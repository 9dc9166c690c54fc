/*
 * t_switch_parse.c - the measurement switches' table and parser
 * (kernels/switches.h): every switch's default is one of its values,
 * unset or empty is the default, each value parses as itself, anything
 * else is refused naming the variable, the value and the values; the
 * start-up check stops on a bad value, notes a switch set for the other
 * device, and fixes the value for the whole process. tests/t_switches.sh
 * runs the same through the real binary.
 */
#include "kernels/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tap.h"

/* Whether spec's default is one of its values, its name a TRIDENT_ one
 * and its line of what it does there. */
static int well_formed(const ops_switch_spec *spec)
{
    int has_default = 0;
    for (int i = 0; i < OPS_SWITCH_MAX_VALUES && spec->values[i]; i++)
        has_default |= strcmp(spec->values[i], spec->default_value) == 0;
    return has_default && strncmp(spec->name, "TRIDENT_", 8) == 0 && spec->what &&
           spec->what[0];
}

static void test_table(void)
{
    int ok = 1;
    for (int s = 0; s < OPS_SWITCH_COUNT; s++) {
        const ops_switch_spec *spec = ops_switch_spec_of((ops_switch)s);
        if (!well_formed(spec)) {
            tap_diag("%s: the default is not one of its values, or no line of what it does",
                     spec->name);
            ok = 0;
        }
        for (int t = 0; t < s; t++)
            ok &= strcmp(spec->name, ops_switch_spec_of((ops_switch)t)->name) != 0;
    }
    tap_ok(ok, "the table: %d switches, distinct names, each default one of its values",
           OPS_SWITCH_COUNT);
}

/* Whether spec parses value as want (NULL: refuses it with a message
 * holding want_err). */
static int parses(const ops_switch_spec *spec, const char *value, const char *want,
                  const char *want_err)
{
    const char *word = NULL;
    char err[320] = "";
    int rc = ops_switch_parse(spec, value, &word, err, sizeof err);
    int ok = want ? rc == 0 && word && strcmp(word, want) == 0
                  : rc != 0 && strstr(err, want_err) != NULL;
    if (!ok)
        tap_diag("%s=%s: rc %d, word %s, message \"%s\"", spec->name, value ? value : "(unset)",
                 rc, word ? word : "(none)", err);
    return ok;
}

static void test_parse(void)
{
    int ok = 1;
    for (int s = 0; s < OPS_SWITCH_COUNT; s++) {
        const ops_switch_spec *spec = ops_switch_spec_of((ops_switch)s);
        ok &= parses(spec, NULL, spec->default_value, NULL);
        ok &= parses(spec, "", spec->default_value, NULL);
        for (int i = 0; i < OPS_SWITCH_MAX_VALUES && spec->values[i]; i++)
            if (!spec->lacking || strcmp(spec->values[i], spec->lacking) != 0)
                ok &= parses(spec, spec->values[i], spec->values[i], NULL);
    }
    tap_ok(ok, "unset or empty is the default, every value parses as itself");

    const ops_switch_spec *fused = ops_switch_spec_of(OPS_SWITCH_FUSED);
    const ops_switch_spec *lt = ops_switch_spec_of(OPS_SWITCH_LT_EPILOGUE);
    int bad = parses(fused, "2", NULL, "TRIDENT_FUSED=2: expected 0 or 1 (unset: 1)") &&
              parses(fused, "01", NULL, "TRIDENT_FUSED=01") &&
              parses(lt, "ALL", NULL, "TRIDENT_LT_EPILOGUE=ALL: expected none, bias or all") &&
              parses(ops_switch_spec_of(OPS_SWITCH_CPU_BF16_GEMM), "fastest", NULL,
                     "TRIDENT_CPU_BF16_GEMM=fastest: expected auto, library, trident or "
                     "widened (unset: auto)");
    tap_ok(bad, "another value is refused, naming the variable, the value and the values");

    /* TRIDENT_ATTENTION as a build with cuDNN and one without see it */
    ops_switch_spec with = *ops_switch_spec_of(OPS_SWITCH_ATTENTION), without = with;
    with.lacking = NULL;
    without.lacking = "cudnn";
    without.lacking_why = "no cuDNN here";
    int lacking = parses(&with, "cudnn", "cudnn", NULL) &&
                  parses(&without, "cudnn", NULL, "TRIDENT_ATTENTION=cudnn: no cuDNN here") &&
                  parses(&without, "trident", "trident", NULL) &&
                  parses(&without, "flash", NULL,
                         "TRIDENT_ATTENTION=flash: expected trident or cudnn");
    tap_ok(lacking && (TRI_HAVE_CUDNN ? !ops_switch_spec_of(OPS_SWITCH_ATTENTION)->lacking
                                      : !!ops_switch_spec_of(OPS_SWITCH_ATTENTION)->lacking),
           "a value this build lacks (cudnn without cuDNN) is refused with the reason");
}

/* The file's contents (at most size - 1 bytes). */
static void read_back(FILE *f, char *buf, size_t size)
{
    rewind(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
}

/* ops_switches_check through the environment: TRIDENT_ATTENTION_D, which
 * nothing in this program reads otherwise. */
static void test_check(void)
{
    char err[400] = "", notes[1024] = "";
    FILE *f = tmpfile();
    setenv("TRIDENT_ATTENTION_D", "sideways", 1);
    int refused = ops_switches_check(0, f, err, sizeof err) != 0 &&
                  strstr(err, "TRIDENT_ATTENTION_D=sideways: expected out or sweep");
    tap_ok(refused, "the start-up check refuses a bad value on a CPU run: %s", err);

    setenv("TRIDENT_ATTENTION_D", "sweep", 1);
    int passed = ops_switches_check(0, f, err, sizeof err) == 0;
    read_back(f, notes, sizeof notes);
    int noted = strstr(notes, "TRIDENT_ATTENTION_D=sweep has no effect on this run: it "
                              "switches GPU kernels, and this run computes on the CPU") != NULL;
    setenv("TRIDENT_ATTENTION_D", "out", 1);
    int once = ops_switch_is(OPS_SWITCH_ATTENTION_D, "sweep") &&
               strstr(ops_switches_set(), "TRIDENT_ATTENTION_D=sweep") != NULL;
    fclose(f);
    f = tmpfile();
    int quiet_on_gpu = ops_switches_check(1, f, err, sizeof err) == 0;
    read_back(f, notes, sizeof notes);
    quiet_on_gpu &= strstr(notes, "TRIDENT_ATTENTION_D") == NULL;
    fclose(f);
    unsetenv("TRIDENT_ATTENTION_D");
    tap_ok(passed && noted && once && quiet_on_gpu,
           "a good value passes, a GPU switch set on a CPU run is noted (on a GPU run not), "
           "and the value read at start-up holds for the process");

    const ops_switch_spec *fused = ops_switch_spec_of(OPS_SWITCH_FUSED);
    tap_ok(ops_switch_value_named(fused, "1") == fused->values[1] &&
               !ops_switch_value_named(fused, "yes"),
           "a value is named by the table's own string, a word the switch does not take by "
           "none (ops_switch_is refuses it)");
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(7);
    test_table();
    test_parse();
    test_check();
    return tap_done();
}
