#!/bin/sh
# t_share_gpu.sh - TRIDENT_TEST_SHARE_GPU, the test-only escape from the
# one-rank-per-GPU rule (src/parallel/device.c), through the real binary
# on the CPU: set to 1 it warns on every rank (and says it changes
# nothing on the CPU); unset or 0 it is silent; any other value stops
# every rank with a message naming it, also when one rank alone has it.
# Whether ranks then share a GPU is run by tests/t_gpu_comm.sh on a GPU.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-2}
plan 5
cfg="$WORK/c.ini"
write_config "$cfg"
var=TRIDENT_TEST_SHARE_GPU
warning="trident: warning: $var=1: ranks of a machine may drive one GPU"

# warned_by: how many ranks printed the warning in the last run
warned_by() { grep -c "^\[rank [0-9]* [^]]*\] $warning" "$WORK/out"; }

TRIDENT_TEST_SHARE_GPU=1 run "$np" train --config "$cfg" --set train.steps=1
n=$(warned_by)
[ "$rc" -eq 0 ] && [ "$n" -eq "$np" ] && grep -q "never for training (this run computes on the CPU: no effect)" "$WORK/out"
ok $? "$var=1: the run goes on, and each of the $np ranks warns (exit $rc, $n warnings)" ||
    sed 's/^/#   /' "$WORK/out" | tail -n 10

for value in unset 0 ""; do
    if [ "$value" = unset ]; then
        run "$np" train --config "$cfg" --set train.steps=1
    else
        TRIDENT_TEST_SHARE_GPU=$value run "$np" train --config "$cfg" --set train.steps=1
    fi
    n=$(warned_by)
    [ "$rc" -eq 0 ] && [ "$n" -eq 0 ]
    ok $? "$var ${value:-empty}: no warning (exit $rc, $n warnings)"
done

# a bad value on the last rank alone: every rank stops, none hangs
# (Open MPI's colon syntax gives each rank its own environment)
# shellcheck disable=SC2086  # TRI_MPIEXEC is a command line
$TRI_MPIEXEC -n $((np - 1)) "$TRIDENT" train --config "$cfg" --set train.steps=1 : \
    -n 1 env "$var=yes" "$TRIDENT" train --config "$cfg" --set train.steps=1 > "$WORK/out" 2>&1
rc=$?
expect 1 "trident: $var=yes: set it to 1 to let ranks share a GPU (for tests only), or unset it" \
    "$var=yes on rank $((np - 1)) alone stops every rank, naming the variable and value"
done_testing
