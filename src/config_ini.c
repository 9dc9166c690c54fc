/*
 * config_ini.c - the INI reader: a config's text, from a file or from
 * memory, through libinih onto a Config; see config_ini.h. What each key
 * means and accepts is the key table's (config_keys.c, config_value.c);
 * this file knows lines.
 *
 * libinih as Debian ships it (r55) is built without INI_HANDLER_LINENO and
 * with a 200-byte line buffer: a longer line is silently cut, its tail parsed
 * as a line of its own, and every later line number is off by one. So we
 * never let libinih read a file. We read the text ourselves and hand it one
 * physical line per reader call (ini_parse_stream), which gives every key
 * its true line number, stops the parse at the first error, makes
 * indentation harmless (no continuation lines) and passes values of any
 * length (paths up to CONFIG_PATH_MAX) around libinih's buffer; see
 * next_line.
 *
 * A key given twice in one file is an error, not "last one wins": in a file
 * that defines a run, a second `lr =` is a mistake, and which of the two the
 * run used would be invisible. Changing a file's value is what --set is for;
 * overrides apply after the file, in order, so the last --set wins.
 */
#include "config_ini.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_keys.h"
#include "config_message.h"
#include "config_value.h"
#include "file_check.h"

#define CONFIG_FILE_MAX (1 << 20)     /* anything bigger is not a config */

typedef struct {
    Config *cfg;
    const char *name;           /* for messages: the file's path, or the text's origin */
    const char *text;
    size_t len, pos;
    int lineno;                 /* physical line last handed to libinih */
    const char *long_value;     /* the real value of a too-long line */
    char *long_buf;
    int err_line;               /* first error: its line and message */
    char msg[CONFIG_MSG_MAX];
    int seen[];                 /* per key: the line that set it, 0: not yet */
} IniSource;

/* Checked here rather than in on_key so that an unknown section is reported
 * at its own line, even when it holds no keys. */
static int section_unknown(IniSource *src, const char *line, size_t n)
{
    const char *end = memchr(line, ']', n);
    char name[64];      /* a longer name is cut, and no known one */
    if (!end)
        return 0;       /* libinih reports the syntax error */
    size_t len = (size_t)(end - line - 1);
    snprintf(name, sizeof name, "%.*s", (int)len, line + 1);
    if (!config_section_unknown(name, src->msg, sizeof src->msg))
        return 0;
    src->err_line = src->lineno;
    return 1;
}

/* A line too long for libinih's buffer is nearly always "key = long path".
 * libinih gets "key = -" and on_key takes the real value from
 * src->long_value, cut out here as libinih would: trimmed, up to an inline
 * " ;" comment. A long comment becomes an empty one, a long header just its
 * "[name]"; anything else becomes a lone "[", which libinih reports as a
 * syntax error on this line. */
static char *long_line(IniSource *src, char *buf, size_t size, const char *line, size_t n)
{
    if (*line == ';' || *line == '#') {
        snprintf(buf, size, ";\n");
        return buf;
    }
    if (*line == '[') {
        const char *end = memchr(line, ']', n);
        if (end && (size_t)(end - line) + 3 <= size)
            snprintf(buf, size, "%.*s\n", (int)(end - line + 1), line);
        else
            snprintf(buf, size, "[\n");
        return buf;
    }
    size_t sep = 0;
    while (sep < n && line[sep] != '=' && line[sep] != ':' &&
           !(line[sep] == ';' && sep > 0 && isspace((unsigned char)line[sep - 1])))
        sep++;
    if (sep == n || line[sep] == ';') {
        snprintf(buf, size, "[\n");
        return buf;
    }
    size_t name_len = sep;
    while (name_len > 0 && isspace((unsigned char)line[name_len - 1]))
        name_len--;
    /* as libinih: the comment search starts right after the separator */
    const char *value = line + sep + 1, *end = line + n, *v;
    int was_space = 0;
    for (v = value; v < end && !(*v == ';' && was_space); v++)
        was_space = isspace((unsigned char)*v);
    while (value < v && isspace((unsigned char)*value))
        value++;
    while (v > value && isspace((unsigned char)v[-1]))
        v--;
    char *copy = realloc(src->long_buf, (size_t)(v - value) + 1);
    if (!copy) {
        snprintf(src->msg, sizeof src->msg, "out of memory");
        src->err_line = src->lineno;
        return NULL;
    }
    memcpy(copy, value, (size_t)(v - value));
    copy[v - value] = '\0';
    src->long_buf = copy;
    src->long_value = copy;
    /* no real key is 64 characters long, so a cut name stays unknown */
    snprintf(buf, size, "%.*s = -\n", (int)(name_len < 64 ? name_len : 64), line);
    return buf;
}

