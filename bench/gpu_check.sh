#!/bin/sh
# gpu_check.sh - trident's GPU checks and its measurements against
# PyTorch (issue 34), on a GPU machine that has CUDA's libraries
# (PyTorch's wheels), transformers and tokenizers, but no MPI or HDF5,
# from the bundle bench/gpu_bundle.sh built elsewhere:
#
#   bench/gpu_check.sh [SECTIONS]     SECTIONS: any of, with the device
#                                     seconds each is guessed to take
#     env      the GPU (nvidia-smi), the libraries trident resolves, the
#              NCCL version they load, whether cuDNN and NVRTC load, and
#              an MPI hello over 1 rank from the bundle's Open MPI. 15 s
#     tests    the GPU tests: t_ops_cuda, t_gpu (GPT-2 and Llama, 20 steps
#              against the CPU), t_offload, t_gpu_wait, each log in
#              logs.tgz. 90 s
#     ab       GPT-2 small bf16 (as gpt2) once as it is and once per line
#              of GPU_AB_VARIANTS below ("NAME ENV=VAL key=VAL"): tokens/s,
#              MFU and step ms of each beside the default's, one table, so
#              a run-time switch's old and new paths are measured in one
#              call. 15 s a row
#     gpt2     GPT-2 small (12 x 768, 12 heads, T 1024, vocabulary 50304,
#              micro_batch 16) in bf16 (GPU_GPT2_DTYPES: "bf16 fp32" adds
#              fp32): tokens/s, MFU against the datasheet peak and against
#              trident's measured GEMM peak, the GPU memory nvidia-smi saw
#              at most, and `trident plan --hw`'s predicted step. 25 s
#     pytorch  the same model in PyTorch on the same GPU (bf16 autocast,
#              eager and torch.compile; bench/pytorch_gpt2.py). 80 s
#     llama1b  Llama 3.2 1B's shape (jobs/configs/llama-1b.ini: 16 x 2048,
#              32 query and 8 KV heads, FFN 8192, vocabulary 128256, T
#              2048), bf16, micro-batch GPU_LLAMA_MB (4), by trident (with
#              plan's prediction) and by PyTorch, eager and compiled
#              (bench/pytorch_llama.py). 150 s
#     interop  transformers and tokenizers as a user's client: a tiny
#              GPT-2 and a tiny Llama trained 5 steps, exported, and run by
#              GPT2LMHeadModel and LlamaForCausalLM; a tiny Mixtral and
#              Qwen2-MoE likewise (one step at lr = 0), all fp32, on the
#              CPU and on the GPU (bench/hf_logits.py: logits against the
#              modeling files' math, cross-entropy against trident's loss,
#              1e-5 relative); and `trident tokenize` against tokenizers'
#              GPT-2 BPE on 2.5 MB of text, every id
#              (bench/hf_tokenize.py). 130 s
#     profile  GPT-2 small in bf16 with [log] profile: where a step's time
#              goes, per kind of op (the device waited for around each). 20 s
#     long     GPT-2 small at T 8192, two sequences: attention's memory
#              stays linear in T. 25 s
#     comm     NCCL between ranks on the one GPU (issue 35), with the
#              bundle's NCCL 2.30 (bench/build_nccl.sh; skipped without
#              it): tests/t_gpu_comm.sh on 2 ranks sharing the GPU
#              (NCCL_MULTI_RANK_GPU_ENABLE=1 and trident's test-only
#              TRIDENT_TEST_SHARE_GPU=1), then, with GPU_COMM_NP="2 4"
#              and if that passed, on 4 with NCCL_MAX_CTAS=2
#              (GPU_NCCL_MAX_CTAS); NCCL_DEBUG=WARN logs per rank in
#              logs.tgz. 240 s at 2 ranks, 120 more at 4
#   (default: env tests gpt2 pytorch comm ab llama1b interop profile
#   long: what decides issues 34 and 35 first; the
#   seconds are guesses, none of the new sections has run yet. A section
#   that would end past GPU_BUDGET_S seconds (540: the device allows 600 a
#   call) is skipped and says so, so a call stays within its limit and
#   keeps the sections before)
#
# Run it from the checkout's root with the bundle at .gpu/bundle.tar.xz
# (GPU_BUNDLE names another). Each step runs under a time limit, so one
# hang costs that step only. The logs are kept in a work folder and packed
# into $OUT/logs.tgz after every section (the device tool brings back at
# most 8 files, and a call cut short keeps what was packed); the summary
# is $OUT/summary.txt and is printed last, with plan against measured as
# one table. Env: GPU_STEPS (default 20), GPU_PT_MODES (PyTorch's modes,
# default "eager compile"), GPU_AB_STEPS (15), GPU_LLAMA_MB (4),
# GPU_LLAMA_STEPS (10), GPU_BUDGET_S (540), GPU_COMM_NP (2).
set -u
# Section ab's variants, one a line: "NAME ENV=VAL ... section.key=VAL ...",
# each trained as GPT-2 small bf16 under those environment variables and
# config keys beside the default (none set). mb32: issue 34's micro-batch
# 32 (the step is then 32 sequences, so compare tokens/s and MFU, not ms).
# The engineer of a run-time switch adds its line; GPU_AB_VARIANTS in the
# environment replaces the list.
GPU_AB_VARIANTS=${GPU_AB_VARIANTS-"
fused-off TRIDENT_FUSED=0
lt-none TRIDENT_LT_EPILOGUE=none
lt-all TRIDENT_LT_EPILOGUE=all
att-trident TRIDENT_ATTENTION=trident
mb32 train.micro_batch=32
att-sync TRIDENT_ATTENTION=trident TRIDENT_ATTENTION_ASYNC=0
"}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
bundle=${GPU_BUNDLE:-$root/.gpu/bundle.tar.xz}
OUT=${OUT:-$root/gpu-out}
SECTIONS=${1:-"env tests gpt2 pytorch comm ab llama1b interop profile long"}
BUDGET=${GPU_BUDGET_S:-540}
started=$(date +%s)
STEPS=${GPU_STEPS:-20}
LOGS=${TMPDIR:-/tmp}/trident-gpu-logs
rm -rf "$LOGS"
mkdir -p "$OUT" "$LOGS"
summary="$OUT/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
# limited SECONDS CMD...: CMD, killed after SECONDS (exit 124 then)
limited() { secs=$1; shift; timeout -k 10 "$secs" "$@"; }
pack_logs() { tar -czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null; }

# ---- the bundle: trident's build, Open MPI and the libraries, relocated --
b=${TMPDIR:-/tmp}/trident-gpu
rm -rf "$b"
mkdir -p "$b"
tar -xJf "$bundle" -C "$b" || { echo "gpu_check.sh: cannot unpack $bundle" >&2; exit 1; }
for p in trident tests/t_ops_cuda tests/t_offload tests/t_gpu_wait; do
    cp "$b/build/$p" "$root/$p"
done
usr=$b/root/usr
lib=$usr/lib/x86_64-linux-gnu
# Open MPI, moved as a whole; its PMIx and hwloc, whose plug-ins would
# otherwise be looked for where Debian put them (tried on a machine whose
# own Open MPI, PMIx and hwloc were hidden: bench/gpu_bundle.sh)
export OPAL_PREFIX="$usr"
export PMIX_PREFIX="$lib/pmix2" PMIX_MCA_mca_base_component_path="$lib/pmix2/lib/pmix"
export HWLOC_PLUGINS_PATH="$lib/hwloc"
# the machine's own PMIx (or none) lacks a symbol the bundled zlib
# compressor wants; PMIx then warns once per launch and goes on without it
export PMIX_MCA_pcompress_base_silence_warning=1
export PATH="$usr/bin:$PATH"
# CUDA's libraries: PyTorch's wheels (nvidia/*/lib), else the toolkit's;
# cuDNN and NVRTC with them
cuda_dirs=$(python3 -c '
import glob, os, sys
want = ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2",
        "libcudnn.so.9", "libnvrtc.so.13")
dirs = []
for base in sys.path:
    for w in want:
        for f in glob.glob(os.path.join(base, "nvidia", "**", w), recursive=True):
            d = os.path.dirname(f)
            if d not in dirs:
                dirs.append(d)
print(":".join(dirs))' 2>/dev/null)
# NCCL 2.30 from the bundle, when packed, before the wheels' 2.28
nccl_dir=""
[ -f "$b/nccl/libnccl.so.2" ] && nccl_dir=$b/nccl
export LD_LIBRARY_PATH="${nccl_dir:+$nccl_dir:}$lib:$lib/openmpi/lib:${cuda_dirs:+$cuda_dirs:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
note "bundle: commit $(cat "$b/build/commit"), $(wc -l < "$b/build/changes") uncommitted changes"

section_env() {
    nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
    note "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -n 1)"
    ldd ./trident > "$LOGS/ldd.txt" 2>&1
    if grep -q "not found" "$LOGS/ldd.txt"; then
        note "ldd: MISSING $(grep 'not found' "$LOGS/ldd.txt" | awk '{print $1}' | tr '\n' ' ')"
    else
        note "ldd: every library found ($(grep -c cuda "$LOGS/ldd.txt") from CUDA's wheels or toolkit)"
    fi
    # the NCCL the library path gives (trident's own line, "nccl: ...
    # loaded", is in the comm section's logs)
    note "nccl: $(python3 -c '
import ctypes
lib = ctypes.CDLL("libnccl.so.2")
v = ctypes.c_int()
lib.ncclGetVersion(ctypes.byref(v))
path = [l.split()[-1] for l in open("/proc/self/maps") if "libnccl" in l][0]
print("%d.%d.%d loaded from %s" % (v.value // 10000, v.value // 100 % 100, v.value % 100, path))' 2>&1 | tail -n 1)"
    # cuDNN (trident's fused attention, when built with it) and NVRTC,
    # which cuDNN's runtime-compiled kernels load by name
    note "cudnn, nvrtc: $(python3 -c '
import ctypes
for name in ("libcudnn.so.9", "libnvrtc.so.13"):
    try:
        ctypes.CDLL(name)
        path = [l.split()[-1] for l in open("/proc/self/maps") if name.split(".")[0] + "." in l][0]
        print(name, "from", path, end="; ")
    except OSError:
        print(name, "NOT FOUND", end="; ")' 2>&1 | tail -n 1)"
    ./trident --version > "$LOGS/version.txt" 2>&1
    limited 60 mpirun -n 1 ./trident --version > "$LOGS/mpirun.txt" 2>&1
    note "mpirun -n 1 trident --version: exit $? ($(head -n 1 "$LOGS/mpirun.txt"))"
}

# NCCL between ranks sharing the one GPU: 2 ranks, then 4 with few CTAs
# per collective (NCCL documents more than two ranks per GPU only so).
# At most 4 + 2 minutes, so that with the other sections (about 2 minutes
# on 2026-11-27) the script stays within the ~8 one device call allows
section_comm() {
    if [ -z "$nccl_dir" ]; then
        note "comm: SKIPPED: the bundle has no NCCL (bench/build_nccl.sh, then GPU_NCCL=DIR bench/gpu_bundle.sh)"
        return
    fi
    # ranks sharing the GPU need it in the Default compute mode (or MPS):
    # in Exclusive_Process the second rank cannot make a CUDA context
    note "comm: NCCL $(cat "$nccl_dir/VERSION" 2>/dev/null) from the bundle; the GPU's compute mode: $(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>&1 | head -n 1)"
    for np in ${GPU_COMM_NP:-2}; do
        ctas=""
        [ "$np" -eq 4 ] && ctas=NCCL_MAX_CTAS=${GPU_NCCL_MAX_CTAS:-2}
        mkdir -p "$LOGS/nccl-np$np"
        # shellcheck disable=SC2086  # ctas is empty or one assignment
        limited $((np == 2 ? 240 : 120)) env srcdir=. TRI_TEST_TIMEOUT=$((np == 2 ? 230 : 110)) \
            NCCL_MULTI_RANK_GPU_ENABLE=1 TRIDENT_TEST_SHARE_GPU=1 NCCL_DEBUG=WARN \
            NCCL_DEBUG_FILE="$LOGS/nccl-np$np/%h.%p.log" $ctas \
            sh tests/mpitap.sh "tests/t_gpu_comm.np$np.tap" > "$LOGS/t_gpu_comm.np$np.log" 2>&1
        rc=$?
        log=$LOGS/t_gpu_comm.np$np.log
        note "t_gpu_comm np $np${ctas:+ $ctas}: exit $rc, $(grep -c '^ok' "$log") ok, $(grep -c '^not ok' "$log") not ok$(grep -m1 'SKIP' "$log" | sed 's/^/, /')"
        grep -m 1 '^# nccl:' "$log" | sed 's/^# /    /' | tee -a "$summary"
        grep '^ok\|^not ok' "$log" | sed 's/^/    /' | tee -a "$summary"
        grep -h 'WARN' "$LOGS/nccl-np$np"/*.log 2>/dev/null | head -n 5 | sed 's/^/    NCCL: /' | tee -a "$summary"
        [ "$rc" -eq 0 ] || break
    done
}

section_tests() {
    for t in t_ops_cuda t_gpu t_offload t_gpu_wait; do
        limited 120 env srcdir=. sh tests/mpitap.sh "tests/$t.np1.tap" > "$LOGS/$t.log" 2>&1
        rc=$?
        n_ok=$(grep -c '^ok' "$LOGS/$t.log")
        n_bad=$(grep -c '^not ok' "$LOGS/$t.log")
        note "$t: exit $rc, $n_ok ok, $n_bad not ok$(grep -m1 'SKIP' "$LOGS/$t.log" | sed 's/^/, /')"
        grep '^not ok' "$LOGS/$t.log" | head -n 5 | sed 's/^/    /' | tee -a "$summary"
        # a test that passes its CPU checks but could not see the GPU
        grep -i '^# .*no CUDA device' "$LOGS/$t.log" | head -n 2 | sed 's/^/    GPU CHECKS NOT RUN: /' \
            | tee -a "$summary"
    done
}

# GPT-2 small on the bytes of the test corpus (the vocabulary is GPT-2's;
# the speed does not depend on which ids the tokens are)
corpus() {
    [ -f "$LOGS/corpus.txt" ] || for _ in $(seq 400); do cat tests/data/small.txt; done > "$LOGS/corpus.txt"
}
gpt2_config() {
    corpus
    cat > "$1" <<EOF
[model]
n_layer = 12
n_embd = 768
n_head = 12
seq_len = 1024
vocab_size = 50304
[parallel]
device = cuda
[train]
micro_batch = 16
steps = $STEPS
warmup = 1
precision = $2
[data]
train = $LOGS/corpus.txt
[eval]
every = 0
[log]
every = 1
metrics = $LOGS/gpt2-$2.jsonl
sample_tokens = 0
EOF
}

# mean of FIELD over the steps after the first five (warm-up)
mean_after_warmup() {
    grep '^{"step":' "$1" | sed -n '6,$p' | sed "s/.*\"$2\":\([^,}]*\).*/\1/" \
        | awk '{ s += $1; n++ } END { if (n) printf "%.4g", s / n; else print "nan" }'
}

# train_watched NAME ARGS...: trident train ARGS on one rank (150 s at
# most), output in NAME.out, while nvidia-smi samples the GPU's memory;
# sets rc and mem (the most it saw, MiB)
train_watched() {
    name=$1
    shift
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 \
        > "$LOGS/mem-$name.txt" 2>/dev/null &
    smi=$!
    # stdin from /dev/null: mpirun would read a caller's loop's input
    limited 150 mpirun -n 1 ./trident train "$@" < /dev/null > "$LOGS/$name.out" 2>&1
    rc=$?
    kill "$smi" 2>/dev/null
    mem=$(sort -n "$LOGS/mem-$name.txt" | tail -n 1)
}

section_gpt2() {
    for dtype in ${GPU_GPT2_DTYPES:-bf16}; do
        gpt2_config "$LOGS/gpt2-$dtype.ini" "$dtype"
        train_watched "gpt2-$dtype" --config "$LOGS/gpt2-$dtype.ini"
        m="$LOGS/gpt2-$dtype.jsonl"
        note "trident gpt2 $dtype: exit $rc, $(mean_after_warmup "$m" tokens_per_s) tokens/s," \
             "mfu $(mean_after_warmup "$m" mfu), of GEMM peak $(mean_after_warmup "$m" of_gemm_peak)," \
             "step $(mean_after_warmup "$m" step_ms) ms, GPU memory ${mem:-?} MiB"
        grep -E '^(hardware|gemm|device|attention|fused|nccl):' "$LOGS/gpt2-$dtype.out" | sed 's/^/    /' | tee -a "$summary"
        [ "$rc" -eq 0 ] || tail -n 5 "$LOGS/gpt2-$dtype.out" | sed 's/^/    /' | tee -a "$summary"
        plan_against "gpt2 $dtype" "$(mean_after_warmup "$m" step_ms)" "$LOGS/gpt2-$dtype.ini"
    done
}

# plan's profile for this GPU: roofline.c knows h100, h200 and a100 (an
# H100 and an H200 differ in memory: its size and bandwidth)
plan_hw() {
    case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)" in
    *H200*) echo h200 ;;
    *A100*) echo a100 ;;
    *) echo h100 ;;
    esac
}

