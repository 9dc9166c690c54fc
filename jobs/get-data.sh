#!/bin/sh
# get-data.sh - builds data/fortunes.txt, the default job's corpus: the
# English text of Debian's `fortunes` and `fortunes-min` packages (about
# 2.5 MB), with the "%" separators turned into blank lines.
# Needs: apt-get install fortunes fortunes-min (jobs/setup.sh does it).
set -eu
cd "$(dirname "$0")/.."
src=${FORTUNES_DIR:-/usr/share/games/fortunes}
out=data/fortunes.txt
if [ ! -d "$src" ]; then
    echo "get-data.sh: $src not found; install the fortunes package (apt-get install fortunes)" >&2
    exit 1
fi
mkdir -p data
tmp="$out.tmp.$$"
: > "$tmp"
for f in "$src"/*; do
    case "$f" in *.dat|*.u8) continue ;; esac
    [ -f "$f" ] || continue
    sed 's/^%$//' "$f" >> "$tmp"
done
mv "$tmp" "$out"
echo "get-data.sh: $out ($(wc -c < "$out") bytes)"
