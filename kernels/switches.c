/*
 * switches.c - the measurement switches' table, their one parser, and the
 * start-up check; see switches.h.
 */
#include "switches.h"

#include <stdlib.h>
#include <string.h>

#include "fatal.h"

/* TRIDENT_ATTENTION's default and the value a build without cuDNN lacks */
#if TRI_HAVE_CUDNN
#define ATTENTION_DEFAULT "cudnn"
#define ATTENTION_LACKING NULL
#else
#define ATTENTION_DEFAULT "trident"
#define ATTENTION_LACKING "cudnn"
#endif

static const ops_switch_spec table[OPS_SWITCH_COUNT] = {
    [OPS_SWITCH_ATTENTION] = {
        "TRIDENT_ATTENTION", {"trident", "cudnn"}, ATTENTION_DEFAULT, 1,
        "a GPU's whole-sequence causal attention in bf16 and fp16: trident's kernel or "
        "cuDNN's fused SDPA",
        ATTENTION_LACKING, "this build has no cuDNN attention; configure --with-cuda "
        "--with-cudnn-frontend=DIR for it"},
    [OPS_SWITCH_ATTENTION_D] = {
        "TRIDENT_ATTENTION_D", {"out", "sweep"}, "out", 1,
        "the tensor-core attention's dQ kernel: D from the stored output, or by a first "
        "sweep over the keys", NULL, NULL},
    [OPS_SWITCH_ATTENTION_ASYNC] = {
        "TRIDENT_ATTENTION_ASYNC", {"0", "1"}, "1", 1,
        "the tensor-core attention's key and value tiles: cp.async double buffering (1) "
        "or plain loads (0)", NULL, NULL},
    [OPS_SWITCH_LT_EPILOGUE] = {
        "TRIDENT_LT_EPILOGUE", {"none", "bias", "all"}, "bias", 1,
        "what the linear layers fuse into their cuBLASLt GEMMs: nothing, the bias and its "
        "gradient, or GELU and its gradient too", NULL, NULL},
    [OPS_SWITCH_FUSED] = {
        "TRIDENT_FUSED", {"0", "1"}, "1", 1,
        "issue 34's fused GPU kernels (1) or the kernels they replace (0)", NULL, NULL},
    [OPS_SWITCH_CPU_BF16_GEMM] = {
        "TRIDENT_CPU_BF16_GEMM", {"auto", "library", "trident", "widened"}, "auto", 0,
        "the kernel of the CPU's bf16 GEMMs: chosen by the CPU, the GEMM library's, "
        "trident's own, or sgemm on widened copies", NULL, NULL},
};

const ops_switch_spec *ops_switch_spec_of(ops_switch s)
{
    if ((int)s < 0 || s >= OPS_SWITCH_COUNT)
        ops_fatalf(__FILE__, __LINE__, "no measurement switch number %d", (int)s);
    return &table[s];
}

/* "a, b or c": the values spec takes */
static void values_list(const ops_switch_spec *spec, char *out, size_t size)
{
    int n = 0;
    while (n < OPS_SWITCH_MAX_VALUES && spec->values[n])
        n++;
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), size - strlen(out), "%s%s",
                 i == 0 ? "" : i == n - 1 ? " or " : ", ", spec->values[i]);
}

const char *ops_switch_value_named(const ops_switch_spec *spec, const char *word)
{
    for (int i = 0; i < OPS_SWITCH_MAX_VALUES && spec->values[i]; i++)
        if (strcmp(word, spec->values[i]) == 0)
            return spec->values[i];
    return NULL;
}

int ops_switch_parse(const ops_switch_spec *spec, const char *value, const char **word,
                     char *err, size_t err_size)
{
    if (!value || !*value) {
        *word = spec->default_value;
        return 0;
    }
    const char *known = ops_switch_value_named(spec, value);
    int lacking = known && spec->lacking && strcmp(value, spec->lacking) == 0;
    if (known && !lacking) {
        *word = known;
        return 0;
    }
    char values[128];
    values_list(spec, values, sizeof values);
    if (lacking)
        snprintf(err, err_size, "%s=%s: %s (unset: %s)", spec->name, value, spec->lacking_why,
                 spec->default_value);
    else
        snprintf(err, err_size, "%s=%.40s: expected %s (unset: %s)", spec->name, value,
                 values, spec->default_value);
    return -1;
}

/* the words in force, NULL until read (once per process) */
static const char *in_force[OPS_SWITCH_COUNT];

/* Reads s from the environment into in_force: 0, or -1 with err. */
static int read_switch(ops_switch s, char *err, size_t err_size)
{
    if (in_force[s])
        return 0;
    return ops_switch_parse(&table[s], getenv(table[s].name), &in_force[s], err, err_size);
}

const char *ops_switch_word(ops_switch s)
{
    char err[320];
    ops_switch_spec_of(s); /* a bad s is fatal */
    if (read_switch(s, err, sizeof err) != 0)
        ops_fatalf(__FILE__, __LINE__, "%s", err);
    return in_force[s];
}

int ops_switch_is(ops_switch s, const char *word)
{
    const ops_switch_spec *spec = ops_switch_spec_of(s);
    if (!ops_switch_value_named(spec, word))
        ops_fatalf(__FILE__, __LINE__, "ops_switch_is: %s takes no value '%s'", spec->name,
                   word);
    return strcmp(ops_switch_word(s), word) == 0;
}

static int is_set(ops_switch s)
{
    const char *v = getenv(table[s].name);
    return v && *v;
}

int ops_switches_check(int on_gpu, FILE *notes, char *err, size_t err_size)
{
    for (int s = 0; s < OPS_SWITCH_COUNT; s++)
        if (read_switch((ops_switch)s, err, err_size) != 0)
            return 1;
    for (int s = 0; s < OPS_SWITCH_COUNT; s++)
        if (notes && is_set((ops_switch)s) && table[s].gpu != on_gpu)
            fprintf(notes, "trident: note: %s=%s has no effect on this run: it switches %s "
                    "kernels, and this run computes on the %s\n", table[s].name, in_force[s],
                    table[s].gpu ? "GPU" : "CPU", on_gpu ? "GPU" : "CPU");
    return 0;
}

const char *ops_switches_set(void)
{
    static char line[512];
    line[0] = '\0';
    for (int s = 0; s < OPS_SWITCH_COUNT; s++)
        if (is_set((ops_switch)s))
            snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s=%s",
                     line[0] ? " " : "", table[s].name, ops_switch_word((ops_switch)s));
    return line;
}
