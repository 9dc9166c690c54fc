#!/bin/sh
# t_zero_memory.sh - what ZeRO saves, from the trainer's own accounting
# (the bytes it allocated, printed at start-up): with zero = 1 and dp = 4
# each rank holds about a quarter of dp = 1's optimizer state; with
# zero = 3 it also holds a quarter of the weights, plus the buffer that
# one unit (the largest layer) is gathered into; zero = 0 holds no buffers
# beside its gradients, and zero = 1 none beside its full and owned ones.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-4}
plan 6
cfg="$WORK/c.ini"
write_config "$cfg"
sed -i 's/^n_layer = 2/n_layer = 8/; s/^n_embd = 32/n_embd = 64/; s/^micro_batch = 4/micro_batch = 1/' "$cfg"
# column COL (1 weights, 2 grads, 3 optimizer) of rank 0's memory line
mem() {  # mem RANKS COL SETS...
    ranks=$1 col=$2
    shift 2
    run "$ranks" train --config "$cfg" --set train.steps=0 "$@"
    grep '^  rank   0:' "$WORK/out" | sed 's/.*: *//' | awk -F' / ' -v c="$col" '{ print $c + 0 }'
}
opt1=$(mem 1 3 --set parallel.zero=1)
opt4=$(mem "$np" 3 --set parallel.zero=1)
ratio=$(awk -v a="$opt4" -v b="$opt1" 'BEGIN { printf "%.3f", a / b }')
awk -v r="$ratio" 'BEGIN { exit !(r > 0.24 && r < 0.27) }'
ok $? "zero 1, dp 4: optimizer $opt4 MiB per rank = $ratio x dp 1's $opt1 MiB"
w0=$(mem "$np" 1 --set parallel.zero=0)
w3=$(mem "$np" 1 --set parallel.zero=3)
w3b=$(mem 2 1 --set parallel.zero=3)
ratio=$(awk -v a="$w3" -v b="$w0" 'BEGIN { printf "%.3f", a / b }')
awk -v r="$ratio" 'BEGIN { exit !(r > 0.25 && r < 0.40) }'
ok $? "zero 3, dp 4: weights $w3 MiB per rank = $ratio x zero 0's $w0 MiB (a quarter + one layer's gather buffer)"
step=$(awk -v a="$w3b" -v b="$w3" -v f="$w0" 'BEGIN { printf "%.3f", (a - b) / f }')
awk -v r="$step" 'BEGIN { exit !(r > 0.24 && r < 0.26) }'
ok $? "zero 3: going from dp 2 to dp 4 saves a quarter of the weights ($w3b -> $w3 MiB, $step x)"
g1=$(mem "$np" 2 --set parallel.zero=1)
g2=$(mem "$np" 2 --set parallel.zero=2)
awk -v a="$g2" -v b="$g1" 'BEGIN { exit !(a < 0.6 * b) }'
ok $? "zero 2 drops the full gradients: $g2 MiB per rank against zero 1's $g1 MiB"
# zero 0 all-reduces in place: its gradient memory is the gradients alone
# (fp32, as large as the fp32 weights), with no pack or receive buffers
g0=$(mem "$np" 2 --set parallel.zero=0)
awk -v g="$g0" -v w="$w0" 'BEGIN { exit !(g == w) }'
ok $? "zero 0: gradients $g0 MiB per rank = the weights' $w0 MiB, no buffers beside them"
# zero 1 over one DP level reduce-scatters each tensor's gradients straight
# into its owned rows and all-gathers the weights where they live, with
# overlap or without: its gradient memory is the full gradients and the
# owned rows (a quarter, rounded up per tensor), and nothing else. It once
# held two units' pack and receive buffers (2.4x zero 0's here), and with
# overlap each flight's pack and share beside them.
g1n=$(mem "$np" 2 --set parallel.zero=1 --set parallel.overlap=false)
r1=$(awk -v a="$g1" -v g="$g0" 'BEGIN { printf "%.3f", a / g }')
r1n=$(awk -v a="$g1n" -v g="$g0" 'BEGIN { printf "%.3f", a / g }')
awk -v a="$r1" -v b="$r1n" 'BEGIN { exit !(a >= 1.25 && a < 1.27 && b == a) }'
ok $? "zero 1, dp 4: gradients $g1 MiB per rank with overlap, $g1n without = $r1 x zero 0's (full + owned rows, no buffers)"
done_testing
