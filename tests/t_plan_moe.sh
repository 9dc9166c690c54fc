#!/bin/sh
# t_plan_moe.sh - `trident plan` with a mixture of experts ([model]
# n_expert, [parallel] ep; issue 38): total against active
# parameters and the model's FLOPs on a known shape, each against the
# arithmetic done here from the config (a MoE layer: router E x C, E
# experts of 3 Fm x C, a shared expert of 3 Fs x C and its 1 x C gate; a
# token goes through top_k of the experts); Mixtral 8x7B's published
# 46.7 B total, 12.9 B active; the expert all-to-all's bytes (per MoE layer
# and microbatch 2 forward, 2 backward, 2 more recomputed, 4 under zb1; each (ep-1)/ep
# of B T top_k rows of C elements) and their time at the link the ep group
# spans; the layout search tries ep 1, 2, 4, ... dividing dp and n_expert,
# and picks ep > 1 (saying why) where ep 1 does not fit or is slower; and
# against the trainer: plan's per-rank memory at ep 1, 2 and 4, ZeRO 1 and
# 3, equals what the trainer allocates for a tiny MoE model on 4 ranks,
# and the all-to-alls the trainer issues (traced) are the ones plan counts.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-4}
plan 16
# 4 layers, MoE every second (layers 1 and 3), 4 experts of 96, top 2, one
# shared expert (96), GQA; dense layers' MLP 128; fp32.
cfg="$WORK/moe.ini"
cat > "$cfg" <<EOC
[model]
arch = llama
n_layer = 4
n_embd = 128
n_head = 8
n_kv_head = 2
ffn_dim = 128
seq_len = 32
vocab_size = 256
tie_embeddings = false
n_expert = 4
top_k = 2
moe_ffn_dim = 96
n_shared_expert = 1
moe_every = 2
[train]
micro_batch = 2
grad_accum = 3
[data]
train = none.bin
format = tokens
EOC
# The shape's counts by hand: C 128, KV 32 (2 heads of 16), F 128, E 4, k 2, Fm 96, Fs 96,
# V 256, T 32; two dense and two MoE layers.
hand() {  # hand WHAT: total, active, flops (a step of micro_batch 2 x grad_accum 3 x dp 4)
    awk -v what="$1" 'BEGIN {
        C = 128; KV = 32; F = 128; E = 4; k = 2; Fm = 96; Fs = 96; V = 256; T = 32
        attn = 2 * C * C + 2 * KV * C; norms = 2 * C
        dense = attn + norms + 3 * F * C
        moe = attn + norms + E * C + E * 3 * Fm * C + 3 * Fs * C + C
        total = 2 * dense + 2 * moe + 2 * V * C + C
        active = total - 2 * (E - k) * 3 * Fm * C
        fdense = 2 * (attn + 3 * C * F) + 4 * T * C
        fmoe = 2 * (attn + C * E + k * 3 * C * Fm + 3 * C * Fs + C) + 4 * T * C
        tokens = 2 * 3 * 4 * T
        flops = 3 * tokens * (2 * fdense + 2 * fmoe + 2 * C * V)
        if (what == "total") printf "%d", total
        else if (what == "active") printf "%d", active
        else printf "%.4g", flops }'
}
"$TRIDENT" plan --config "$cfg" --world 4 > "$WORK/out" 2>&1
rc=$?
total=$(hand total) active=$(hand active)
expect 0 "^mixture of experts: params .* B total, .* B active ($total and $active; top 2 of 4 experts in 2 of 4 layers); ep 1, 4 of the 4 experts" \
    "total $total and active $active parameters as counted by hand"
flops=$(hand flops)
grep -q "^flops per step: $flops (model, 3 x forward)" "$WORK/out"
ok $? "the step's FLOPs are the active ones counted by hand: $flops ($(grep '^flops per step' "$WORK/out"))"

