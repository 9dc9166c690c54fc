#!/bin/sh
# build.sh - builds the libFuzzer targets with clang, outside the autotools
# build: tests/fuzz/build.sh BUILDDIR [OUTDIR]
#
# BUILDDIR is a configured and built trident tree (any configure options
# but --enable-sanitizers, whose gcc runtime cannot mix with clang's). The
# code under test (src/config/*.c, src/parallel/grid.c, src/data/*.c,
# src/ckpt/ckpt*.c, src/ckpt/inspect.c, src/interop/safetensors.c,
# src/tokenizer/bpe.c, src/tokenizer/tokenizer_load.c) and the targets are
# compiled here with
# -fsanitize=fuzzer-no-link,address,undefined; the rest of trident comes,
# uninstrumented, from BUILDDIR's libraries, whose copies of those files
# the linker then leaves out. Needs clang and Debian's libclang-rt-14-dev
# (libFuzzer and the sanitizer runtimes).
#
# Run a target:  OUTDIR/fuzz_config -max_total_time=300 CORPUS-COPY tests/fuzz/corpus/config
# (the first directory collects new inputs; keep the committed corpus small).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: build.sh BUILDDIR [OUTDIR]}" && pwd)
out=${2:-$build/tests/fuzz}
mkdir -p "$out"
CLANG=${CLANG:-clang}

var() { sed -n "s/^$1 = //p" "$build/Makefile"; }
gemm=$(var GEMM_LIBS)
cuda=$(var CUDA_LIBS)
nccl=$(var NCCL_LIBS)
hdf5_cflags=$(var HDF5_CFLAGS)
hdf5_libs=$(var HDF5_LIBS)
inih_cflags=$(var INIH_CFLAGS)
inih_libs=$(var INIH_LIBS)
jansson_cflags=$(var JANSSON_CFLAGS)
jansson_libs=$(var JANSSON_LIBS)
pcre2_cflags=$(var PCRE2_CFLAGS)
pcre2_libs=$(var PCRE2_LIBS)
# MPI's flags as configure found them; none when CC was an MPI wrapper
mpi_cflags=$(var MPI_CFLAGS)
mpi_libs=$(var MPI_LIBS)
[ -n "$mpi_cflags$mpi_libs" ] || { mpi_cflags=$(mpicc -showme:compile); mpi_libs=$(mpicc -showme:link); }

san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# every folder of src/ and kernels/ops.h, as the tests see them
incs="-I$top -I$top/kernels"
for d in "$top"/src/*/; do incs="$incs -I${d%/}"; done
# shellcheck disable=SC2086
cc() {  # cc OUT.o SOURCE: instrumented for coverage and the sanitizers
    $CLANG -std=c11 -g -O1 -fsanitize=fuzzer-no-link $san -Wno-unknown-pragmas \
        -include "$build/tri_config.h" $incs -I"$here" \
        $hdf5_cflags $inih_cflags $jansson_cflags $pcre2_cflags $mpi_cflags -c -o "$1" "$2"
}
obj="$out/obj"
mkdir -p "$obj"
for f in config_load config_keys config_value config_message config_rules config_ini ini_read data data_format data_sampler data_loader blend indexed ckpt ckpt_format ckpt_files inspect grid safetensors bpe tokenizer_load; do
    for c in "$top"/src/*/"$f.c"; do cc "$obj/$f.o" "$c"; done
done
for f in fuzz_util fuzz_config fuzz_data fuzz_ckpt fuzz_safetensors fuzz_indexed fuzz_tokenizer; do cc "$obj/$f.o" "$here/$f.c"; done

# shellcheck disable=SC2086
link() {  # link TARGET OBJECTS...: libFuzzer's main, then BUILDDIR's libraries
    t=$1
    shift
    $CLANG -fsanitize=fuzzer $san -o "$out/$t" "$@" "$obj/fuzz_util.o" \
        "$build/src/libtrident.a" "$build/kernels/libkernels.a" $gemm $cuda $nccl \
        $hdf5_libs $inih_libs $jansson_libs $pcre2_libs $mpi_libs -lgomp -lm -pthread
}
config="$obj/config_load.o $obj/config_keys.o $obj/config_value.o $obj/config_message.o $obj/config_rules.o
    $obj/config_ini.o $obj/ini_read.o"
data="$obj/data.o $obj/data_format.o $obj/data_sampler.o $obj/data_loader.o"
ckpt="$obj/ckpt.o $obj/ckpt_format.o $obj/ckpt_files.o $obj/inspect.o"
# shellcheck disable=SC2086
link fuzz_config "$obj/fuzz_config.o" $config "$obj/grid.o"
# shellcheck disable=SC2086
link fuzz_data "$obj/fuzz_data.o" $data "$obj/blend.o" "$obj/indexed.o" $config
# shellcheck disable=SC2086
link fuzz_indexed "$obj/fuzz_indexed.o" "$obj/indexed.o"
# shellcheck disable=SC2086
link fuzz_ckpt "$obj/fuzz_ckpt.o" $ckpt $config $data "$obj/blend.o" "$obj/indexed.o"
# shellcheck disable=SC2086
link fuzz_safetensors "$obj/fuzz_safetensors.o" "$obj/safetensors.o"
# shellcheck disable=SC2086
link fuzz_tokenizer "$obj/fuzz_tokenizer.o" "$obj/bpe.o" "$obj/tokenizer_load.o"
echo "build.sh: $out/fuzz_config $out/fuzz_data $out/fuzz_ckpt $out/fuzz_safetensors $out/fuzz_indexed $out/fuzz_tokenizer"