# plan_against NAME MEASURED_MS CONFIG [--set K=V ...]: the step `trident
# plan --hw` predicts for CONFIG on one GPU beside the measured one, and
# their ratio (issue 34 wants them within 15%); a row of the table
# printed last
plan_against() {
    row=$1 measured=$2
    shift 2
    hw=$(plan_hw)
    limited 60 mpirun -n 1 ./trident plan --config "$@" --world 1 --hw "$hw" \
        > "$LOGS/plan-$(echo "$row" | tr ' ' -).out" 2>&1
    pred=$(sed -n 's/^  step *\([0-9.]*\) ms.*/\1/p' "$LOGS/plan-$(echo "$row" | tr ' ' -).out" | head -n 1)
    awk -v n="$row" -v m="$measured" -v p="${pred:-0}" -v hw="$hw" 'BEGIN {
        if (m ~ /^[0-9.]+$/ && m > 0 && p > 0) {
            r = m / p
            printf "    %-14s %10.1f %10.1f %7.2f  %s (--hw %s)\n", n, m, p, r,
                (r >= 0.85 && r <= 1.15) ? "within 15%" : "OFF by more than 15%", hw
        } else
            printf "    %-14s %10s %10s %7s  no figure (--hw %s; see plan-*.out)\n", n, m, p, "-", hw
    }' >> "$LOGS/plan-rows.txt"
    note "plan against measured, $(tail -n 1 "$LOGS/plan-rows.txt" | sed 's/^ *//')"
}

