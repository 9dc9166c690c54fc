/*
 * cuda_emu/fibers.h - a CUDA block's threads as fibers on one host thread,
 * for the tests that run kernels under cuda_emu/cuda_common.h
 * (t_attention_emu.cpp, t_fused_emu.cpp). Included once per test program: it defines the
 * globals cuda_common.h declares.
 *
 * Each CUDA thread of a block of EMU_THREADS is a fiber (its own stack and
 * registers, ucontext.h); one runs until it waits at a barrier, then the
 * next takes its turn. The turn order is fixed, so a run is reproducible,
 * and it is the test's choice (emu_order): EMU_FORWARD hands the turn from
 * thread t to t + 1, EMU_BACKWARD from t to t - 1 (and runs the blocks
 * last to first). Between two barriers
 * the fibers run one after another, so a race in which thread t writes
 * what a lower thread has yet to read is hidden by the forward order and
 * caught by the backward one (the lower thread then reads the write);
 * a test runs a kernel in both.
 */
#ifndef TRI_TESTS_CUDA_EMU_FIBERS_H
#define TRI_TESTS_CUDA_EMU_FIBERS_H

#include "cuda_common.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <ucontext.h>

EmuDim threadIdx, blockIdx;
EmuDim blockDim = { 128 };
EmuBarrier *emu_block_barrier;
EmuBarrier *emu_warp_barrier[4];
float emu_warp_slot[4][32];
EmuMma emu_mma[4];
EmuLdm emu_ldm[4];
EmuAsync emu_async[128];

enum { EMU_THREADS = 128, EMU_STACK = 512 * 1024 };
enum EmuOrder { EMU_FORWARD, EMU_BACKWARD };
static EmuOrder emu_order = EMU_FORWARD;

static ucontext_t emu_launcher, emu_fiber[EMU_THREADS];
static char *emu_stack[EMU_THREADS];
static bool emu_done[EMU_THREADS];
static const std::function<void()> *emu_kernel;
/* turns taken since a barrier last opened or a fiber last ended: once
 * every fiber has waited twice over with neither, no barrier can open */
static long emu_idle;

/* The fiber after t in the turn order. */
static int emu_after(int t)
{
    return emu_order == EMU_FORWARD ? (t + 1) % EMU_THREADS
                                    : (t + EMU_THREADS - 1) % EMU_THREADS;
}

/* Lets the next fiber that has not ended run; this one goes on when its
 * turn comes round again. */
static void emu_yield()
{
    int me = (int)threadIdx.x, next = me;
    do
        next = emu_after(next);
    while (emu_done[next] && next != me);
    if (++emu_idle > 2 * EMU_THREADS) {
        fprintf(stderr, "cuda_emu: block %u: every thread waits at a barrier that cannot "
                        "open (a barrier some threads skip)\n", blockIdx.x);
        exit(1);
    }
    if (next == me)
        return;
    threadIdx.x = (unsigned)next;
    swapcontext(&emu_fiber[me], &emu_fiber[next]);
    threadIdx.x = (unsigned)me;
}

void EmuBarrier::arrive_and_wait()
{
    unsigned mine = phase;
    if (++arrived == expected) { /* the last one opens it and goes on */
        arrived = 0;
        phase++;
        emu_idle = 0;
        return;
    }
    while (phase == mine)
        emu_yield();
}

/* A fiber's life: the kernel, then the block's barrier once more (so a
 * thread that returns early still counts at the kernel's __syncthreads),
 * then the next fiber's turn; the last one back returns to the launcher. */
static void emu_fiber_main()
{
    (*emu_kernel)();
    emu_block_barrier->arrive_and_wait();
    int me = (int)threadIdx.x;
    emu_done[me] = true;
    emu_idle = 0;
    for (int next = emu_after(me); next != me; next = emu_after(next))
        if (!emu_done[next]) {
            threadIdx.x = (unsigned)next;
            setcontext(&emu_fiber[next]);
        }
    setcontext(&emu_launcher);
}

/* fiber t at the start of emu_fiber_main, on its own stack */
static void emu_fiber_new(int t)
{
    if (!emu_stack[t] && !(emu_stack[t] = (char *)malloc(EMU_STACK))) {
        fprintf(stderr, "cuda_emu: out of memory for the fibers' stacks\n");
        exit(1);
    }
    getcontext(&emu_fiber[t]);
    emu_fiber[t].uc_stack.ss_sp = emu_stack[t];
    emu_fiber[t].uc_stack.ss_size = EMU_STACK;
    emu_fiber[t].uc_link = &emu_launcher;
    makecontext(&emu_fiber[t], emu_fiber_main, 0);
    emu_done[t] = false;
}

/* Whether thread t ended its block with no cp.async copy it never waited
 * for (an empty group is no copy); says which block and thread if not. */
static bool emu_copies_waited(int t)
{
    size_t left = emu_async[t].open.size();
    for (const std::vector<EmuCopy> &g : emu_async[t].groups)
        left += g.size();
    if (left)
        fprintf(stderr, "cuda_emu: block %u, thread %d: %zu cp.async copies never "
                        "waited for\n", blockIdx.x, t, left);
    return left == 0;
}

/* grid blocks of EMU_THREADS threads, one block after another (the last
 * block first in the backward order, so a block that writes what a lower
 * block reads also goes first), each starting with the first thread of
 * the turn order; kernel() is the launch's body. A thread that ends its
 * block with a cp.async copy it never waited for stops the test. */
static void launch(unsigned grid, const std::function<void()> &kernel)
{
    EmuBarrier block{ EMU_THREADS, 0, 0 }, w0{ 32, 0, 0 }, w1{ 32, 0, 0 }, w2{ 32, 0, 0 },
        w3{ 32, 0, 0 };
    emu_block_barrier = &block;
    emu_warp_barrier[0] = &w0;
    emu_warp_barrier[1] = &w1;
    emu_warp_barrier[2] = &w2;
    emu_warp_barrier[3] = &w3;
    emu_kernel = &kernel;
    int first = emu_order == EMU_FORWARD ? 0 : EMU_THREADS - 1;
    for (unsigned k = 0; k < grid; k++) {
        blockIdx.x = emu_order == EMU_FORWARD ? k : grid - 1 - k;
        for (int t = 0; t < EMU_THREADS; t++) {
            emu_fiber_new(t);
            emu_async[t] = EmuAsync();
        }
        emu_idle = 0;
        threadIdx.x = (unsigned)first;
        swapcontext(&emu_launcher, &emu_fiber[first]);
        for (int t = 0; t < EMU_THREADS; t++)
            if (!emu_copies_waited(t))
                exit(1);
    }
}

#endif
