#!/bin/sh
# make-corpus.sh - remakes the checkpoint seeds of tests/fuzz/corpus/ckpt:
# tests/fuzz/make-corpus.sh BUILDDIR. They are checkpoints of the tiny
# model fuzz_ckpt.c loads (1 layer, 8 wide, 2 heads, seq 8, vocab 256), a
# few of them damaged with tests/ckpt_tamper (make -C BUILDDIR
# tests/ckpt_tamper first) or made hostile by gen_hostile.c. The config and
# data seeds are written by hand. good_v1.h5 is a format version 1 file (no
# attrs_checksum), kept from before version 2: this script cannot remake it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: make-corpus.sh BUILDDIR}" && pwd)
out="$here/corpus/ckpt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/c.ini" <<EOC
[model]
n_layer = 1
n_embd = 8
n_head = 2
seq_len = 8
vocab_size = 256
[train]
micro_batch = 1
steps = 2
[data]
train = $top/tests/data/small.txt
[checkpoint]
dir = $work/ck
[eval]
every = 0
[log]
metrics =
sample_tokens = 0
EOC
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpiexec -n 1 "$build/trident" train --config "$work/c.ini" > "$work/log" 2>&1
tamper="$build/tests/ckpt_tamper"
good="$work/ck/step_00000002.h5"
mkdir -p "$out"
cp "$good" "$out/good.h5"
cp "$good" "$out/flip.h5" && "$tamper" "$out/flip.h5" flip /model/wte 5
cp "$good" "$out/delete.h5" && "$tamper" "$out/delete.h5" delete /optim/lnf.b/v
cp "$good" "$out/version.h5" && "$tamper" "$out/version.h5" version 99
cp "$good" "$out/cursor_bit.h5" && "$tamper" "$out/cursor_bit.h5" bit data_cursor 63
cp "$good" "$out/step_bit.h5" && "$tamper" "$out/step_bit.h5" bit step 31
cp "$good" "$out/no_attrs_checksum.h5" && "$tamper" "$out/no_attrs_checksum.h5" unset attrs_checksum
cp "$good" "$out/gutted.h5"
for d in $(h5ls -r "$good" | awk '$2 == "Dataset" && $1 != "/model/wte" { print $1 }'); do
    "$tamper" "$out/gutted.h5" delete "$d"
done
"$tamper" "$out/foreign.h5" foreign
size=$(wc -c < "$good")
head -c $((size / 2)) "$good" > "$out/truncated.h5"
head -c 2048 "$good" > "$out/superblock.h5"
printf 'not hdf5 at all\n' > "$out/text.h5"
# valid HDF5, hostile to a reader: array attributes, 3-D, empty and huge datasets
hdf5_cflags=$(sed -n 's/^HDF5_CFLAGS = //p' "$build/Makefile")
hdf5_libs=$(sed -n 's/^HDF5_LIBS = //p' "$build/Makefile")
# shellcheck disable=SC2086
mpicc -o "$work/gen_hostile" "$here/gen_hostile.c" $hdf5_cflags $hdf5_libs
"$work/gen_hostile" "$out"
ls -l "$out"
