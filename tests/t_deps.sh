#!/bin/sh
# t_deps.sh - src/ and kernels/ have no circles: no file of src/ or of
# kernels/ depends on itself through the files it uses, and no folder of
# src/ on itself through the folders it uses, so each can be read, tested
# and changed from the bottom up (DEVELOPERS.md, "No circles"). Five
# graphs, one TAP line per circle found (a strongly connected set, shown
# by its shortest circle and, under it, every edge inside it):
#  - includes, of src/ and of kernels/: `#include "x.h"`, where a .c (or
#    .cu) and the header beside it are one node (comm.c including
#    comm_nccl.h and comm_nccl.c including comm.h is a circle). Read from
#    the sources, whatever the build, so it sees comm_nccl.c in a CPU
#    build too. src/ includes bare names, found in any of its folders;
#    kernels/ includes by path from the including file ("../ops.h").
#  - calls, of src/ and of kernels/: each object of src/libtrident.a or
#    kernels/libkernels.a (the build's: the CUDA backend's objects too in
#    a CUDA build) against the others of its library, by nm: an undefined
#    symbol of one that another defines (a function or data: T, D, B,
#    R...) is an edge between their source files. kernels/'s dispatchers
#    call their routes and nothing calls back up (the CPU GEMMs:
#    kernels/cpu/gemm_cpu.c calls gemm_dnnl.c or gemm_cblas.c and
#    gemm_bf16_cpu.c, which call nothing of it).
#  - folders of src/: the two graphs' edges between files of different
#    folders, as edges between the folders (the build's fence lets a
#    folder include only the folders it may use; this proves those
#    permissions form no circle). kernels/'s folders are no such layers
#    (ops.c dispatches into cpu/ and cuda/, which use dtype.c and fatal.c
#    beside it), so only its files are checked.
# The finder is checked first on two small graphs, one with a circle, and
# the readers on a circle planted in a copy of kernels/ (its includes) and
# in two objects compiled for it (its calls). Every circle found fails.
# Then the files that call MPI, and the length of every .c and .cu of src/
# and kernels/ (800 lines at most).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
src="${TRI_SRCDIR:-.}/src"
lib="${TRI_BUILDDIR:-.}/src/libtrident.a"

# circles KIND: reads "FROM TO WHY..." edges on stdin, prints one line per
# strongly connected set of more than one node: "KIND<tab>key<tab>circle
# <tab>edges", key being the sorted nodes, circle the shortest circle
# through the first of them, edges each edge inside the set and its why.
circles() {
    sort -u | awk -v kind="$1" '
        function strong(v,    i, w) {   # Tarjan, in the order edges sort
            idx[v] = low[v] = ++counter
            stack[++sp] = v
            onstack[v] = 1
            for (i = 1; i <= nout[v]; i++) {
                w = out[v, i]
                if (!(w in idx)) {
                    strong(w)
                    if (low[w] < low[v]) low[v] = low[w]
                } else if (onstack[w] && idx[w] < low[v])
                    low[v] = idx[w]
            }
            if (low[v] == idx[v]) {
                ncomp++
                do {
                    w = stack[sp--]
                    onstack[w] = 0
                    comp[w] = ncomp
                    members[ncomp, ++nmembers[ncomp]] = w
                } while (w != v)
            }
        }
        # the shortest circle from s back to s inside its set (breadth first)
        function shortest(s,    head, tail, q, from, v, i, w, path) {
            split("", from)
            head = tail = 1
            q[1] = s
            while (head <= tail) {
                v = q[head++]
                for (i = 1; i <= nout[v]; i++) {
                    w = out[v, i]
                    if (comp[w] != comp[s]) continue
                    if (w == s) {
                        path = s
                        while (v != s) { path = v " -> " path; v = from[v] }
                        return s " -> " path
                    }
                    if (!(w in from)) { from[w] = v; q[++tail] = w }
                }
            }
        }
        {
            known = ($1, $2) in why
            if (!known) {
                out[$1, ++nout[$1]] = $2
                if (!($1 in seen)) { seen[$1] = 1; order[++nnodes] = $1 }
                if (!($2 in seen)) { seen[$2] = 1; order[++nnodes] = $2 }
            }
            w = $3
            for (i = 4; i <= NF; i++) w = w " " $i
            why[$1, $2] = known ? why[$1, $2] ", " w : w
        }
        END {
            for (i = 1; i <= nnodes; i++)
                if (!(order[i] in idx)) strong(order[i])
            for (c = 1; c <= ncomp; c++) {
                n = nmembers[c]
                if (n < 2) continue
                for (i = 2; i <= n; i++)   # sort the members (a few)
                    for (j = i; j > 1 && members[c, j - 1] > members[c, j]; j--) {
                        t = members[c, j]; members[c, j] = members[c, j - 1]; members[c, j - 1] = t
                    }
                key = members[c, 1]
                for (i = 2; i <= n; i++) key = key " " members[c, i]
                edges = ""
                for (i = 1; i <= n; i++) {
                    v = members[c, i]
                    for (j = 1; j <= nout[v]; j++)
                        if (comp[out[v, j]] == c)
                            edges = edges (edges == "" ? "" : "; ") v " -> " out[v, j] ": " why[v, out[v, j]]
                }
                printf "%s\t%s\t%s\t%s\n", kind, key, shortest(members[c, 1]), edges
            }
        }'
}

