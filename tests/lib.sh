# shellcheck shell=sh
# lib.sh - TAP helpers for the script tests. Sourced; mpitap.sh exports
# TRI_MPIEXEC, TRI_BUILDDIR and TRI_SRCDIR.
tap_n=0
tap_failed=0
TRIDENT="${TRI_BUILDDIR:-.}/trident"
DATA="${TRI_SRCDIR:-.}/tests/data"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/trident-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

plan() { echo "1..$1"; }
# Whether this CPU runs trident's own bf16 GEMM (TRIDENT_CPU_BF16_GEMM=
# trident): it needs AVX2 (with FMA) or AVX512_BF16.
cpu_has_trident_bf16_gemm() { grep -q -w -E 'avx2|avx512_bf16' /proc/cpuinfo 2>/dev/null; }
# ok CONDITION-EXIT-STATUS DESCRIPTION: one TAP line; returns the
# condition's status, so `ok $? "..." || diag_output` shows what failed.
ok() {
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $tap_n - $2"
    else
        echo "not ok $tap_n - $2"
        tap_failed=$((tap_failed + 1))
        return 1
    fi
}
diag() { echo "# $*"; }
done_testing() { [ "$tap_failed" -eq 0 ]; exit $?; }

# run NP ARGS...: runs trident under mpiexec; stdout+stderr to $WORK/out,
# exit status to $rc.
run() {
    np=$1
    shift
    # shellcheck disable=SC2086
    $TRI_MPIEXEC -n "$np" "$TRIDENT" "$@" >"$WORK/out" 2>&1
    rc=$?
}

# skip_without_gpu: when the last run (on device = cuda) failed for want
# of a CUDA build or of a GPU, prints `1..0 # SKIP` and why, and exits.
skip_without_gpu() {
    [ "$rc" -ne 0 ] || return 0
    if grep -q "reconfigure with --with-cuda" "$WORK/out"; then
        echo "1..0 # SKIP built without CUDA"
        exit 0
    elif grep -q "no CUDA device" "$WORK/out"; then
        echo "1..0 # SKIP no CUDA device"
        exit 0
    fi
}

# expect RC PATTERN DESCRIPTION: the last run exited RC and printed PATTERN.
expect() {
    if [ "$rc" -eq "$1" ] && grep -q -- "$2" "$WORK/out"; then
        ok 0 "$3 (exit $rc)"
    else
        ok 1 "$3: wanted exit $1 and '$2', got exit $rc"
        sed 's/^/#   /' "$WORK/out" | head -n 20
    fi
}

# write_config FILE [EVAL_EVERY]: a small config over the test corpus, on
# the CPU (tests/mpitap.sh also hides GPUs from the CPU suite); extra
# lines may follow. It turns off what the defaults turn on and the tests
# need not pay for: validation (unless EVAL_EVERY, e.g. 30: every 30
# steps), the sample at the end and the metrics file a [checkpoint] dir
# would hold; a test asks for them with --set (log.sample_tokens=40,
# log.metrics=FILE), or appends [eval]'s other keys.
write_config() {
    cat > "$1" <<EOC
[parallel]
device = cpu
[model]
n_layer = 2
n_embd = 32
n_head = 2
seq_len = 32
vocab_size = 256
[train]
micro_batch = 4
steps = 4
lr = 3e-3
warmup = 2
[data]
train = $DATA/small.txt
[eval]
every = ${2:-0}
[log]
every = 1
metrics =
sample_tokens = 0
EOC
}

# max_rel A B N: the largest relative difference between the numbers of
# files A and B, line by line, or "missing" unless both hold N of them
max_rel() {
    paste "$1" "$2" | awk -v want="$3" '
        { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > w) w = r; n++ }
        END { if (n != want) print "missing"; else printf "%.2e", w }'
}

# train_keys CONFIG NAME RANKS KEYS: trident train on RANKS ranks with
# CONFIG and its keys KEYS (k=v,k=v) set; its checkpoints in $WORK/NAME,
# its metrics in $WORK/NAME.jsonl, its output in $WORK/NAME.out (the
# layout tests compare these runs)
train_keys() {
    sets=""
    for kv in $(echo "$4" | tr , ' '); do sets="$sets --set $kv"; done
    # shellcheck disable=SC2086
    $TRI_MPIEXEC -n "$3" "$TRIDENT" train --config "$1" --set checkpoint.dir="$WORK/$2" \
        --set log.metrics="$WORK/$2.jsonl" $sets > "$WORK/$2.out" 2>&1
}
# within WORST TOL: whether max_rel's answer WORST is a number within TOL
within() { awk -v w="$1" -v t="$2" 'BEGIN { exit !(w != "missing" && w + 0 <= t + 0) }'; }

