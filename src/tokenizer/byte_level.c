/*
 * byte_level.c - GPT-2's byte-level spelling; see byte_level.h.
 */
#include "byte_level.h"

/* The highest code point of the spelling is U+0143 (68 bytes are not
 * printable: 256 + 67). */
enum { BYTE_LEVEL_CHARS = 324 };

static int char_of_byte[256];
static int byte_of_char[BYTE_LEVEL_CHARS];

/* Fills both directions of the table on first use. */
static void make_tables(void)
{
    static int ready;
    if (ready)
        return;
    int n = 0;
    for (int i = 0; i < BYTE_LEVEL_CHARS; i++)
        byte_of_char[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        char_of_byte[b] = printable ? b : 256 + n++;
        byte_of_char[char_of_byte[b]] = b;
    }
    ready = 1;
}

void byte_level_spell(const char *bytes, size_t len, char *out)
{
    make_tables();
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int cp = char_of_byte[(unsigned char)bytes[i]];
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else {
            out[o++] = (char)(0xC0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    out[o] = '\0';
}

long byte_level_decode(const char *s, size_t n, unsigned char *out)
{
    make_tables();
    long o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        int cp;
        if (c < 0x80) {
            cp = c, i += 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < n) {
            cp = (c & 0x1F) << 6 | ((unsigned char)s[i + 1] & 0x3F), i += 2;
        } else {
            return -1;
        }
        if (cp >= BYTE_LEVEL_CHARS || byte_of_char[cp] < 0)
            return -1;
        out[o++] = (unsigned char)byte_of_char[cp];
    }
    return o;
}
