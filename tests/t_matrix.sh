#!/bin/sh
# t_matrix.sh - the bad-input matrix of doc/errors.md, one case per TAP
# line: each runs trident on N ranks (2 by default) with one thing wrong,
# and checks that the run ends within a time limit, with the documented
# message and exit code, without a crash (no death by SIGSEGV/SIGABRT/...,
# no sanitizer report), and, at the end, that the completed checkpoint
# made first is byte for byte what it was (doc/design.md, invariants 3 and 4).
# The case ids (M01, ...) are those of doc/errors.md's table.
#
# Needs tests/ckpt_tamper (check_PROGRAMS) and h5copy (hdf5-tools, which
# jobs/setup.sh installs). The disk-full and read-only cases mount a small
# tmpfs in a private mount namespace (unshare -m, as root); where that is
# not allowed they say so and use the save_fail test hook instead.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-2}
TAMPER="${TRI_BUILDDIR:-.}/tests/ckpt_tamper"
limit=${TRI_MATRIX_LIMIT:-60}      # seconds any one case may take
plan 93
# shellcheck disable=SC3045
ulimit -c 0 2>/dev/null            # a crash is detected below, not left as a core file
t_start=$(date +%s)
MPIEXEC_RAW=$TRI_MPIEXEC

cfg="$WORK/c.ini"
write_config "$cfg"
cat >> "$cfg" <<EOC
[checkpoint]
keep = 100
EOC

# ---- helpers -----------------------------------------------------------

# verdict ID WANT-EXIT-REGEX PATTERN WHAT SECONDS: the last run ($rc,
# $WORK/out) exited as wanted, printed PATTERN, did not crash and ended
# before the limit.
verdict() {
    why=""
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || [ "$5" -ge "$limit" ]; then
        why="no end within ${limit}s"
    elif grep -q "exited on signal \(4\|6\|7\|8\|11\) \|Segmentation fault\|core dumped\|Sanitizer\|runtime error:" "$WORK/out"; then
        why="crashed"
    elif ! echo "$rc" | grep -Eqx "$2"; then
        why="exit $rc, wanted $2"
    elif ! grep -q -- "$3" "$WORK/out"; then
        why="no '$3' in the output"
    fi
    if [ -z "$why" ]; then
        ok 0 "$1 $4 (exit $rc, ${5}s)"
    else
        ok 1 "$1 $4: $why"
        sed 's/^/#   /' "$WORK/out" | grep -v '^#   [a-z_0-9]* = ' | tail -n 12
    fi
}

# tcase ID WANT-EXIT PATTERN WHAT [trident arguments]: runs trident on $np
# ranks under a time limit and judges it.
tcase() {
    id=$1 want=$2 pattern=$3 what=$4
    shift 4
    t0=$(date +%s)
    TRI_MPIEXEC="timeout -k 5 $limit $MPIEXEC_RAW" run "$np" "$@"
    verdict "$id" "$want" "$pattern" "$what" $(($(date +%s) - t0))
}

# train ID WANT-EXIT PATTERN WHAT [options]: tcase on `train --config $cfg`.
train() {
    id=$1 want=$2 pattern=$3 what=$4
    shift 4
    tcase "$id" "$want" "$pattern" "$what" train --config "$cfg" "$@"
}

# ini ID PATTERN WHAT TEXT: a config file holding TEXT (printf format
# escapes allowed) and nothing else; wants exit 1.
ini() {
    # shellcheck disable=SC2059
    printf "$4" > "$WORK/bad.ini"
    tcase "$1" 1 "$2" "$3" train --config "$WORK/bad.ini"
}

# shard FILE MAGIC VERSION COUNT NTOKENS [TOKEN]: an llm.c token shard
# whose header says MAGIC, VERSION and COUNT, holding NTOKENS uint16
# tokens, all TOKEN (default 7, < 128) but the 11th, which is 150.
le32() {  # le32 N: N as 4 little-endian bytes
    v=$1
    for _ in 1 2 3 4; do
        # shellcheck disable=SC2059
        printf "\\$(printf %o $((v % 256)))"
        v=$((v / 256))
    done
}
shard() {
    { le32 "$2"; le32 "$3"; le32 "$4"; head -c 1012 /dev/zero
      i=0
      while [ $i -lt "$5" ]; do
          # shellcheck disable=SC2059
          if [ $i = 10 ]; then printf '\226\000'; else printf "\\$(printf %o "${6:-7}")\\000"; fi
          i=$((i + 1))
      done; } > "$1"
}

# ranks PID: the ranks mpiexec PID started (its children).
ranks() { pgrep -P "$1" | tr '\n' ' '; }

# wait_bounded PID: waits for PID at most $limit seconds from $t0, then
# kills it and its children; sets $rc (124 after a kill).
wait_bounded() {
    while kill -0 "$1" 2>/dev/null && [ $(($(date +%s) - t0)) -lt "$limit" ]; do
        sleep 0.1
    done
    if kill -0 "$1" 2>/dev/null; then
        # shellcheck disable=SC2046
        kill -KILL $(ranks "$1") "$1" 2>/dev/null
        wait "$1" 2>/dev/null
        rc=124
    else
        wait "$1"
        rc=$?
    fi
}