# Llama 3.2 1B's shape (jobs/configs/llama-1b.ini) in bf16, micro-batch
# GPU_LLAMA_MB (default 4, 8192 tokens a step: plan puts it at 32 GiB with
# AdamW's state, so it fits an 80 GiB H100 beside PyTorch's at the same
# size), trained by trident and by PyTorch (bench/pytorch_llama.py, eager
# and compiled) on the same GPU
section_llama1b() {
    corpus
    mb=${GPU_LLAMA_MB:-4}
    steps=${GPU_LLAMA_STEPS:-10}
    set -- jobs/configs/llama-1b.ini --set parallel.device=cuda --set train.micro_batch="$mb" \
        --set train.grad_accum=1 --set train.steps="$steps" --set train.warmup=1 \
        --set data.train="$LOGS/corpus.txt" --set data.format=text --set data.tokenizer= \
        --set checkpoint.dir= --set checkpoint.every=0 --set eval.every=0 --set log.every=1 \
        --set log.metrics="$LOGS/llama1b.jsonl"
    train_watched llama1b --config "$@"
    m="$LOGS/llama1b.jsonl"
    note "trident llama1b bf16 micro_batch $mb: exit $rc, $(mean_after_warmup "$m" tokens_per_s) tokens/s," \
         "mfu $(mean_after_warmup "$m" mfu), step $(mean_after_warmup "$m" step_ms) ms, GPU memory ${mem:-?} MiB"
    grep -E '^(gemm|device|attention):' "$LOGS/llama1b.out" | sed 's/^/    /' | tee -a "$summary"
    [ "$rc" -eq 0 ] || tail -n 5 "$LOGS/llama1b.out" | sed 's/^/    /' | tee -a "$summary"
    plan_against "llama1b bf16" "$(mean_after_warmup "$m" step_ms)" "$@"
    for mode in ${GPU_PT_MODES:-eager compile}; do
        c=0
        [ "$mode" = compile ] && c=1
        limited 240 env PYTHONUNBUFFERED=1 PT_DEVICE=cuda PT_DTYPE=bf16 PT_COMPILE=$c \
            python3 bench/pytorch_llama.py 16 2048 32 8 8192 2048 128256 "$mb" "$steps" \
            > "$LOGS/pytorch-llama1b-$mode.out" 2>&1
        note "pytorch llama1b bf16 $mode: exit $?, $(tail -n 1 "$LOGS/pytorch-llama1b-$mode.out")"
    done
}