# single_rank_match MODEL RUN N WHAT TOL WTOL STATUS: a layout test's two
# TAP lines for run RUN of MODEL: the N numbers of $WORK/RUN.loss (WHAT)
# against $WORK/MODEL.ref.loss within relative TOL, and RUN's final
# checkpoint (step 4) against the single-rank run MODEL-1x1x1's within
# WTOL (tests/ckpt_diff); RUN's output's tail too unless STATUS is 0
single_rank_match() {
    worst=$(max_rel "$WORK/$1.ref.loss" "$WORK/$2.loss" "$3")
    within "$worst" "$5"
    ok $? "$2: $4 match the single rank (max rel $worst, tol $5)"
    [ "$7" -eq 0 ] || sed 's/^/# /' "$WORK/$2.out" | tail -n 5
    result=$("${TRI_BUILDDIR:-.}/tests/ckpt_diff" "$WORK/$1-1x1x1/step_00000004.h5" \
        "$WORK/$2/step_00000004.h5" "$6")
    ok $? "$2: final weights match ($result)"
}

# every_rank POINT STEP [POINT STEP ...]: TRIDENT_FAULT text arming each
# fault point on every one of the $np ranks (src/base/fault.h)
every_rank() {
    f=""
    while [ $# -ge 2 ]; do
        i=0
        while [ $i -lt "$np" ]; do f="$f${f:+,}$1:$i:$2"; i=$((i + 1)); done
        shift 2
    done
    echo "$f"
}

# memory_table FILE: the rows of the memory table in FILE, one per rank:
# plan's "ranks A-B: ..." (equal ranks on one line) written out as the
# trainer's "rank A: ..." lines
memory_table() {
    sed -n '/^memory per rank/,/^[^ m]/p' "$1" | awk '
        /^  ranks [0-9]+-[0-9]+: / {
            split($2, r, "-"); sub(/:$/, "", r[2])
            row = $0; sub(/^  ranks [0-9]+-[0-9]+: /, "", row)
            for (i = r[1] + 0; i <= r[2] + 0; i++) printf "  rank %3d: %s\n", i, row
            next
        }
        /^  rank / { print }'
}

# plan_memory_cases NP CONFIG CASES: for each line NAME:SETS of CASES (SETS
# the options with + for blanks), the trainer's memory table at start-up
# on NP ranks (0 steps) against plan's for the same world: one ok each,
# the difference (and the trainer's complaint) as comments when they
# differ. The next case's trainer starts while one is judged: a launch
# mostly waits (MPI's start-up and tear-down), and two at once share the
# cores better than one after the other.
plan_memory_cases() {
    n_cases=$(echo "$3" | wc -l)
    memory_trainer 1 "$@"
    k=1
    for c in $3; do
        [ "$k" -ge "$n_cases" ] || memory_trainer $((k + 1)) "$@"
        wait "$(cat "$WORK/mem$k.pid")"
        name=${c%%:*}
        sets=$(echo "${c#*:}" | tr '+' ' ')
        memory_table "$WORK/mem$k.out" > "$WORK/train.mem"
        # shellcheck disable=SC2086
        "$TRIDENT" plan --config "$2" --world "$1" $sets > "$WORK/plan.out" 2>&1
        memory_table "$WORK/plan.out" > "$WORK/plan.mem"
        [ -s "$WORK/train.mem" ] && cmp -s "$WORK/train.mem" "$WORK/plan.mem"
        ok $? "$name: plan's per-rank memory equals the trainer's ($(wc -l < "$WORK/plan.mem") ranks)"
        cmp -s "$WORK/train.mem" "$WORK/plan.mem" || {
            diff "$WORK/train.mem" "$WORK/plan.mem" | sed 's/^/# /'
            grep "trident:" "$WORK/mem$k.out" | head -n 3 | sed 's/^/# /'
        }
        k=$((k + 1))
    done
}
# memory_trainer K NP CONFIG CASES: starts the trainer (0 steps) of the
# Kth case in the background: its output in $WORK/memK.out, its pid in
# $WORK/memK.pid
memory_trainer() {
    mt_case=$(echo "$4" | sed -n "${1}p")
    mt_sets=$(echo "${mt_case#*:}" | tr '+' ' ')
    # shellcheck disable=SC2086  # the options, split on purpose
    $TRI_MPIEXEC -n "$2" "$TRIDENT" train --config "$3" --set train.steps=0 $mt_sets \
        > "$WORK/mem$1.out" 2>&1 &
    echo $! > "$WORK/mem$1.pid"
}

# emu_not_built WHAT LOG...: a host-emulation test's C++ build failed
# (tests/cuda_emu): a skip when $CXX has no C++20, else "not ok 1 - WHAT"
# with the logs; exits either way.
emu_not_built() {
    what=$1
    shift
    if grep -q "std=c++20" "$1" 2>/dev/null; then
        echo "1..0 # SKIP ${CXX:-c++} has no -std=c++20"
        exit 0
    fi
    echo "1..1"
    echo "not ok 1 - $what"
    cat "$@" 2>/dev/null | sed 's/^/#   /' | head -n 30
    exit 1
}
