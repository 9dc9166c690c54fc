#!/bin/sh
# mpitap.sh - runs one TAP test under MPI; the test name carries the rank
# count: tests/t_grid.np4.tap runs `mpiexec -n 4 tests/t_grid`, or the
# script tests/t_grid.sh with the rank count as its argument when the
# test is a script. A hang fails after TRI_TEST_TIMEOUT seconds (300; the
# bad-input matrix, a sequence of over a hundred cases that each have their
# own 60 s bound, gets 1200; the Slurm test, whose time-limit case may take
# a 3-minute job when slurmctld is slow to signal, 900; the chaos soak's
# brief mode, nine jobs of 4 ranks on a loaded machine, 900).
set -u
stamp=$1
base=$(basename "$stamp" .tap)          # t_grid.np4
name=${base%.np*}                       # t_grid
np=${base##*.np}                        # 4
dir=$(dirname "$stamp")
srcdir=${srcdir:-.}
default_timeout=300
[ "$name" != t_matrix ] || default_timeout=1200
[ "$name" != t_slurm ] || default_timeout=900
[ "$name" != soak ] || default_timeout=900
# many short trainings and tokenizer loads (Llama 3's 128256 ids): 2.5 min
# on 2 idle cores, several times that when the cores are shared
[ "$name" != t_decode ] || default_timeout=900
[ "$name" != t_guide ] || default_timeout=900
[ "$name" != t_runlife ] || default_timeout=900
# 26 traced trainings of 2 to 8 ranks: 30 s on 2 idle cores, 270 s at a
# load of 24
[ "$name" != t_comm_trace ] || default_timeout=900
# two dozen trainings of 4 ranks beside plan's searches: 3.5 to 4.6 min
# under a load of 20
[ "$name" != t_plan ] || default_timeout=600
# 20 trainings of MoE layouts, most on 4 ranks: a minute on 2 idle cores
[ "$name" != t_layouts_moe ] || default_timeout=600
timeout_s=${TRI_TEST_TIMEOUT:-$default_timeout}

MPIEXEC=${MPIEXEC:-mpiexec}
if ! command -v "$MPIEXEC" >/dev/null 2>&1; then
    echo "1..0 # SKIP no mpiexec (install openmpi-bin)"
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# N ranks share the cores: give each its share of OpenMP threads, so the
# test measures correctness rather than thread thrashing.
cores=$(nproc 2>/dev/null || echo 2)
threads=$((cores / np))
[ "$threads" -ge 1 ] || threads=1
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$threads}"
export TRI_MPIEXEC="$MPIEXEC --oversubscribe --bind-to none"
# Open MPI's start-up and tear-down, tuned for a suite of ~1000 short jobs
# on one node (other MPIs ignore OMPI_MCA_*; a value already set wins).
# pml ob1 is the layer Open MPI picks here anyway; naming it skips probing
# the psm/psm2 transports first (0.2 s a process, measured on 2 cores).
# odls_base_sigkill_timeout 0: when mpiexec ends a job (a rank exited
# non-zero, or mpiexec was signalled) it sends SIGTERM to the ranks left
# and then sleeps this many seconds before SIGKILL, even when none is left:
# 1 s, often twice, after every run that fails on purpose.
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}"
export OMPI_MCA_odls_base_sigkill_timeout="${OMPI_MCA_odls_base_sigkill_timeout:-0}"
# The CPU suite runs on the CPU on a GPU node too: with `device = auto` it
# would otherwise train on the GPUs (and 8 ranks would want 8 of them).
# No GPU is visible to it; the tests with GPU checks (t_ops_cuda, t_gpu,
# t_gpu_comm, and t_offload for its CUDA AdamW behind real copies) see
# them all.
case "$name" in
    t_ops_cuda | t_gpu | t_gpu_comm | t_offload) ;;
    *) export CUDA_VISIBLE_DEVICES="" ;;
esac
export TRI_BUILDDIR="${TRI_BUILDDIR:-$(pwd)}"
export TRI_SRCDIR="$srcdir"

t0=$(date +%s)
if [ -f "$srcdir/$dir/$name.sh" ]; then
    timeout -k 10 "$timeout_s" sh "$srcdir/$dir/$name.sh" "$np"
else
    # TRI_MPIEXEC is a command with options: split it
    # shellcheck disable=SC2086
    timeout -k 10 "$timeout_s" $TRI_MPIEXEC -n "$np" "$dir/$name"
fi
rc=$?
# the test's wall time, as a TAP comment in its log, for keeping the
# suite's time in bounds (DEVELOPERS.md)
echo "# $base took $(($(date +%s) - t0)) s (limit $timeout_s s)"
exit $rc