# GPT-2 small bf16 once per variant (GPU_AB_VARIANTS, at the top) and
# once as it is: one row each, the default's first
section_ab() {
    ab_steps=${GPU_AB_STEPS:-15}
    gpt2_config "$LOGS/ab.ini" bf16
    note "ab: GPT-2 small bf16, $ab_steps steps a row (the first five not counted)"
    note "$(printf '    %-16s %6s %12s %7s %9s %9s  %s' variant exit tokens/s mfu step_ms "/default" variables)"
    printf 'default\n%s\n' "$GPU_AB_VARIANTS" | while read -r variant vars; do
        [ -n "$variant" ] || continue
        (
            # vars: environment assignments (NAME=VAL) and config keys
            # (section.key=VAL), the latter passed as --set
            set -- --config "$LOGS/ab.ini" --set train.steps="$ab_steps" \
                --set log.metrics="$LOGS/ab-$variant.jsonl"
            for v in $vars; do
                case $v in
                [a-z]*.*=*) set -- "$@" --set "$v" ;;
                *=*) export "${v?}" ;;
                *) echo "gpu_check.sh: GPU_AB_VARIANTS: $variant: $v is neither NAME=VAL nor section.key=VAL" >&2 ;;
                esac
            done
            train_watched "ab-$variant" "$@"
            m="$LOGS/ab-$variant.jsonl"
            step=$(mean_after_warmup "$m" step_ms)
            # the step against the default's: below 1 is faster
            of_default=$(awk -v s="$step" -v d="$(mean_after_warmup "$LOGS/ab-default.jsonl" step_ms)" \
                'BEGIN { if (s ~ /^[0-9.]+$/ && d ~ /^[0-9.]+$/ && d > 0) printf "%.3f", s / d; else print "-" }')
            note "$(printf '    %-16s %6s %12s %7s %9s %9s  %s' "$variant" "$rc" \
                "$(mean_after_warmup "$m" tokens_per_s)" "$(mean_after_warmup "$m" mfu)" \
                "$step" "$of_default" "${vars:--}")"
            # the start-up lines say which paths the variables chose
            grep -E '^(gemm|device|attention|fused|switches):' "$LOGS/ab-$variant.out" | sed 's/^/        /' \
                | tee -a "$summary"
        )
    done
}