# include_edges DIR...: "FROM TO FILE includes HEADER" between the nodes
# of the files in DIRs: a .c (or .cu) and the header beside it are one
# node, named by the file's name without its suffix. An include is found
# by its path from the including file, else by its name in any DIR. A
# header with no source beside it (timer.h, the private seams
# model_impl.h and config_keys.h, kernels/cpu/cpu.h) is no node of its
# own but part of each file that includes it: its includes are theirs.
include_edges() {
    for d in "$@"; do
        for f in "$d"/*.c "$d"/*.cu "$d"/*.h; do
            [ -f "$f" ] || continue
            case $f in *.c | *.cu) echo "C ${f##*/}" ;; esac
            sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
                while read -r h; do
                    if [ -f "${f%/*}/$h" ]; then
                        echo "I ${f##*/} ${h##*/}"
                        continue
                    fi
                    for e in "$@"; do
                        if [ -f "$e/$h" ]; then
                            echo "I ${f##*/} ${h##*/}"
                            break
                        fi
                    done
                done
        done
    done | awk '
        function stem(f) { sub(/\.(c|cu|h)$/, "", f); return f }
        function node(f) { return (stem(f) ".c") in has_c || (stem(f) ".cu") in has_c ? stem(f) : "" }
        # the edges of file f through header h, which f reaches via text
        function edges(f, h, via, depth,    i) {
            if (node(h) != "") {
                if (node(h) != node(f))
                    print node(f), node(h), f, "includes", h via
            } else if (depth < 8)
                for (i = 1; i <= nincl[h]; i++)
                    edges(f, incl[h, i], via " (through " h ")", depth + 1)
        }
        $1 == "C" { has_c[$2] = 1; next }
        { incl[$2, ++nincl[$2]] = $3; files[$2] = 1 }
        END {
            for (f in files)
                if (node(f) != "")
                    for (i = 1; i <= nincl[f]; i++)
                        edges(f, incl[f, i], "", 0)
        }'
}

# call_edges LIB: "FROM TO SYMBOL" between the objects of the library
# LIB, named by their source files as .c (automake calls them
# libFOLDER_a-x.o; the CUDA suffix rule x_cuda.o)
call_edges() {
    ${NM:-nm} -P -A "$1" | awk '
        {
            obj = $1
            sub(/^.*\[/, "", obj); sub(/\]:$/, "", obj)
            sub(/^lib[a-z]*_a-/, "", obj); sub(/\.o$/, ".c", obj)
            if ($3 == "U") used[obj, $2] = 1
            else if ($3 ~ /^[TDBRCGSVWi]$/) owner[$2] = obj
        }
        END {
            for (k in used) {
                split(k, p, SUBSEP)
                if ((p[2] in owner) && owner[p[2]] != p[1])
                    print p[1], owner[p[2]], p[2]
            }
        }'
}

