#!/bin/sh
# t_offload_train.sh - training through [train] offload = optimizer's GPU
# path, run on the CPU (fault.h: offload_cpu puts the master weights and
# moments in host arenas of their own, keeps the master separate even in
# fp32, and runs the chunked executor with memcpy copies): on dp = 2, for
# ZeRO 0, 1 and 3 in fp32, bf16 and fp16 (the loss scaler), the losses,
# norms and final checkpoint are bitwise those of offload = none, the
# memory table moves the optimizer state to the host column, and a
# checkpoint written without offload resumes with it.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-2}
DIFF="${TRI_BUILDDIR:-.}/tests/ckpt_diff"
plan 7
cfg="$WORK/c.ini"
write_config "$cfg"
loss_lines() { grep -o '"step":[0-9]*,"loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*,"loss_scale":[^,]*' "$1"; }
forced=$(every_rank offload_cpu 0)

# train NAME ARGS...: 6 steps into $WORK/NAME.jsonl and $WORK/NAME/
train() {
    into=$1
    shift
    run "$np" train --config "$cfg" --set train.steps=6 --set checkpoint.every=3 \
        --set checkpoint.dir="$WORK/$into" --set log.metrics="$WORK/$into.jsonl" "$@"
}

for c in "zero1-fp32:--set+parallel.zero=1" \
         "zero3-bf16:--set+parallel.zero=3+--set+train.precision=bf16" \
         "zero0-fp16:--set+parallel.zero=0+--set+train.precision=fp16"; do
    name=${c%%:*}
    sets=$(echo "${c#*:}" | tr '+' ' ')
    # shellcheck disable=SC2086
    train "$name-none" $sets
    # shellcheck disable=SC2086
    TRIDENT_FAULT=$forced train "$name-offload" $sets --set train.offload=optimizer
    cp "$WORK/out" "$WORK/$name.out"
    loss_lines "$WORK/$name-none.jsonl" > "$WORK/x"
    loss_lines "$WORK/$name-offload.jsonl" > "$WORK/y"
    "$DIFF" "$WORK/$name-none/step_00000006.h5" "$WORK/$name-offload/step_00000006.h5" 0 \
        > "$WORK/d" 2>&1
    d=$?
    [ "$rc" -eq 0 ] && [ -s "$WORK/x" ] && cmp -s "$WORK/x" "$WORK/y" && [ $d -eq 0 ]
    ok $? "$name: offloaded, bitwise the losses, norms and final checkpoint of offload = none ($(cat "$WORK/d"))"
done

# the path ran: its line, and the memory table's host column with the
# device's optimizer column at 0
grep -q "^offload: master weights and Adam moments in host memory" "$WORK/zero1-fp32.out" &&
    grep -q "^memory per rank (MiB): .* / host (offloaded)$" "$WORK/zero1-fp32.out" &&
    grep '^  rank   [01]:' "$WORK/zero1-fp32.out" |
        awk -F/ '{ if (!(NF == 5 && $3 + 0 == 0 && $5 + 0 > 0)) bad++ } END { exit bad > 0 || NR != 2 }'
ok $? "the offloaded run says so, and its memory table has the state in the host column"

# a checkpoint written without offload resumes with it, and the other way
mkdir -p "$WORK/r1" "$WORK/r2"
cp "$WORK/zero1-fp32-none/step_00000003.h5" "$WORK/r1/"
echo step_00000003.h5 > "$WORK/r1/latest"
cp "$WORK/zero1-fp32-offload/step_00000003.h5" "$WORK/r2/"
echo step_00000003.h5 > "$WORK/r2/latest"
TRIDENT_FAULT=$forced run "$np" train --config "$cfg" --set train.steps=6 --set parallel.zero=1 \
    --set checkpoint.dir="$WORK/r1" --set log.metrics="$WORK/r1.jsonl" --set train.offload=optimizer
loss_lines "$WORK/zero1-fp32-none.jsonl" | tail -n 3 > "$WORK/x"
loss_lines "$WORK/r1.jsonl" > "$WORK/y"
[ -s "$WORK/x" ] && cmp -s "$WORK/x" "$WORK/y"
ok $? "a checkpoint of offload = none resumes offloaded: steps 4-6 bitwise"
run "$np" train --config "$cfg" --set train.steps=6 --set parallel.zero=3 --set parallel.dp=1 --set parallel.tp=2 \
    --set train.micro_batch=8 --set checkpoint.dir="$WORK/r2" --set log.metrics="$WORK/r2.jsonl"
loss_lines "$WORK/r2.jsonl" | sed 's/.*"loss":\([^,]*\).*/\1/' > "$WORK/l1"
loss_lines "$WORK/zero1-fp32-none.jsonl" | tail -n 3 | sed 's/.*"loss":\([^,]*\).*/\1/' > "$WORK/l2"
worst=$(paste "$WORK/l1" "$WORK/l2" | awk '{ d = ($1 - $2) / $2; if (d < 0) d = -d; if (d > w) w = d; n++ }
                                        END { if (n != 3) print "missing"; else printf "%.1e", w }')
awk -v w="$worst" 'BEGIN { exit !(w != "missing" && w + 0 <= 1e-5) }'
ok $? "an offloaded checkpoint resumes without offload on another layout (loss max rel $worst)"

# offload = optimizer alone (no fault) on the CPU runs the usual path
train plain --set parallel.zero=1 --set train.offload=optimizer
loss_lines "$WORK/zero1-fp32-none.jsonl" > "$WORK/x"
loss_lines "$WORK/plain.jsonl" > "$WORK/y"
grep -q "^offload: .* changes nothing on the CPU backend" "$WORK/out" && [ -s "$WORK/x" ] &&
    cmp -s "$WORK/x" "$WORK/y" &&
    ! grep -q "/ host (offloaded)" "$WORK/out"
ok $? "without the fault the CPU backend says offload changes nothing, and it does not"
done_testing