section_profile() {
    gpt2_config "$LOGS/profile.ini" bf16
    limited 120 mpirun -n 1 ./trident train --config "$LOGS/profile.ini" --set log.profile=true \
        --set train.steps=8 --set log.metrics="$LOGS/profile.jsonl" > "$LOGS/profile.out" 2>&1
    note "gpt2 bf16 profiled: exit $?"
    sed -n '/^time per step by op/,/^  other/p' "$LOGS/profile.out" | tee -a "$summary"
}

section_long() {
    # attention's memory at long T: GPT-2 small, T 8192, two sequences
    gpt2_config "$LOGS/long.ini" bf16
    train_watched long --config "$LOGS/long.ini" --set model.seq_len=8192 \
        --set train.micro_batch=2 --set train.steps=8 --set log.metrics="$LOGS/long.jsonl"
    note "gpt2 bf16 T 8192 x 2: exit $rc, $(mean_after_warmup "$LOGS/long.jsonl" tokens_per_s) tokens/s," \
         "GPU memory ${mem:-?} MiB"
    [ "$rc" -eq 0 ] || tail -n 5 "$LOGS/long.out" | sed 's/^/    /' | tee -a "$summary"
}

section_pytorch() {
    for mode in ${GPU_PT_MODES:-eager compile}; do
        c=0
        [ "$mode" = compile ] && c=1
        limited 150 env PYTHONUNBUFFERED=1 PT_DEVICE=cuda PT_DTYPE=bf16 PT_COMPILE=$c \
            python3 bench/pytorch_gpt2.py 12 768 12 1024 50304 16 "$STEPS" \
            > "$LOGS/pytorch-$mode.out" 2>&1
        note "pytorch gpt2 bf16 $mode: exit $?, $(tail -n 1 "$LOGS/pytorch-$mode.out")"
    done
}

