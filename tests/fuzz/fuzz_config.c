/*
 * fuzz_config.c - fuzz target for the INI config reader (src/config/config_ini.c, src/config/config_load.c):
 * config_load over a file holding the input, with --set overrides.
 *
 * Input: INI text. A line "%%set" ends it; each following line is one
 * --set override (at most 16), so the override parser is fuzzed too.
 * A config that loads is also checked against a few world sizes by
 * layout_check, as train does next. Besides "no crash, no sanitizer
 * report", one property is checked: a config that loads writes itself
 * out (config_to_ini) as text that loads back to the very same Config, as
 * a checkpoint's stored config must.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_load.h"
#include "fuzz.h"
#include "grid.h"

#define MAX_SETS 16

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* Splits the input at the "%%set" line: sets[i] point into the copy. */
static size_t split(char *text, size_t size, char **sets, int *n_sets)
{
    *n_sets = 0;
    char *mark = NULL;
    for (char *p = text; p && p < text + size; p = memchr(p, '\n', (size_t)(text + size - p))) {
        if (*p == '\n')
            p++;
        if ((size_t)(text + size - p) >= 5 && !memcmp(p, "%%set", 5)
            && (p + 5 == text + size || p[5] == '\n')) {
            mark = p;
            break;
        }
    }
    if (!mark)
        return size;
    char *line = mark + 5 + (mark + 5 < text + size);
    while (line < text + size && *n_sets < MAX_SETS) {
        char *nl = memchr(line, '\n', (size_t)(text + size - line));
        if (nl)
            *nl = '\0';
        sets[(*n_sets)++] = line;
        if (!nl)
            break;
        line = nl + 1;
    }
    return (size_t)(mark - text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Config cfg, again;
    /* +1: a NUL after the last override; overrides are C strings, so an
     * embedded NUL simply ends one early, as it would on a command line */
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *sets[MAX_SETS];
    int n_sets;
    size_t len = split(text, size, sets, &n_sets);
    const char *path = fuzz_scratch(0, text, len);
    int rc = config_load(&cfg, path, (const char *const *)sets, n_sets, fuzz_quiet());
    if (rc == 0) {
        static const int worlds[] = {1, 2, 8, 4096};
        for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; i++)
            layout_check(&cfg, worlds[i], fuzz_quiet());
        static char ini[1 << 16];
        int n = config_to_ini(&cfg, ini, sizeof ini);
        if (n < 0 || (size_t)n >= sizeof ini)
            fuzz_fail("config_to_ini: text does not fit 64 KiB");
        const char *back = fuzz_scratch(1, ini, (size_t)n);
        if (config_load(&again, back, NULL, 0, stderr) != 0)
            fuzz_fail("a loaded config, written by config_to_ini, does not load again");
        memcpy(again.source, cfg.source, sizeof cfg.source);
        if (memcmp(&cfg, &again, sizeof cfg) != 0)
            fuzz_fail("config_to_ini -> config_load does not give the same Config");
    }
    free(text);
    return 0;
}
