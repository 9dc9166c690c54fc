#!/bin/sh
# t_layouts_llama.sh - t_layouts.sh's invariant for arch = llama: every
# layout trains the same model. Two tiny Llama models, both with fewer
# key/value heads than query heads: "gqa" (4 query heads over 2 key/value
# heads) and "mqa" (4 over 1), and "deep" (8 layers, for the interleaved
# schedule's layouts with 4 stages or 4 chunks). Each layout's 10 per-step losses match its
# model's single-rank run within relative 1e-5 and its final weights (the
# checkpoints' logical tensors) within 1e-5, as in t_layouts.sh; a third,
# "bf16", runs in bf16 within 2e-3 (losses) and 1e-2 (weights). The
# layouts with tp > n_kv_head replicate each key/value head on
# tp / n_kv_head ranks (doc/guide.md, "Training a Llama model").
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-8}
DIFF="${TRI_BUILDDIR:-.}/tests/ckpt_diff"
cfg="$WORK/c.ini"
cat > "$cfg" <<EOC
[model]
arch = llama
n_layer = 4
n_embd = 32
n_head = 4
n_kv_head = 2
ffn_dim = 48
seq_len = 32
vocab_size = 256
tie_embeddings = false
rope_theta = 10000
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

# model:layout: ranks dp pp tp micro_batch grad_accum zero schedule extra,--set,keys
# (the first line of each model is its single-rank reference)
LAYOUTS="gqa:1x1x1:1:1:1:1:2:4:1:1f1b:
gqa:1x1x2:2:1:1:2:2:4:1:1f1b:
gqa:1x1x4-replicated:4:1:1:4:2:4:1:1f1b:
gqa:1x2x1-gpipe:2:1:2:1:2:4:1:gpipe:
gqa:2x1x1:2:2:1:1:1:4:1:1f1b:
gqa:2x2x2:8:2:2:2:1:4:1:1f1b:
gqa:2x2x2-zero3:8:2:2:2:1:4:3:1f1b:
gqa:1x2x4-zero2-recompute:8:1:2:4:2:4:2:1f1b:train.recompute=full
gqa:2x2x2-zb1-zero2:8:2:2:2:1:4:2:zb1:
gqa:1x4x1-zb1-recompute:4:1:4:1:2:4:1:zb1:train.recompute=full
gqa:1x2x2-interleaved2-zero3-recompute:4:1:2:2:2:4:3:interleaved:parallel.virtual_stages=2,train.recompute=full
gqa:1x1x2-sp:2:1:1:2:2:4:1:1f1b:parallel.sequence_parallel=1
gqa:1x2x2-sp-recompute:4:1:2:2:2:4:1:1f1b:parallel.sequence_parallel=1,train.recompute=every:2
gqa:2x1x4-sp-zero3-replicated:8:2:1:4:1:4:3:1f1b:parallel.sequence_parallel=1
gqa:1x2x2-zb1-sp:4:1:2:2:2:4:1:zb1:parallel.sequence_parallel=1
deep:1x1x1:1:1:1:1:2:4:1:1f1b:model.n_layer=8
deep:1x4x1-interleaved2:4:1:4:1:2:4:1:interleaved:model.n_layer=8,parallel.virtual_stages=2
deep:1x2x1-interleaved4-every3:2:1:2:1:2:4:1:interleaved:model.n_layer=8,parallel.virtual_stages=4,train.recompute=every:3
deep:2x4x1-interleaved2-zero2:8:2:4:1:1:4:2:interleaved:model.n_layer=8,parallel.virtual_stages=2
mqa:1x1x1:1:1:1:1:2:4:1:1f1b:model.n_kv_head=1
mqa:1x1x2-replicated:2:1:1:2:2:4:1:1f1b:model.n_kv_head=1
mqa:2x2x2-zero0-replicated:8:2:2:2:1:4:0:1f1b:model.n_kv_head=1
mqa:2x1x4-zero3-replicated:8:2:1:4:1:4:3:1f1b:model.n_kv_head=1
bf16:1x1x1:1:1:1:1:2:4:1:1f1b:train.precision=bf16,model.n_kv_head=1
bf16:2x2x2-zero3-replicated:8:2:2:2:1:4:3:1f1b:train.precision=bf16,model.n_kv_head=1
bf16:2x2x2-zero3-sp:8:2:2:2:1:4:3:1f1b:train.precision=bf16,model.n_kv_head=1,parallel.sequence_parallel=1"
count=$(echo "$LAYOUTS" | wc -l)
plan $((2 * (count - 4) + 7))

