#!/usr/bin/env bash
# bitwise.sh OLD NEW - does a refactoring keep trident's behaviour bit for
# bit? Runs the same short trainings with two builds of trident (OLD and NEW,
# paths to the binaries) over a set of layouts, GPT-2 and Llama (one rank;
# dp x pp x tp with ZeRO 0-3; every pipeline schedule; two-level DP;
# sequence parallelism; recompute; fp32, bf16 and fp16), and compares what
# each run says: every step's loss, gradient norm, loss scale and
# validation loss, the sample it generates, and its final checkpoint
# (h5diff, every dataset and attribute but the run's own tag and times).
# Then `trident plan` on a few layouts, whose figures must agree (its
# output's layout aside: plan_figures).
# Prints one line per case and ends "N passed, N failed".
#
# Not part of `make check`: it needs two builds. For a change that must
# not move a bit: build the old tree somewhere, then
#   bench/bitwise.sh /tmp/old/trident ./trident
set -u
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
    echo "usage: $0 OLD_TRIDENT NEW_TRIDENT" >&2
    exit 2
fi
old=$(realpath "$1")
new=$(realpath "$2")
top=$(cd "$(dirname "$0")/.." && pwd)
corpus=$top/data/fortunes.txt
[ -f "$corpus" ] || { echo "bitwise.sh: $corpus missing (jobs/get-data.sh)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
work=$(mktemp -d /tmp/trident-bitwise.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

common=(--set "data.train=$corpus" --set train.steps=4 --set train.micro_batch=2
        --set log.every=1 --set eval.every=2 --set eval.batches=2
        --set log.sample_tokens=24 --set checkpoint.dir=ck --set train.warmup=2)
llama=(--set model.arch=llama --set model.n_kv_head=2 --set model.ffn_dim=320)

# run BIN DIR NP ARGS...: one training in DIR; prints nothing
run() {
    local bin=$1 dir=$2 np=$3
    shift 3
    mkdir -p "$dir"
    (cd "$dir" && mpirun --oversubscribe -np "$np" "$bin" train "${common[@]}" \
        --set log.metrics=m.jsonl "$@" >out.txt 2>&1)
    echo $? >"$dir/rc"
}

# what of a run must agree: exit code, metrics that do not time, the sample
summary() {
    local dir=$1
    cat "$dir/rc"
    # step records only: a run's header record (its id and start time) differs by design
    jq -c 'select(.step != null) | {step, loss, grad_norm, loss_scale, val_loss, skipped}' "$dir/m.jsonl" 2>&1
    sed -n '/^sample (/,/^done:/p' "$dir/out.txt" | grep -av '^done:'
}

compare_case() {
    local name=$1 np=$2
    shift 2
    local a=$work/$name/old b=$work/$name/new why=""
    run "$old" "$a" "$np" "$@"
    run "$new" "$b" "$np" "$@"
    if [ "$(cat "$a/rc")" != 0 ]; then
        why="the old build failed (rc $(cat "$a/rc")): $(tail -n 1 "$a/out.txt")"
    elif ! diff <(summary "$a") <(summary "$b") >"$work/$name.diff"; then
        why="metrics or sample differ: $(head -n 4 "$work/$name.diff" | tr '\n' ' ')"
    else
        local ca cb
        ca=$(find "$a/ck" -name "step_*.h5" 2>/dev/null | sort | tail -n 1)
        cb=$(find "$b/ck" -name "step_*.h5" 2>/dev/null | sort | tail -n 1)
        if [ -z "$ca" ] || [ -z "$cb" ]; then
            why="no checkpoint"
        elif ! h5diff -q "$ca" "$cb" >/dev/null 2>&1; then
            # the root attributes hold the run's times and tag: compare the
            # datasets, each by name
            local d
            for d in $(h5ls -r "$ca" | awk '$2 == "Dataset" {print $1}'); do
                h5diff -q "$ca" "$cb" "$d" "$d" >/dev/null 2>&1 || why="$why $d"
            done
            [ -n "$why" ] && why="checkpoint datasets differ:$why"
        fi
    fi
    if [ -z "$why" ]; then
        passed=$((passed + 1))
        echo "ok $name"
    else
        failed=$((failed + 1))
        echo "not ok $name: $why"
    fi
}

# plan's figures, whatever their layout on the page: from the "plan:" line
# on (the config print before it lists what differs from the defaults),
# without the last line (train with:, since issue 36), "ranks A-B:" and
# "stages A-B:" rows written out one per rank or stage, the schedules
# table once (it was printed twice), the layouts that fit --mem without
# their header's ordering note, and all lines sorted, so that only the
# numbers and the rows count. Context parallelism (issue 39) added what a
# plan at cp 1 writes as "x cp 1 x", ", cp 0", a zero "context-parallel
# traffic" term and the layout table's cp column, whose cp 1 rows are
# compared (cp > 1 rows are new layouts); tables' runs of blanks count as one.
plan_figures() {
    sed -n '/^plan: /,$p' | grep -v '^train with:' | awk '
        { gsub(/ x cp 1 x /, " x "); sub(/, cp 0$/, "") }
        /^  context-parallel traffic \(exposed\) +0\.00 ms/ { next }
        /^ +dp +pp +tp / { sub(/ +cp /, " "); gsub(/ +/, " "); print; next }
        /^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +(none|full) / {
            if ($4 != 1) next   # a cp column: only cp 1 rows
            $4 = ""
        }
        /^ *[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +(none|full) / { $1 = $1; gsub(/ +/, " "); print; next }
        /^  (rank|stage)s [0-9]+-[0-9]+: / {
            what = substr($1, 1, length($1) - 1); split($2, r, "-"); sub(/:$/, "", r[2])
            row = $0; sub(/^  [a-z]+ [0-9]+-[0-9]+: /, "", row); sub(/\(each of their/, "(each of its", row)
            for (i = r[1] + 0; i <= r[2] + 0; i++) printf "  %s %3d: %s\n", what, i, row
            next
        }
        /^schedules |^  schedule |^  (1f1b|gpipe|interleaved|zb1) |^recommended schedule/ { if (seen[$0]++) next }
        { sub(/ \(largest rank\), best first .*:$/, " (largest rank):"); print }' | sort
}

plan_case() {
    local name=$1
    shift
    local pa pb all_old=() all_new=()
    # a plan that knows --all lists only the best ten layouts that fit
    # --mem without it: ask each build that knows it for every layout
    case " $* " in *" --mem "*)
        "$old" plan --help 2>&1 | grep -q -- '--all' && all_old=(--all)
        "$new" plan --help 2>&1 | grep -q -- '--all' && all_new=(--all) ;;
    esac
    pa=$("$old" plan --config "$top/jobs/configs/tiny.ini" "$@" "${all_old[@]}" 2>&1 | plan_figures)
    pb=$("$new" plan --config "$top/jobs/configs/tiny.ini" "$@" "${all_new[@]}" 2>&1 | plan_figures)
    if [ "$pa" = "$pb" ]; then
        passed=$((passed + 1))
        echo "ok plan $name"
    else
        failed=$((failed + 1))
        echo "not ok plan $name: $(diff <(echo "$pa") <(echo "$pb") | head -n 4 | tr '\n' ' ')"
    fi
}

compare_case gpt2-1rank 1
compare_case gpt2-1rank-untied 1 --set model.tie_embeddings=false
for z in 0 1 2 3; do
    compare_case "gpt2-2x2x2-zero$z" 8 --set parallel.dp=2 --set parallel.pp=2 \
        --set parallel.tp=2 --set parallel.zero=$z --set train.grad_accum=2
done
for s in 1f1b gpipe zb1; do
    compare_case "gpt2-pp4-$s" 4 --set parallel.pp=4 --set parallel.schedule=$s \
        --set train.grad_accum=4
done
compare_case gpt2-pp2-interleaved 2 --set parallel.pp=2 --set parallel.schedule=interleaved \
    --set parallel.virtual_stages=2 --set train.grad_accum=4
compare_case gpt2-dp4-two-level 4 --set parallel.node_size=2 --set parallel.zero=1
compare_case gpt2-dp4-two-level-zero0 4 --set parallel.node_size=2 --set parallel.zero=0
compare_case gpt2-tp2-sp 2 --set parallel.tp=2 --set parallel.sequence_parallel=true
compare_case gpt2-recompute-full 2 --set parallel.pp=2 --set train.recompute=full \
    --set train.grad_accum=2
compare_case gpt2-recompute-every2 1 --set train.recompute=every:2
compare_case gpt2-bf16 2 --set train.precision=bf16 --set parallel.zero=2
compare_case gpt2-fp16 2 --set train.precision=fp16 --set parallel.tp=2
compare_case llama-1rank 1 "${llama[@]}"
compare_case llama-2x2x2-zero3 8 "${llama[@]}" --set parallel.dp=2 --set parallel.pp=2 \
    --set parallel.tp=2 --set parallel.zero=3 --set train.grad_accum=2
compare_case llama-tp4-kv-replicas-sp 4 "${llama[@]}" --set parallel.tp=4 \
    --set parallel.sequence_parallel=true
compare_case llama-pp2-zb1-bf16 2 "${llama[@]}" --set parallel.pp=2 \
    --set parallel.schedule=zb1 --set train.grad_accum=2 --set train.precision=bf16
compare_case llama-dp4-two-level-recompute 4 "${llama[@]}" --set parallel.node_size=2 \
    --set train.recompute=full

gpt2_small=(--set model.n_layer=12 --set model.n_embd=768 --set model.n_head=12
            --set model.seq_len=1024 --set model.vocab_size=50304 --set train.micro_batch=8)
plan_case tiny-8 --world 8 --set parallel.pp=2 --set parallel.tp=2
plan_case gpt2-small-64-mem --world 64 --mem 40 "${gpt2_small[@]}"
plan_case gpt2-small-h100 --world 16 --hw h100 "${gpt2_small[@]}" --set parallel.tp=2 \
    --set parallel.sequence_parallel=true --set train.precision=bf16
plan_case llama-8-zb1 --world 8 "${llama[@]}" --set parallel.pp=4 --set parallel.schedule=zb1 \
    --set train.recompute=every:2 --set parallel.node_size=2 --hw h200

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
