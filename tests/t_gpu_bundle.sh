#!/bin/sh
# t_gpu_bundle.sh - bench/gpu_bundle.sh refuses a working tree whose new
# sources git does not track (its build takes tracked files only, and
# would leave them out silently), naming them, before it builds anything;
# a git-ignored file or an untracked file that is not a source does not
# stop it. Runs the script in a small git repository of its own, where a
# tree it accepts fails soon after at autoreconf (no configure.ac): no GPU,
# CUDA or build needed.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
plan 7
if ! command -v git >/dev/null 2>&1; then
    echo "1..0 # SKIP no git"
    exit 0
fi
R="$WORK/repo"
mkdir -p "$R/bench" "$R/kernels/cuda"
cp "${TRI_SRCDIR:-.}/bench/gpu_bundle.sh" "$R/bench/"
printf 'ignored.cu\n' > "$R/.gitignore"
echo 'int main(void) { return 0; }' > "$R/main.c"
(cd "$R" && git init -q && git add . &&
    git -c user.name=t -c user.email=t@t commit -qm base) || exit 1

# bundle: runs the script on the repository; output in $WORK/out, exit
# status in $rc
bundle() {
    (cd "$R" && env -u GPU_NCCL sh bench/gpu_bundle.sh "$WORK/pack") > "$WORK/out" 2>&1
    rc=$?
}

touch "$R/kernels/cuda/new_kernel_cuda.cu" "$R/bench/new_check.py"
bundle
expect 1 "sources in .* that git does not track" "untracked sources are refused"
grep -q '^    kernels/cuda/new_kernel_cuda.cu$' "$WORK/out" && grep -q '^    bench/new_check.py$' "$WORK/out"
ok $? "the refusal names each untracked source"
grep -q 'git add them' "$WORK/out"
ok $? "the refusal says what to do"
! grep -q '== building' "$WORK/out" && [ ! -e "$WORK/pack/bundle.tar.xz" ]
ok $? "nothing is built or packed after the refusal"

(cd "$R" && git add kernels/cuda/new_kernel_cuda.cu)
bundle
grep -q 'bench/new_check.py' "$WORK/out" && ! grep -q 'new_kernel_cuda.cu' "$WORK/out"
ok $? "once added, a source is no longer named; the one still untracked is"

rm "$R/bench/new_check.py"
touch "$R/ignored.cu" "$R/notes.txt"
bundle
! grep -q 'does not track' "$WORK/out" && grep -q '== building' "$WORK/out"
ok $? "a git-ignored source and an untracked non-source pass the check (the build starts)"
[ "$rc" -ne 0 ]
ok $? "the stand-in repository's build then fails (exit $rc), as it must without configure.ac"
done_testing
