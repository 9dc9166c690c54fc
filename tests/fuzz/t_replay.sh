#!/bin/sh
# t_replay.sh - replays every file of the fuzz corpora (tests/fuzz/corpus/)
# through its target, without libFuzzer: no crash, no sanitizer report
# (in a --enable-sanitizers build), no property broken (fuzz_fail).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
plan 6
for t in config data ckpt safetensors indexed tokenizer; do
    corpus="${TRI_SRCDIR:-.}/tests/fuzz/corpus/$t"
    # shellcheck disable=SC2086
    $TRI_MPIEXEC -n 1 "${TRI_BUILDDIR:-.}/tests/fuzz/replay_$t" "$corpus" > "$WORK/out" 2>&1
    rc=$?
    n=$(grep -c '^replayed ' "$WORK/out")
    total=$(find "$corpus" -type f | wc -l)
    [ "$rc" -eq 0 ] && [ "$n" -eq "$total" ]
    ok $? "fuzz_$t: all $n of $total corpus files replayed, no crash or finding (exit $rc)"
    [ "$rc" -eq 0 ] || grep -v '^replayed ' "$WORK/out" | sed 's/^/#   /' | tail -n 15
done
done_testing
