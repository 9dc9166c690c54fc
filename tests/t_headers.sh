#!/bin/sh
# t_headers.sh - every header that declares an extern function says whether
# its functions are collective (DEVELOPERS.md: a caller must know which
# calls every rank of a communicator has to make, or a rank hangs). One
# TAP line per such header; headers of static inline code only are not
# checked. The rule is the file's: "Not collective." in its opening comment
# for a file of local functions, "Collective over ..." on each function
# that communicates.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
cd "${TRI_SRCDIR:-.}" || exit 1
# a top-level declaration of a function that is not static: a type, then a
# name and its opening parenthesis, at the start of a line
declares_extern() {
    grep -E '^[A-Za-z_][A-Za-z0-9_ ]*[ *]+[A-Za-z_][A-Za-z0-9_]*\(' "$1" \
        | grep -q -v -E '^(static|typedef|return|if|for|while|else)\b'
}
headers=""
for f in src/*/*.h kernels/*.h kernels/cpu/*.h kernels/cuda/*.h; do
    [ -f "$f" ] && declares_extern "$f" && headers="$headers $f"
done
n=$(echo "$headers" | wc -w)
plan $((n + 1))
[ "$n" -ge 40 ]
ok $? "found the headers ($n with extern functions)"
for f in $headers; do
    grep -q -i 'collective' "$f"
    ok $? "$f states its functions' collectivity"
done
done_testing
