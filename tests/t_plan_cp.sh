#!/bin/sh
# t_plan_cp.sh - `trident plan` with context parallelism ([parallel] cp,
# issue 39), plan alone (no trainer): a rank's activations fall by about
# cp; the layout table has a cp column and the last line trains the cp
# plan advises; plan proposes cp, and says why, for a sequence that fits
# no layout at cp 1; the communication line's cp bytes and the roofline's
# line "cp traffic X GB/step, Y ms at link Z GB/s, attention W ms:
# exposed (... a ring ... would [not] hide it)" agree with the formula, computed here from the config:
# per layer and microbatch three collectives (forward all-gather of q|k|v,
# backward all-gather and reduce-scatter of its gradient) and one more
# per recomputed layer, each (cp-1)/cp x B x T x 3C/tp elements of the
# activations' dtype, over the busiest stage's layers and grad_accum
# microbatches.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
plan 11
# A Llama of 8 layers, 1024 wide, GQA, 32k-token sequences, bf16.
cfg="$WORK/long.ini"
cat > "$cfg" <<EOC
[model]
arch = llama
n_layer = 8
n_embd = 1024
n_head = 16
n_kv_head = 4
ffn_dim = 3584
seq_len = 32768
vocab_size = 32000
tie_embeddings = false
[train]
micro_batch = 1
grad_accum = 8
precision = bf16
recompute = full
[data]
train = none.bin
format = tokens
EOC
acts() {  # acts WORLD CP: rank 0's activations (MiB) in plan's memory table
    "$TRIDENT" plan --config "$cfg" --world "$1" --set parallel.cp="$2" > "$WORK/out" 2>&1 || return 1
    sed -n 's/^  ranks* *[0-9-]*: .* \/ .* \/ .* \/ *\([0-9.]*\)$/\1/p' "$WORK/out" | head -n 1
}
# Per token they fall by cp; at cp > 1 attention over the group adds two
# whole-sequence buffers, B x T x 3C/tp each (bf16: 384 MiB here): within
# 5% of that sum (the head's logit chunk, a few MiB, stays as it is).
a1=$(acts 1 1) a2=$(acts 2 2) a4=$(acts 4 4)
awk -v a="$a1" -v b="$a2" -v c="$a4" 'BEGIN {
    s = 2 * 1 * 32768 * 3 * 1024 * 2 / 1048576
    e2 = a / 2 + s; e4 = a / 4 + s
    exit !(a > 0 && b / e2 > 0.95 && b / e2 < 1.05 && c / e4 > 0.95 && c / e4 < 1.05) }'
ok $? "a rank's activations fall by cp per token: $a1 MiB at cp 1, $a2 at cp 2, $a4 at cp 4 (each with 384 MiB of whole-sequence buffers)"

# The plan names cp in its first line; at cp 4 each rank holds 8192 tokens
# of each sequence and sends the formula's bytes.
"$TRIDENT" plan --config "$cfg" --world 8 --set parallel.cp=4 --set parallel.tp=2 > "$WORK/out" 2>&1
rc=$?
expect 0 "^plan: 8 ranks = dp 1 x pp 1 x cp 4 x tp 2, zero" "plan's first line names cp"
# bytes of one collective: (cp-1)/cp x B x T x 3C/tp x 2 (bf16); the step:
# grad_accum x (3 x layers + recomputed layers) of them
want=$(awk 'BEGIN { one = 3 / 4 * 1 * 32768 * 3 * 1024 / 2 * 2; printf "%.4g %.4g", one, 8 * (3 * 8 + 8) * one }')
one=${want% *} step=${want#* }
grep -q "tied embedding [0-9.e+]*, cp $step\$" "$WORK/out" &&
    grep -q "per layer and microbatch $one bytes in each of 3 collectives over cp" "$WORK/out"
ok $? "plan's cp bytes are the formula's: $one a collective, $step a step"

# The roofline's line: X GB/step as above, Y = X / Z, and the cp group of
# tp 2 x cp 4 ranks inside a node of 8: NVLink's 450 GB/s.
"$TRIDENT" plan --config "$cfg" --world 8 --set parallel.cp=4 --set parallel.tp=2 --hw h100 \
    > "$WORK/out" 2>&1
line=$(grep -m 1 '^  cp traffic ' "$WORK/out")
echo "$line" | awk -v want="$step" '{
    x = $3; y = $5; z = $9; w = $12; verdict = $14
    sub(/:$/, "", w)
    ok = x > 0 && (x - want / 1e9) / x < 2e-3 && (x - want / 1e9) / x > -2e-3 && z == 450
    ok = ok && y > 0 && (y - 1e3 * x / z) / y < 2e-3 && (y - 1e3 * x / z) / y > -2e-3
    ok = ok && verdict == "exposed"
    ok = ok && (index($0, "would not hide it") > 0) == (y > w)
    exit !ok }'
