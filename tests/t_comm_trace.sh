#!/bin/sh
# t_comm_trace.sh - the communication trace (TRIDENT_COMM_TRACE,
# src/parallel/comm_trace.h) and its checker (tests/trace_check.c).
#
# Each layout below trains two steps of a tiny model with an evaluation
# and the end-of-run sample (none where cp or ep > 1: generation runs
# neither), every rank tracing each call through comm.h;
# trace_check then proves from the files that on every communicator all
# members issued the same collectives and that on every pipeline link the
# sends are the receives. Each layout also names a line its trace must
# hold (the communicator or operation it is there to exercise), so a
# layout that quietly stopped using it fails. Then three doctored copies
# of a good trace (a call dropped, a count changed, two sends swapped)
# must fail the checker with a message naming the communicator or link,
# the ranks and the first differing call; expert parallelism's
# all-to-alls (tests/t_moe_ep) pair every send count with its receive,
# and one doctored count fails; a trace directory that already
# holds a trace is refused, and left as it was; and tracing changes no
# loss.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-8}
CHECK="${TRI_BUILDDIR:-.}/tests/trace_check"
cfg="$WORK/c.ini"
write_config "$cfg" 2
# every run: two steps of four microbatches, an evaluation and a sample
common="model.n_layer=4,model.n_head=4,model.seq_len=16,train.micro_batch=1"
common="$common,train.grad_accum=4,train.steps=2,train.warmup=1,eval.batches=1"
common="$common,log.sample_tokens=4"
llama="model.arch=llama,model.ffn_dim=48,model.tie_embeddings=false"
# a mixture of experts (generation needs ep = 1 and cp = 1: those layouts
# set log.sample_tokens=0, which overrides common's)
moe="$llama,model.n_expert=4,model.top_k=2,log.sample_tokens=0"

# name:ranks:a line the trace must hold (grep -E):settings (key=value,...)
LAYOUTS="tp2:2:^coll tp@:parallel.tp=2
tp2-sp:2:^coll tp@.* allgather:parallel.tp=2,parallel.sequence_parallel=1
dp2-zero0:2:^coll dp@.* iallreduce:parallel.dp=2,parallel.zero=0
dp2-zero0-no-overlap:2:^coll dp@.* allreduce n=:parallel.dp=2,parallel.zero=0,parallel.overlap=false
dp2-zero1:2:^coll dp@.* ireduce_scatter:parallel.dp=2,parallel.zero=1
dp2-zero1-no-overlap:2:^coll dp@.* reduce_scatter:parallel.dp=2,parallel.zero=1,parallel.overlap=false
dp2-zero2:2:^coll dp@.* reduce_scatter:parallel.dp=2,parallel.zero=2
dp2-zero3:2:^coll dp@.* allgather:parallel.dp=2,parallel.zero=3
pp2-1f1b:2:^send pp@:parallel.pp=2,parallel.schedule=1f1b
pp2-gpipe:2:^send pp@:parallel.pp=2,parallel.schedule=gpipe
pp2-zb1:2:^send pp@:parallel.pp=2,parallel.schedule=zb1
pp2-interleaved2:2:^send pp@:parallel.pp=2,parallel.schedule=interleaved,parallel.virtual_stages=2
llama-tp2-kv1:2:^coll kv@:$llama,model.n_kv_head=1,parallel.tp=2
async-checkpoint-dp2:2:^coll world@0#1 :parallel.dp=2,checkpoint.every=1,checkpoint.async=true
pp4-1f1b:4:^recv pp@:parallel.pp=4,train.grad_accum=8
pp4-interleaved2:4:^recv pp@:model.n_layer=8,parallel.pp=4,parallel.schedule=interleaved,parallel.virtual_stages=2,train.grad_accum=8
dp4-two-level:4:^coll dp_cross@:parallel.dp=4,parallel.node_size=2,parallel.zero=1
dp4-two-level-zero0:4:^coll dp_node@:parallel.dp=4,parallel.node_size=2,parallel.zero=0,parallel.overlap=false
dp2-pp2-zero3-interleaved:4:^coll embed@:parallel.dp=2,parallel.pp=2,parallel.zero=3,parallel.schedule=interleaved,parallel.virtual_stages=2
pp2-tp2-sp-zb1:4:^send pp@:parallel.pp=2,parallel.tp=2,parallel.sequence_parallel=1,parallel.schedule=zb1
dp2-tp2-sp-zero2:4:^coll tp@:parallel.dp=2,parallel.tp=2,parallel.sequence_parallel=1,parallel.zero=2
llama-dp2-tp2-kv1:4:^coll kv@:$llama,model.n_kv_head=1,parallel.dp=2,parallel.tp=2,parallel.zero=1
llama-tp4-kv2:4:^coll kv@:$llama,model.n_kv_head=2,parallel.tp=4
dp2-pp2-tp2:8:^send pp@:parallel.dp=2,parallel.pp=2,parallel.tp=2
dp2-pp2-tp2-sp-zero3-gpipe:8:^coll dp@.* allgather:parallel.dp=2,parallel.pp=2,parallel.tp=2,parallel.sequence_parallel=1,parallel.zero=3,parallel.schedule=gpipe
dp4-two-level-pp2-zero2:8:^coll dp_node@:parallel.dp=4,parallel.node_size=2,parallel.pp=2,parallel.zero=2
cp2:2:^coll cp@:parallel.cp=2,log.sample_tokens=0
llama-cp2-tp2-sp-zero1:4:^coll cp@:$llama,model.n_kv_head=2,parallel.cp=2,parallel.tp=2,parallel.sequence_parallel=1,parallel.zero=1,log.sample_tokens=0
moe-ep2:2:^a2a ep@:$moe,parallel.ep=2
moe-ep2-tp2:4:^coll edp@:$moe,parallel.ep=2,parallel.tp=2
moe-ep2-pp2:4:^a2a ep@:$moe,parallel.ep=2,parallel.pp=2"
count=$(echo "$LAYOUTS" | wc -l)
plan $((2 * count + 11))

