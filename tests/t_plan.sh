#!/bin/sh
# t_plan.sh - `trident plan` against the trainer: for the same config and
# world, the per-rank memory table that plan computes (arithmetic, no MPI)
# equals the one the trainer prints from its real allocations (for gpt2
# and llama, replicated key/value heads included, zb1's kept gradients
# too, with and without sequence parallelism, which must shrink the
# activations, and with context parallelism (cp 2 with pp, and with tp,
# sequence parallelism and ZeRO-3); offload on the CPU, where it changes nothing); plan prints
# each schedule's bubble and memory and recommends one; plan handles a 175B
# model on 1024 ranks, with the layouts that fit 80 GiB; and plan moves
# the optimizer state to a host column with [train] offload, and
# recommends it where nothing else fits; plan --hw cpu times this machine:
# the optimizer in bf16 about as fp32, and Llama's own layer. plan prints
# its schedules table once, equal ranks on one line, the layouts that fit
# --mem best first (ten, or --all), and a last line of options that train
# what it advises; 100,000 layers plan in time (one layer priced and
# multiplied).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-4}
cfg="$WORK/c.ini"
write_config "$cfg"
sed -i 's/^n_layer = 2/n_layer = 4/; s/^micro_batch = 4/micro_batch = 2/' "$cfg"
CASES="dp:--set+parallel.zero=1
pp2:--set+parallel.pp=2+--set+train.grad_accum=4
tp2-zero3:--set+parallel.tp=2+--set+parallel.zero=3
tp2-pp2-zero0-gpipe:--set+parallel.tp=2+--set+parallel.pp=2+--set+parallel.zero=0+--set+parallel.schedule=gpipe+--set+train.grad_accum=3
pp2-zero2-recompute:--set+parallel.pp=2+--set+parallel.zero=2+--set+train.recompute=full+--set+train.grad_accum=4
untied-every2:--set+model.tie_embeddings=0+--set+train.recompute=every:2+--set+parallel.zero=3
two-level-dp:--set+parallel.node_size=2+--set+parallel.zero=2
offload-cpu-zero1:--set+parallel.zero=1+--set+train.offload=optimizer
llama-tp2-kv1-zero3-every2:--set+model.arch=llama+--set+model.n_kv_head=1+--set+model.ffn_dim=48+--set+parallel.tp=2+--set+parallel.zero=3+--set+train.recompute=every:2+--set+model.tie_embeddings=0
llama-pp2-tp2-zero2-recompute:--set+model.arch=llama+--set+parallel.pp=2+--set+parallel.tp=2+--set+parallel.zero=2+--set+train.recompute=full+--set+train.grad_accum=4
pp2-tp2-zb1:--set+parallel.pp=2+--set+parallel.tp=2+--set+parallel.schedule=zb1+--set+train.grad_accum=4
llama-pp4-zb1-every2:--set+model.arch=llama+--set+model.n_kv_head=1+--set+model.ffn_dim=48+--set+parallel.pp=4+--set+parallel.schedule=zb1+--set+train.recompute=every:2+--set+model.tie_embeddings=0+--set+train.grad_accum=3
pp2-interleaved2:--set+parallel.pp=2+--set+parallel.schedule=interleaved+--set+parallel.virtual_stages=2+--set+train.grad_accum=4
pp2-interleaved2-every3-zero3:--set+parallel.pp=2+--set+parallel.schedule=interleaved+--set+parallel.virtual_stages=2+--set+train.grad_accum=6+--set+train.recompute=every:3+--set+parallel.zero=3
pp4-interleaved-llama-recompute:--set+model.arch=llama+--set+parallel.pp=4+--set+parallel.schedule=interleaved+--set+model.n_layer=8+--set+parallel.virtual_stages=2+--set+train.grad_accum=4+--set+train.recompute=full
sp-tp2-zero3:--set+parallel.tp=2+--set+parallel.zero=3+--set+parallel.sequence_parallel=1
sp-pp2-tp2-every2:--set+parallel.tp=2+--set+parallel.pp=2+--set+train.recompute=every:2+--set+parallel.sequence_parallel=1+--set+train.grad_accum=4
sp-tp4-llama-kv1:--set+model.arch=llama+--set+model.n_head=4+--set+model.n_kv_head=1+--set+model.ffn_dim=48+--set+parallel.tp=4+--set+model.tie_embeddings=0+--set+parallel.sequence_parallel=1
sp-pp2-tp2-zb1:--set+parallel.tp=2+--set+parallel.pp=2+--set+parallel.schedule=zb1+--set+parallel.sequence_parallel=1+--set+train.grad_accum=4
cp2-pp2-zero1:--set+parallel.cp=2+--set+parallel.pp=2+--set+parallel.zero=1+--set+train.grad_accum=4
llama-cp2-tp2-sp-zero3:--set+model.arch=llama+--set+model.n_kv_head=1+--set+model.ffn_dim=48+--set+parallel.cp=2+--set+parallel.tp=2+--set+parallel.sequence_parallel=1+--set+parallel.zero=3+--set+model.tie_embeddings=0"
plan $(($(echo "$CASES" | wc -l) + 25))
plan_memory_cases "$np" "$cfg" "$CASES"
# zb1 on pp 4, 8 microbatches: with f = b = w the simulator's bubble is
# 3/27 = 11.1% against 1F1B's and GPipe's 3/11 = 27.3% (t_schedule derives
# both; 4 layers cannot be interleaved on 4 stages); zb1's kept gradients
# cost memory, so plan recommends it when it fits and 1f1b when only 1f1b
# does. Columns: schedule, v, bubble, activations MiB, total MiB, messages.
"$TRIDENT" plan --config "$cfg" --world 4 --set parallel.pp=4 --set train.grad_accum=8 \
    > "$WORK/out" 2>&1