# background DIR [options]: starts a long run (checkpoints in DIR, resumed
# from the good checkpoint copied there) in the background; $mp is
# mpiexec's pid.
background() {
    dir=$1
    shift
    rm -rf "$dir" && cp -r "$WORK/good" "$dir"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    $MPIEXEC_RAW -n "$np" "$TRIDENT" train --config "$cfg" --set train.steps=100000 \
        --set checkpoint.dir="$dir" "$@" > "$WORK/out" 2>&1 &
    mp=$!
}

# wait_for PATTERN: until the running job printed PATTERN (or 20 s).
wait_for() {
    i=0
    until grep -q -- "$1" "$WORK/out" || [ $i -gt 200 ]; do sleep 0.1; i=$((i + 1)); done
}

# the good checkpoint at step 4, its byte copy, and its directory
run "$np" train --config "$cfg" --set checkpoint.dir="$WORK/good" --set checkpoint.every=4
good="$WORK/good/step_00000004.h5"
if [ "$rc" -ne 0 ] || [ ! -f "$good" ]; then
    echo "Bail out! cannot make the good checkpoint (exit $rc)"
    sed 's/^/# /' "$WORK/out" | tail -n 20
    exit 1
fi
cp "$good" "$WORK/pristine.h5"
cp "$WORK/good/latest" "$WORK/pristine.latest"
intact_dirs="$WORK/good"

# ---- config ------------------------------------------------------------
ini M01 "bad.ini:2: syntax error in \"n_layer 2\" (expected key = value" \
    "config: a line that is not key = value" '[model]\nn_layer 2\n'
ini M02 "bad.ini:1: \[modle\]: unknown section (known: model, parallel" \
    "config: unknown section" '[modle]\nn_layer = 2\n'
ini M03 "bad.ini:2: \[model\] n_layers: unknown key in \[model\] (did you mean n_layer?)" \
    "config: unknown key in the file, a typo" '[model]\nn_layers = 2\n'
train M04 1 "\-\-set: \[train\] batch_size: unknown key in \[train\] (known: micro_batch" \
    "config: unknown key through --set" --set train.batch_size=8
ini M05 "bad.ini:3: \[model\] n_layer = 3: set twice (first on line 2)" \
    "config: a key given twice" '[model]\nn_layer = 2\nn_layer = 3\n'
ini M06 "bad.ini:1: n_layer: key before any \[section\] header (n_layer is in \[model\])" \
    "config: a key above every section" 'n_layer = 2\n[model]\n'
train M07 1 "\[model\] n_layer = two: not an integer" \
    "type: a word where an integer goes" --set model.n_layer=two
train M08 1 "\[train\] lr = fast: not a number" \
    "type: a word where a number goes" --set train.lr=fast
train M09 1 "\[model\] tie_embeddings = maybe: not a boolean" \
    "type: not a boolean" --set model.tie_embeddings=maybe
train M10 1 "\[train\] precision = fp8: expected one of fp32, bf16, fp16" \
    "type: a word not in the list" --set train.precision=fp8
train M11 1 "\[parallel\] zero = 4: must be between 0 and 3" \
    "range: ZeRO stage 4" --set parallel.zero=4
train M12 1 "\[train\] beta2 = 1: must be in \[0, 1)" \
    "range: beta2 = 1" --set train.beta2=1
train M13 1 "\[train\] steps = 99999999999: integer overflow" \
    "range: an integer beyond int" --set train.steps=99999999999
train M14 1 "\[train\] lr = inf: not a finite number" \
    "range: lr = inf" --set train.lr=inf
ini M15 "\[train\] lr = 1e-3 # peak: not a number (inline comments start with \" ;\"" \
    "config: a # comment after a value" '[train]\nlr = 1e-3 # peak\n'
train M16 1 "\[model\] n_head = 3: n_embd (32) is not divisible by n_head" \
    "sizes: n_embd not divisible by n_head" --set model.n_head=3
train M17 1 "\[train\] min_lr = 0.01: greater than lr (0.003)" \
    "sizes: min_lr above lr" --set train.min_lr=0.01
train M18 1 "\[checkpoint\] every = 2: needs \[checkpoint\] dir" \
    "config: periodic checkpoints without a directory" --set checkpoint.every=2
train M19 1 "\[eval\] patience = 3: early stopping needs \[eval\] every > 0" \
    "config: early stopping without evaluation" --set eval.patience=3
train M20 1 "\[model\] vocab_size = 100: text data is bytes: vocab_size must be >= 256" \
    "sizes: a text corpus with a vocabulary under 256" --set model.vocab_size=100
tcase M21 1 "cannot read config $WORK/none.ini: No such file or directory" \
    "config: the file does not exist" train --config "$WORK/none.ini"
tcase M22 1 "cannot read config $WORK: Is a directory" \
    "config: the file is a directory" train --config "$WORK"
train M23 1 "\-\-set model.n_layer: expected section.key=value" \
    "config: --set without a value" --set model.n_layer