# trace NAME RANKS SETTINGS: a traced run into $WORK/NAME (its output in
# $WORK/NAME.out, its metrics in $WORK/NAME.jsonl); exit status in $rc.
trace() {
    set -- "$1" "$2" "$(echo "$common,$3" | tr ',' '\n' | sed 's/^/--set /' | tr '\n' ' ')"
    # shellcheck disable=SC2086
    TRIDENT_COMM_TRACE="$WORK/$1" $TRI_MPIEXEC -n "$2" "$TRIDENT" train --config "$cfg" \
        --set checkpoint.dir="$WORK/$1.ckpt" --set log.metrics="$WORK/$1.jsonl" $3 \
        < /dev/null > "$WORK/$1.out" 2>&1
    rc=$?
}

# (mpiexec forwards its stdin to rank 0: the runs read /dev/null, not the list)
while IFS=: read -r name ranks expect settings; do
    if [ "$ranks" -gt "$np" ]; then
        ok 0 "$name # SKIP needs $ranks ranks"
        ok 0 "$name holds '$expect' # SKIP needs $ranks ranks"
        continue
    fi
    trace "$name" "$ranks" "$settings"
    if [ $rc -eq 0 ] && "$CHECK" "$WORK/$name" > "$WORK/$name.check" 2>&1; then
        ok 0 "$name ($ranks ranks): $(cat "$WORK/$name.check")"
    else
        ok 1 "$name ($ranks ranks): the run exited $rc, or its trace failed the check"
        sed 's/^/# /' "$WORK/$name.check" "$WORK/$name.out" 2>/dev/null | tail -n 12
    fi
    cat "$WORK/$name"/rank-*.trace 2>/dev/null | grep -q -E "$expect"
    ok $? "$name: its trace holds '$expect'"
done <<EOL
$LAYOUTS
EOL

# doctor NAME HOW: a copy of the pp2-tp2-sp-zb1 trace in $WORK/NAME, with
# rank 0's file passed through the awk program HOW; the checker's verdict
# in $WORK/NAME.check, its exit status in $rc.
good="$WORK/pp2-tp2-sp-zb1"
doctor() {
    cp -r "$good" "$WORK/$1"
    awk "$2" "$good/rank-00000.trace" > "$WORK/$1/rank-00000.trace"
    "$CHECK" "$WORK/$1" > "$WORK/$1.check" 2>&1
    rc=$?
}
# doctored NAME PATTERN DESCRIPTION: the checker refused NAME with PATTERN.
doctored() {
    if [ $rc -eq 1 ] && grep -q -E -- "$2" "$WORK/$1.check"; then
        ok 0 "$3: $(cat "$WORK/$1.check")"
    else
        ok 1 "$3: wanted exit 1 and '$2', got exit $rc"
        sed 's/^/#   /' "$WORK/$1.check" | head -n 5
    fi
}
if [ -d "$good" ]; then
    doctor dropped '/^coll tp@0 / && ++n == 5 { next } { print }'
    doctored dropped "communicator tp@0 \(world ranks 0,1\): call 4 differs: world rank 0 \(its rank 0\) issued #5 .*; world rank 1 \(its rank 1\) issued #4 " \
        "a collective dropped from rank 0's trace"
    doctor count '/^coll tp@0 / && ++n == 3 { sub(/ n=[0-9]+ /, " n=7 ") } { print }'
    doctored count "communicator tp@0 \(world ranks 0,1\): call 2 differs: world rank 0 \(its rank 0\) issued #2 [a-z_]+ n=7 .*world rank 1 \(its rank 1\) issued #2 " \
        "a count changed in rank 0's trace"
    # shellcheck disable=SC2016
    doctor swapped '/^send pp@0 [0-9]+ activation/ && ++n == 2 { held = $0; next }
                    { print } n == 3 && held != "" { print held; held = "" }'
    doctored swapped "link pp@0 activation from its rank 0 to 1 \(world ranks 0 -> 2\): message 1 differs: world rank 0 sent #2 .*; world rank 2 received #1 " \
        "two activation sends swapped in rank 0's trace"