ok $? "the cp traffic line agrees with the formula, the link and the attention time ($line)"
grep -Eq '^  context-parallel traffic \(exposed\) +[0-9.]+ ms' "$WORK/out"
ok $? "the step's terms include the exposed cp traffic"
# across nodes: tp 8 x cp 2 spans two nodes of 8, so the cp group's link is
# the NIC's 50 GB/s
"$TRIDENT" plan --config "$cfg" --world 16 --set parallel.cp=2 --set parallel.tp=8 --hw h100 \
    > "$WORK/out" 2>&1
grep -q '^  cp traffic .* at link 50 GB/s, .*(cp 2 over the cross-node link)$' "$WORK/out"
ok $? "a cp group across nodes is priced at the cross-node link ($(grep -m 1 '^  cp traffic' "$WORK/out"))"

# A 256k-token sequence of this model fits no layout of 8 ranks at cp 1 in
# 5.5 GiB (the least there is 5.69 GiB on a GPU, whose head holds a
# sixteenth of the device's memory in logits at once): plan's search
# proposes cp and says why, its table has a cp column, and the last line
# trains it.
"$TRIDENT" plan --config "$cfg" --world 8 --set model.seq_len=262144 --mem 5.5 > "$WORK/out" 2>&1
rc=$?
best=$(sed -n '/^layouts of/,/^[^ ]/p' "$WORK/out" | awk '$1 ~ /^[0-9]+$/' | head -n 1)
bcp=$(echo "$best" | awk '{ print $4 }')
[ "$rc" -eq 0 ] && [ "${bcp:-1}" -gt 1 ] &&
    grep -q "^context parallelism, cp $bcp (.*): no layout at cp 1 fits 5.5 GiB, the least a rank needs there is" "$WORK/out"
ok $? "plan --mem 5.5 proposes cp ${bcp:-1} for a 256k-token sequence and says why ($(grep '^context parallelism' "$WORK/out"))"
# the config samples at the end (sample_tokens = auto), which cp > 1 cannot:
# the last line turns the sample off with cp
grep -Eq '^ +dp +pp +tp +cp +ga +zero ' "$WORK/out" &&
    tail -n 1 "$WORK/out" | grep -q -- "--set parallel.cp=$bcp .*--set log.sample_tokens=0$"
ok $? "the layout table names cp, and the last line sets it, the sample off ($(tail -n 1 "$WORK/out"))"
# planned with the advised options, plan keeps them: cp is what it
# advises there too, and its last line adds nothing
advice=$(tail -n 1 "$WORK/out")
# shellcheck disable=SC2086  # the pasted options, split on purpose
"$TRIDENT" plan --config "$cfg" --world 8 --mem 5.5 ${advice#train with: } > "$WORK/out2" 2>&1
grep -q "^plan: 8 ranks = dp [0-9]* x pp [0-9]* x cp $bcp x tp " "$WORK/out2" &&
    [ "$(tail -n 1 "$WORK/out2")" = "$advice" ]
ok $? "planned as advised, the layout keeps cp $bcp and plan changes nothing ($(grep '^plan:' "$WORK/out2"))"
# In 13.2 GiB layouts at cp 1 fit, but only with full recompute (without,
# the least is tp 8's 13.43 GiB): cp 2 spares it (12.97 GiB), and plan
# says so.
"$TRIDENT" plan --config "$cfg" --world 8 --set model.seq_len=262144 --mem 13.2 > "$WORK/out" 2>&1
grep -q "^context parallelism, cp [248] (.*): layouts at cp 1 fit 13.2 GiB too, this one is less work$" "$WORK/out"
ok $? "plan --mem 13.2: cp for less work where cp 1 fits too ($(grep '^context parallelism' "$WORK/out"))"
# One sequence on 2 ranks of a model with one head and one layer: no tp,
# no pp, and a global batch of 1 leaves cp 1 no layout; cp 2 is the only
# one, and plan says why without a figure for cp 1.
"$TRIDENT" plan --config "$cfg" --world 2 --set parallel.cp=2 --set model.n_head=1 \
    --set model.n_kv_head=1 --set model.n_layer=1 --set train.grad_accum=1 --mem 80 > "$WORK/out" 2>&1
grep -q "^context parallelism, cp 2 (.*): no layout at cp 1 is valid here$" "$WORK/out"
ok $? "plan --mem: cp 2 where no cp 1 layout keeps the batch ($(grep '^context parallelism, cp' "$WORK/out"))"
done_testing