train M24 2 "unknown option '--sett'" "command line: a misspelt option" --sett model.n_layer=2
head -c 600 "$TRIDENT" > "$WORK/binary.ini"
tcase M25 1 "binary.ini:1: a NUL byte in the text: not a text file" \
    "config: a binary file given as the config" \
    train --config "$WORK/binary.ini"
ini M26 "\[data\] train: required (the training data file)" \
    "config: no training data named" '[model]\nn_layer = 2\n'
ini M77 "bad.ini:2: a NUL byte in the text" \
    "config: a NUL byte inside a value (lr = 1<NUL>e-3)" '[train]\nlr = 1\000e-3\n'

# ---- layout -------------------------------------------------------------
train M27 1 "\[parallel\] dp \* pp \* tp = 3 \* 1 \* 1 = 3, but $np ranks were started" \
    "layout: dp x pp x tp is not the world" --set parallel.dp=3
train M28 1 "\[parallel\] dp = 0: the world size $np is not a multiple of pp \* tp = 2 \* 2" \
    "layout: pp x tp needs more ranks than started" --set parallel.pp=2 --set parallel.tp=2
train M29 1 "\[parallel\] tp = 2: n_head (1) is not divisible by tp" \
    "divisibility: tp does not divide n_head" --set parallel.tp=2 --set model.n_head=1
train M30 1 "\[parallel\] tp = 2: vocab_size (257) is not divisible by tp" \
    "divisibility: tp does not divide vocab_size" --set parallel.tp=2 --set model.vocab_size=257
train M31 1 "\[parallel\] pp = 3: more pipeline stages than layers (n_layer = 2)" \
    "layout: more stages than layers" --set parallel.pp=3
train M32 1 "\[parallel\] node_size = 3: must divide the world size" \
    "divisibility: node_size does not divide the world" --set parallel.node_size=3
train M78 1 "\[parallel\] tp = 65536: pp \* tp = 65536 \* 65536 = 4294967296 is more ranks than an MPI world holds" \
    "layout: pp x tp beyond any MPI world (it used to divide by zero)" --set parallel.pp=65536 \
    --set parallel.tp=65536 --set model.n_layer=65536 --set model.n_head=65536 \
    --set model.n_embd=65536 --set model.vocab_size=65536

# ---- data ---------------------------------------------------------------
train M33 1 "\[data\] train = $WORK/missing.txt: No such file or directory" \
    "data: the file does not exist" --set data.train="$WORK/missing.txt"
: > "$WORK/empty.txt"
train M34 1 "\[data\] train = $WORK/empty.txt: empty file" \
    "data: the file is empty" --set data.train="$WORK/empty.txt"
printf 'only twenty bytes...' > "$WORK/short.txt"
train M35 1 "\[data\] train = $WORK/short.txt: too short: 18 tokens in the train split, a sample needs seq_len+1 = 33" \
    "data: shorter than one sample" --set data.train="$WORK/short.txt"
train M36 1 "\[data\] train = $WORK: is a directory" \
    "data: a directory given as the data" --set data.train="$WORK"
tok() {  # train on a token shard with vocab 128
    t_id=$1 t_pat=$2 t_what=$3 t_file=$4
    shift 4
    train "$t_id" 1 "$t_pat" "$t_what" --set data.format=tokens --set model.vocab_size=128 \
        --set data.train="$t_file" "$@"
}
shard "$WORK/magic.bin" 12345 1 300 300
tok M37 "\[data\] train = $WORK/magic.bin: not a token shard: magic 12345 (expected 20240520)" \
    "data: a shard with the wrong magic" "$WORK/magic.bin"
shard "$WORK/version.bin" 20240520 2 300 300
tok M38 "\[data\] train = $WORK/version.bin: unsupported version 2 (expected 1)" \
    "data: a shard of another version" "$WORK/version.bin"
shard "$WORK/trunc.bin" 20240520 1 300 200
tok M39 "\[data\] train = $WORK/trunc.bin: truncated: header says 300 tokens but the file holds 200" \
    "data: a truncated shard" "$WORK/trunc.bin"
shard "$WORK/vocab.bin" 20240520 1 300 300
tok M40 "\[data\] train = $WORK/vocab.bin: token 150 at position 10 is outside the vocabulary (vocab_size 128)" \
    "data: a token id outside the vocabulary" "$WORK/vocab.bin"
head -c 100 "$WORK/vocab.bin" > "$WORK/tiny.bin"
tok M41 "\[data\] train = $WORK/tiny.bin: too small for a token shard: 100 bytes" \
    "data: a file smaller than a shard header" "$WORK/tiny.bin"
shard "$WORK/val.bin" 20240520 1 300 300 9
tok M42 "\[data\] val = $WORK/none.bin: No such file or directory" \
    "data: the validation file does not exist" "$WORK/val.bin" --set model.vocab_size=256 \
    --set data.val="$WORK/none.bin"
train M43 1 "too short: [0-9]* tokens in the held-out validation split (last 0.1% of \[data\] train)" \
    "data: the held-out validation split is shorter than one sample" \
    --set data.val_fraction=0.001
export TRIDENT_FAULT=
TRIDENT_FAULT="data_open:1:0"
train M44 1 "\[rank 1 .*injected fault: this rank cannot read it" \
    "data: only rank 1 cannot read the file (every rank exits)"
