/*
 * fuzz.h - what the fuzz targets share: libFuzzer's entry points, and a
 * scratch file that each input is written to, since trident's readers
 * (config_load, data_open, ckpt_*) take paths, as they do in a real run.
 *
 * The same targets build two ways: with clang -fsanitize=fuzzer,address
 * (tests/fuzz/build.sh, for fuzzing), and with the normal toolchain against
 * replay.c's main (make check, which replays every corpus file).
 */
#ifndef TRI_TESTS_FUZZ_FUZZ_H
#define TRI_TESTS_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Writes size bytes to a private temporary file (created on first use,
 * rewritten on each call; slot 0 or 1) and returns its path. Aborts if the
 * write fails: that is the harness failing, not the code under test. */
const char *fuzz_scratch(int slot, const void *data, size_t size);

/* A stream that discards what is written to it: the readers' messages. */
FILE *fuzz_quiet(void);

/* A finding: prints why and aborts, which both libFuzzer and the replay
 * test report as a failure. */
void fuzz_fail(const char *why) __attribute__((noreturn));

#endif