# report KIND FILE NAME: one failing TAP line per circle of $WORK/FILE,
# with the edges inside it, or one line saying there is no KIND circle
# among NAME
report() {
    if [ ! -s "$WORK/$2" ]; then
        ok 0 "no $1 circle among $3"
        return
    fi
    while IFS="$(printf '\t')" read -r kind _ circle edges; do
        ok 1 "$kind circle: $circle"
        echo "$edges" | tr ';' '\n' | sed 's/^ */#   /'
    done < "$WORK/$2"
}

# the finder itself: a -> b -> c -> a (and d beside it), and a graph without one
printf 'a b x\nb c x\nc a x\nc d x\nd e x\n' | circles t > "$WORK/planted"
printf 'a b x\nb c x\na c x\n' | circles t > "$WORK/dag"
[ "$(cut -f 2,3 "$WORK/planted")" = "$(printf 'a b c\ta -> b -> c -> a')" ] && [ ! -s "$WORK/dag" ]
ok $? "the finder finds a planted circle, and none in a graph without one"

include_edges "$src"/* > "$WORK/include.edges"
n=$(cut -d ' ' -f 1 "$WORK/include.edges" | sort -u | wc -l)
[ "$n" -ge 20 ]
ok $? "read the includes of src/ ($n files include others)"
circles include < "$WORK/include.edges" > "$WORK/include"
report include include "src/'s files"

if ! command -v "${NM:-nm}" >/dev/null 2>&1; then
    ok 0 "no call circle among src/'s objects # SKIP no nm"
elif [ ! -f "$lib" ]; then
    ok 1 "no $lib: build it first (make)"
else
    call_edges "$lib" > "$WORK/call.edges"
    n=$(cut -d ' ' -f 1 "$WORK/call.edges" | sort -u | wc -l)
    [ "$n" -ge 20 ]
    ok $? "read the symbols of $lib ($n objects use others)"
    circles call < "$WORK/call.edges" > "$WORK/call"
    report call call "src/'s objects"
fi

# kernels/: its includes, first on a copy of two of its folders with a
# circle planted (cpu/planted_cpu.c includes ../planted.h, planted.c
# includes cpu/planted_cpu.h), which the reader must find, then its own
kernels="${TRI_SRCDIR:-.}/kernels"
klib="${TRI_BUILDDIR:-.}/kernels/libkernels.a"
mkdir -p "$WORK/k/cpu"
printf '#include "../planted.h"\n' > "$WORK/k/cpu/planted_cpu.c"
printf '#include "cpu/planted_cpu.h"\n' > "$WORK/k/planted.c"
: > "$WORK/k/cpu/planted_cpu.h"
: > "$WORK/k/planted.h"
include_edges "$WORK/k" "$WORK/k/cpu" | circles include > "$WORK/kplanted"
[ "$(cut -f 2,3 "$WORK/kplanted")" = "$(printf 'planted planted_cpu\tplanted -> planted_cpu -> planted')" ]
ok $? "the include reader finds a circle planted by relative paths, as kernels/ includes"
include_edges "$kernels" "$kernels"/cpu "$kernels"/cuda > "$WORK/kinclude.edges"
n=$(cut -d ' ' -f 1 "$WORK/kinclude.edges" | sort -u | wc -l)
[ "$n" -ge 20 ]
ok $? "read the includes of kernels/ ($n files include others)"
circles include < "$WORK/kinclude.edges" > "$WORK/kinclude"
report include kinclude "kernels/'s files"

# and its calls, first on two objects that call each other, named as
# automake names kernels/'s (libkernels_a-x.o), in a library of their own
cc_planted() {   # cc_planted NAME CALLS: NAME.o defining NAME, calling CALLS
    printf 'void %s(void);\nvoid %s(void) { %s(); }\nvoid %s(void);\n' "$2" "$1" "$2" "$1" \
        > "$WORK/$1.c" && ${CC:-cc} -c -o "$WORK/libkernels_a-$1.o" "$WORK/$1.c"
}
if ! command -v "${NM:-nm}" >/dev/null 2>&1; then
    ok 0 "no call circle among kernels/'s objects # SKIP no nm"
elif ! cc_planted route_a route_b || ! cc_planted route_b route_a ||
    ! ${AR:-ar} rc "$WORK/libplanted.a" "$WORK/libkernels_a-route_a.o" "$WORK/libkernels_a-route_b.o"; then
    ok 1 "compile two objects calling each other with ${CC:-cc} and ${AR:-ar}"
elif [ ! -f "$klib" ]; then
    ok 1 "no $klib: build it first (make)"
else
    call_edges "$WORK/libplanted.a" | circles call > "$WORK/kcplanted"
    [ "$(cut -f 2,3 "$WORK/kcplanted")" = "$(printf 'route_a.c route_b.c\troute_a.c -> route_b.c -> route_a.c')" ]
    ok $? "the call reader finds a circle between two objects named as kernels/'s"
    call_edges "$klib" > "$WORK/kcall.edges"
    n=$(cut -d ' ' -f 1 "$WORK/kcall.edges" | sort -u | wc -l)
    [ "$n" -ge 20 ]
    ok $? "read the symbols of $klib ($n objects use others)"
    circles call < "$WORK/kcall.edges" > "$WORK/kcall"
    report call kcall "kernels/'s objects"
fi
# folder_edges: the include and call edges between files of two folders,
# as "FROM TO FILE ..." between the folders
folder_edges() {
    for f in "$src"/*/*.c "$src"/*/*.h; do
        [ -f "$f" ] || continue
        d=${f%/*}
        echo "${f##*/} ${d##*/}"
    done > "$WORK/folder.of"
    cat "$WORK/include.edges" "$WORK/call.edges" 2>/dev/null | awk '
        NR == FNR { folder[$1] = $2; s = $1; sub(/\.[ch]$/, "", s); folder[s] = $2; next }
        {
            a = folder[$1]; b = folder[$2]
            if (a != "" && b != "" && a != b && !seen[a, b]++)
                print a, b, $1, "uses", $2
        }' "$WORK/folder.of" -
}
folder_edges > "$WORK/folders.edges"
n=$(cut -d ' ' -f 1 "$WORK/folders.edges" | sort -u | wc -l)
[ "$n" -ge 8 ]
ok $? "read the folders of src/ ($n use others)"
circles folder < "$WORK/folders.edges" > "$WORK/folder"
report folder folder "src/'s folders"

