/*
 * byte_level.h - GPT-2's byte-level spelling, in which tokenizer.json's
 * vocabulary and merges are written: each byte is one printable
 * character, the printable Latin-1 bytes themselves and the others
 * U+0100 onwards in byte order. Reading a tokenizer file decodes it
 * (tokenizer_load.c); exporting one spells it (tokenizer_hf.c).
 */
#ifndef TRI_SRC_BYTE_LEVEL_H
#define TRI_SRC_BYTE_LEVEL_H

#include <stddef.h>

/* Writes bytes[0..len) in the byte-level spelling, as UTF-8 (every
 * character is below U+0800: two bytes at most), to out, which holds
 * 2 len + 1 bytes; NUL-terminated. Not collective. */
void byte_level_spell(const char *bytes, size_t len, char *out);

/* Decodes a byte-level string (UTF-8 of those characters) into bytes.
 * Returns the length, or -1 when a character is not one of the spelling's.
 * Not collective. */
long byte_level_decode(const char *s, size_t n, unsigned char *out);

#endif
