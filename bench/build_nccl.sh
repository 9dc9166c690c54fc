#!/bin/sh
# build_nccl.sh - builds NCCL from NVIDIA's public source (github.com/NVIDIA/nccl,
# 2.30 or later) for Hopper (sm_90) only, with only the device kernels
# trident launches, outside this repository:
#
#   bench/build_nccl.sh NCCL_SOURCE_DIR CACHE_DIR
#
# NCCL_SOURCE_DIR is an unpacked NCCL source tree (no network is needed or
# used: the GPU machine and CI have none). CACHE_DIR receives
#   build/          NCCL's own build tree (objects, include/, lib/)
#   libnccl.so.2    the library, stripped
#   libnccl.so.2.xz the same, xz-compressed, as bench/gpu_bundle.sh packs it
#   VERSION         the version built, e.g. 2.30.7
#   ONLY_FUNCS      the filter it was built with (below)
# NCCL's source and binaries never go into this repository: CACHE_DIR must
# lie outside it.
#
# Why build it at all: NCCL 2.30 is the first to run several ranks on one
# GPU (NCCL_MULTI_RANK_GPU_ENABLE=1), which is how bench/gpu_check.sh runs
# trident's NCCL path on a machine with a single GPU; the GPU machines'
# PyTorch wheels and the CUDA toolkit carry 2.28.
#
# Why ONLY_FUNCS: NCCL compiles one kernel per collective x reduction x type
# x algorithm x protocol; trident calls only the ones below (see
# src/parallel/comm_nccl.c), so the rest are left out, which cuts the build
# time and the library's size several-fold. Keep the list in step with
# comm_nccl.c. A function left out is not refused at run time: NCCL runs
# its Nop in its place, a kernel that does nothing, so the call returns
# with its buffer untouched. So before building, check_funcs runs NCCL's
# own generator with and without the filter and refuses to build when a
# function of `needed` below would be a Nop, naming it.
#   AllGather, Broadcast     (no reduction, any type)
#   AllGatherV               NCCL 2.30 runs every ncclBroadcast as one
#                            (NCCL_ALLGATHERV_ENABLE, on by default; the
#                            unequal all-gathers are broadcasts)
#   AllReduce, Reduce, ReduceScatter with ncclSum, ncclMax, ncclMin (NCCL's
#                            MinMax kernels) on f32, bf16, f16, i32, f64
#   SendRecv                 (the pipeline links, expert parallelism's
#                            all-to-all)
# The sm_100 FP8 symmetric kernels are compiled for sm_90 too
# (NVCC_GENCODE_LDMC_FP8 = NVCC_GENCODE), where their bodies are empty:
# NCCL's host table names them, so leaving the gencode empty (NCCL then
# compiles an empty file) fails the link with undefined
# ncclSymkDevKernel_*_f8e4m3 symbols. The library holds sm_90 code only.
#
# Environment: NCCL_JOBS (default 2; the build runs under nice -n 19),
# CUDA_HOME (default /usr/local/cuda).
set -eu
only_funcs='(AllGather * *|AllGatherV * *|Broadcast * *|SendRecv|(AllReduce|Reduce|ReduceScatter) (Sum|MinMax) (f32|bf16|f16|i32|f64) * *)'
# the filter alone, for gpu_bundle.sh to compare with a cache's
if [ "${1:-}" = --only-funcs ]; then
    printf '%s\n' "$only_funcs"
    exit 0