# tiny_train_keys: the interop configs' sections after [model]: one step
# at lr = 0, fp32, on the window (seq_len + 1 bytes)
tiny_train_keys() {
    cat <<EOF
[train]
micro_batch = 2
steps = 1
lr = 0
min_lr = 0
warmup = 0
precision = fp32
[data]
train = $LOGS/window.txt
val = $LOGS/window.txt
[eval]
every = 0
[log]
every = 1
sample_tokens = 0
EOF
}

# hf_export NAME CKPT: when rc is 0, exports $LOGS/NAME/CKPT to
# $LOGS/hf-NAME; sets rc
hf_export() {
    [ "$rc" -eq 0 ] && limited 60 mpirun -n 1 ./trident export "$LOGS/$1/$2" --format hf \
        "$LOGS/hf-$1" < /dev/null >> "$LOGS/$1.out" 2>&1
    rc=$?
}

# hf_compare NAME WHAT: when rc is 0, transformers runs the export
# $LOGS/hf-NAME on the window, against the step-1 loss of trident's
# metrics $LOGS/NAME.jsonl (bench/hf_logits.py); a line of the summary
hf_compare() {
    loss=$(sed -n 's/.*"step":1,"loss":\([^,]*\),.*/\1/p' "$LOGS/$1.jsonl" 2>/dev/null)
    [ "$rc" -eq 0 ] && limited 300 python3 bench/hf_logits.py "$LOGS/hf-$1" \
        "$LOGS/window.txt" "$loss" >> "$LOGS/$1.out" 2>&1
    rc=$?
    note "interop $2: exit $rc, $(verdict "$LOGS/$1.out")"
}