grep -Eq "^  1f1b +1 +27.3% " "$WORK/out" && grep -Eq "^  gpipe +1 +27.3% " "$WORK/out" \
    && grep -Eq "^  zb1 +1 +11.1% " "$WORK/out" && grep -q "^recommended schedule: zb1" "$WORK/out"
ok $? "plan pp 4, 8 microbatches: bubbles 1f1b 27.3%, gpipe 27.3%, zb1 11.1%; recommends zb1"
mib() { awk -v s="$1" '$1 == s { print $5 }' "$WORK/out"; }
mid=$(awk -v a="$(mib 1f1b)" -v b="$(mib zb1)" 'BEGIN { if (a < b) printf "%.9f", (a + b) / 2048 }')
"$TRIDENT" plan --config "$cfg" --world 4 --set parallel.pp=4 --set train.grad_accum=8 \
    --mem "${mid:-0}" > "$WORK/out" 2>&1
grep -q "^recommended schedule: 1f1b (the smallest bubble that fits" "$WORK/out"
ok $? "plan --mem $mid (GiB), between 1f1b's and zb1's largest rank: recommends 1f1b"
# What plan advises is one line to paste into `trident train` (plan's own
# --set options, then what it changes), and it trains: on 4 ranks the
# trainer's memory table is plan's for zb1.
"$TRIDENT" plan --config "$cfg" --world 4 --set parallel.pp=4 --set train.grad_accum=8 \
    > "$WORK/out" 2>&1
advice=$(tail -n 1 "$WORK/out")
[ "$advice" = "train with: --set parallel.pp=4 --set train.grad_accum=8 --set parallel.schedule=zb1" ] &&
    [ "$(grep -c '^schedules (' "$WORK/out")" -eq 1 ]