TRIDENT_FAULT=

# ---- checkpoint ------------------------------------------------------------
bad_ckpt() {  # bad_ckpt ID FILE PATTERN WHAT: resuming FILE is refused before step 1
    t0=$(date +%s)
    TRI_MPIEXEC="timeout -k 5 $limit $MPIEXEC_RAW" run "$np" train --config "$cfg" \
        --set train.steps=8 --set checkpoint.resume="$2"
    if grep -q "^step  *[0-9]" "$WORK/out"; then
        echo "(training started before the checkpoint was refused)" >> "$WORK/out"
        rc=99
    fi
    verdict "$1" 1 "$3" "$4" $(($(date +%s) - t0))
}
bad_ckpt M45 "$WORK/none.h5" "\[checkpoint\] resume = $WORK/none.h5: No such file or directory" \
    "checkpoint: the file does not exist"
head -c $(($(wc -c < "$good") / 2)) "$good" > "$WORK/trunc.h5"
bad_ckpt M46 "$WORK/trunc.h5" "checkpoint $WORK/trunc.h5: .*truncated" "checkpoint: a truncated file"
cp "$good" "$WORK/flip.h5" && "$TAMPER" "$WORK/flip.h5" flip /model/h.1.mlp.fc.w 17
bad_ckpt M47 "$WORK/flip.h5" "checkpoint $WORK/flip.h5: dataset /model/h.1.mlp.fc.w is corrupt" \
    "checkpoint: a corrupt dataset (checksum)"
cp "$good" "$WORK/del.h5" && "$TAMPER" "$WORK/del.h5" delete /optim/lnf.b/v
bad_ckpt M48 "$WORK/del.h5" "checkpoint $WORK/del.h5: dataset /optim/lnf.b/v is missing" \
    "checkpoint: a missing dataset"
cp "$good" "$WORK/shape.h5" && "$TAMPER" "$WORK/shape.h5" delete /model/wpe \
    && h5copy -i "$WORK/shape.h5" -o "$WORK/shape.h5" -s /model/h.0.attn.qkv.w -d /model/wpe
bad_ckpt M49 "$WORK/shape.h5" "dataset /model/wpe has shape 96 x 32, the model needs 32 x 32" \
    "checkpoint: a dataset of the wrong shape"
train M50 1 "\[model\] n_embd is 32 in the checkpoint but 64 in the config" \
    "checkpoint: written for another model shape" --set checkpoint.resume="$good" \
    --set model.n_embd=64
cp "$good" "$WORK/ver.h5" && "$TAMPER" "$WORK/ver.h5" version 99
bad_ckpt M51 "$WORK/ver.h5" "format version 99, this trident reads version 1" \
    "checkpoint: a newer format version"
"$TAMPER" "$WORK/foreign.h5" foreign
bad_ckpt M52 "$WORK/foreign.h5" "no format_version attribute: not a trident checkpoint" \
    "checkpoint: a foreign HDF5 file"
printf 'not hdf5 at all\n' > "$WORK/text.h5"
bad_ckpt M53 "$WORK/text.h5" "checkpoint $WORK/text.h5: not an HDF5 file, or truncated" \
    "checkpoint: not an HDF5 file"
mkdir -p "$WORK/dangling" && echo step_00000042.h5 > "$WORK/dangling/latest"
train M54 1 "latest names $WORK/dangling/step_00000042.h5, which cannot be read: No such file" \
    "checkpoint: latest names a missing file" --set checkpoint.dir="$WORK/dangling"
mkdir -p "$WORK/escape" && echo ../good/step_00000004.h5 > "$WORK/escape/latest"
train M55 1 "escape/latest: does not name a checkpoint file" \
    "checkpoint: latest names a path outside its directory" --set checkpoint.dir="$WORK/escape"
bad_ckpt M56 "$WORK/good" "checkpoint $WORK/good: not an HDF5 file" \
    "checkpoint: resume names a directory"
tcase M57 1 "some datasets are corrupt or unreadable" "inspect: a corrupt checkpoint" \
    inspect "$WORK/flip.h5"
tcase M58 1 "no config attribute: not a trident checkpoint" "sample: from a foreign HDF5 file" \
    sample --ckpt "$WORK/foreign.h5"

# ---- run directory --------------------------------------------------------
: > "$WORK/plainfile"
train M59 1 "\[checkpoint\] dir = $WORK/plainfile/ck: Not a directory" \
    "run dir: the checkpoint directory is under a regular file" \
    --set checkpoint.dir="$WORK/plainfile/ck" --set checkpoint.every=2
train M60 1 "\[log\] metrics = $WORK/plainfile/m.jsonl: Not a directory" \
    "run dir: the metrics file is under a regular file" --set log.metrics="$WORK/plainfile/m.jsonl"

