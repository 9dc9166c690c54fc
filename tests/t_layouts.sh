#!/bin/sh
# t_layouts.sh - invariant 1 of doc/design.md: every layout trains the same model.
# A 10-step fp32 run on each dp x pp x tp layout, ZeRO stage, schedule and
# microbatch split below gives the single-rank run's per-step losses within
# relative 1e-5 (zb1, the zero-bubble schedule, included), and the same final weights (compared tensor by tensor in
# the checkpoints, which hold logical tensors) within 1e-5 as the whole
# model's ||w - w_ref|| / ||w_ref||. Per element, Adam turns fp32
# reassociation noise in directions whose true gradient is zero (the key
# bias) into visible differences, so elements are reported, not gated;
# t_grads checks each tensor's gradients, before Adam, to 1e-5.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-8}
DIFF="${TRI_BUILDDIR:-.}/tests/ckpt_diff"
cfg="$WORK/c.ini"
cat > "$cfg" <<EOC
[model]
n_layer = 4
n_embd = 32
n_head = 4
seq_len = 32
vocab_size = 256
[train]
micro_batch = 2
grad_accum = 4
steps = 10
lr = 3e-3
warmup = 3
[data]
train = $DATA/small.txt
[eval]
every = 5
batches = 1
[log]
every = 1
sample_tokens = 0
EOC

# layout: ranks dp pp tp micro_batch grad_accum zero schedule [virtual_stages [sequence_parallel]]
LAYOUTS="1x1x1:1:1:1:1:2:4:1:1f1b
2x1x1:2:2:1:1:1:4:1:1f1b
1x2x1:2:1:2:1:2:4:1:1f1b
1x1x2:2:1:1:2:2:4:1:1f1b
2x2x1:4:2:2:1:1:4:1:1f1b
1x2x2:4:1:2:2:2:4:1:1f1b
2x1x2:4:2:1:2:1:4:1:1f1b
2x2x2:8:2:2:2:1:4:1:1f1b
1x4x1-ga8:4:1:4:1:1:8:1:1f1b
2x2x2-zero0:8:2:2:2:1:4:0:1f1b
2x2x2-zero2:8:2:2:2:1:4:2:1f1b
2x2x2-zero3:8:2:2:2:1:4:3:1f1b
4x1x1-zero3:4:4:1:1:1:2:3:1f1b
1x2x1-gpipe:2:1:2:1:2:4:1:gpipe
1x2x1-zb1:2:1:2:1:2:4:1:zb1
1x4x1-zb1-ga8:4:1:4:1:1:8:1:zb1
2x2x2-zb1-zero3:8:2:2:2:1:4:3:zb1
1x2x1-interleaved2:2:1:2:1:2:4:1:interleaved:2
2x2x1-interleaved2-zero0:4:2:2:1:1:4:0:interleaved:2
1x2x2-interleaved2-zero2:4:1:2:2:2:4:2:interleaved:2
2x2x2-interleaved2-zero3:8:2:2:2:1:4:3:interleaved:2
1x1x1-mb8:1:1:1:1:8:1:1:1f1b
1x1x2-sp:2:1:1:2:2:4:1:1f1b::1
2x1x2-sp-zero3:4:2:1:2:1:4:3:1f1b::1
1x2x4-sp:8:1:2:4:2:4:1:1f1b::1
2x2x2-sp-zero3:8:2:2:2:1:4:3:1f1b::1
1x2x2-zb1-sp-zero2:4:1:2:2:2:4:2:zb1::1
2x2x2-interleaved2-sp:8:2:2:2:1:4:1:interleaved:2:1"
count=$(echo "$LAYOUTS" | wc -l)
plan $((2 * count - 1))

train() {  # name ranks dp pp tp mb ga zero schedule virtual_stages sequence_parallel
    # shellcheck disable=SC2086
    $TRI_MPIEXEC -n "$2" "$TRIDENT" train --config "$cfg" \
        --set parallel.dp="$3" --set parallel.pp="$4" --set parallel.tp="$5" \
        --set train.micro_batch="$6" --set train.grad_accum="$7" --set parallel.zero="$8" \
        --set parallel.schedule="$9" --set parallel.virtual_stages="${10:-1}" \
        --set parallel.sequence_parallel="${11:-0}" \
        --set checkpoint.dir="$WORK/$1" \
        --set log.metrics="$WORK/$1.jsonl" > "$WORK/$1.out" 2>&1
}

losses() { sed -n 's/^{"step":.*"loss":\([^,]*\).*/\1/p' "$1"; }

for line in $LAYOUTS; do
    IFS=: read -r name ranks dp pp tp mb ga zero sched v sp <<EOL
$line
EOL
    if [ "$ranks" -gt "$np" ]; then
        ok 0 "$name # SKIP needs $ranks ranks"
        ok 0 "$name weights # SKIP needs $ranks ranks"
        continue
    fi
    train "$name" "$ranks" "$dp" "$pp" "$tp" "$mb" "$ga" "$zero" "$sched" "$v" "$sp"
    status=$?
    if [ "$name" = 1x1x1 ]; then
        [ $status -eq 0 ] || { sed 's/^/# /' "$WORK/$name.out"; }
        losses "$WORK/1x1x1.jsonl" > "$WORK/ref.loss"
        continue
    fi
    losses "$WORK/$name.jsonl" > "$WORK/$name.loss"
    worst=$(max_rel "$WORK/ref.loss" "$WORK/$name.loss" 10)
    awk -v w="$worst" 'BEGIN { exit !(w != "missing" && w + 0 <= 1e-5) }'
    ok $? "$name: 10 per-step losses match the single rank (max rel $worst, tol 1e-5)"
    [ $status -eq 0 ] || sed 's/^/# /' "$WORK/$name.out" | tail -n 5
    result=$("$DIFF" "$WORK/1x1x1/step_00000010.h5" "$WORK/$name/step_00000010.h5" 1e-5)
    ok $? "$name: final weights match ($result)"
done

# Generation at the end of a run reads the last stage's output, which
# sequence parallelism slices: it is gathered, and the sample is the same.
sample() {  # sample sequence_parallel
    $TRI_MPIEXEC -n 2 "$TRIDENT" train --config "$cfg" --set parallel.tp=2 \
        --set parallel.sequence_parallel="$1" --set train.steps=3 --set eval.every=0 \
        --set log.sample_tokens=40 2>&1 | sed -n '/^sample (/,/^done:/{/^done:/!p}' > "$WORK/sample$1"
}
sample 0
sample 1
[ -s "$WORK/sample0" ] && cmp -s "$WORK/sample0" "$WORK/sample1"
ok $? "tp 2: the end-of-run sample is the same with sequence_parallel"
done_testing
