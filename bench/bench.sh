#!/bin/sh
# bench.sh - performance figures, printed side by side (never asserted).
# Usage: bench/bench.sh [path/to/trident]
set -eu
TRIDENT=${1:-./trident}
echo "bench.sh: not written yet (issue: performance)"
"$TRIDENT" --version