# A real read-only file system and a real full disk need a mount: a tmpfs
# in a private mount namespace (unshare -m), gone when the case ends.
# inmnt.sh OPTIONS FROM OUT COMMAND...: mounts a tmpfs with OPTIONS on
# $WORK/mnt, copies FROM into it (- for nothing), runs COMMAND, copies the
# tmpfs back out to OUT (- for not) and exits with COMMAND's status.
mkdir -p "$WORK/mnt"
cat > "$WORK/inmnt.sh" <<EOS
opts=\$1 from=\$2 out=\$3
shift 3
mount -t tmpfs -o "\$opts" tmpfs "$WORK/mnt" || exit 97
[ "\$from" = - ] || cp -r "\$from"/. "$WORK/mnt/" || exit 98
"\$@"
rc=\$?
[ "\$out" = - ] || { mkdir -p "\$out" && cp -r "$WORK/mnt"/. "\$out"/; }
exit \$rc
EOS
can_mount=0
if [ "$(id -u)" = 0 ] && unshare -m sh "$WORK/inmnt.sh" size=64k - - true 2>/dev/null; then
    can_mount=1
fi
# fill.sh: the disk fills up while a save is being written. Every step
# saves; when a temporary file holds all its tensors, the ranks are
# stopped, the tmpfs is filled, and they go on. The run must end, exit 1,
# with latest naming a complete checkpoint.
cat > "$WORK/fill.sh" <<EOS
mount -t tmpfs -o size=4m tmpfs "$WORK/mnt" && cp -r "$WORK/good"/. "$WORK/mnt/" || exit 97
$MPIEXEC_RAW -n $np "$TRIDENT" train --config "$cfg" --set train.steps=100000 \\
    --set checkpoint.dir="$WORK/mnt" --set checkpoint.every=1 &
mp=\$!
size=\$(wc -c < "$good")
n=0
until [ "\$(stat -c %s "$WORK"/mnt/*.h5.tmp 2>/dev/null || echo 0)" -ge "\$size" ] \\
      || [ \$n -gt 5000 ]; do n=\$((n + 1)); done
r=\$(pgrep -P \$mp)
kill -STOP \$r
head -c 8M /dev/zero > "$WORK/mnt/filler" 2>/dev/null
kill -CONT \$r
wait \$mp
rc=\$?
rm -f "$WORK/mnt/filler"
mkdir -p "$WORK/filled" && cp -r "$WORK/mnt"/. "$WORK/filled/"
exit \$rc
EOS
if [ $can_mount = 1 ]; then
    MPIEXEC_SAVED=$MPIEXEC_RAW
    MPIEXEC_RAW="unshare -m sh $WORK/inmnt.sh ro,size=64k - - $MPIEXEC_SAVED"
    train M61 1 "\[checkpoint\] dir = $WORK/mnt: Read-only file system" \
        "run dir: the checkpoint directory is on a read-only file system (tmpfs, ro)" \
        --set checkpoint.dir="$WORK/mnt" --set checkpoint.every=2
    # the good checkpoint fits, the next one does not
    kb=$(($(wc -c < "$good") / 1024 + 160))
    MPIEXEC_RAW="unshare -m sh $WORK/inmnt.sh size=${kb}k $WORK/good $WORK/full $MPIEXEC_SAVED"
    train M62 1 "checkpoint: $WORK/mnt has 0.[0-9] MB free, but a checkpoint needs about 0.[0-9] MB (No space left on device)" \
        "run dir: the disk is too full for the next save (a ${kb} KiB tmpfs)" \
        --set checkpoint.dir="$WORK/mnt" --set train.steps=6 --set checkpoint.every=2
    MPIEXEC_RAW=$MPIEXEC_SAVED
    t0=$(date +%s)
    TRI_MPIEXEC="timeout -k 5 $limit unshare -m sh $WORK/fill.sh" run "$np"
    verdict M63 1 "No space left on device\|disk full\|did not finish in time" \
        "run dir: the disk fills up while a save is being written (a 4 MiB tmpfs)" \
        $(($(date +%s) - t0))
else
    diag "cannot mount a tmpfs here (not root, or no mount namespaces): the next three cases use stand-ins"
    mkdir -p "$WORK/ro_standin" && : > "$WORK/ro_standin/f"
    train M61 1 "Not a directory" \
        "run dir: unwritable checkpoint directory (stand-in: a path under a file)" \
        --set checkpoint.dir="$WORK/ro_standin/f/ck" --set checkpoint.every=2
    cp -r "$WORK/good" "$WORK/full"
    TRIDENT_FAULT="save_fail:0:6"
    train M62 1 "No space left on device" \
        "run dir: the disk is too full for the next save (stand-in: the save_fail hook)" \
        --set checkpoint.dir="$WORK/full" --set train.steps=6 --set checkpoint.every=2
    cp -r "$WORK/good" "$WORK/filled"
    TRIDENT_FAULT="save_fail:1:5"
    train M63 1 "No space left on device" \
        "run dir: the disk fills up while a save is being written (stand-in: the save_fail hook)" \
        --set checkpoint.dir="$WORK/filled" --set train.steps=6 --set checkpoint.every=1
    TRIDENT_FAULT=
fi
[ "$(cat "$WORK/full/latest" 2>/dev/null)" = step_00000004.h5 ] \
    && [ -z "$(find "$WORK/full" -name '*.tmp')" ] && [ ! -e "$WORK/full/step_00000006.h5" ]
