#!/bin/sh
# t_build_nccl.sh - bench/build_nccl.sh's ONLY_FUNCS keeps every NCCL device
# function that src/parallel/comm_nccl.c reaches, and the script refuses,
# before building, a filter that would drop one. NCCL does not refuse a
# call whose function was filtered out: it runs its Nop kernel, and the
# collective leaves its buffer untouched. NCCL 2.30 runs each ncclBroadcast
# (comm_nccl.c's unequal all-gather) as an AllGatherV, which the filter
# once left out.
#
# No NCCL source here: a stand-in tree whose src/device/generate.py writes
# host_table.cc's table of functions (one row per function, named in a
# comment, "Nop" where the filter drops it) for a sample of NCCL 2.30's
# rows, filtering as NCCL's generator documents it (a glob `*` is one
# space-free word; `(a|b)` groups; the whole name must match; any case),
# and a stand-in `make` that says it ran. Checked against NCCL 2.30.7's own
# generator by hand (doc/gpu.md).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP no python3 (NCCL's build needs it too)"
    exit 0
fi
plan 9
nccl="$WORK/nccl"
mkdir -p "$nccl/makefiles" "$nccl/src/device" "$WORK/bin"
printf 'NCCL_MAJOR   := 2\nNCCL_MINOR   := 30\nNCCL_PATCH   := 7\n' > "$nccl/makefiles/version.mk"
cat > "$nccl/src/device/generate.py" <<'EOF'
import os, re, sys
rows = ["SendRecv", "AllGather RING LL", "AllGather PAT SIMPLE", "Broadcast RING LL",
        "AllGatherV RING LL", "AllGatherV RING SIMPLE", "AllReduce Sum f32 RING LL",
        "AllReduce Sum bf16 NVLS SIMPLE", "AllReduce MinMax f64 TREE LL128",
        "AllReduce Prod f32 RING LL", "Reduce Sum f16 RING LL",
        "ReduceScatter Sum i32 PAT SIMPLE", "ReduceScatter Sum u8 RING LL", None]
pattern = sys.argv[2]
drop = os.environ.get("STANDIN_DROP", "")
def built(name):
    if pattern and drop and name.startswith(drop):
        return False
    return not pattern or re.match(pattern.replace("*", "[^ ]*") + "$", name, re.I) is not None
os.makedirs(sys.argv[1])
with open(os.path.join(sys.argv[1], "host_table.cc"), "w") as f:
    f.write("extern int const ncclDevFuncRowToId[] = {\n")
    for i, name in enumerate(rows):
        if name is None:
            f.write("/*%4d*/ -1,\n" % i)
        else:
            f.write("/*%4d*/ %d, // %s\n" % (i, i, name if built(name) else "Nop"))
    f.write("-1};\n")
    if pattern:
        open(os.path.join(sys.argv[1], "kept"), "w").write(
            "\n".join(n for n in rows if n and built(n)) + "\n")
EOF
printf '#!/bin/sh\necho "stand-in make ran"\nexit 3\n' > "$WORK/bin/make"
chmod +x "$WORK/bin/make"

# build: the script on the stand-in tree; output in $WORK/out, status in $rc
build() {
    PATH="$WORK/bin:$PATH" sh "${TRI_SRCDIR:-.}/bench/build_nccl.sh" "$nccl" "$WORK/cache" > "$WORK/out" 2>&1
    rc=$?
}

build
kept="$WORK/cache/funcs-check/only/kept"
grep -qx "AllGatherV RING LL" "$kept" && grep -qx "AllGatherV RING SIMPLE" "$kept"
ok $? "ONLY_FUNCS keeps AllGatherV, which NCCL 2.30 runs each ncclBroadcast as"
grep -qx "SendRecv" "$kept" && grep -qx "Broadcast RING LL" "$kept" &&
    grep -qx "AllReduce MinMax f64 TREE LL128" "$kept" && grep -qx "ReduceScatter Sum i32 PAT SIMPLE" "$kept" &&
    ! grep -q "Prod\|u8" "$kept"
ok $? "it keeps send/receive, broadcast and the reductions trident calls, and drops the rest (Prod, u8)"
grep -q "keeps all 11 of NCCL's device functions that comm_nccl.c needs" "$WORK/out" &&
    grep -q "stand-in make ran" "$WORK/cache/build.log"
ok $? "the check passes and says so, and the build starts (exit $rc, the stand-in make's failure)"

rm -rf "$WORK/cache"
export STANDIN_DROP=AllGatherV   # the stand-in drops it whatever the filter
build
unset STANDIN_DROP
expect 1 "ONLY_FUNCS would leave out functions comm_nccl.c needs" \
    "a filter that drops a needed function is refused"
grep -q '^    AllGatherV RING LL$' "$WORK/out" && grep -q '^    AllGatherV RING SIMPLE$' "$WORK/out"
ok $? "the refusal names each function dropped"
! grep -q "stand-in make ran" "$WORK/cache/build.log" 2>/dev/null && ! grep -q "== building" "$WORK/out"
ok $? "nothing is built after the refusal"
# A cache an older filter built starts afresh (NCCL's makefiles would
# keep its device objects), and gpu_bundle.sh refuses to pack one.
mkdir -p "$WORK/cache/build/obj"
printf '(AllGather * *|SendRecv)\n' > "$WORK/cache/ONLY_FUNCS"
build
grep -q "built with another ONLY_FUNCS, or by an older build_nccl.sh: building afresh" "$WORK/out" &&
    [ ! -e "$WORK/cache/build/obj" ] && grep -q "stand-in make ran" "$WORK/cache/build.log"
ok $? "a cache built with another filter is built afresh"
mkdir -p "$WORK/old"
: > "$WORK/old/libnccl.so.2"
echo 2.30.7 > "$WORK/old/VERSION"
GPU_NCCL="$WORK/old" sh "${TRI_SRCDIR:-.}/bench/gpu_bundle.sh" "$WORK/bundle" > "$WORK/out" 2>&1
expect 1 "gpu_bundle.sh: GPU_NCCL=$WORK/old was built with another ONLY_FUNCS than bench/build_nccl.sh's, or before it recorded one" \
    "gpu_bundle.sh refuses a cache that records no filter"
# what --only-funcs prints (gpu_bundle.sh's reference) is the filter built
# with, as the build's announcement quotes it
rm -rf "$WORK/cache"
build
filter=$(sh "${TRI_SRCDIR:-.}/bench/build_nccl.sh" --only-funcs)
grep -qF "ONLY_FUNCS='$filter')" "$WORK/out"
ok $? "--only-funcs prints the filter the build uses"
done_testing