train() {  # name ranks dp pp tp mb ga zero schedule extra
    sets=""
    for kv in $(echo "${10}" | tr , ' '); do sets="$sets --set $kv"; done
    # shellcheck disable=SC2086
    $TRI_MPIEXEC -n "$2" "$TRIDENT" train --config "$cfg" \
        --set parallel.dp="$3" --set parallel.pp="$4" --set parallel.tp="$5" \
        --set train.micro_batch="$6" --set train.grad_accum="$7" --set parallel.zero="$8" \
        --set parallel.schedule="$9" --set checkpoint.dir="$WORK/$1" \
        --set log.metrics="$WORK/$1.jsonl" $sets > "$WORK/$1.out" 2>&1
}

losses() { sed -n 's/^{"step":.*"loss":\([^,]*\).*/\1/p' "$1"; }

for line in $LAYOUTS; do
    IFS=: read -r model name ranks dp pp tp mb ga zero sched extra <<EOL
$line
EOL
    if [ "$ranks" -gt "$np" ]; then
        ok 0 "$model $name # SKIP needs $ranks ranks"
        ok 0 "$model $name weights # SKIP needs $ranks ranks"
        continue
    fi
    run="$model-$name"
    train "$run" "$ranks" "$dp" "$pp" "$tp" "$mb" "$ga" "$zero" "$sched" "$extra"
    status=$?
    if [ "$name" = 1x1x1 ]; then
        [ $status -eq 0 ] || { sed 's/^/# /' "$WORK/$run.out"; }
        losses "$WORK/$run.jsonl" > "$WORK/$model.ref.loss"
        continue
    fi
    losses "$WORK/$run.jsonl" > "$WORK/$run.loss"
    worst=$(max_rel "$WORK/$model.ref.loss" "$WORK/$run.loss" 10)
    tol=1e-5 wtol=1e-5
    [ "$model" != bf16 ] || { tol=2e-3; wtol=1e-2; }
    awk -v w="$worst" -v t="$tol" 'BEGIN { exit !(w != "missing" && w + 0 <= t + 0) }'
    ok $? "$model $name: 10 per-step losses match the single rank (max rel $worst, tol $tol)"
    [ $status -eq 0 ] || sed 's/^/# /' "$WORK/$run.out" | tail -n 5
    result=$("$DIFF" "$WORK/$model-1x1x1/step_00000010.h5" "$WORK/$run/step_00000010.h5" "$wtol")
    ok $? "$model $name: final weights match ($result)"
done