# MPI itself is called only where doc/design.md ("Communication") says;
# everything else goes through comm.h. Asking a rank's number or a
# communicator's size is no call of that kind.
mpi_allowed="base/fail.c ckpt/ckpt_async.c ckpt/ckpt_io.c cmd/main.c parallel/affinity.c
parallel/comm.c parallel/comm_nccl.c parallel/comm_trace.c parallel/device.c parallel/grid.c"
mpi_callers=$(grep -l -E 'MPI_[A-Z][a-z_]*\(' "$src"/*/*.c | while read -r f; do
    grep -E 'MPI_[A-Z][a-z_]*\(' "$f" | grep -q -v -E 'MPI_Comm_(rank|size)\(' && echo "${f#"$src"/}"
done | sort | tr '\n' ' ')
[ "$mpi_callers" = "$(echo "$mpi_allowed" | tr ' ' '\n' | sort | tr '\n' ' ')" ]
ok $? "MPI is called only by the files design.md names (${mpi_callers% })"

# No .c or .cu of src/ or kernels/ is over 800 lines (DEVELOPERS.md,
# "Where each concept lives"): one that long holds more than one concept,
# to be split by them as kernels/ops.c was into one file per op family.
top="${TRI_SRCDIR:-.}"
long=$(wc -l "$src"/*/*.c "$top"/kernels/*.c "$top"/kernels/*/*.c "$top"/kernels/*/*.cu |
    awk -v top="$top/" '$2 != "total" && $1 > 800 {
        f = $2; if (index(f, top) == 1) f = substr(f, length(top) + 1)
        printf "%s%s (%d lines)", sep, f, $1; sep = ", " }')
[ -z "$long" ]
ok $? "no .c or .cu of src/ or kernels/ is over 800 lines${long:+: $long}"

plan "$tap_n"
done_testing