else
    for what in dropped count swapped; do ok 0 "doctored: $what # SKIP needs 4 ranks"; done
fi

# Expert parallelism's all-to-all (tests/t_moe_ep on 2 ranks: ep 2, one
# and three experts per rank, counts uneven and zero; on more ranks its
# grids of several ep sizes would give two ep groups one trace ID, which
# a run's single grid never does): the trace pairs every rank's send to a
# peer with the peer's receive, and a count doctored on one side fails.
if [ "$np" -ge 2 ]; then
    TRIDENT_COMM_TRACE="$WORK/a2a" $TRI_MPIEXEC -n 2 "${TRI_BUILDDIR:-.}/tests/t_moe_ep" \
        < /dev/null > "$WORK/a2a.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && "$CHECK" "$WORK/a2a" > "$WORK/a2a.check" 2>&1; then
        ok 0 "all-to-all over ep (2 ranks): $(cat "$WORK/a2a.check")"
    else
        ok 1 "all-to-all over ep (2 ranks): the run exited $rc, or its trace failed the check"
        sed 's/^/# /' "$WORK/a2a.check" "$WORK/a2a.out" 2>/dev/null | tail -n 12
    fi
    grep -q -E "^a2a ep@[0-9]+ [0-9]+ send=[0-9]+,[0-9]+ recv=" "$WORK/a2a"/rank-00000.trace
    ok $? "the all-to-all trace holds its a2a lines on ep"
    good="$WORK/a2a"
    # rank 0's first send count to its ep rank 1, made one larger
    # shellcheck disable=SC2016
    doctor a2a-count '/^a2a ep@/ && !done { sub(/send=[0-9]+,[0-9]+/, "&1"); done = 1 } { print }'
    doctored a2a-count "communicator ep@0 \(world ranks 0,1\): all-to-all #[0-9]+: world rank 0 \(its rank 0\) sent [0-9]+ elements to its rank 1, but world rank 1 \(its rank 1\) received [0-9]+ from its rank 0" \
        "an all-to-all's send count changed in rank 0's trace"
else
    for what in run lines doctored; do ok 0 "all-to-all trace: $what # SKIP needs 2 ranks"; done
fi

# A trace is never overwritten: a second run into the same directory
# stops, names the file, and leaves the first trace as it was.
first="$WORK/tp2"
if [ -d "$first" ]; then
    sum=$(cat "$first"/rank-*.trace | cksum)
    trace tp2 2 parallel.tp=2
    grep -q "TRIDENT_COMM_TRACE: cannot create .*/tp2/rank-0000[01].trace: File exists (an earlier trace? name a new directory)" "$WORK/tp2.out"
    ok $(( $? || rc == 0 )) "a trace directory holding a trace is refused (exit $rc), naming the file"
    [ "$(cat "$first"/rank-*.trace | cksum)" = "$sum" ]
    ok $? "the earlier trace is left as it was"
else
    ok 0 "the refusal # SKIP needs 2 ranks"
    ok 0 "the earlier trace # SKIP needs 2 ranks"
fi

# Tracing changes nothing a run computes: the same losses untraced.
losses() { sed -n 's/^{"step":.*"loss":\([^,]*\).*/\1/p' "$1"; }
# shellcheck disable=SC2046
$TRI_MPIEXEC -n 2 "$TRIDENT" train --config "$cfg" --set parallel.tp=2 \
    $(echo "$common" | tr ',' '\n' | sed 's/^/--set /') \
    --set checkpoint.dir="$WORK/untraced.ckpt" --set log.metrics="$WORK/untraced.jsonl" \
    > "$WORK/untraced.out" 2>&1
[ -s "$WORK/untraced.jsonl" ] && [ "$(losses "$WORK/untraced.jsonl")" = "$(losses "$WORK/tp2.jsonl")" ]
ok $? "tp 2: the traced run's losses are the untraced run's, digit for digit"
[ ! -e "$WORK/untraced" ] && ! grep -q "tracing every communication call" "$WORK/untraced.out"
ok $? "untraced: no trace is written or announced"

# The checker itself: a directory missing a rank's file fails.
if [ -d "$first" ]; then
    cp -r "$first" "$WORK/missing" && rm "$WORK/missing/rank-00001.trace"
    "$CHECK" "$WORK/missing" > "$WORK/missing.check" 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -q "1 trace files for a world of 2 ranks" "$WORK/missing.check"
    ok $? "a trace missing a rank's file fails the checker (exit $rc)"
else
    ok 0 "missing file # SKIP needs 2 ranks"
fi
done_testing
