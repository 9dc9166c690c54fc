#!/bin/sh
# t_indexed.sh - Megatron-LM indexed datasets and blends in training.
# The datasets are written by tests/mkidx (written from the format, not by
# trident's writer): the bytes of the test corpus as uint16 or int32 tokens.
# - an indexed dataset trains bitwise like the same tokens as format = text
#   (same samples in the same order), in uint16 and in int32;
# - a resumed run continues bitwise as the run that never stopped, for an
#   indexed dataset and for a blend (whose data state is the cursor alone);
# - other layouts (dp 2; dp 2 x tp 2; pp 2 x dp 2) give the single rank's
#   losses within relative 1e-5, for both;
# - a blend reports val_loss/<name> of each dataset on stdout and in the
#   metrics file, and val_loss is their mean weighted by the blend.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
ranks=${1:-4}   # run() sets np
MKIDX="${TRI_BUILDDIR:-.}/tests/mkidx"
plan 12
cfg="$WORK/c.ini"
write_config "$cfg" 4
cat >> "$cfg" <<EOC
[eval]
batches = 1
EOC
"$MKIDX" "$DATA/small.txt" "$WORK/u16" && "$MKIDX" -t int32 "$DATA/small.txt" "$WORK/i32" &&
    "$MKIDX" -a 256 "$DATA/small.txt" "$WORK/high"
ok $? "mkidx writes the test datasets"

loss_lines() { grep -o '"step":[0-9]*,"loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1"; }
# trial NAME NP [options]: an 8-step run; its metrics in $WORK/NAME.jsonl
trial() {
    t_name=$1 t_n=$2
    shift 2
    run "$t_n" train --config "$cfg" --set train.steps=8 --set log.metrics="$WORK/$t_name.jsonl" "$@"
    cp "$WORK/out" "$WORK/$t_name.out"
    [ "$rc" = 0 ] || sed 's/^/#   /' "$WORK/out" | grep -v '^#   [a-z_0-9]* = ' | tail -n 8
}
# same REF NAME: the 8 losses of NAME within relative 1e-5 of REF's
same() {
    worst=$(paste "$WORK/$1.loss" "$WORK/$2.loss" | awk '
        { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > w) w = r; n++ }
        END { if (n != 8) print "missing"; else printf "%.2e", w }')
    awk -v w="$worst" 'BEGIN { exit !(w != "missing" && w + 0 <= 1e-5) }'
}
losses() { sed -n 's/^{"step":.*"loss":\([^,]*\).*/\1/p' "$WORK/$1.jsonl" > "$WORK/$1.loss"; }

# 1. the same tokens as text
trial text 1
trial u16 1 --set data.format=indexed --set data.train="$WORK/u16"
trial i32 1 --set data.format=indexed --set data.train="$WORK/i32"
loss_lines "$WORK/text.jsonl" > "$WORK/a"
loss_lines "$WORK/u16.jsonl" > "$WORK/b"
[ -s "$WORK/a" ] && cmp -s "$WORK/a" "$WORK/b"
ok $? "uint16 indexed dataset: losses and norms bitwise those of the same bytes as format = text"
loss_lines "$WORK/i32.jsonl" > "$WORK/b"
[ -s "$WORK/a" ] && cmp -s "$WORK/a" "$WORK/b"
ok $? "int32 indexed dataset: the same"

# 2. resume: steps 5-8 after resuming from step 4 are those of the straight run
resume() {  # resume NAME [options]
    r_name=$1
    shift
    trial "$r_name-straight" 1 --set checkpoint.every=4 --set checkpoint.dir="$WORK/$r_name-s" "$@"
    mkdir -p "$WORK/$r_name-r"
    cp "$WORK/$r_name-s/step_00000004.h5" "$WORK/$r_name-r/"
    echo step_00000004.h5 > "$WORK/$r_name-r/latest"
    trial "$r_name-resumed" 1 --set checkpoint.dir="$WORK/$r_name-r" "$@"
    loss_lines "$WORK/$r_name-straight.jsonl" | tail -n 4 > "$WORK/a"
    loss_lines "$WORK/$r_name-resumed.jsonl" > "$WORK/b"
    grep -q "resumed from .*step_00000004.h5: step 4" "$WORK/out" && cmp -s "$WORK/a" "$WORK/b"
}
resume idx --set data.format=indexed --set data.train="$WORK/u16"
ok $? "indexed: steps 5-8 after a resume from step 4 are bitwise the straight run's"
blend="--set data.format=indexed --set model.vocab_size=512"
# shellcheck disable=SC2086
resume blend $blend --set data.train="0.7 $WORK/u16 0.3 $WORK/high"
ok $? "blend 0.7/0.3: steps 5-8 after a resume from step 4 are bitwise the straight run's"

# 3. layouts
losses u16
# layout NAME RANKS DP PP TP [options]
layout() {
    name=$1 n=$2 dp=$3 pp=$4 tp=$5
    shift 5
    if [ "$n" -gt "$ranks" ]; then
        ok 0 "$name # SKIP needs $n ranks"
        return
    fi
    trial "$name" "$n" --set parallel.dp="$dp" --set parallel.pp="$pp" --set parallel.tp="$tp" \
        --set train.micro_batch=$((4 / dp)) "$@"
    losses "$name"
    same "$ref" "$name"
    ok $? "$name: 8 losses match the single rank (max rel $worst, tol 1e-5)"
}
ref=u16
layout idx-dp2 2 2 1 1 --set data.format=indexed --set data.train="$WORK/u16"
layout idx-dp2tp2 4 2 1 2 --set data.format=indexed --set data.train="$WORK/u16"
ref=blend
# shellcheck disable=SC2086
trial blend 1 $blend --set data.train="0.7 $WORK/u16 0.3 $WORK/high"
losses blend
# shellcheck disable=SC2086
layout blend-dp2 2 2 1 1 $blend --set data.train="0.7 $WORK/u16 0.3 $WORK/high"
# shellcheck disable=SC2086
layout blend-pp2dp2 4 2 2 1 $blend --set data.train="0.7 $WORK/u16 0.3 $WORK/high"
# shellcheck disable=SC2086
layout blend-dp2tp2 4 2 1 2 $blend --set data.train="0.7 $WORK/u16 0.3 $WORK/high"

# 4. validation per dataset
grep -q "step  *8/8 | loss [0-9.]* | val [0-9.]* | val_loss/u16 [0-9.]* | val_loss/high [0-9.]*" \
    "$WORK/blend.out"
ok $? "stdout shows val_loss/u16 and val_loss/high beside val"
line=$(grep '"step":8,' "$WORK/blend.jsonl")
echo "$line" | awk '{
    v = $0; sub(/.*"val_loss":/, "", v); sub(/,.*/, "", v)
    a = $0; sub(/.*"val_loss\/u16":/, "", a); sub(/,.*/, "", a)
    b = $0; sub(/.*"val_loss\/high":/, "", b); sub(/,.*/, "", b)
    m = 0.7 * a + 0.3 * b; d = v - m; if (d < 0) d = -d
    printf "# val_loss %s, val_loss/u16 %s, val_loss/high %s\n", v, a, b
    exit !(a > 0 && b > 0 && d <= 1e-6 * v) }'
ok $? "the metrics file has val_loss/<name> of each, and val_loss = 0.7 u16 + 0.3 high"
done_testing