/* ini_reader: one physical line per call, without its indentation, so
 * libinih's line count is ours and no line continues the one before. */
static char *next_line(char *buf, int size, void *stream)
{
    IniSource *src = stream;
    src->long_value = NULL;
    if (src->err_line || src->pos >= src->len)
        return NULL;    /* stop at the first error */
    const char *line = src->text + src->pos;
    const char *nl = memchr(line, '\n', src->len - src->pos);
    size_t n = nl ? (size_t)(nl - line) : src->len - src->pos;
    src->pos += n + (nl != NULL);
    src->lineno++;
    if (src->lineno == 1 && n >= 3 && !memcmp(line, "\xEF\xBB\xBF", 3)) {
        line += 3;      /* UTF-8 byte order mark */
        n -= 3;
    }
    while (n > 0 && (*line == ' ' || *line == '\t')) {
        line++;
        n--;
    }
    if (n > 0 && *line == '[' && section_unknown(src, line, n))
        return NULL;
    if (n + 2 <= (size_t)size) {
        memcpy(buf, line, n);
        buf[n] = '\n';
        buf[n + 1] = '\0';
        return buf;
    }
    return long_line(src, buf, (size_t)size, line, n);
}

/* ini_handler. Always returns 1: errors are kept in src (the first one
 * wins) so libinih's own return value means syntax errors only. */
static int on_key(void *user, const char *section, const char *name, const char *value)
{
    IniSource *src = user;
    if (src->err_line)
        return 1;
    if (src->long_value)
        value = src->long_value;
    int k = config_key_index(section, name);
    if (k >= 0 && src->seen[k]) {
        char why[64];
        snprintf(why, sizeof why, "set twice (first on line %d)", src->seen[k]);
        config_describe(src->msg, sizeof src->msg, section, name, value, why);
    } else if (!config_set_key(src->cfg, section, name, value, src->msg, sizeof src->msg)) {
        src->seen[k] = src->lineno;
        return 1;
    }
    src->err_line = src->lineno;
    return 1;
}

static int report_syntax(const IniSource *src, int line, FILE *err)
{
    const char *p = src->text, *end = src->text + src->len;
    for (int i = 1; i < line && p < end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    char text[256], msg[CONFIG_MSG_MAX];
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    snprintf(text, sizeof text, "%.*s", (int)(n < 255 ? n : 255), p);
    config_describe_syntax(msg, sizeof msg, text);
    return config_report(err, "%s:%d: %s", src->name, line, msg);
}

static int parse_text(Config *cfg, const char *name, const char *text, size_t len, FILE *err)
{
    /* libinih reads lines as C strings: a NUL byte would silently end a
     * line early ("lr = 1<NUL>e-3" would run with lr = 1). A text config
     * has none, so one means a damaged or binary file. */
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        int line = 1;
        for (const char *p = text; p < nul; p++)
            line += *p == '\n';
        return config_report(err, "%s:%d: a NUL byte in the text: not a text file, or a damaged one",
                      name, line);
    }
    IniSource *src = calloc(1, sizeof *src + (size_t)config_key_count() * sizeof src->seen[0]);
    if (!src)
        return config_report(err, "%s: out of memory", name);
    src->cfg = cfg;
    src->name = name;
    src->text = text;
    src->len = len;
    int line = ini_parse_stream(next_line, src, on_key, src), rc = 0;
    if (line > 0 && (!src->err_line || line < src->err_line))
        rc = report_syntax(src, line, err);
    else if (src->err_line)
        rc = config_report(err, "%s:%d: %s", name, src->err_line, src->msg);
    else if (line < 0)
        rc = config_report(err, "%s: libinih failed (%d)", name, line);
    free(src->long_buf);
    free(src);
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