# verdict LOG: the last line of LOG that says how a chain ended (a check's
# ok or FAIL, trident's error, Python's exception), not mpirun's epilogue
verdict() {
    grep -E '^(ok|FAIL): |^trident: |Error' "$1" | tail -n 1 | grep . || tail -n 1 "$1"
}

# A trained GPT-2 and a trained Llama (tied head, grouped-query
# attention, as Llama 3.2 1B), fp32, read by transformers'
# GPT2LMHeadModel and LlamaForCausalLM (issue 34): 5 steps at lr 1e-3 on
# the test corpus, exported; a second run starts from the export
# (init_from) and takes one step at lr = 0 on the window, so its loss is trident's
# cross-entropy of the window under the exported weights, which
# bench/hf_logits.py has transformers compute again (trident prints no
# logits; the script also compares transformers' logits with the
# modeling files' math written out in Python)
interop_dense() {
    for arch in gpt2 llama; do
        more=""
        [ "$arch" = llama ] && more="n_kv_head = 2
ffn_dim = 96
rope_theta = 500000"
        cat > "$LOGS/dense-$arch.ini" <<EOF
[model]
arch = $arch
n_layer = 2
n_embd = 64
n_head = 4
seq_len = 16
vocab_size = 256
tie_embeddings = true
$more
EOF
        tiny_train_keys >> "$LOGS/dense-$arch.ini"
        for dev in cpu cuda; do
            name="dense-$arch-$dev"
            limited 120 mpirun -n 1 ./trident train --config "$LOGS/dense-$arch.ini" \
                --set parallel.device=$dev --set checkpoint.dir="$LOGS/$name" \
                --set train.steps=5 --set train.lr=1e-3 --set data.train=tests/data/small.txt \
                --set log.metrics="$LOGS/$name-train.jsonl" > "$LOGS/$name.out" 2>&1
            rc=$?
            hf_export "$name" latest
            [ "$rc" -eq 0 ] && limited 120 mpirun -n 1 ./trident train --config "$LOGS/dense-$arch.ini" \
                --set parallel.device=$dev --set checkpoint.init_from="$LOGS/hf-$name" \
                --set log.metrics="$LOGS/$name.jsonl" >> "$LOGS/$name.out" 2>&1
            rc=$?
            hf_compare "$name" "$arch trained 5 steps, trident on $dev"
        done
    done
}