ok $? "M62 ... and latest still names step 4, no partial file is left"
"$TRIDENT" inspect "$WORK/filled/$(cat "$WORK/filled/latest" 2>/dev/null)" > /dev/null 2>&1
ok $? "M63 ... and latest names a complete checkpoint ($(cat "$WORK/filled/latest" 2>/dev/null)), which verifies"
intact_dirs="$intact_dirs $WORK/full $WORK/filled"
cp -r "$WORK/good" "$WORK/hook"
TRIDENT_FAULT="save_fail:1:6"
train M64 1 "injected fault: No space left on device" \
    "run dir: the save fails on rank 1 only" --set checkpoint.dir="$WORK/hook" --set train.steps=6
TRIDENT_FAULT=
[ "$(cat "$WORK/hook/latest")" = step_00000004.h5 ] && [ -z "$(find "$WORK/hook" -name '*.tmp')" ]
ok $? "M64 ... and latest still names step 4, no partial file is left"
intact_dirs="$intact_dirs $WORK/hook"

# ---- signals --------------------------------------------------------------
# sig SIG TARGET: sends SIG to the ranks of the background job, or to mpiexec.
sig() {
    if [ "$2" = ranks ]; then
        # shellcheck disable=SC2046
        kill -"$1" $(ranks $mp) 2>/dev/null
    else
        kill -"$1" "$mp"
    fi
}

# At start: the signal reaches the ranks as soon as they exist, before
# trident installs its handlers, so they die by it and mpiexec reports it
# (exit 128 + signal). A trident that handles them from the start (see
# doc/errors.md) stops with 75 instead; both are accepted.
start_signal() {  # start_signal ID SIG TARGET WANT-EXIT PATTERN WHAT
    background "$WORK/sig_$1"
    i=0
    until [ -n "$(ranks $mp)" ] || [ $i -gt 2000 ]; do i=$((i + 1)); done
    sig "$2" "$3"
    wait_bounded "$mp"
    verdict "$1" "$4" "$5" "$6" $(($(date +%s) - t0))
    intact_dirs="$intact_dirs $WORK/sig_$1"
}
start_signal M65 TERM ranks "143|75" "exited on signal 15\|stopping" \
    "signal: SIGTERM to the ranks at start-up"
start_signal M66 USR1 mpiexec "138|75" "exited on signal 10\|stopping" \
    "signal: SIGUSR1 to mpiexec at start-up (forwarded to the ranks)"

# want_stop TARGET: the exit codes of a run stopped by a signal sent to
# TARGET. The ranks exit 75 after their checkpoint; but Open MPI's mpiexec
# can die by the SIGUSR1 it forwarded (138) once they have, and then a
# rank may abort on losing it. trident's stop line is required either way,
# and jobs/*.sbatch read it to requeue.
want_stop() {
    if [ "$1" = mpiexec ]; then echo "75|138"; else echo 75; fi
}

# Mid-step: once steps are running; a checkpoint, then exit 75.
mid_step() {  # mid_step ID SIG TARGET WHAT
    background "$WORK/sig_$1"
    wait_for "^step  *[0-9]"
    sig "$2" "$3"
    wait_bounded "$mp"
    verdict "$1" "$(want_stop "$3")" "stopping at step [0-9]* on a signal: exit 75" "$4" \
        $(($(date +%s) - t0))
    intact_dirs="$intact_dirs $WORK/sig_$1"
}
mid_step M67 TERM ranks "signal: SIGTERM to the ranks mid-step (as Slurm and scancel send it)"
mid_step M68 USR1 mpiexec "signal: SIGUSR1 to mpiexec mid-step (as sbatch --signal sends it)"

# Mid-save: every step saves; when a temporary file appears, stop the
# ranks (SIGSTOP) and look again: if it is still there, no rank has
# finished that save (rank 0 renames it last, and no rank leaves ckpt_save
# before rank 0), so a signal sent now lands mid-save. The save completes;
# the run stops with 75 at the next step boundary.
mid_save() {  # mid_save ID SIG TARGET WHAT
    background "$WORK/sig_$1" --set checkpoint.every=1
    hit=0 tries=0 tmp=""
    while [ $hit = 0 ] && [ $tries -lt 40 ] && kill -0 "$mp" 2>/dev/null; do
        n=0
        until [ -n "$(find "$WORK/sig_$1" -name '*.h5.tmp')" ] || [ $n -gt 2000 ]; do n=$((n + 1)); done
        r=$(ranks $mp)
        # shellcheck disable=SC2086
        kill -STOP $r 2>/dev/null
        tmp=$(find "$WORK/sig_$1" -name '*.h5.tmp')
        if [ -n "$tmp" ]; then
            hit=1
            sig "$2" "$3"
            [ "$3" = ranks ] || sleep 0.5   # mpiexec forwards it to the stopped ranks
        fi
        # shellcheck disable=SC2086
        kill -CONT $r 2>/dev/null
        tries=$((tries + 1))
    done
    wait_bounded "$mp"
    verdict "$1" "$(want_stop "$3")" "stopping at step [0-9]* on a signal: exit 75" "$4" \
        $(($(date +%s) - t0))
    saved=$(basename "${tmp%.tmp}")
    [ $hit = 1 ] && [ -f "$WORK/sig_$1/$saved" ] && grep -q "checkpoint: .*$saved" "$WORK/out" \
        && "$TRIDENT" inspect "$WORK/sig_$1/$saved" > /dev/null 2>&1 \
        && [ -z "$(find "$WORK/sig_$1" -name '*.tmp')" ]
    ok $? "$1 ... the save it interrupted (${saved:-none seen}, try $tries) completed and verifies; no temporary file is left"
    intact_dirs="$intact_dirs $WORK/sig_$1"
}
mid_save M69 TERM ranks "signal: SIGTERM to the ranks mid-save"
mid_save M70 USR1 mpiexec "signal: SIGUSR1 to mpiexec mid-save"

