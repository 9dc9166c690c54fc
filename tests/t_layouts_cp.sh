#!/bin/sh
# t_layouts_cp.sh - t_layouts.sh's invariant for context parallelism
# ([parallel] cp, doc/guide.md "Long sequences: context parallelism"):
# cutting each sequence over cp ranks trains the same model. Tiny GPT-2
# ("gpt2") and Llama with grouped-query attention ("gqa", 4 query heads
# over 2 key/value heads) models at seq_len 256, and GPT-2 at 512
# ("long"), each layout against its model's single-rank run: every
# per-step loss and validation loss within relative 1e-5 (the evaluation
# cuts its microbatches into chunks as the training does) and the final
# weights (the checkpoints' logical tensors, tests/ckpt_diff) within 1e-5;
# "bf16" (the gqa model in bf16) within t_layouts_llama's bf16
# tolerances. The layouts
# compose cp with tp (sequence parallelism), pp (1F1B and zb1), dp with
# ZeRO 1-3 (overlapped, the default, and not), and recompute.
#
# Then: cp holds no state (4 steps at cp 2, resumed at cp 1 and at cp 4,
# give the losses of the uninterrupted run); generation is turned off at
# cp > 1; and a 16k-token sequence on 4 ranks: the activations per rank
# at cp 4 are at most 0.3 of cp 1's, with cp 1's loss (doc/performance.md
# has the figures).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-4}
[ "$np" -ge 4 ] || { echo "1..0 # SKIP the layouts need 4 ranks"; exit 0; }
cfg="$WORK/c.ini"
# five copies of small.txt: a validation split that holds a 512-token
# sample, and one sequence of 16,384 tokens for the 16k case
i=0
while [ $i -lt 5 ]; do cat "$DATA/small.txt"; i=$((i + 1)); done > "$WORK/long.txt"
# decay_steps fixes the learning-rate schedule, so a 4-step run is the
# first 4 steps of a 6-step one (the resume checks below)
cat > "$cfg" <<EOC
[model]
n_layer = 2
n_embd = 32
n_head = 4
seq_len = 256
vocab_size = 256
[train]
micro_batch = 2
grad_accum = 2
steps = 4
lr = 3e-3
warmup = 2
decay_steps = 6
[data]
train = $WORK/long.txt
[eval]
every = 2
batches = 1
[log]
every = 1
sample_tokens = 0
EOC
llama="model.arch=llama,model.n_kv_head=2,model.ffn_dim=48,model.tie_embeddings=false"

# model:layout: ranks dp pp tp cp micro_batch grad_accum zero schedule extra,keys
# (the first line of each model is its single-rank reference; the global
# batch is micro_batch x grad_accum x dp = 4 sequences throughout)
LAYOUTS="gpt2:1x1x1:1:1:1:1:1:2:2:1:1f1b:
gpt2:cp2:2:1:1:1:2:2:2:1:1f1b:log.sample_tokens=auto
gpt2:cp4:4:1:1:1:4:2:2:1:1f1b:
gpt2:cp2-tp2-sp:4:1:1:2:2:2:2:1:1f1b:parallel.sequence_parallel=1
gpt2:cp2-pp2-1f1b:4:1:2:1:2:2:2:1:1f1b:
gpt2:cp2-dp2-zero1:4:2:1:1:2:1:2:1:1f1b:
gpt2:cp2-dp2-zero3-recompute:4:2:1:1:2:1:2:3:1f1b:train.recompute=full
gqa:1x1x1:1:1:1:1:1:2:2:1:1f1b:$llama
gqa:cp4:4:1:1:1:4:2:2:1:1f1b:$llama
gqa:cp2-tp2-sp-every2:4:1:1:2:2:2:2:1:1f1b:$llama,parallel.sequence_parallel=1,train.recompute=every:2
gqa:cp2-pp2-zb1:4:1:2:1:2:2:2:1:zb1:$llama
gqa:cp2-dp2-zero2-no-overlap:4:2:1:1:2:1:2:2:1f1b:$llama,parallel.overlap=false
gqa:cp2-dp2-zero3:4:2:1:1:2:1:2:3:1f1b:$llama
long:1x1x1:1:1:1:1:1:1:2:1:1f1b:model.seq_len=512
long:cp4:4:1:1:1:4:1:2:1:1f1b:model.seq_len=512
bf16:1x1x1:1:1:1:1:1:2:2:1:1f1b:$llama,train.precision=bf16
bf16:cp2-dp2-zero3:4:2:1:1:2:1:2:3:1f1b:$llama,train.precision=bf16"
count=$(echo "$LAYOUTS" | wc -l)
plan $((2 * (count - 4) + 6))

# train NAME RANKS KEYS: lib.sh's train_keys on this config
train() { train_keys "$cfg" "$@"; }

losses() { sed -n 's/^{"step":.*"loss":\([^,]*\).*/\1/p' "$1"; }
# the per-step losses, then the validation losses (steps 2 and 4): the
# evaluation's microbatches are cut into chunks as the training's
both_losses() { losses "$1"; sed -n 's/^{"step":.*"val_loss":\([^,}]*\).*/\1/p' "$1"; }

