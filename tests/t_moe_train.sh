#!/bin/sh
# t_moe_train.sh - a mixture of experts' metrics in real runs (doc/moe.md,
# "The metrics"): every logged step's record and line carry the MoE
# figures, z and drops only where there is a z-loss or a capacity, the
# tp ranks of a replica count their routing once, a dense run has none;
# and jobs/configs/moe-tiny.ini is a valid run.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
ranks=${1:-2}
plan 7
cfg="$WORK/c.ini"
write_config "$cfg"
moe="--set model.arch=llama --set model.n_expert=4 --set train.steps=3 --set log.metrics=$WORK/m.jsonl"

# field NAME: the value of "NAME" in each step record of m.jsonl, one a line
field() { sed -n "s/^{\"step\":.*\"$1\":\([^,}]*\).*/\1/p" "$WORK/m.jsonl"; }

rm -f "$WORK/m.jsonl"
# shellcheck disable=SC2086
run "$ranks" train --config "$cfg" $moe
n=$(grep -c '^{"step":' "$WORK/m.jsonl" 2>/dev/null)
aux=$(field moe_aux | tr '\n' ' ')
loads=$(sed -n 's/^{"step":.*"moe_load":\(\[[^]]*\]\).*/\1/p' "$WORK/m.jsonl" | sed -n 1p)
[ "$rc" -eq 0 ] && [ "$n" -eq 3 ] && [ "$(field moe_aux | grep -c '^[0-9.e+-]*$')" -eq 3 ] &&
    [ "$(field moe_dropped | sort -u)" = 0 ] && [ "$(field moe_load_max_layer | sed -n 1p)" -ge 0 ] &&
    echo "$loads" | grep -q '^\[[0-9.e+-]*,[0-9.e+-]*\]$' && ! grep -q moe_z "$WORK/m.jsonl" &&
    [ "$(grep -c '| moe aux [0-9.]* load [0-9.]* (h\.[01])' "$WORK/out")" -eq 3 ] &&
    ! grep '^step' "$WORK/out" | grep -q dropped
ok $? "a MoE run: aux ($aux) and both layers' loads ($loads) on each of 3 steps, no drops, no z"
awk -v l="$(field moe_load_max | sed -n 1p)" 'BEGIN { exit !(l >= 1 && l <= 4) }'
ok $? "the worst load is between even (1) and all on one expert (4): $(field moe_load_max | tr '\n' ' ')"

# with a capacity that must drop, and a z-loss, on one rank
cap="--set model.moe_capacity=0.5 --set model.moe_z_loss=0.001"
rm -f "$WORK/m.jsonl"
# shellcheck disable=SC2086
run 1 train --config "$cfg" $moe $cap
dropped1=$(field moe_dropped | sed -n 1p)
[ "$rc" -eq 0 ] && [ "${dropped1:-0}" -gt 0 ] && [ "$(field moe_z | wc -l)" -eq 3 ] &&
    grep -q '| moe aux [0-9.]* z [0-9.e+-]* load [0-9.]* (h\.[01]) dropped [1-9]' "$WORK/out"
ok $? "a capacity of 0.5 drops ($dropped1 pairs at step 1) and a z-loss is reported"

# the same batch on tp 2 (dp 1 again): each replica's routing counted
# once, not once per tp rank
rm -f "$WORK/m.jsonl"
# shellcheck disable=SC2086
run 2 train --config "$cfg" $moe $cap --set parallel.tp=2
dropped2=$(field moe_dropped | sed -n 1p)
awk -v a="$dropped1" -v b="${dropped2:-0}" 'BEGIN { exit !(b > 0.8 * a && b < 1.25 * a) }'
ok $? "tp 2 counts the same drops at step 1 as tp 1 ($dropped2 and $dropped1), not tp times as many"

# a dense model reports nothing of the kind
rm -f "$WORK/m.jsonl"
run "$ranks" train --config "$cfg" --set model.arch=llama --set train.steps=2 \
    --set log.metrics="$WORK/m.jsonl"
[ "$rc" -eq 0 ] && ! grep -q moe "$WORK/m.jsonl" && ! grep -q moe "$WORK/out"
ok $? "a dense llama run: no MoE field or figure"

# the preset: valid, and its MoE layers as documented
run 1 plan --config "${TRI_SRCDIR:-.}/jobs/configs/moe-tiny.ini" --world "$ranks"
expect 0 "n_expert = 4" "jobs/configs/moe-tiny.ini plans on $ranks ranks"
run "$ranks" train --config "${TRI_SRCDIR:-.}/jobs/configs/moe-tiny.ini" --set train.steps=2 \
    --set data.train="$DATA/small.txt" --set checkpoint.dir= --set eval.every=0 \
    --set log.metrics= --set log.every=1 --set log.sample_tokens=0
expect 0 "| moe aux [0-9.]* load" "jobs/configs/moe-tiny.ini trains and reports its experts"
done_testing