fi
if [ $# -ne 2 ]; then
    echo "usage: $0 NCCL_SOURCE_DIR CACHE_DIR   (or: $0 --only-funcs)" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
# the cache's absolute path before it exists, so that a refused one is
# not made
cache=$(realpath -m "$2")
repo=$(cd "$(dirname "$0")/.." && pwd)
case "$cache/" in
"$repo"/*)
    echo "build_nccl.sh: $cache lies inside the repository $repo; NCCL's binaries never go there" >&2
    exit 2
    ;;
esac
version_mk=$src/makefiles/version.mk
if [ ! -f "$version_mk" ]; then
    echo "build_nccl.sh: $src is not an NCCL source tree (no makefiles/version.mk)" >&2
    exit 2
fi
field() { sed -n "s/^$1 *:= *\([0-9]*\).*/\1/p" "$version_mk"; }
major=$(field NCCL_MAJOR)
minor=$(field NCCL_MINOR)
patch=$(field NCCL_PATCH)
version=$major.$minor.$patch
# 2.30 is the first NCCL with NCCL_MULTI_RANK_GPU_ENABLE
if [ "$major" -lt 2 ] || { [ "$major" -eq 2 ] && [ "$minor" -lt 30 ]; }; then
    echo "build_nccl.sh: $version_mk says NCCL $version; 2.30 or later is needed" >&2
    exit 2
fi

mkdir -p "$cache"
cuda_home=${CUDA_HOME:-/usr/local/cuda}
# Some CUDA toolkits (13.0 here) carry NCCL's headers in their include
# folder, which NCCL's makefiles put on the host compiler's path before
# the tree's own, so another version's headers shadow the tree's (seen:
# NCCL_GIN_MAX_CONNECTIONS undeclared in sym_kernels_host.cc). The build
# sees the toolkit's headers through a folder of links without NCCL's.
cuda_inc=$cache/cuda-include
rm -rf "$cuda_inc"
mkdir -p "$cuda_inc"
for f in "$cuda_home"/include/*; do
    case "$(basename "$f")" in nccl*) continue ;; esac
    ln -s "$f" "$cuda_inc/"
done
# the device functions comm_nccl.c reaches, as NCCL's generator names them
# ("Coll redop type algo proto", "Coll algo proto", "SendRecv"): an ERE
needed='^(SendRecv$|AllGather |AllGatherV |Broadcast |(AllReduce|Reduce|ReduceScatter) (Sum|MinMax) (f32|bf16|f16|i32|f64) )'

# check_funcs: NCCL's src/device/generate.py run into a scratch folder
# unfiltered and with ONLY_FUNCS; its table of functions (host_table.cc,
# one row per function in a fixed order, named in a comment, "Nop" where
# the filter dropped it) side by side. Exits naming each needed function
# the filter would drop; cheap (a second), so it runs before the build.
check_funcs() {
    gen=$cache/funcs-check
    rm -rf "$gen"
    mkdir -p "$gen"
    if ! python3 "$src/src/device/generate.py" "$gen/all" "" >"$gen/log" 2>&1 ||
        ! python3 "$src/src/device/generate.py" "$gen/only" "$only_funcs" >>"$gen/log" 2>&1; then
        cat "$gen/log" >&2
        echo "build_nccl.sh: NCCL's src/device/generate.py failed (above)" >&2
        exit 1
    fi
    # rows: each row's function name, or nothing for an unsupported one
    rows() { sed -n '/ncclDevFuncRowToId/,/^-1}/p' "$1/host_table.cc" | sed 's|^[^/]*/\*.*\*/[^/]*||; s|^ *// ||'; }
    rows "$gen/all" >"$gen/all.rows"
    rows "$gen/only" >"$gen/only.rows"
    dropped=$(paste -d '|' "$gen/all.rows" "$gen/only.rows" |
        awk -F '|' -v re="$needed" '$1 ~ re && $2 == "Nop" { print "    " $1 }')
    if [ -n "$dropped" ]; then
        echo "build_nccl.sh: ONLY_FUNCS would leave out functions comm_nccl.c needs (NCCL would run a Nop kernel in their place, silently):" >&2
        echo "$dropped" >&2
        exit 1
    fi
    kept=$(awk -v re="$needed" '$0 ~ re' "$gen/only.rows" | wc -l)
    [ "$kept" -gt 0 ] || { echo "build_nccl.sh: $src/src/device/generate.py's table names none of the functions comm_nccl.c needs" >&2; exit 1; }
    echo "== ONLY_FUNCS keeps all $kept of NCCL's device functions that comm_nccl.c needs"
}
check_funcs
# A cache built with another filter (an older build_nccl.sh's, which left
# out AllGatherV) would be rebuilt only in part by NCCL's makefiles, which
# do not track ONLY_FUNCS: start it afresh. ONLY_FUNCS records the filter
# of a finished build (gpu_bundle.sh refuses a cache without this one).
stamp=$cache/ONLY_FUNCS
if [ -e "$cache/build" ] && [ "$(cat "$stamp" 2>/dev/null)" != "$only_funcs" ]; then
    echo "== $cache/build was built with another ONLY_FUNCS, or by an older build_nccl.sh: building afresh"
    rm -rf "$cache/build" "$cache/libnccl.so.2" "$cache/libnccl.so.2.xz" "$cache/VERSION" "$stamp"
fi
echo "== building NCCL $version from $src into $cache/build (sm_90, ONLY_FUNCS='$only_funcs')"
started=$(date +%s)
log=$cache/build.log
# NCCL's Makefile writes into its source tree's build/ unless BUILDDIR says
# otherwise; src.build is the library alone (no packages, no nccl4py).
if ! nice -n 19 make -C "$src" -j"${NCCL_JOBS:-2}" src.build \
    BUILDDIR="$cache/build" \
    CUDA_HOME="$cuda_home" CUDA_INC="$cuda_inc" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
    NVCC_GENCODE_LDMC_FP8="-gencode=arch=compute_90,code=sm_90" \
    ONLY_FUNCS="$only_funcs" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "build_nccl.sh: NCCL's build failed; the whole log is $log" >&2
    exit 1
fi
lib=$(find "$cache/build/lib" -name 'libnccl.so.2.*' -type f | head -n 1)
[ -n "$lib" ] || { echo "build_nccl.sh: no libnccl.so.2.* under $cache/build/lib" >&2; exit 1; }
strip --strip-unneeded -o "$cache/libnccl.so.2" "$lib"
xz -9 -T1 -c "$cache/libnccl.so.2" >"$cache/libnccl.so.2.xz"
echo "$version" >"$cache/VERSION"
printf '%s\n' "$only_funcs" >"$stamp"
elapsed=$(($(date +%s) - started))
size() { du -k "$1" | cut -f1; }
echo "== NCCL $version built in ${elapsed}s: $cache/libnccl.so.2 $(size "$cache/libnccl.so.2") KiB stripped, $(size "$cache/libnccl.so.2.xz") KiB xz"
