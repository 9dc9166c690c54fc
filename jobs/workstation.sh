#!/bin/sh
# workstation.sh - runs trident on this machine with mpirun.
#
#   jobs/workstation.sh [-n RANKS] [-c CONFIG] [-- more trident train options]
#
# Defaults: 1 rank, jobs/configs/tiny.ini. Choose the layout in the config
# or with options, e.g.
#   jobs/workstation.sh -n 4 -- --set parallel.tp=2 --set parallel.pp=2
# trident sizes each rank's OpenMP pool to its share of the cores, unless
# OMP_NUM_THREADS is set (then it is passed on as it is).
# Paths in configs are relative to the repository root, where this runs.
# Plot the loss: jobs/plot.sh runs/tiny/metrics.jsonl. Clusters: doc/cluster.md.
# Needs: a built ./trident (jobs/setup.sh, or TRIDENT=path) and Open MPI's mpirun.
set -eu
cd "$(dirname "$0")/.."
ranks=1
config=jobs/configs/tiny.ini
while [ $# -gt 0 ]; do
    case "$1" in
    -n) ranks=$2; shift 2 ;;
    -c) config=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "workstation.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
done
case "$ranks" in
''|*[!0-9]*) ranks=0 ;;
esac
if [ "$ranks" -lt 1 ]; then
    echo "workstation.sh: -n needs a positive number of ranks" >&2
    exit 2
fi
TRIDENT=${TRIDENT:-./trident}
[ -x "$TRIDENT" ] || { echo "workstation.sh: $TRIDENT not built; run jobs/setup.sh" >&2; exit 1; }
cores=$(nproc)
# Left unset, OMP_NUM_THREADS is trident's to choose: it gives each rank its
# share of the cores (one each when the ranks outnumber them). Setting it
# here would only make trident warn about a choice this script made.
threads="trident's choice (each rank's share of $cores core(s))"
[ -z "${OMP_NUM_THREADS:-}" ] || threads="OMP_NUM_THREADS=$OMP_NUM_THREADS"
mpi_opts="--bind-to none"
[ "$ranks" -le "$cores" ] || mpi_opts="$mpi_opts --oversubscribe"
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
echo "workstation.sh: $ranks rank(s), threads: $threads, config $config"

# Ctrl-C or SIGTERM to this script stops the run with a checkpoint. mpirun
# would take either as an order to end the job at once, so it runs in a
# session of its own (the terminal's Ctrl-C reaches this script only) and
# gets the stop as SIGUSR1, which it passes on to every rank: trident then
# saves and exits 75, or, with no [checkpoint] dir, exits 77 with nothing
# saved. A second Ctrl-C ends the job at once.
stops=0
# shellcheck disable=SC2317  # called by the trap
stop() {
    stops=$((stops + 1))
    if [ "$stops" = 1 ]; then
        echo "workstation.sh: stopping at the next step boundary (Ctrl-C again to end at once)" >&2
        kill -USR1 "$child" 2>/dev/null || true
    else
        kill -TERM "$child" 2>/dev/null || true
    fi
}
trap stop INT TERM
# shellcheck disable=SC2086
setsid mpirun -n "$ranks" $mpi_opts "$TRIDENT" train --config "$config" "$@" &
child=$!
rc=0
while :; do
    seen=$stops
    rc=0
    wait "$child" || rc=$?
    [ "$stops" != "$seen" ] || break    # a trap cut the wait short: wait again
done
# mpirun can die by the SIGUSR1 it passed on (exit 138) just after the
# ranks exited 75 or 77 (their stop line says which).
if [ "$stops" = 1 ] && [ "$rc" = 138 ]; then
    echo "workstation.sh: stopped on request; mpirun died by the signal it passed on (exit 138, reported as 75): trident's stop line above says whether a checkpoint was saved" >&2
    exit 75
fi
case "$rc" in
75) echo "workstation.sh: stopped on request after saving a checkpoint (exit 75); the same command resumes from it (Open MPI's report above of a non-zero exit is expected)" >&2 ;;
77) echo "workstation.sh: stopped on request with nothing saved (exit 77: no [checkpoint] dir); the same command starts over" >&2 ;;
esac
exit "$rc"
