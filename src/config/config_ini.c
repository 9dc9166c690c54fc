/*
 * config_ini.c - a config's INI text, from a file or from memory, applied
 * to a Config; see config_ini.h. The lines are ini_read.c's (libinih, true
 * line numbers); this file is the visitor it hands each section and key
 * to, which sets the key through the key table (config_value.c) and
 * turns the first error into the one line "trident: ORIGIN:LINE: ...".
 * config_load (config_load.c) calls this file, and this file calls the key
 * table and the reader, never the loader, so the config files' calls run
 * one way.
 *
 * A key given twice in one file is an error, not "last one wins": in a file
 * that defines a run, a second `lr =` is a mistake, and which of the two the
 * run used would be invisible. Changing a file's value is what --set is for;
 * overrides apply after the file, in order, so the last --set wins.
 */
#include "config_ini.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_keys.h"
#include "config_message.h"
#include "config_value.h"
#include "file_check.h"
#include "ini_read.h"

#define CONFIG_FILE_MAX (1 << 20)     /* anything bigger is not a config */

typedef struct {
    Config *cfg;
    int seen[];                 /* per key: the line that set it, 0: not yet */
} IniTarget;

/* IniVisit: an unknown section is refused at its header; a key is set
 * through the key table, once. */
static int apply(void *user, const char *section, const char *key, const char *value, int line,
                 char *msg, size_t n)
{
    IniTarget *t = user;
    if (!key)
        return config_section_unknown(section, msg, n);
    int k = config_key_index(section, key);
    if (k >= 0 && t->seen[k]) {
        char why[64];
        snprintf(why, sizeof why, "set twice (first on line %d)", t->seen[k]);
        config_describe(msg, n, section, key, value, why);
        return 1;
    }
    if (config_set_key(t->cfg, section, key, value, msg, n))
        return 1;
    t->seen[k] = line;
    return 0;
}

static int parse_text(Config *cfg, const char *name, const char *text, size_t len, FILE *err)
{
    IniTarget *t = calloc(1, sizeof *t + (size_t)config_key_count() * sizeof t->seen[0]);
    if (!t)
        return config_report(err, "%s: out of memory", name);
    t->cfg = cfg;
    IniError e;
    char msg[CONFIG_MSG_MAX];
    int rc = 0;
    switch (ini_read_text(text, len, apply, t, &e)) {
    case INI_OK:
        break;
    case INI_ERR_SYNTAX:
        config_describe_syntax(msg, sizeof msg, e.msg);
        rc = config_report(err, "%s:%d: %s", name, e.line, msg);
        break;
    case INI_ERR_LINE:
        rc = config_report(err, "%s:%d: %s", name, e.line, e.msg);
        break;
    case INI_ERR_LIBINIH:
        rc = config_report(err, "%s: libinih failed (%d)", name, e.line);
        break;
    }
    free(t);
    return rc;
}

static char *read_text(const char *path, size_t *len, FILE *err)
{
    char why[128];
    int fd = file_open_regular(path, O_RDONLY, why, sizeof why); /* a FIFO would block */
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        if (fd >= 0) {
            snprintf(why, sizeof why, "%s", strerror(errno));
            close(fd);
        }
        config_report(err, "cannot read config %s: %s", path, why);
        return NULL;
    }
    char *text = NULL;
    size_t cap = 0, n = 0;
    while (!feof(f) && !ferror(f)) {
        if (n + 1 >= cap) {
            char *bigger = cap < CONFIG_FILE_MAX ? realloc(text, cap ? 2 * cap : 4096) : NULL;
            if (!bigger) {
                config_report(err, "cannot read config %s: %s", path,
                       cap < CONFIG_FILE_MAX ? "out of memory" : "larger than 1 MiB");
                free(text);
                fclose(f);
                return NULL;
            }
            text = bigger;
            cap = cap ? 2 * cap : 4096;
        }
        n += fread(text + n, 1, cap - n - 1, f);
    }
    int failed = ferror(f), e = errno;
    fclose(f);
    if (failed) {
        config_report(err, "cannot read config %s: %s", path, strerror(e));
        free(text);
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}

int config_parse_text(Config *cfg, const char *text, const char *origin, FILE *err)
{
    return parse_text(cfg, origin, text, strlen(text), err);
}

int config_parse_file(Config *cfg, const char *path, FILE *err)
{
    size_t len;
    char *text = read_text(path, &len, err);
    if (!text)
        return 1;
    int rc = parse_text(cfg, path, text, len, err);
    free(text);
    return rc;
}