# SIGTERM to mpiexec itself: Open MPI kills the job at once, without a save.
background "$WORK/sig_M70"
wait_for "^step  *[0-9]"
sig TERM mpiexec
wait_bounded "$mp"
verdict M71 "1|143" "" "signal: SIGTERM to mpiexec itself (the job is killed, no checkpoint)" \
    $(($(date +%s) - t0))
intact_dirs="$intact_dirs $WORK/sig_M70"

# ---- a rank dies; numerics -------------------------------------------------
cp -r "$WORK/good" "$WORK/die"
TRIDENT_FAULT="die:1:6"
train M72 "[1-9][0-9]*" "exited on signal\|non-zero status\|exit code" \
    "a rank dies mid-step: mpiexec ends the job instead of hanging" \
    --set checkpoint.dir="$WORK/die" --set train.steps=8
cp -r "$WORK/good" "$WORK/nan"
TRIDENT_FAULT="nan_loss:0:6"
train M73 1 "step 6: the loss is .*nan.*training diverged" \
    "numeric: the loss turns NaN" --set checkpoint.dir="$WORK/nan" --set train.steps=8
cp -r "$WORK/good" "$WORK/inf"
TRIDENT_FAULT="grad_inf:1:6"
train M74 1 "step 6: .*gradient norm inf: training diverged" \
    "numeric: a gradient explodes to inf on rank 1" --set checkpoint.dir="$WORK/inf" \
    --set train.steps=8
TRIDENT_FAULT=
intact_dirs="$intact_dirs $WORK/die $WORK/nan $WORK/inf"
train M75 1 "step 2: the loss is .*nan.*training diverged" \
    "numeric: a real divergence (lr = 1e30, no clipping)" --set train.lr=1e30 \
    --set train.min_lr=0 --set train.warmup=0 --set train.clip_norm=0 --set train.steps=20

# a model far too big: the first allocation fails, and says so (a heuristic
# overcommit refuses 550 GB on any machine that runs these tests)
train M76 1 "fatal: ops_alloc: out of memory allocating [0-9]* bytes" \
    "sizes: a model far too big for the memory (n_embd = 2^30)" \
    --set model.n_embd=1073741824 --set model.n_head=1

