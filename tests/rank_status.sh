#!/bin/sh
# rank_status.sh DIR COMMAND... - runs COMMAND (one rank of an MPI job) as
# its child and records, in DIR, the child's pid (rank<R>.pid, at once)
# and exit status (rank<R>.status: 128 + N when signal N ended it), R
# being the launcher's rank; then ends as the child did.
#
# Why it exists: a test of what the survivors of a killed rank do
# (tests/t_fault_kill.sh, tests/t_gpu_comm.sh's kill case). Open MPI's
# mpiexec ends the whole job as soon as one rank dies, before any survivor
# can notice, so the survivors' own verdict (trident's wait or watchdog
# ending them with exit 76, which is all that ends them under srun, whose
# default KillOnBadExit=0 leaves them running) is never seen. Under
# `mpiexec --enable-recovery` the survivors run on, but mpiexec then
# returns 0 whatever its ranks did; this wrapper keeps each rank's status
# where the test can read it. The test kills the pid it records, which is
# trident itself, not this shell. TERM and USR1 (mpiexec's or Slurm's)
# are passed on to the child, so that a stop still reaches it.
dir=$1
shift
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-unknown}}}}
"$@" &
child=$!
echo "$child" > "$dir/rank$rank.pid"
for sig in TERM USR1; do
    # shellcheck disable=SC2064  # the child's pid and the signal, now
    trap "kill -$sig $child 2>/dev/null" "$sig"
done
# a trapped signal ends `wait` early: wait again until the child is gone
while :; do
    wait "$child"
    status=$?
    kill -0 "$child" 2>/dev/null || break
done
echo "$status" > "$dir/rank$rank.status"
# The launcher sees the end the child had: a death by signal N as that
# signal (mpiexec's notice then names it, as without the wrapper), any
# other status as it is.
if [ "$status" -gt 128 ]; then
    trap - TERM USR1
    kill -$((status - 128)) $$
fi
exit "$status"
