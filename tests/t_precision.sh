#!/bin/sh
# t_precision.sh - mixed precision on 2 ranks: bf16 and fp16 runs track
# fp32's losses over 50 steps (bf16 within 1e-2 relative, fp16 within
# 2e-3; bf16 also with its GEMMs on trident's own kernel), and fp16's dynamic loss scale reacts to an overflow injected on
# one rank (TRIDENT_FAULT=grad_inf): every rank skips that step, the scale
# halves after `hysteresis` overflows, grows back after `window` clean
# steps, and a scale below loss_scale_min stops the run with a message.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-2}
plan 8
cfg="$WORK/c.ini"
write_config "$cfg"
field() { sed -n "s/^{\"step\":.*\"$1\":\([^,}]*\).*/\1/p" "$2"; }

for p in fp32 bf16 fp16; do
    run "$np" train --config "$cfg" --set train.precision=$p --set train.steps=50 \
        --set log.metrics="$WORK/$p.jsonl"
done
# bf16 on trident's own GEMM (vdpbf16ps, or AVX2 FMAs here) whatever path
# this CPU takes by default; a CPU with neither runs the default again
own=trident
cpu_has_trident_bf16_gemm || own=auto
TRIDENT_CPU_BF16_GEMM=$own run "$np" train --config "$cfg" --set train.precision=bf16 \
    --set train.steps=50 --set log.metrics="$WORK/bf16own.jsonl"
for p in bf16:1e-2 bf16own:1e-2 fp16:2e-3; do
    name=${p%:*} tol=${p#*:} label=${p%:*}
    [ "$name" != bf16own ] || label="bf16 on TRIDENT_CPU_BF16_GEMM=$own"
    worst=$(paste "$WORK/fp32.jsonl" "$WORK/$name.jsonl" | grep '^{"step":' | sed 's/{"step":[0-9]*,"loss":\([^,]*\),[^\t]*\t{"step":[0-9]*,"loss":\([^,]*\),.*/\1 \2/' \
        | awk '{ d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > w) w = d; n++ }
               END { if (n != 50) print "missing"; else printf "%.1e", w }')
    awk -v w="$worst" -v t="$tol" 'BEGIN { exit !(w != "missing" && w + 0 <= t + 0) }'
    ok $? "$label tracks fp32 over 50 steps: max relative loss difference $worst (tol $tol)"
done

fp16="--set train.precision=fp16 --set train.steps=12 --set log.metrics=$WORK/s.jsonl"
# shellcheck disable=SC2086
TRIDENT_FAULT="grad_inf:1:5" run "$np" train --config "$cfg" $fp16 \
    --set train.loss_scale_hysteresis=1 --set train.loss_scale_window=4
scales=$(field loss_scale "$WORK/s.jsonl" | tr '\n' ' ')
skipped=$(field skipped "$WORK/s.jsonl" | tr '\n' ' ')
[ "$skipped" = "0 0 0 0 1 0 0 0 0 0 0 0 " ]
ok $? "an inf on rank 1 at step 5 makes every rank skip that step alone (skipped: $skipped)"
# 4 clean steps double it (step 4), the overflow halves it (step 5), and
# steps 6-9 double it again
echo "$scales" | grep -q "^65536 65536 65536 131072 65536 65536 65536 65536 131072 "
ok $? "the scale doubles after 4 clean steps and halves at once on the overflow ($scales)"
rm -f "$WORK/s.jsonl"    # every run appends to its metrics file: each case reads its own
# shellcheck disable=SC2086
TRIDENT_FAULT="grad_inf:0:5,grad_inf:1:6" run "$np" train --config "$cfg" $fp16 \
    --set train.loss_scale_hysteresis=2 --set train.loss_scale_window=100
scales=$(field loss_scale "$WORK/s.jsonl" | tr '\n' ' ')
skipped=$(field skipped "$WORK/s.jsonl" | tr '\n' ' ')
echo "$scales" | grep -q "^65536 65536 65536 65536 65536 32768 32768 " \
    && echo "$skipped" | grep -q "^0 0 0 0 1 1 0 "
ok $? "with hysteresis 2 the first overflow only skips, the second halves ($scales)"
rm -f "$WORK/s.jsonl"
# shellcheck disable=SC2086
TRIDENT_FAULT="grad_inf:0:0" run "$np" train --config "$cfg" $fp16 \
    --set train.loss_scale_hysteresis=1 --set train.loss_scale_min=1024
expect 1 "loss scale fell to 512, below \[train\] loss_scale_min = 1024" \
    "overflowing every step ends the run at loss_scale_min instead of spinning"
grep -q '"step":7' "$WORK/s.jsonl" && ! grep -q '"step":8' "$WORK/s.jsonl"
ok $? "it stops at the 7th halving (65536 -> 512), step 7"
done_testing