# Mixtral 8x7B, as Mistral AI publishes it: 46.7 B total, 12.9 B active.
"$TRIDENT" plan --config "${TRI_SRCDIR:-.}/jobs/configs/mixtral-8x7b.ini" --world 64 > "$WORK/out" 2>&1
rc=$?
expect 0 "^mixture of experts: params 46.7 B total, 12.9 B active (" \
    "jobs/configs/mixtral-8x7b.ini: params 46.7 B total, 12.9 B active"

# The all-to-all at ep 2 of dp 4: one is (ep-1)/ep x B T k rows x C x 4
# bytes (fp32); a step has grad_accum x 4 per MoE layer (2 forward, 2
# backward), x 6 where the layer recomputes.
a2a() {  # a2a EP RECOMPUTE_LAYERS: one all-to-all's bytes and a step's
    awk -v ep="$1" -v re="$2" 'BEGIN {
        one = (ep - 1) / ep * 2 * 32 * 2 * 128 * 4
        printf "%.4g %.4g", one, 3 * (4 * 2 + 2 * re) * one }'
}
"$TRIDENT" plan --config "$cfg" --world 4 --set parallel.ep=2 > "$WORK/out" 2>&1
want=$(a2a 2 0) one=${want% *} step=${want#* }
grep -q "^expert all-to-all: $one bytes a rank in each, 8 a microbatch on stage 0 .*, $step bytes a step over ep 2 (2 world ranks); exposed" "$WORK/out"
ok $? "ep 2: $one bytes an all-to-all, $step a step, as by hand ($(grep '^expert all-to-all' "$WORK/out"))"
"$TRIDENT" plan --config "$cfg" --world 4 --set parallel.ep=4 --set train.recompute=full > "$WORK/out" 2>&1
want=$(a2a 4 2) one=${want% *} step=${want#* }
grep -q "^expert all-to-all: $one bytes a rank in each, 12 a microbatch on stage 0 .*, $step bytes a step over ep 4 (4 world ranks); exposed" "$WORK/out"
ok $? "ep 4 with recompute: $one bytes an all-to-all, $step a step ($(grep '^expert all-to-all' "$WORK/out"))"

# The roofline prices them at the ep group's link: tp 2 x ep 4 is 8
# consecutive ranks, inside a node of 8 (NVLink, 450 GB/s); tp 4 x ep 4
# spans two nodes (the NIC's 50 GB/s). The time is the bytes over the link
# (the model widened and its sequence lengthened to take milliseconds).
big="--set model.n_embd=1024 --set model.seq_len=16384"
# shellcheck disable=SC2086  # $big: the options, split on purpose
"$TRIDENT" plan --config "$cfg" --world 16 $big --set parallel.tp=2 --set parallel.ep=4 --hw h100 \
    > "$WORK/out" 2>&1
in_node=$(grep -m 1 '^  expert all-to-alls [0-9]' "$WORK/out")
# shellcheck disable=SC2086
"$TRIDENT" plan --config "$cfg" --world 16 $big --set parallel.tp=4 --set parallel.ep=4 --hw h100 \
    > "$WORK/out" 2>&1
cross=$(grep -m 1 '^  expert all-to-alls [0-9]' "$WORK/out")
printf '%s\n%s\n' "$in_node" "$cross" | awk '
    { x = $3; y = $5; z = $9
      ok = x > 0 && y > 0 && (y - 1e3 * x / z) / y < 2e-3 && (y - 1e3 * x / z) / y > -2e-3
      ok = ok && index($0, "exposed") > 0
      if (NR == 1) ok = ok && z == 450 && index($0, "over the in-node link") > 0
      else ok = ok && z == 50 && index($0, "over the cross-node link") > 0
      bad += !ok }
    END { exit !(NR == 2 && bad == 0) }'
ok $? "the all-to-alls' time is their bytes at the ep group's link ($in_node / $cross)"
grep -Eq '^  expert all-to-alls \(exposed\) +[0-9.]+ ms' "$WORK/out"
ok $? "the step's terms include the exposed all-to-alls"

# The search tries ep 1, 2 and 4 on 4 ranks (dp 4 or 2 and 4 experts),
# never an ep that does not divide dp.
"$TRIDENT" plan --config "$cfg" --world 4 --mem 100 --all > "$WORK/out" 2>&1
sed -n '/^layouts of/,/^[^ ]/p' "$WORK/out" | awk '$1 ~ /^[0-9]+$/ {
        ep = 1
        for (i = 12; i <= NF; i++) if ($i ~ /^ep=/) ep = substr($i, 4) + 0
        seen[ep] = 1; bad += $1 % ep != 0 }
    END { exit !(seen[1] && seen[2] && seen[4] && !seen[8] && bad == 0) }'
ok $? "plan --mem tries ep 1, 2 and 4, each dividing dp"
# Where experts are most of the model and little else shards them (one
# layer: no pp; one head: no tp; no cp with experts), the search picks
# ep > 1 and says why: in 20 GiB no layout at ep 1 fits (ZeRO's
# unit-sized buffers hold the one huge block), and on 8 H100s ep 8 is the
# fastest (no expert gradients to reduce, an eighth of the optimizer's
# rows) though ep 1 fits too.
wide="$WORK/wide.ini"
cat > "$wide" <<EOC
[model]
arch = llama
n_layer = 1
n_embd = 4096
n_head = 1
ffn_dim = 14336
seq_len = 128
vocab_size = 32000
tie_embeddings = false
n_expert = 64
top_k = 2
[train]
micro_batch = 1
grad_accum = 1
precision = bf16
[data]
train = none.bin
format = tokens
EOC
"$TRIDENT" plan --config "$wide" --world 8 --mem 20 > "$WORK/out" 2>&1
best=$(sed -n '/^layouts of/,/^[^ ]/p' "$WORK/out" | awk '$1 ~ /^[0-9]+$/' | head -n 1)
bep=$(echo "$best" | sed -n 's/.* ep=\([0-9]*\)$/\1/p')
[ "${bep:-1}" -gt 1 ] &&
    grep -q "^expert parallelism, ep $bep (.*): no layout at ep 1 fits 20.0 GiB, the least a rank needs there is" "$WORK/out" &&
    tail -n 1 "$WORK/out" | grep -q -- "--set parallel.ep=$bep "
ok $? "plan --mem 20 picks ep ${bep:-1} where no ep 1 layout fits, and says so ($(grep '^expert parallelism' "$WORK/out"))"
"$TRIDENT" plan --config "$wide" --world 8 --hw h100 > "$WORK/out" 2>&1
grep -q "^fastest layout on 8 x h100 .*: dp 8 x pp 1 x cp 1 x tp 1," "$WORK/out" &&
    grep -q "^expert parallelism, ep 8 (8 of the 64 experts of each MoE layer a rank): layouts at ep 1 fit 80.0 GiB too, this one is faster$" "$WORK/out" &&
    tail -n 1 "$WORK/out" | grep -q -- "--set parallel.ep=8 "
ok $? "plan --hw h100 picks ep 8 as the fastest, and says why ($(grep '^expert parallelism' "$WORK/out"))"

# The experts' memory against the trainer's: for a tiny MoE Llama on $np
# ranks, plan's per-rank table equals the one the trainer prints at
# start-up from its allocations, at ep 1, 2 and 4 (each rank n_expert / ep
# experts of every MoE layer) and ZeRO 1 and 3 (the experts' state
# sharded over their dp / ep replicas), with a shared expert, and with
# dense and MoE layers alternating (moe_every 2: every block built).
mcfg="$WORK/m.ini"
write_config "$mcfg"
MOE="--set+model.arch=llama+--set+model.n_expert=4+--set+model.top_k=2+--set+model.moe_ffn_dim=48+--set+model.tie_embeddings=0"
MOE_SETS=$(echo "$MOE" | tr '+' ' ')
CASES="ep1-zero1:$MOE+--set+parallel.zero=1
ep2-zero1:$MOE+--set+parallel.ep=2+--set+parallel.zero=1
ep4-zero3-shared:$MOE+--set+parallel.ep=4+--set+parallel.zero=3+--set+model.n_shared_expert=1
ep2-zero3-every2:$MOE+--set+parallel.ep=2+--set+parallel.zero=3+--set+model.moe_every=2+--set+model.n_layer=4"
plan_memory_cases "$np" "$mcfg" "$CASES"
# The trainer's all-to-alls, traced (TRIDENT_COMM_TRACE) on 2 ranks at ep
# 2 with full recomputation: each rank issues on the ep group as many as
# plan counts (12 a microbatch here, 2 microbatches), and all the ranks'
# calls together send B T top_k rows of C elements a call (each rank's
# dispatch; what returns, the same), whatever the routing's split among
# the ranks: plan's bytes for one, (ep-1)/ep of them in fp32.
sets="--set parallel.ep=2 --set train.recompute=full --set train.grad_accum=2 --set train.steps=1"
export TRIDENT_COMM_TRACE="$WORK/trace"
# shellcheck disable=SC2086
run 2 train --config "$mcfg" $MOE_SETS $sets
unset TRIDENT_COMM_TRACE
# shellcheck disable=SC2086
"$TRIDENT" plan --config "$mcfg" --world 2 $MOE_SETS $sets > "$WORK/plan.out" 2>&1
line=$(grep '^expert all-to-all: ' "$WORK/plan.out")
cat "$WORK/trace"/rank-*.trace 2>/dev/null | awk -v plan="$(echo "$line" | awk '{ print $3, $9 }')" '
    $1 == "coll" && $2 ~ /^ep@/ && $4 == "alltoallv" { calls++ }
    $1 == "a2a" { n = split(substr($4, 6), s, ","); for (i = 1; i <= n; i++) sent += s[i] }
    END {
        split(plan, p, " ")        # plan: one call, bytes to the other rank; calls a microbatch
        rows = 4 * 32 * 2 * 32     # micro_batch x seq_len x top_k x n_embd
        ok = calls > 0 && calls == 2 * 2 * p[2] && sent == calls * rows
        exit !(ok && (p[1] - rows * 4 / 2) / p[1] < 1e-3 && (p[1] - rows * 4 / 2) / p[1] > -1e-3) }'
ok $? "the trainer's all-to-alls are plan's: $(grep -c '^coll ep@[0-9]* [0-9]* alltoallv' "$WORK/trace/rank-00000.trace" 2>/dev/null) on rank 0, plan's count x 2 microbatches, $((4 * 32 * 2 * 32)) elements a call over the ranks ($line)"
# Under zb1 the weight pass runs a recomputed layer's forward again, and
# its all-to-alls: on pp 2 x dp 2 at ep 2 every rank issues plan's count
# (8 a microbatch for its stage's one MoE layer) x 2 microbatches.
sets="--set parallel.ep=2 --set parallel.pp=2 --set parallel.schedule=zb1 --set train.recompute=full --set train.grad_accum=2 --set train.steps=1"
export TRIDENT_COMM_TRACE="$WORK/trace-zb1"
# shellcheck disable=SC2086
run 4 train --config "$mcfg" $MOE_SETS $sets
unset TRIDENT_COMM_TRACE
# shellcheck disable=SC2086
per=$("$TRIDENT" plan --config "$mcfg" --world 4 $MOE_SETS $sets 2>&1 |
    sed -n 's/^expert all-to-all: .* bytes a rank in each, \([0-9]*\) a microbatch on stage 0 .*/\1/p')
counts=$(for f in "$WORK/trace-zb1"/rank-*.trace; do grep -c '^coll ep@[0-9]* [0-9]* alltoallv' "$f"; done | sort -u | tr '\n' ' ')
[ "$rc" -eq 0 ] && [ "$counts" = "$((2 * ${per:-0})) " ]
ok $? "zb1 with recompute: every rank's all-to-alls (${counts% }) are plan's ${per:-?} a microbatch x 2"
done_testing