# `trident tokenize` against HuggingFace's tokenizers: GPT-2's BPE on the
# text the bundle carries (data/fortunes.txt, 2.5 MB, as one document),
# every id (bench/hf_tokenize.py)
interop_tokenize() {
    text=$b/text/fortunes.txt
    gpt2=$b/text/gpt2
    if [ ! -f "$text" ] || [ ! -f "$gpt2/encoder.json" ]; then
        note "interop tokenize: SKIPPED: the bundle has no text/fortunes.txt or text/gpt2/encoder.json (bench/gpu_bundle.sh says why)"
        return
    fi
    limited 120 mpirun -n 1 ./trident tokenize --tokenizer "$gpt2/encoder.json" --input "$text" \
        --output "$LOGS/fortunes-gpt2" > "$LOGS/tokenize.out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && limited 120 python3 bench/hf_tokenize.py "$gpt2/encoder.json" "$gpt2/vocab.bpe" \
        "$text" "$LOGS/fortunes-gpt2" >> "$LOGS/tokenize.out" 2>&1
    rc=$?
    note "interop tokenize gpt2: exit $rc, $(verdict "$LOGS/tokenize.out")"
}

# A MoE llama exported and read by transformers (issue 38 item 4): the
# run's loss is the cross-entropy of its one window, which transformers
# computes again from the export; first the dense models and the
# tokenizer (issue 34)
section_interop() {
    printf 'Mixture of expert' > "$LOGS/window.txt"   # seq_len + 1 bytes
    interop_dense
    interop_tokenize
    cat > "$LOGS/moe.ini" <<EOF
[model]
arch = llama
n_layer = 2
n_embd = 64
n_head = 4
n_kv_head = 2
seq_len = 16
vocab_size = 256
tie_embeddings = false
n_expert = 4
top_k = 2
moe_ffn_dim = 96
EOF
    tiny_train_keys >> "$LOGS/moe.ini"
    for fmt in mixtral qwen2_moe; do
        more=""
        [ "$fmt" = qwen2_moe ] && more="--set model.n_shared_expert=1 --set model.moe_every=2 --set model.moe_router=softmax_topk"
        for dev in cpu cuda; do
            name="moe-$fmt-$dev"
            # shellcheck disable=SC2086
            limited 120 mpirun -n 1 ./trident train --config "$LOGS/moe.ini" $more \
                --set parallel.device=$dev --set checkpoint.dir="$LOGS/$name" \
                --set log.metrics="$LOGS/$name.jsonl" > "$LOGS/$name.out" 2>&1
            rc=$?
            hf_export "$name" step_00000001.h5
            hf_compare "$name" "$fmt, trident on $dev"
        done
    done
}

# guess_s SECTION: the device seconds SECTION is guessed to take (the
# header's figures)
guess_s() {
    case $1 in
    env) echo 15 ;; tests) echo 90 ;; gpt2) echo 25 ;; pytorch) echo 80 ;;
    llama1b) echo 150 ;; interop) echo 130 ;; profile) echo 20 ;; long) echo 25 ;;
    comm) case "${GPU_COMM_NP:-2}" in *4*) echo 360 ;; *) echo 240 ;; esac ;;
    ab) echo $((15 * ($(printf '%s\n' "$GPU_AB_VARIANTS" | grep -c .) + 1))) ;;
    *) echo 60 ;;
    esac
}

for s in $SECTIONS; do
    spent=$(($(date +%s) - started))
    if [ $((spent + $(guess_s "$s"))) -gt "$BUDGET" ]; then
        note "$s: SKIPPED: $spent s spent, about $(guess_s "$s") more would pass GPU_BUDGET_S=$BUDGET"
        continue
    fi
    "section_$s"
    pack_logs
done
if [ -f "$LOGS/plan-rows.txt" ]; then
    note "plan against measured (issue 34: within 15%), step ms:"
    note "$(printf '    %-14s %10s %10s %7s' run measured predicted ratio)"
    tee -a "$summary" < "$LOGS/plan-rows.txt"
fi
note "gpu_check.sh: $(($(date +%s) - started)) s after unpacking"
pack_logs
echo "== summary"
cat "$summary"