# matches MODEL RUN TOL WTOL STATUS: two TAP lines, RUN's 4 per-step
# and 2 validation losses and its final weights against MODEL's
# single-rank run
matches() {
    both_losses "$WORK/$2.jsonl" > "$WORK/$2.loss"
    single_rank_match "$1" "$2" 6 "4 per-step and 2 validation losses" "$3" "$4" "$5"
}

for line in $LAYOUTS; do
    IFS=: read -r model name ranks dp pp tp cp mb ga zero sched extra <<EOL
$line
EOL
    train "$model-$name" "$ranks" "parallel.dp=$dp,parallel.pp=$pp,parallel.tp=$tp,parallel.cp=$cp,train.micro_batch=$mb,train.grad_accum=$ga,parallel.zero=$zero,parallel.schedule=$sched${extra:+,$extra}"
    status=$?
    if [ "$name" = 1x1x1 ]; then
        [ $status -eq 0 ] || sed 's/^/# /' "$WORK/$model-$name.out"
        both_losses "$WORK/$model-$name.jsonl" > "$WORK/$model.ref.loss"
    elif [ "$model" = bf16 ]; then
        matches "$model" "$model-$name" 2e-3 1e-2 $status   # t_layouts_llama's bf16 bounds
    else
        matches "$model" "$model-$name" 1e-5 1e-5 $status
    fi
done

# cp holds no state: the checkpoint the cp 2 run wrote at step 4 resumes
# at cp 1 and at cp 4 for steps 5 and 6 with the uninterrupted
# single-rank run's losses.
train gpt2-ref6 1 train.steps=6
losses "$WORK/gpt2-ref6.jsonl" | tail -n 2 > "$WORK/ref6.loss"
for to in 1 4; do
    train "resumed-cp$to" "$to" \
        "parallel.cp=$to,train.steps=6,checkpoint.resume=$WORK/gpt2-cp2/step_00000004.h5"
    losses "$WORK/resumed-cp$to.jsonl" > "$WORK/resumed-cp$to.loss"
    worst=$(max_rel "$WORK/ref6.loss" "$WORK/resumed-cp$to.loss" 2)
    within "$worst" 1e-5
    ok $? "saved at cp 2, resumed at cp $to: steps 5-6 match the uninterrupted run (max rel $worst)"
    [ "$worst" != missing ] || sed 's/^/# /' "$WORK/resumed-cp$to.out" | tail -n 5
done

# Generation needs whole rows on one rank: at cp > 1 the default sample
# at the end of a run is off, saying why (the gpt2 cp2 run above asked for
# the default), and one asked for is refused naming the keys.
why="generation needs \[parallel\] cp = 1 (this config's is 2)"
grep -q "a sample at the end (\[log\] sample_tokens; none by default here: $why" "$WORK/gpt2-cp2.out"
ok $? "cp 2: the default sample at the end is off, and the start-up says why"
train sample-cp2 2 parallel.cp=2,log.sample_tokens=8
rc=$?
[ $rc -eq 1 ] && grep -q "\[log\] sample_tokens = 8: $why" "$WORK/sample-cp2.out"
ok $? "cp 2: an explicit [log] sample_tokens is refused, naming [parallel] cp (exit $rc)"

# The 16k case: one sequence of 16,384 tokens, cp 1 on one rank against
# cp 4 on 4, one step each (a global batch of one sequence both times,
# so the same training). The activations a rank allocates (the start-up's
# memory table, model_activation_bytes) fall to about 1/4: every
# per-token buffer is a quarter, and attention adds two whole-sequence
# buffers of qkv (model_cp.c). The model is small (6 layers of 8
# channels) so that the step's T^2 attention stays a few seconds.
activations() { sed -n 's/^  rank   0: .* \/ *\([0-9.]*\)$/\1/p' "$1"; }
for cp in 1 4; do
    train "16k-cp$cp" "$cp" "model.n_layer=6,model.n_embd=8,model.n_head=2,model.seq_len=16384,train.micro_batch=1,train.grad_accum=1,parallel.cp=$cp,train.steps=1,data.val=$WORK/long.txt" \
        || sed 's/^/# /' "$WORK/16k-cp$cp.out" | tail -n 5
    losses "$WORK/16k-cp$cp.jsonl" > "$WORK/16k-cp$cp.loss"
done
a1=$(activations "$WORK/16k-cp1.out")
a4=$(activations "$WORK/16k-cp4.out")
awk -v a="$a1" -v b="$a4" 'BEGIN { exit !(a + 0 > 0 && b + 0 > 0 && b / a <= 0.3) }'
ok $? "16k tokens: activations per rank at cp 4 are at most 0.3 of cp 1's (cp 1: $a1 MiB, cp 4: $a4 MiB)"
worst=$(max_rel "$WORK/16k-cp1.loss" "$WORK/16k-cp4.loss" 1)
within "$worst" 1e-5
ok $? "16k tokens: the step's loss at cp 4 is cp 1's (rel $worst)"
done_testing
