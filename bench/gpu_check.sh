#!/bin/sh
# gpu_check.sh - trident's GPU checks and its GPT-2 small measurement, on
# a GPU machine that has CUDA's libraries (PyTorch's wheels) but no MPI or
# HDF5, from the bundle bench/gpu_bundle.sh built elsewhere:
#
#   bench/gpu_check.sh [SECTIONS]     SECTIONS: any of
#     env      the GPU (nvidia-smi), the libraries trident resolves, and
#              an MPI hello over 1 rank from the bundle's Open MPI
#     tests    the GPU tests: t_ops_cuda, t_gpu (20 steps against the CPU),
#              t_offload, t_gpu_wait, each log under $OUT
#     gpt2     GPT-2 small (12 x 768, 12 heads, T 1024, vocabulary 50304,
#              micro_batch 16) in bf16 and fp32: tokens/s, MFU against
#              the datasheet peak and against trident's measured GEMM
#              peak, and the GPU memory nvidia-smi saw at most
#     pytorch  the same model in PyTorch on the same GPU (bf16 autocast,
#              eager and torch.compile; bench/pytorch_gpt2.py)
#   (default: all of them, in that order)
#
# Run it from the checkout's root with the bundle at .gpu/bundle.tar.xz
# (GPU_BUNDLE names another). Logs go to $OUT (default ./gpu-out); the
# summary table is printed last. Env: GPU_STEPS (default 30).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
bundle=${GPU_BUNDLE:-$root/.gpu/bundle.tar.xz}
OUT=${OUT:-$root/gpu-out}
SECTIONS=${1:-"env tests gpt2 pytorch"}
STEPS=${GPU_STEPS:-30}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

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
export PATH="$usr/bin:$PATH"
# CUDA's libraries: PyTorch's wheels (nvidia/*/lib), else the toolkit's
cuda_dirs=$(python3 -c '
import glob, os, sys
want = ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2")
dirs = []
for base in sys.path:
    for w in want:
        for f in glob.glob(os.path.join(base, "nvidia", "**", w), recursive=True):
            d = os.path.dirname(f)
            if d not in dirs:
                dirs.append(d)
print(":".join(dirs))' 2>/dev/null)
export LD_LIBRARY_PATH="$lib:$lib/openmpi/lib:${cuda_dirs:+$cuda_dirs:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
note "bundle: commit $(cat "$b/build/commit"), $(wc -l < "$b/build/changes") uncommitted changes"

section_env() {
    nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
    note "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -n 1)"
    ldd ./trident > "$OUT/ldd.txt" 2>&1
    if grep -q "not found" "$OUT/ldd.txt"; then
        note "ldd: MISSING $(grep 'not found' "$OUT/ldd.txt" | awk '{print $1}' | tr '\n' ' ')"
    else
        note "ldd: every library found ($(grep -c cuda "$OUT/ldd.txt") from CUDA's wheels or toolkit)"
    fi
    ./trident --version > "$OUT/version.txt" 2>&1
    mpirun -n 1 ./trident --version > "$OUT/mpirun.txt" 2>&1
    note "mpirun -n 1 trident --version: exit $? ($(head -n 1 "$OUT/mpirun.txt"))"
}

section_tests() {
    for t in t_ops_cuda t_gpu t_offload t_gpu_wait; do
        srcdir=. sh tests/mpitap.sh "tests/$t.np1.tap" > "$OUT/$t.log" 2>&1
        rc=$?
        n_ok=$(grep -c '^ok' "$OUT/$t.log")
        n_bad=$(grep -c '^not ok' "$OUT/$t.log")
        note "$t: exit $rc, $n_ok ok, $n_bad not ok$(grep -m1 'SKIP' "$OUT/$t.log" | sed 's/^/, /')"
        grep '^not ok' "$OUT/$t.log" | head -n 5 | sed 's/^/    /' | tee -a "$summary"
    done
}

# GPT-2 small on the bytes of the test corpus (the vocabulary is GPT-2's;
# the speed does not depend on which ids the tokens are)
gpt2_config() {
    for _ in $(seq 400); do cat tests/data/small.txt; done > "$OUT/corpus.txt"
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
train = $OUT/corpus.txt
[log]
every = 1
metrics = $OUT/gpt2-$2.jsonl
EOF
}

# mean of FIELD over the steps after the first five (warm-up)
mean_after_warmup() {
    sed -n '6,$p' "$1" | sed "s/.*\"$2\":\([^,}]*\).*/\1/" \
        | awk '{ s += $1; n++ } END { if (n) printf "%.4g", s / n; else print "nan" }'
}

section_gpt2() {
    for dtype in bf16 fp32; do
        gpt2_config "$OUT/gpt2-$dtype.ini" "$dtype"
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 \
            > "$OUT/mem-$dtype.txt" 2>/dev/null &
        smi=$!
        mpirun -n 1 ./trident train --config "$OUT/gpt2-$dtype.ini" > "$OUT/gpt2-$dtype.out" 2>&1
        rc=$?
        kill "$smi" 2>/dev/null
        m="$OUT/gpt2-$dtype.jsonl"
        mem=$(sort -n "$OUT/mem-$dtype.txt" | tail -n 1)
        note "trident gpt2 $dtype: exit $rc, $(mean_after_warmup "$m" tokens_per_s) tokens/s," \
             "mfu $(mean_after_warmup "$m" mfu), of GEMM peak $(mean_after_warmup "$m" of_gemm_peak)," \
             "step $(mean_after_warmup "$m" step_ms) ms, GPU memory ${mem:-?} MiB"
        grep -E '^(hardware|gemm|device|attention):' "$OUT/gpt2-$dtype.out" | sed 's/^/    /' | tee -a "$summary"
        [ "$rc" -eq 0 ] || tail -n 5 "$OUT/gpt2-$dtype.out" | sed 's/^/    /' | tee -a "$summary"
    done
}

section_pytorch() {
    for mode in eager compile; do
        c=0
        [ "$mode" = compile ] && c=1
        PYTHONUNBUFFERED=1 PT_DEVICE=cuda PT_DTYPE=bf16 PT_COMPILE=$c \
            python3 bench/pytorch_gpt2.py 12 768 12 1024 50304 16 "$STEPS" \
            > "$OUT/pytorch-$mode.out" 2>&1
        note "pytorch gpt2 bf16 $mode: exit $?, $(tail -n 1 "$OUT/pytorch-$mode.out")"
    done
}

for s in $SECTIONS; do
    "section_$s"
done
echo "== summary"
cat "$summary"
