/*
 * config_load.c - the run's configuration as a whole (config_load.h): defaults,
 * config_load (the INI text, then the --set overrides, then validation),
 * config_set, config_validate and config_to_ini. The parts are each a
 * file of their own, and this one puts them together:
 *
 *   config_keys.c     the key table: every key's type, default and range
 *   config_value.c    one value as text, both ways; setting a key by name
 *   config_message.c  how errors read, and the suggestions for a typo
 *   config_rules.c    the rules between keys
 *   config_ini.c      INI text applied to a Config (lines: ini_read.c)
 *
 * Calls among them run one way, from this file down to the key table, so
 * that each can be read, and changed, without the ones above it.
 */
#include "config_load.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "config_ini.h"
#include "config_keys.h"
#include "config_message.h"
#include "config_rules.h"
#include "config_value.h"
#include "layout.h"

#define BUILTIN_NAME "(built-in tiny.ini)"
#define METRICS_FILE_NAME "metrics.jsonl" /* [log] metrics = auto, in the dir */

/* Every key's default as the table gives it, auto left for config_load to
 * resolve once the file and the overrides have set arch. */
static void defaults_unresolved(Config *cfg)
{
    char why[CONFIG_MSG_MAX];
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < config_key_count(); i++) {
        if (config_value_parse(&config_keys[i], config_keys[i].def, cfg, why, sizeof why)) {
            /* a bad default is a bug in the key table, not bad input */
            fprintf(stderr, "trident: bug: default of [%s] %s: %s\n", config_keys[i].section,
                    config_keys[i].name, why);
            abort();
        }
    }
}

/* The keys left at auto, made what they mean for the run `run` (cfg
 * itself, or, for config_to_ini_changed, the run whose defaults cfg
 * holds):
 *   tie_embeddings: the architecture's answer (GPT-2 ties its head,
 *     Llama unties it);
 *   log.metrics: metrics.jsonl in [checkpoint] dir, so that a run's
 *     files are together (the checkpoint files' own names are
 *     step_NNNNNNNN.h5 and latest: nothing there reads another file);
 *     none without a dir;
 *   log.sample_tokens: SAMPLE_TOKENS_DEFAULT, or 0 where the layout cannot
 *     generate (layout_sample_fits; config_off says why), since a default
 *     must not make a valid config fail. An explicit value is checked.
 * Returns non-zero, why in msg, where the metrics path would not fit. */
static int resolve_auto(Config *cfg, const Config *run, char *msg, size_t n)
{
    if (cfg->model.tie_embeddings == TIE_AUTO)
        cfg->model.tie_embeddings = arch_of(&run->model)->tied_head;
    if (cfg->log.sample_tokens == SAMPLE_AUTO)
        cfg->log.sample_tokens = layout_sample_fits(run) ? SAMPLE_TOKENS_DEFAULT : 0;
    if (!strcmp(cfg->log.metrics, "auto")) {
        const char *dir = run->checkpoint.dir;
        int len = (int)strlen(dir);
        while (len > 1 && dir[len - 1] == '/')
            len--;
        /* as config_value_set_text: no trace of "auto" after the text,
         * so that two equal configs compare equal byte for byte */
        memset(cfg->log.metrics, 0, sizeof cfg->log.metrics);
        int need = dir[0] ? snprintf(cfg->log.metrics, sizeof cfg->log.metrics, "%.*s/%s", len,
                                     dir, METRICS_FILE_NAME)
                          : snprintf(cfg->log.metrics, sizeof cfg->log.metrics, "%s", "");
        if (need >= (int)sizeof cfg->log.metrics) {
            config_describe(msg, n, "log", "metrics", "auto", "[checkpoint] dir is too long to "
                            "hold " METRICS_FILE_NAME ": set [log] metrics to a shorter path");
            return 1;
        }
    }
    return 0;
}

void config_defaults(Config *cfg)
{
    char msg[CONFIG_MSG_MAX];
    defaults_unresolved(cfg);
    resolve_auto(cfg, cfg, msg, sizeof msg); /* no dir: nothing to overflow */
}

int config_set(Config *cfg, const char *section, const char *key, const char *value,
               const char *origin, FILE *err)
{
    char msg[CONFIG_MSG_MAX];
    if (!config_set_key(cfg, section, key, value, msg, sizeof msg))
        return 0;
    return config_report(err, "%s: %s", origin ? origin : "config", msg);
}

int config_validate(const Config *cfg, FILE *err)
{
    char msg[CONFIG_MSG_MAX], why[CONFIG_MSG_MAX], value[CONFIG_VALUE_MAX];
    const char *origin = cfg->source[0] ? cfg->source : "config";
    for (int i = 0; i < config_key_count(); i++) {
        const KeyDef *k = &config_keys[i];
        if (config_value_check(cfg, k, why, sizeof why)) {
            config_value_format(k, cfg, value, sizeof value);
            config_describe(msg, sizeof msg, k->section, k->name, value, why);
            return config_report(err, "%.*s: %s", CONFIG_PATH_MAX, origin, msg);
        }
    }
    if (config_rules_check(cfg, msg, sizeof msg))
        return config_report(err, "%.*s: %s", CONFIG_PATH_MAX, origin, msg);
    return 0;
}

/* The config as INI text: every key, or (defaults not NULL) those whose
 * value differs from the default's, each section's header before its
 * first key written. */
