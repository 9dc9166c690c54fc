#!/bin/sh
# plot.sh - turns a metrics file into a PNG of two panels: the training
# and validation loss, and below it the speed (tokens/s) and the learning
# rate, against the step (or, with --tokens, the tokens trained on).
#
#   jobs/plot.sh [--tokens] [--name NAME] METRICS.jsonl [OUT.png]
#   jobs/plot.sh runs/tiny/metrics.jsonl      -> runs/tiny/metrics.png
#
# --tokens   x is the tokens trained on: compares runs of different batches
# --name     the run's name in the title (default: the file's directory)
# Every run appends to the file after a header record (README.md,
# "Metrics"); each run after the first is marked by a dashed line and
# its number, "resumed" when it continued a checkpoint. Needs: gnuplot
# (Debian: apt-get install gnuplot-nox).
set -eu
usage() { sed -n '2,14p' "$0"; }
xkey=step
name=""
while [ $# -gt 0 ]; do
    case "$1" in
    -h|--help) usage; exit 0 ;;
    --tokens) xkey=tokens; shift ;;
    --name) [ $# -ge 2 ] || { echo "plot.sh: --name needs a value" >&2; exit 2; }
            name=$2; shift 2 ;;
    -*) echo "plot.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    usage >&2
    exit 2
fi
in=$1
out=${2:-${in%.jsonl}.png}
[ -r "$in" ] || { echo "plot.sh: cannot read $in" >&2; exit 1; }
command -v gnuplot >/dev/null 2>&1 ||
    { echo "plot.sh: no gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -n "$name" ] || name=$(basename "$(dirname "$in")")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# One "x value" line per step record and field, a blank line (a break in
# the curve) at each run's header, and in $tmp/runs "x number kind" where
# each run after the first begins.
: > "$tmp/runs"
awk -v xkey="$xkey" -v dir="$tmp" '
function get(key,   m) {
    if (!match($0, "\"" key "\":[-0-9.eE+]+")) return ""
    m = substr($0, RSTART, RLENGTH)
    return substr(m, length(key) + 4)
}
function put(file, v) { if (v != "") print x, v > (dir "/" file) }
function gap(file) { print "" > (dir "/" file) }
/^\{"run":/ {
    runs++
    kind = ($0 ~ /"resumed":true/) ? "resumed" : "new"
    pending = 1
    gap("loss"); gap("val"); gap("speed"); gap("lr")
    next
}
/^\{"step":/ {
    x = get(xkey)
    if (x == "") next
    if (runs == 0) runs = 1    # records before any header: a file from before headers came
    if (pending && plotted) print x, runs, kind > (dir "/runs")
    pending = 0
    plotted = 1
    put("loss", get("loss")); put("val", get("val_loss"))
    put("speed", get("tokens_per_s")); put("lr", get("lr"))
}' "$in"
if ! grep -q '[0-9]' "$tmp/loss" 2>/dev/null; then
    echo "plot.sh: $in has no step records with \"$xkey\" and \"loss\" fields" >&2
    exit 1
fi
: > "$tmp/marks"
if [ -s "$tmp/runs" ]; then
    while read -r x n kind; do
        echo "set arrow from $x, graph 0 to $x, graph 1 nohead dt 2 lc rgb '#7f7f7f'"
        echo "set label 'run $n ($kind)' at $x, graph 0.97 offset 0.5, 0 font ',9'"
    done < "$tmp/runs" > "$tmp/marks"
fi
val_plot=""
grep -q '[0-9]' "$tmp/val" 2>/dev/null &&
    val_plot=", '$tmp/val' using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb '#d62728' title 'validation'"
quote() { printf '%s' "$1" | sed "s/'/''/g"; }
title=$(quote "$name: $in")
xlabel=step
[ "$xkey" = step ] || xlabel='tokens trained on'

gnuplot <<EOF
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1000,800 font ",11"
} else {
    set terminal png size 1000,800
}
set termoption noenhanced
set output '$(quote "$out")'
set multiplot layout 2,1 title '$title'
set grid
set xlabel '$xlabel'
load '$tmp/marks'
set ylabel 'loss (nats per token)'
set key top right
plot '$tmp/loss' using 1:2 with lines lw 1.5 lc rgb '#1f77b4' title 'training'$val_plot
set ylabel 'tokens/s'
set y2label 'learning rate'
set ytics nomirror
set y2tics
set format y2 '%.1e'
plot '$tmp/speed' using 1:2 with lines lw 1.2 lc rgb '#2ca02c' title 'tokens/s', \
     '$tmp/lr' using 1:2 axes x1y2 with lines lw 1.2 lc rgb '#9467bd' title 'learning rate'
unset multiplot
EOF
# what the picture holds, for a reader without it (and for the tests)
runs=$(($(wc -l < "$tmp/runs") + 1))
marks=$(awk -v xkey="$xkey" '{ printf "%srun %s (%s) at %s %s", (NR > 1 ? ", " : ""), $2, $3, xkey, $1 }' "$tmp/runs")
if [ "$runs" -gt 1 ]; then
    echo "plot.sh: $out: $runs runs in $in; $marks"
else
    echo "plot.sh: $out: 1 run in $in"
fi
