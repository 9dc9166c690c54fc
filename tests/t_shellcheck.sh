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
for f in $files; do
    # -x: follow `. tests/lib.sh`, which the tests source from the source root
    shellcheck -x "$f" > "$WORK/out" 2>&1
    rc=$?
    ok $rc "shellcheck $f"
    [ $rc -eq 0 ] || sed 's/^/#   /' "$WORK/out" | head -n 40
done
block() { sed -n '/^# ---- launch, forward signals, requeue/,/^# ---- end of the shared block/p' "$1"; }
block jobs/train.sbatch > "$WORK/train"
block jobs/cpu.sbatch > "$WORK/cpu"
[ -s "$WORK/train" ] && cmp -s "$WORK/train" "$WORK/cpu"
ok $? "train.sbatch and cpu.sbatch launch, forward signals and requeue the same way"
done_testing
