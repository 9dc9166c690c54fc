#!/bin/sh
# plot.sh - turns a metrics file into a loss-curve PNG: training loss and,
# where evaluated, validation loss against the step.
#
#   jobs/plot.sh METRICS.jsonl [OUT.png]      (OUT: METRICS with .png)
#   jobs/plot.sh runs/tiny/metrics.jsonl      -> runs/tiny/metrics.png
#
# Needs: gnuplot (Debian: apt-get install gnuplot-nox). A file that a
# requeued run appended to is one curve; where the steps start again (a
# new run in the same file) the curve breaks.
set -eu
case "${1:-}" in
''|-h|--help) sed -n '2,10p' "$0"; [ $# -gt 0 ]; exit $? ;;
esac
in=$1
out=${2:-${in%.jsonl}.png}
[ -r "$in" ] || { echo "plot.sh: cannot read $in" >&2; exit 1; }
command -v gnuplot >/dev/null 2>&1 ||
    { echo "plot.sh: no gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# One "step value" line per record; a blank line where the steps go back.
field() {
    sed -n "s/.*\"step\":\([0-9]*\).*\"$1\":\([-0-9.eE+][-0-9.eE+]*\).*/\1 \2/p" "$in" |
        awk 'NR > 1 && $1 <= prev { print "" } { print; prev = $1 }'
}
field loss > "$tmp/loss"
field val_loss > "$tmp/val"
if [ ! -s "$tmp/loss" ]; then
    echo "plot.sh: $in has no \"step\" and \"loss\" fields" >&2
    exit 1
fi
val_plot=""
[ -s "$tmp/val" ] && val_plot=", '$tmp/val' using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb '#d62728' title 'validation'"
title=$(printf '%s' "$in" | sed "s/'/''/g")

gnuplot <<EOF
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1000,600 font ",11"
} else {
    set terminal png size 1000,600
}
set termoption noenhanced
set output '$out'
set title '$title'
set xlabel 'step'
set ylabel 'loss (nats per token)'
set grid
set key top right
plot '$tmp/loss' using 1:2 with lines lw 1.5 lc rgb '#1f77b4' title 'training'$val_plot
EOF
echo "plot.sh: $out"