ok $? "plan prints its schedules table once and ends with the options to train what it advises ($advice)"
# shellcheck disable=SC2086  # the pasted options, split on purpose
run 4 train --config "$cfg" --set train.steps=0 ${advice#train with: }
memory_table "$WORK/out" > "$WORK/train.mem"
"$TRIDENT" plan --config "$cfg" --world 4 --set parallel.pp=4 --set train.grad_accum=8 \
    --set parallel.schedule=zb1 > "$WORK/plan.out" 2>&1
memory_table "$WORK/plan.out" > "$WORK/plan.mem"
[ "$rc" -eq 0 ] && grep -q "schedule = zb1" "$WORK/out" && [ -s "$WORK/train.mem" ] &&
    cmp -s "$WORK/train.mem" "$WORK/plan.mem" && [ "$(tail -n 1 "$WORK/plan.out")" = \
    "train with: --set parallel.pp=4 --set train.grad_accum=8 --set parallel.schedule=zb1" ]
ok $? "the pasted options train (exit $rc) with plan's memory for zb1; planned as given, plan changes nothing"
# Ranks of equal memory share one line: four DP ranks without ZeRO hold
# the same.
"$TRIDENT" plan --config "$cfg" --world 4 --set parallel.zero=0 > "$WORK/out" 2>&1
[ "$(sed -n '/^memory per rank/,/^[^ m]/p' "$WORK/out" | grep -c '^  rank')" -eq 1 ] &&
    grep -q '^  ranks 0-3: ' "$WORK/out" && [ "$(memory_table "$WORK/out" | wc -l)" -eq 4 ]
ok $? "plan: four equal ranks on one line ($(grep '^  ranks' "$WORK/out"))"
"$TRIDENT" plan --config "$cfg" --world 4 --set parallel.pp=4 --set train.grad_accum=8 \
    --set parallel.schedule=zb1 > "$WORK/out" 2>&1
grep -q "pipeline bubble (zb1, 8 microbatches, 1 chunk a stage, f = b = w): 11.1%; 48 pipeline messages a step" "$WORK/out" \
    && grep -q "pp 1.311e+05 in 16 messages" "$WORK/out"
ok $? "plan schedule = zb1: its bubble, and 1F1B's 2 x 8 pipeline messages per rank"
# what plan prints for the interleaved schedule: the simulated bubble
# (pp-1)/(v*m+pp-1) = 1/9, 2m(v*pp-1) = 24 messages, each schedule's row;
# zb1's 1 - 12/13 = 7.7% is the smallest, so plan recommends it
"$TRIDENT" plan --config "$cfg" --world 2 --set parallel.pp=2 --set parallel.schedule=interleaved \
    --set parallel.virtual_stages=2 --set train.grad_accum=4 > "$WORK/out" 2>&1
grep -q "pipeline bubble (interleaved, 4 microbatches, 2 chunks a stage, f = b = w): 11.1%; 24 pipeline messages a step" "$WORK/out" \
    && grep -Eq "^  1f1b +1 +20.0% .* 8$" "$WORK/out" && grep -Eq "^  interleaved +2 +11.1% .* 24$" "$WORK/out" \
    && grep -Eq "^  zb1 +1 +7.7% .* 8$" "$WORK/out" \
    && grep -q "^recommended schedule: zb1 (the smallest bubble)" "$WORK/out"
ok $? "plan: interleaved's simulated bubble and messages, zb1's, and the recommendation among schedules"
# with memory for 1f1b alone, plan recommends 1f1b
mib=$(awk '$1 == "1f1b" { print $5 }' "$WORK/out")
gib=$(awk -v t="$mib" 'BEGIN { printf "%.9f", (t + 0.01) / 1024 }')
"$TRIDENT" plan --config "$cfg" --world 2 --set parallel.pp=2 --set train.grad_accum=4 \
    --mem "$gib" > "$WORK/out2" 2>&1
grep -q "^recommended schedule: 1f1b (the smallest bubble that fits)" "$WORK/out2"
ok $? "plan: 1f1b when neither interleaved nor zb1 fits $gib GiB"
# Sequence parallelism divides the activations outside attention and the
# MLP by tp: on tp 4 the trainer's rank 0 allocates less with it.
acts() {  # the trainer's rank 0 activations (MiB) with sequence_parallel=$1
    run "$np" train --config "$cfg" --set train.steps=0 --set parallel.tp=4 --set model.n_head=4 \
        --set parallel.sequence_parallel="$1"
    memory_table "$WORK/out" | awk 'NR == 1 { print $NF }'
}
without=$(acts 0) with=$(acts 1)
awk -v a="$without" -v b="$with" 'BEGIN { exit !(b > 0 && b < a) }'
ok $? "sequence_parallel on tp 4: activations per rank $with MiB, against $without MiB without"
cat > "$WORK/g175.ini" <<EOC
[model]
n_layer = 96
n_embd = 12288
n_head = 96
seq_len = 2048
vocab_size = 50304
[parallel]
tp = 8
pp = 16
[train]
micro_batch = 1
grad_accum = 192
recompute = full
[data]
train = none.bin
format = tokens
EOC
start=$(date +%s%N)
"$TRIDENT" plan --config "$WORK/g175.ini" --world 1024 --mem 80 > "$WORK/out" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect 0 "174604.837M parameters" "plan: GPT-3 175B on 1024 ranks (${ms} ms)"
grep -q "layouts of 1024 ranks within 80.0 GiB" "$WORK/out"
ok $? "plan lists the layouts that fit 80 GiB"
# The layouts that fit, best first: the least work (full recompute 4/3 of
# it, over 1 - bubble), ten of them unless --all; the best one is what the
# last line trains.
fits() { sed -n '/^layouts of/,/^[^ ]/p' "$1" | awk '$1 ~ /^[0-9]+$/'; }
sorted() {  # the rows' work never falls
    awk '{ b = $10; sub(/%/, "", b); w = ($7 == "full" ? 4 / 3 : 1) / (1 - b / 100)
           if (NR > 1 && w < last - 1e-9) bad = 1; last = w } END { exit bad }'
}
more=$(sed -n 's/^  \.\.\. and \([0-9]*\) more (--all shows them)$/\1/p' "$WORK/out")
fits "$WORK/out" > "$WORK/fits10"
best=$(head -n 1 "$WORK/fits10")
[ "$(wc -l < "$WORK/fits10")" -eq 10 ] && [ "${more:-0}" -gt 0 ] && sorted < "$WORK/fits10"
ok $? "plan --mem 80: the best 10 layouts, sorted, and $more more on request"
"$TRIDENT" plan --config "$WORK/g175.ini" --world 1024 --mem 80 --all > "$WORK/out" 2>&1
fits "$WORK/out" > "$WORK/fits"
[ "$(wc -l < "$WORK/fits")" -eq $((10 + more)) ] && sorted < "$WORK/fits" &&
    ! grep -q "more (--all" "$WORK/out"