# Checkpoints: a save on 2x2x2 resumes on 1x1x4 (replicated key/value
# heads) for two more steps with the losses of the single-rank run
# resumed alike; inspect and sample read the architecture from the file.
resume() {  # name ranks dp pp tp mb from [extra,--set,keys]
    sets=""
    for kv in $(echo "$8" | tr , ' '); do sets="$sets --set $kv"; done
    # shellcheck disable=SC2086
    $TRI_MPIEXEC -n "$2" "$TRIDENT" train --config "$cfg" --set parallel.dp="$3" \
        --set parallel.pp="$4" --set parallel.tp="$5" --set train.micro_batch="$6" \
        --set train.steps=12 --set checkpoint.resume="$WORK/$7/step_00000010.h5" \
        --set checkpoint.dir="$WORK/$1" --set log.metrics="$WORK/$1.jsonl" $sets \
        > "$WORK/$1.out" 2>&1
}
# resumed_like NAME REF WHAT: steps 11-12 of run NAME match run REF's
resumed_like() {
    losses "$WORK/$2.jsonl" > "$WORK/a.loss"
    losses "$WORK/$1.jsonl" > "$WORK/b.loss"
    worst=$(max_rel "$WORK/a.loss" "$WORK/b.loss" 2)
    awk -v w="$worst" 'BEGIN { exit !(w != "missing" && w + 0 <= 1e-5) }'
    ok $? "$3: steps 11-12 match the single rank's (max rel $worst)"
    [ "$worst" != missing ] || sed 's/^/# /' "$WORK/$1.out" | tail -n 5
}
# The interleaved layout's checkpoint holds the same logical tensors:
# saved on 1x4x1 with 2 chunks a stage, resumed on one rank (and sampled
# from), and the single rank's checkpoint resumed on 1x2x1 with 4 chunks
# a stage.
if [ "$np" -ge 4 ]; then
    deep=model.n_layer=8
    resume deep-ref-resumed 1 1 1 1 2 deep-1x1x1 "$deep"
    resume deep-from-interleaved 1 1 1 1 2 deep-1x4x1-interleaved2 "$deep"
    resumed_like deep-from-interleaved deep-ref-resumed "deep: saved on 1x4x1 interleaved, resumed on 1x1x1"
    resume deep-to-interleaved 2 1 2 1 2 deep-1x1x1 \
        "$deep,parallel.schedule=interleaved,parallel.virtual_stages=4"
    resumed_like deep-to-interleaved deep-ref-resumed "deep: saved on 1x1x1, resumed on 1x2x1 interleaved (4 chunks)"
    $TRI_MPIEXEC -n 1 "$TRIDENT" sample --ckpt "$WORK/deep-1x4x1-interleaved2/step_00000010.h5" \
        --tokens 8 > "$WORK/sample-deep.out" 2>&1
    ok $? "sample generates from a checkpoint the interleaved schedule wrote"
else
    ok 0 "deep resume from interleaved # SKIP needs 4 ranks"
    ok 0 "deep resume to interleaved # SKIP needs 4 ranks"
    ok 0 "sample from interleaved # SKIP needs 4 ranks"
fi
if [ "$np" -ge 8 ]; then
    resume ref-resumed 1 1 1 1 2 gqa-1x1x1
    resume tp4-resumed 4 1 1 4 2 gqa-2x2x2
    resumed_like tp4-resumed ref-resumed "gqa: saved on 2x2x2, resumed on 1x1x4"
else
    ok 0 "gqa resume on another layout # SKIP needs 8 ranks"
fi
ck="$WORK/gqa-1x1x1/step_00000010.h5"
"$TRIDENT" inspect "$ck" > "$WORK/inspect.out" 2>&1
grep -q "complete: all 117 datasets of the model (llama, 4 layers, 32 wide, vocab 256)" "$WORK/inspect.out"
ok $? "inspect: the llama checkpoint is complete (its tensors come from the stored arch)"
$TRI_MPIEXEC -n 1 "$TRIDENT" sample --ckpt "$ck" --tokens 8 > "$WORK/sample.out" 2>&1
ok $? "sample builds the llama model from the checkpoint and generates"
$TRI_MPIEXEC -n 1 "$TRIDENT" train --config "$cfg" --set model.arch=gpt2 --set model.n_kv_head=0 \
    --set model.ffn_dim=0 --set checkpoint.resume="$ck" --set train.steps=12 \
    --set checkpoint.dir="$WORK/wrong-arch" > "$WORK/wrong.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "\[model\] arch is llama in the checkpoint but gpt2 in the config" "$WORK/wrong.out"
ok $? "resuming a llama checkpoint with a gpt2 config is refused, naming [model] arch (exit $rc)"
done_testing
