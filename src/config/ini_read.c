/*
 * ini_read.c - the libinih adapter: INI text, read line by line, each
 * section header and key handed to a visitor (ini_read.h) with its true
 * line number. It knows lines and nothing of config keys; config_ini.c
 * is the visitor that applies them to a Config. Keeping the reader below
 * the key table, rather than calling into it, is what keeps the config
 * files' call graph free of cycles: the loader calls the reader and the
 * table, and the reader calls only libinih and its visitor.
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
 */
#include "ini_read.h"

#include <ctype.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *text;
    size_t len, pos;
    int lineno;                 /* physical line last handed to libinih */
    const char *long_value;     /* the real value of a too-long line */
    char *long_buf;
    IniVisit visit;
    void *user;
    int err_line;               /* first error: its line, message in msg */
    char *msg;
} IniSource;

/* Visited here rather than in on_key so that an unknown section is reported
 * at its own line, even when it holds no keys. */
static int section_refused(IniSource *src, const char *line, size_t n)
{
    const char *end = memchr(line, ']', n);
    char name[64];      /* a longer name is cut, and no known one */
    if (!end)
        return 0;       /* libinih reports the syntax error */
    size_t len = (size_t)(end - line - 1);
    snprintf(name, sizeof name, "%.*s", (int)len, line + 1);
    if (!src->visit(src->user, name, NULL, NULL, src->lineno, src->msg, INI_MSG_MAX))
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
        snprintf(src->msg, INI_MSG_MAX, "out of memory");
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
    if (n > 0 && *line == '[' && section_refused(src, line, n))
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
    if (src->visit(src->user, section, name, value, src->lineno, src->msg, INI_MSG_MAX))
        src->err_line = src->lineno;
    return 1;
}

/* The text of line number `line`, at most 255 bytes, to msg. */
static void line_text(const IniSource *src, int line, char *msg)
{
    const char *p = src->text, *end = src->text + src->len;
    for (int i = 1; i < line && p < end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    snprintf(msg, INI_MSG_MAX, "%.*s", (int)(n < 255 ? n : 255), p);
}

IniStatus ini_read_text(const char *text, size_t len, IniVisit visit, void *user, IniError *e)
{
    e->status = INI_OK;
    e->line = 0;
    e->msg[0] = '\0';
    /* libinih reads lines as C strings: a NUL byte would silently end a
     * line early ("lr = 1<NUL>e-3" would run with lr = 1). A text config
     * has none, so one means a damaged or binary file. */
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        e->line = 1;
        for (const char *p = text; p < nul; p++)
            e->line += *p == '\n';
        snprintf(e->msg, sizeof e->msg,
                 "a NUL byte in the text: not a text file, or a damaged one");
        return e->status = INI_ERR_LINE;
    }
    IniSource src = { .text = text, .len = len, .visit = visit, .user = user, .msg = e->msg };
    int line = ini_parse_stream(next_line, &src, on_key, &src);
    if (line > 0 && (!src.err_line || line < src.err_line)) {
        e->status = INI_ERR_SYNTAX;
        e->line = line;
        line_text(&src, line, e->msg);
    } else if (src.err_line) {
        e->status = INI_ERR_LINE;
        e->line = src.err_line;
    } else if (line < 0) {
        e->status = INI_ERR_LIBINIH;
        e->line = line;
    }
    free(src.long_buf);
    return e->status;
}
