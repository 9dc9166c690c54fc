/*
 * cuda_emu/uniform.h - the emulation tests' random inputs: a fixed
 * xorshift sequence, so that every run draws the same numbers
 * (t_fused_emu.cpp, t_llama_emu.cpp, t_optim_emu.cpp). Included once per test program.
 */
#ifndef TRI_TESTS_CUDA_EMU_UNIFORM_H
#define TRI_TESTS_CUDA_EMU_UNIFORM_H

#include <cstdint>

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* The next number of the sequence, uniform in [lo, hi). */
static float uniform(float lo, float hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

#endif
