#!/bin/sh
# t_cli.sh - the command line and bad inputs through the real binary: each
# fails fast, on every rank, with a message naming what is wrong.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-1}
plan 29
cfg="$WORK/c.ini"
write_config "$cfg"

run "$np" --version;                 expect 0 "backends: cpu" "--version names the backends"
run "$np" --help;                    expect 0 "usage: trident train" "--help prints the usage"
run "$np" frobnicate;                expect 2 "unknown command 'frobnicate'" "unknown command"
run "$np" train --bogus;             expect 2 "unknown option '--bogus'" "unknown option"
run "$np" train --config;            expect 2 "needs a value" "option without its value"
# one parser for every command (cli_options.h): the same messages, the
# word as the user wrote it, getopt's unique prefixes
run "$np" train --conf;              expect 2 "^trident: option '--conf' needs a value" "an abbreviated option without its value"
run "$np" sample --ckpt x --tokens 0; expect 2 "^trident: --tokens 0: expected a positive integer" "a value the option's check refuses"
run "$np" export a.h5 --dtype fp16 d --format hf; expect 2 "^trident: --dtype fp16: expected fp32 or bf16" "export: a value not in the option's choices"
run "$np" export a.h5 d e --format hf; expect 2 "^trident: unexpected argument 'e'" "export: a third positional argument"
run "$np" tokenize --tokenizer t --bogus; expect 2 "^trident: unknown option '--bogus'$" "tokenize: unknown option, as for every command"
run "$np" train --config "$WORK/none.ini"; expect 1 "none.ini" "missing config file"
run "$np" train --config "$cfg" --set model.n_layers=3; expect 1 "n_layers" "unknown key through --set"
run "$np" train --config "$cfg" --set model.n_head=3; expect 1 "divisible" "n_embd not divisible by n_head"
run "$np" train --config "$cfg" --set data.train="$WORK/missing.txt"; expect 1 "\[data\] train" "missing data file"
: > "$WORK/empty.txt"
run "$np" train --config "$cfg" --set data.train="$WORK/empty.txt"; expect 1 "empty" "empty data file"
run "$np" train --config "$cfg" --set model.seq_len=4096; expect 1 "too short" "seq_len longer than the data"
run "$np" train --config "$cfg" --set parallel.dp=3; expect 1 "dp \* pp \* tp" "layout that does not fit the world"
run "$np" train --config "$cfg" --set train.precision=fp8; expect 1 "precision" "unknown precision"
run "$np" train --config "$cfg" --set parallel.device=cuda
expect 1 "device = cuda: .*\(reconfigure with --with-cuda\|no CUDA device\|GPUs\)" "asking for a GPU without one (or without CUDA)"
run "$np" train --config "$cfg" --set train.steps=2; expect 0 "done: 2 steps" "a good config trains"
# At start-up a run prints the keys not at their defaults, not all 64:
# init_std is at its default, n_embd is not.
grep -q "config $cfg, the keys not at their defaults (--print-config shows every key):$" "$WORK/out" &&
    grep -q "^n_embd = 32$" "$WORK/out" && ! grep -q "^init_std = " "$WORK/out" &&
    grep -q "^off, as the config does not ask for them: validation (\[eval\] every), a metrics file" "$WORK/out"
ok $? "start-up prints the keys not at their defaults ($(grep -c ' = ' "$WORK/out") lines of keys) and what is off"
# --print-config: every key, and nothing trained; its output is a config
# that loads as the same one
run "$np" train --config "$cfg" --set train.steps=2 --print-config
cp "$WORK/out" "$WORK/full.ini"
[ "$rc" -eq 0 ] && grep -q "^init_std = 0.02$" "$WORK/full.ini" && grep -q "^steps = 2$" "$WORK/full.ini" &&
    [ "$(grep -c ' = ' "$WORK/full.ini")" -ge 50 ] && ! grep -q "^step \|done:" "$WORK/full.ini"
ok $? "train --print-config prints every key ($(grep -c ' = ' "$WORK/full.ini")) and trains nothing (exit $rc)"
run "$np" train --config "$WORK/full.ini" --print-config
[ "$rc" -eq 0 ] && diff "$WORK/out" "$WORK/full.ini" | grep -c '^[<>]' | grep -qx 2 &&
    [ "$(tail -n +2 "$WORK/out")" = "$(tail -n +2 "$WORK/full.ini")" ]
ok $? "--print-config's output loads as the same config"
run "$np" plan --config "$cfg" --world 2 --print-config
[ "$rc" -eq 0 ] && grep -q "^init_std = 0.02$" "$WORK/out" && ! grep -q "^plan:" "$WORK/out"
ok $? "plan --print-config prints every key and plans nothing (exit $rc)"
run "$np" sample --ckpt x --print-config; expect 2 "option '--print-config' does not apply to this command" \
    "--print-config is train's and plan's"
# the bf16 GEMM path (kernels/cpu/gemm_bf16.h): a bad choice is refused by
# name; trident's own kernel trains and says so (AVX2 or AVX512_BF16)
TRIDENT_CPU_BF16_GEMM=fastest run "$np" train --config "$cfg" --set train.precision=bf16
expect 1 "TRIDENT_CPU_BF16_GEMM=fastest: expected auto, library, trident or widened" "an unknown bf16 GEMM path"
if cpu_has_trident_bf16_gemm; then
    TRIDENT_CPU_BF16_GEMM=trident run "$np" train --config "$cfg" --set train.steps=2 --set train.precision=bf16
    expect 0 "bf16 on trident's bf16 GEMM" "bf16 trains on trident's own GEMM when asked"
else
    ok 0 "# SKIP trident's bf16 GEMM needs AVX2 or AVX512_BF16"
fi
# the attention route (kernels/attention_route.c, its switch in switches.c): a bad word is refused by
# name on every device; the start-up line says which kernel runs
TRIDENT_ATTENTION=flash run "$np" train --config "$cfg" --set train.steps=1
expect 1 "TRIDENT_ATTENTION=flash: expected trident or cudnn" "an unknown attention route"
run "$np" train --config "$cfg" --set train.steps=1
expect 0 "^attention: trident's fused kernel (CPU" "the start-up line names the attention kernel"
done_testing