ok $? "plan --mem 80 --all: all $((10 + more)) layouts, sorted"
# planned with the last line's options, the layout is the best row's
advice=$(tail -n 1 "$WORK/out")
# shellcheck disable=SC2086  # the pasted options, split on purpose
"$TRIDENT" plan --config "$WORK/g175.ini" --world 1024 ${advice#train with: } > "$WORK/out2" 2>&1
echo "$best" | awk '{ printf "plan: 1024 ranks = dp %d x pp %d x cp %d x tp %d, zero %d,\n", $1, $2, $4, $3, $6 }' \
    > "$WORK/want"
grep -qF "$(cat "$WORK/want")" "$WORK/out2"
ok $? "the last line trains the best layout ($advice; $(head -n 1 "$WORK/out2"))"
"$TRIDENT" plan --config "$WORK/g175.ini" --world 1024 --all > "$WORK/out" 2>&1
rc=$?
expect 2 "--all: it lists every layout that fits --mem GIB, and no --mem was given" \
    "plan --all without --mem is refused"
# plan prices one layer and multiplies (issue 37: 89 s for 100,000 layers
# on 8 ranks, linear in n_layer): 100,000 layers plan within the time
# limit, with the search of --mem, as 1,000 do, and its memory is the
# per-layer figure times the layers.
layers_mib() {  # the weights column (MiB) of stage 0's row for n_layer=$1
    timeout 120 "$TRIDENT" plan --config "$cfg" --world 8 --mem 80 --set model.n_layer="$1" \
        --set parallel.pp=2 --set train.grad_accum=2 > "$WORK/out" 2>&1 || return 1
    memory_table "$WORK/out" | awk 'NR == 1 { print $3 }'
}
start=$(date +%s)
w1=$(layers_mib 1000) && w100=$(layers_mib 100000)
rc=$?
s=$(($(date +%s) - start))
awk -v a="$w1" -v b="$w100" 'BEGIN { exit !(a > 0 && b / a > 99 && b / a < 100.01) }' && [ "$rc" -eq 0 ]
ok $? "plan of 100,000 layers on 8 ranks with --mem in time (both plans ${s} s): weights $w100 MiB, 100 x 1,000 layers' $w1"
"$TRIDENT" plan --config "$WORK/g175.ini" --world 1024 --hw h100 --set train.precision=bf16 \
    > "$WORK/out" 2>&1
mfu=$(sed -n 's/.*MFU \([0-9.]*\)%.*/\1/p' "$WORK/out" | tail -n 1)
grep -q "^fastest layout on 1024 x h100" "$WORK/out" \
    && awk -v m="$mfu" 'BEGIN { exit !(m > 20 && m < 70) }'
ok $? "plan --hw h100: a term-by-term prediction and the fastest layout (MFU $mfu%)"
# plan --hw cpu times the machine, 3.5 s a plan whatever the model, so the
# checks below share their plans: three each of a small Llama (C = 256,
# 1.6M parameters) in fp32 with ffn_dim 256 (both checks'), in bf16 (the
# optimizer's) and with ffn_dim 2048 (the GEMMs'), each check taking the
# least of its three.
llama="--set model.arch=llama --set model.n_embd=256 --set model.n_head=4 --set model.n_kv_head=2
       --set model.seq_len=64 --set train.micro_batch=2"
hw_plans() {  # hw_plans PRECISION FFN_DIM: three plans, in $WORK/hw_PRECISION_FFN_DIM.1 to .3
    for i in 1 2 3; do
        # shellcheck disable=SC2086  # $llama: the options, split on purpose
        "$TRIDENT" plan --config "$cfg" --world 1 --hw cpu $llama --set model.ffn_dim="$2" \
            --set train.precision="$1" > "$WORK/hw_$1_$2.$i" 2>&1
    done
}
least_ms() {  # least_ms PLANS TERM: the least of TERM's ms in the three plans PLANS.1 to .3
    for i in 1 2 3; do
        sed -n "s/^  $2  *\([0-9.]*\) ms.*/\1/p" "$1.$i" | head -n 1
    done | sort -g | head -n 1
}
hw_plans fp32 256
grep -q "^predicted step on 1 x cpu" "$WORK/hw_fp32_256.1" && grep -q "^  GEMMs" "$WORK/hw_fp32_256.1"
ok $? "plan --hw cpu measures this machine and predicts the step"
# The optimizer term in bf16 against fp32: both read the fp32 gradients the
# trainer keeps, and bf16 writes a 2-byte compute copy beside the 28 bytes
# of fp32 state per parameter, so the two differ by the machine's noise
# (allowed: 3.5x). plan once timed bf16's AdamW on bf16 gradients, a path
# the trainer never runs, and predicted 629 ms against fp32's 124 for
# GPT-2 small (7x here), where a training step's optimizer takes 145 to
# 155 ms in bf16. AdamW is timed per element on 4M of them whatever the
# model (kernel_times_adamw), then priced by the parameters: the least of
# three plans each, as a test model's 0.2 ms once swung 6x under make
# check's load, and two plans each still read 33 ms against 7 beside two
# other builds.
hw_plans bf16 256
f32=$(least_ms "$WORK/hw_fp32_256" optimizer)
b16=$(least_ms "$WORK/hw_bf16_256" optimizer)
awk -v a="$f32" -v b="$b16" 'BEGIN { exit !(a > 0 && b > 0 && b / a > 0.3 && b / a < 3.5) }'
ok $? "plan --hw cpu: the optimizer step in bf16 ($b16 ms) is about fp32's ($f32 ms)"
# A Llama layer is timed as its block runs it (arch_llama.c): its SwiGLU
# MLP's width is ffn_dim, not GPT-2's 4C (plan once timed GPT-2's layer
# for every arch). ffn_dim 2048 against 256 at C = 256 is 4.5x the layer's
# GEMM FLOPs; the GEMM term must at least double. Each is the least of
# three plans, as the optimizer's above: other jobs' load on the cores
# (make -j2 check beside a build) once read 424 ms against 300.
hw_plans fp32 2048
narrow=$(least_ms "$WORK/hw_fp32_256" "GEMMs (timed)")
wide=$(least_ms "$WORK/hw_fp32_2048" "GEMMs (timed)")
awk -v a="$narrow" -v b="$wide" 'BEGIN { exit !(a > 0 && b / a > 2) }'
ok $? "plan --hw cpu times Llama's layer: GEMMs $narrow ms with ffn_dim 256, $wide ms with 2048"
"$TRIDENT" plan --config "$cfg" --world 1 --hw tpu > "$WORK/out" 2>&1
rc=$?
expect 1 "unknown hardware" "an unknown hardware profile is refused"

# offload: a 6.7B model on one 80 GiB GPU fits only with the optimizer
# state in host memory (16 bytes per parameter of weights and gradients
# stay on the device, the 8 of the moments go)
cat > "$WORK/g7.ini" <<EOC
[model]
n_layer = 32
n_embd = 4096
n_head = 32
seq_len = 1024
vocab_size = 50304
[train]
micro_batch = 1
grad_accum = 8
recompute = full
[data]
train = none.bin
format = tokens
EOC
"$TRIDENT" plan --config "$WORK/g7.ini" --world 1 --set train.offload=optimizer \
    --set parallel.device=cuda > "$WORK/out" 2>&1
row=$(grep '^  rank   0:' "$WORK/out")
echo "$row" | awk -F/ '{ exit !(NF == 5 && $3 + 0 == 0 && $5 + 0 > 3 * 25000) }' &&
    grep -q '^largest rank: .* on its device, and .* GiB of host memory (offload)' "$WORK/out"
ok $? "offload = optimizer: the device's optimizer column is 0, the host column holds 12 B per parameter ($row)"
"$TRIDENT" plan --config "$WORK/g7.ini" --world 1 --hw h100 > "$WORK/out" 2>&1
grep -q "^fastest layout on 1 x h100 that fits 80 GiB: .*, offload optimizer$" "$WORK/out" &&
    grep -q "optimizer (offloaded, overlapped)" "$WORK/out"
ok $? "plan --hw h100 recommends offload where nothing else fits: $(grep '^fastest' "$WORK/out")"
"$TRIDENT" plan --config "$WORK/g7.ini" --world 1 --mem 80 --set parallel.device=cpu > "$WORK/out" 2>&1
"$TRIDENT" plan --config "$WORK/g7.ini" --world 1 --mem 80 > "$WORK/out2" 2>&1
rows=$(sed -n '/^layouts of/,$p' "$WORK/out2" | awk '$1 == 1 && $2 == 1 { print $8 }' | sort -u)
grep -q "^  none: more ranks" "$WORK/out" && [ "$rows" = optimizer ]
ok $? "the layouts that fit are those that offload (${rows:-none}); with device = cpu, where it frees nothing, none fit"
# The head's logits on a GPU: a sixteenth of the device's memory, so GPT-2
# small's head (16 x 1024 rows x 50257 words) is one chunk of 3,216 MiB of
# fp32 logits where the CPU holds 328 rows at once: plan's memory (--mem
# on device = cuda, and --hw h100's largest rank) counts the larger buffer.
gpt2="${TRI_SRCDIR:-.}/jobs/configs/gpt2-124m.ini"
acts_mib() {  # rank 0's planned activations (MiB) on device $1 with --mem 80
    "$TRIDENT" plan --config "$gpt2" --world 1 --mem 80 --set parallel.device="$1" 2>&1 |
        awk -F/ '/^  rank   0:/ { print $4 + 0 }'
}
on_cpu=$(acts_mib cpu) && on_gpu=$(acts_mib cuda)
largest=$("$TRIDENT" plan --config "$gpt2" --world 1 --hw h100 2>&1 |
    sed -n 's/.*MFU .*, largest rank \([0-9.]*\) GiB.*/\1/p' | head -n 1)
awk -v c="$on_cpu" -v g="$on_gpu" -v l="$largest" \
    'BEGIN { d = g - c; exit !(d > 3050 && d < 3110 && l + 0 >= (c + 3050) / 1024) }'
ok $? "GPT-2 small's head on a GPU: activations $on_gpu MiB against $on_cpu on the CPU (one chunk of 16384 rows, not 50 of 328); plan --hw h100's largest rank $largest GiB"
done_testing
