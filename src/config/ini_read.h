/*
 * ini_read.h - INI text read through libinih one physical line at a time
 * (ini_read.c), each key handed to a visitor with its true line number.
 * It knows lines, not config keys: what a section or key means is the
 * visitor's (config_ini.c). Not collective.
 */
#ifndef TRI_SRC_INI_READ_H
#define TRI_SRC_INI_READ_H

#include <stddef.h>

#define INI_MSG_MAX 1024   /* one error line */

/* Called for each [section] header (key and value NULL: section is the
 * name between the brackets, cut to 63 characters) and for each
 * "key = value" under one (section "" above the first header). Returns 0
 * to go on; else writes why to msg (n bytes) and returns non-zero, which
 * stops the read at this line. */
typedef int (*IniVisit)(void *user, const char *section, const char *key, const char *value,
                        int line, char *msg, size_t n);

typedef enum {
    INI_OK = 0,
    INI_ERR_LINE,      /* line: the visitor's message, or the reader's own */
    INI_ERR_SYNTAX,    /* line is not INI; msg holds its text (255 bytes at most) */
    INI_ERR_LIBINIH    /* libinih itself failed; line holds its code */
} IniStatus;

typedef struct {
    IniStatus status;
    int line;
    char msg[INI_MSG_MAX];
} IniError;

/* Reads text (len bytes, with no NUL byte before len: one is reported as
 * an INI_ERR_LINE) and visits every section and key in order, stopping at
 * the first error, which goes to e. Returns e->status. */
IniStatus ini_read_text(const char *text, size_t len, IniVisit visit, void *user, IniError *e);

#endif
