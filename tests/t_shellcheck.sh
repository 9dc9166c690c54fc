#!/bin/sh
# t_shellcheck.sh - every shell script we ship passes shellcheck (all
# severities, sourced files followed), one TAP line per script; and the
# launch-and-requeue block is the same in train.sbatch and cpu.sbatch.
# Skips where shellcheck is not installed.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
if ! command -v shellcheck >/dev/null 2>&1; then
    echo "1..0 # SKIP no shellcheck (apt-get install shellcheck)"
    exit 0
fi
cd "${TRI_SRCDIR:-.}" || exit 1
files=""
for f in jobs/*.sh jobs/*.sbatch tests/*.sh tests/fuzz/*.sh bench/*.sh .ci/run .ci/hardening.sh; do
    [ -f "$f" ] && files="$files $f"
done
plan $(($(echo "$files" | wc -w) + 1))
# two at a time (shellcheck uses one core; half the test's time), each
# script's output and status in $WORK/sc.N, judged in order below
n=0
for f in $files; do
    n=$((n + 1))
    echo "$n $f"
done > "$WORK/scripts"
# shellcheck disable=SC2016  # the script xargs runs: its own $0, $1, $2
xargs -n 2 -P 2 sh -c '
    # -x: follow `. tests/lib.sh`, which the tests source from the source root
    shellcheck -x "$2" > "$0/sc.$1" 2>&1
    echo $? > "$0/sc.$1.rc"' "$WORK" < "$WORK/scripts"
n=0
for f in $files; do
    n=$((n + 1))
    rc=$(cat "$WORK/sc.$n.rc" 2>/dev/null || echo 1)
    ok "$rc" "shellcheck $f"
    [ "$rc" -eq 0 ] || sed 's/^/#   /' "$WORK/sc.$n" | head -n 40
done
block() { sed -n '/^# ---- launch, forward signals, requeue/,/^# ---- end of the shared block/p' "$1"; }
block jobs/train.sbatch > "$WORK/train"
block jobs/cpu.sbatch > "$WORK/cpu"
[ -s "$WORK/train" ] && cmp -s "$WORK/train" "$WORK/cpu"
ok $? "train.sbatch and cpu.sbatch launch, forward signals and requeue the same way"
done_testing