# ---- asynchronous checkpoints (issue 17) ----
# on every rank: an asynchronous save is collective
every_rank() {  # every_rank POINT STEP [POINT STEP ...]: TRIDENT_FAULT text
    f=""
    while [ $# -ge 2 ]; do
        i=0
        while [ $i -lt "$np" ]; do f="$f${f:+,}$1:$i:$2"; i=$((i + 1)); done
        shift 2
    done
    echo "$f"
}
# no_step6 DIR: latest still names step 4, no step 6 and no temporary file
no_step6() {
    [ "$(cat "$1/latest" 2>/dev/null)" = step_00000004.h5 ] && [ ! -e "$1/step_00000006.h5" ] \
        && [ -z "$(find "$1" -name '*.tmp')" ]
}
train M118 1 "\[checkpoint\] async = maybe: not a boolean" \
    "config: [checkpoint] async is not a boolean" --set checkpoint.async=maybe
cp -r "$WORK/good" "$WORK/async_fail"
TRIDENT_FAULT="save_fail:1:6"
train M119 1 "the checkpoint of step 6, written in the background, failed" \
    "run dir: an asynchronous save fails on rank 1 only (save_fail hook)" \
    --set checkpoint.dir="$WORK/async_fail" --set checkpoint.async=true --set train.steps=10 \
    --set checkpoint.every=2
TRIDENT_FAULT=
no_step6 "$WORK/async_fail"
ok $? "M119 ... and latest still names step 4, no partial file is left"
if [ $can_mount = 1 ]; then
    kb=$(($(wc -c < "$good") / 1024 + 160))
    MPIEXEC_SAVED=$MPIEXEC_RAW
    MPIEXEC_RAW="unshare -m sh $WORK/inmnt.sh size=${kb}k $WORK/good $WORK/async_full $MPIEXEC_SAVED"
    train M120 1 "No space left on device" \
        "run dir: the disk is too full for an asynchronous save (a ${kb} KiB tmpfs)" \
        --set checkpoint.dir="$WORK/mnt" --set checkpoint.async=true --set train.steps=8 \
        --set checkpoint.every=2
    MPIEXEC_RAW=$MPIEXEC_SAVED
else
    diag "cannot mount a tmpfs here: M120 uses the save_fail hook on every rank"
    cp -r "$WORK/good" "$WORK/async_full"
    TRIDENT_FAULT=$(every_rank save_fail 6)
    train M120 1 "No space left on device" \
        "run dir: the disk is too full for an asynchronous save (stand-in: the save_fail hook)" \
        --set checkpoint.dir="$WORK/async_full" --set checkpoint.async=true \
        --set train.steps=8 --set checkpoint.every=2
    TRIDENT_FAULT=
fi
grep -q "written in the background, failed" "$WORK/out" && no_step6 "$WORK/async_full"
ok $? "M120 ... reported as a failed background save; latest still names step 4, no partial file is left"
intact_dirs="$intact_dirs $WORK/async_fail $WORK/async_full"
# every rank kills itself (SIGKILL) halfway through the tensors of the
# step-6 save, its writer slowed so the training thread is mid-step too
cp -r "$WORK/good" "$WORK/async_kill"
# (verdict reads 137 as a timeout's kill: judged here instead)
TRIDENT_FAULT=$(every_rank async_kill 6 save_slow 6)
t0=$(date +%s)
TRI_MPIEXEC="timeout -k 5 $limit $MPIEXEC_RAW" run "$np" train --config "$cfg" \
    --set checkpoint.dir="$WORK/async_kill" --set checkpoint.async=true --set train.steps=8 \
    --set checkpoint.every=2
took=$(($(date +%s) - t0))
TRIDENT_FAULT=
[ "$took" -lt "$limit" ] && grep -q "exited on signal 9" "$WORK/out" \
    && ! grep -q "Segmentation fault\|core dumped\|Sanitizer\|runtime error:" "$WORK/out"
ok $? "M121 kill -9: every rank killed halfway through writing an asynchronous save (exit $rc, ${took}s)"
half=$(find "$WORK/async_kill" -name 'step_00000006.h5.tmp')
no6=0
[ "$(cat "$WORK/async_kill/latest")" = step_00000004.h5 ] && [ ! -e "$WORK/async_kill/step_00000006.h5" ] || no6=1
run "$np" train --config "$cfg" --set checkpoint.dir="$WORK/async_kill" --set train.steps=8 \
    --set checkpoint.async=true
[ -n "$half" ] && [ $no6 = 0 ] && [ "$rc" = 0 ] \
    && grep -q "resumed from .*step_00000004.h5: step 4" "$WORK/out" \
    && "$TRIDENT" inspect "$WORK/async_kill/step_00000008.h5" > /dev/null 2>&1
ok $? "M121 ... left a partial step_00000006.h5.tmp${half:+ (seen)}; latest still names step 4, and a run resumes from it to step 8"
intact_dirs="$intact_dirs $WORK/async_kill"
# SIGTERM to the ranks while the step-6 save is still being written
TRIDENT_FAULT=$(every_rank save_slow 0)
background "$WORK/sig_M122" --set checkpoint.async=true --set checkpoint.every=2
wait_for "^step  *7/"
inflight=$(grep -c "checkpoint: .*in the background" "$WORK/out")
sig TERM ranks
wait_bounded "$mp"
TRIDENT_FAULT=
verdict M122 75 "stopping at step [0-9]* on a signal: exit 75" \
    "signal: SIGTERM to the ranks while an asynchronous save is in flight" $(($(date +%s) - t0))
stop=$(sed -n 's/^stopping at step \([0-9]*\) on a signal.*/\1/p' "$WORK/out")
last=$(printf 'step_%08d.h5' "${stop:-0}")
[ "$inflight" = 0 ] && grep -q "checkpoint: .*step_00000006.h5.*in the background" "$WORK/out" \
    && [ "$(cat "$WORK/sig_M122/latest")" = "$last" ] \
    && "$TRIDENT" inspect "$WORK/sig_M122/step_00000006.h5" > /dev/null 2>&1 \
    && "$TRIDENT" inspect "$WORK/sig_M122/$last" > /dev/null 2>&1
ok $? "M122 ... the save in flight (step 6) completed first, then the stop's own ($last); both verify"
intact_dirs="$intact_dirs $WORK/sig_M122"

# ---- the completed checkpoint survived all of it ------------------------------
bad=""
for d in $intact_dirs; do
    cmp -s "$WORK/pristine.h5" "$d/step_00000004.h5" || bad="$bad $d"
done
cmp -s "$WORK/pristine.latest" "$WORK/good/latest" || bad="$bad $WORK/good/latest"
[ -z "$bad" ] && "$TRIDENT" inspect "$good" > /dev/null
ok $? "the step-4 checkpoint is byte-identical in all $(echo "$intact_dirs" | wc -w) run directories${bad:+ (changed:$bad)}"
# No rank may outlive its case: name and end any that did.
left=$(pgrep -f "$TRIDENT train --config $WORK/" | tr '\n' ' ')
if [ -n "$left" ]; then
    diag "ranks still running after their case ended (killed now): $left"
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null
fi
diag "matrix: $tap_n checks in $(($(date +%s) - t_start)) s"
done_testing
