/*
 * fuzz_safetensors.c - fuzz target for the safetensors reader
 * (src/interop/safetensors.c), which [checkpoint] init_from runs on files from
 * the internet: st_open on a file holding the input, then every tensor of
 * a float dtype read whole, converted to fp32.
 *
 * Besides "no crash, no sanitizer report", a file that opens must hold
 * what the specification promises: its tensors tile the data area (their
 * byte counts sum to the file's length less the header), each one's byte
 * count is its element count times its dtype's size, and each float
 * tensor reads back without error.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static int is_float(const char *dtype)
{
    return !strcmp(dtype, "F32") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_scratch(0, data, size);
    StFile f;
    char why[ST_WHY_MAX];
    if (st_open(&f, path, why, sizeof why))
        return 0;
    uint64_t bytes = 0;
    for (int i = 0; i < f.n; i++) {
        const StTensor *t = &f.t[i];
        if ((uint64_t)st_numel(t) * (uint64_t)t->elem_size != t->end - t->begin)
            fuzz_fail("an opened tensor's byte count is not its shape times its dtype's size");
        bytes += t->end - t->begin;
        if (!is_float(t->dtype))
            continue;
        int64_t rows, cols;
        st_matrix(t, &rows, &cols);
        float *out = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *out);
        if (!out)
            fuzz_fail("out of memory for a tensor smaller than its input");
        if (st_read_f32(&f, t, 0, rows, 0, cols, out, why, sizeof why))
            fuzz_fail("a float tensor of a file that opened does not read back");
        free(out);
    }
    if (bytes != size - f.data_start)
        fuzz_fail("the tensors of a file that opened do not tile its data area");
    st_close(&f);
    return 0;
}