static int write_ini(const Config *cfg, const Config *defaults, char *buf, size_t size)
{
    ConfigText t = { buf, size, 0 };
    char value[CONFIG_VALUE_MAX], def[CONFIG_VALUE_MAX];
    const char *section = NULL;
    if (size)
        buf[0] = '\0';
    for (int i = 0; i < config_key_count(); i++) {
        const KeyDef *k = &config_keys[i];
        if ((k->flags & ARCH_KEY) && !arch_of(&cfg->model)->writes_arch_keys)
            continue;
        config_value_format(k, cfg, value, sizeof value);
        if ((k->flags & OMIT_UNSET) && !strcmp(value, k->def))
            continue;
        if (defaults) {
            config_value_format(k, defaults, def, sizeof def);
            if (!strcmp(value, def))
                continue;
        }
        if (!section || strcmp(section, k->section)) {
            config_put(&t, "%s[%s]\n", section ? "\n" : "", k->section);
            section = k->section;
        }
        config_put(&t, "%s = %s\n", k->name, value);
    }
    return (int)t.len;
}

int config_to_ini(const Config *cfg, char *buf, size_t size)
{
    return write_ini(cfg, NULL, buf, size);
}

int config_to_ini_changed(const Config *cfg, char *buf, size_t size)
{
    /* the defaults as cfg's run resolves them: tie_embeddings = auto is
     * its architecture's answer, metrics = auto the file in its
     * checkpoint dir, neither a change */
    static Config defaults;
    char msg[CONFIG_MSG_MAX];
    defaults_unresolved(&defaults);
    resolve_auto(&defaults, cfg, msg, sizeof msg); /* cfg's own resolution fitted */
    return write_ini(cfg, &defaults, buf, size);
}

int config_off(const Config *cfg, char *buf, size_t size)
{
    /* where the default sample cannot run, say why rather than only that
     * it is off */
    char sample[CONFIG_MSG_MAX];
    if (layout_sample_fits(cfg))
        snprintf(sample, sizeof sample, "a sample at the end ([log] sample_tokens)");
    else {
        char why[CONFIG_MSG_MAX / 2];
        layout_sample_why(cfg, why, sizeof why);
        snprintf(sample, sizeof sample, "a sample at the end ([log] sample_tokens; none by "
                 "default here: %s)", why);
    }
    const struct { int off; const char *what; } parts[] = {
        {cfg->eval.every == 0, "validation ([eval] every)"},
        /* with a dir, metrics are on unless set empty */
        {!cfg->log.metrics[0], cfg->checkpoint.dir[0] ? "a metrics file ([log] metrics)"
             : "a metrics file ([log] metrics, or [checkpoint] dir for one inside it)"},
        {!cfg->checkpoint.dir[0], "checkpoints ([checkpoint] dir)"},
        {cfg->log.sample_tokens == 0, sample},
    };
    ConfigText t = { buf, size, 0 };
    int n = 0;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i].off)
            config_put(&t, "%s%s", n++ ? ", " : "", parts[i].what);
    return n;
}

/* "--set KEY=VALUE: expected section.key=value", and where KEY names a key
 * of trident's or another trainer's ("lr=3e-4"), the --set it means. */
static int report_malformed(const char *text, FILE *err)
{
    char b[CONFIG_SHOW_MAX + 1], guess[CONFIG_MSG_MAX], *copy = strdup(text);
    char *eq = copy ? strchr(copy, '=') : NULL;
    int guessed = 0;
    if (eq && !memchr(copy, '.', (size_t)(eq - copy))) {
        *eq = '\0';
        guessed = config_describe_set_guess(guess, sizeof guess, config_trim(copy),
                                            config_trim(eq + 1));
    }
    free(copy);
    if (guessed)
        return config_report(err, "--set %s: expected section.key=value (%s)",
                             config_shown(text, b), guess);
    return config_report(err, "--set %s: expected section.key=value", config_shown(text, b));
}

/* "section.key=value", blanks around each part ignored. */
static int apply_override(Config *cfg, const char *text, FILE *err)
{
    size_t len = strlen(text);
    char *copy = malloc(len + 1);
    if (!copy)
        return config_report(err, "--set: out of memory");
    memcpy(copy, text, len + 1);
    char *eq = strchr(copy, '=');
    char *dot = eq ? memchr(copy, '.', (size_t)(eq - copy)) : NULL;
    int malformed = !eq || !dot, rc = 0;
    if (!malformed) {
        *eq = '\0';
        *dot = '\0';
        char *section = config_trim(copy), *key = config_trim(dot + 1);
        char *value = config_trim(eq + 1);
        malformed = !*section || !*key;
        if (!malformed)
            rc = config_set(cfg, section, key, value, "--set", err);
    }
    free(copy);
    if (malformed)
        return report_malformed(text, err);
    return rc;
}

int config_load(Config *cfg, const char *path, const char *const *overrides,
                int n_overrides, FILE *err)
{
    const char *name = path ? path : BUILTIN_NAME;
    int rc;
    defaults_unresolved(cfg);
    if (strlen(name) >= sizeof cfg->source)
        return config_report(err, "cannot read config %.64s...: path longer than %d characters", name,
                      CONFIG_PATH_MAX - 1);
    config_value_set_text(cfg->source, sizeof cfg->source, name);
    if (path)
        rc = config_parse_file(cfg, path, err);
    else
        rc = config_parse_text(cfg, config_builtin_tiny, name, err);
    if (rc)
        return rc;
    for (int i = 0; i < n_overrides; i++)
        if (apply_override(cfg, overrides[i], err))
            return 1;
    char msg[CONFIG_MSG_MAX];
    if (resolve_auto(cfg, cfg, msg, sizeof msg))
        return config_report(err, "%.*s: %s", CONFIG_PATH_MAX, cfg->source, msg);
    return config_validate(cfg, err);
}
