#!/usr/bin/env bash
# Issue 47: under `mpirun -n 1` and `-n 2`, a report that cannot be written is a failure of the
# job. Every command's report (tests/cli/commands.bash; inspect and sweep split over the ranks, as
# in the README's cluster commands) into a full device and into a closed standard output exits nonzero
# with fp8kit's one line saying the report was lost; every rank's exit status is the writing
# rank's. Rank 0 writes to the launcher's own standard output (cluster/launcher.hpp), since
# mpirun ignores a failure to copy a rank's output.
# Usage: bash output_lost.sh /path/to/fp8kit /path/to/repo /path/to/mpiexec
set -u
FP8KIT=$1
REPO=$2
MPIEXEC=${3:-}
if [ -z "$MPIEXEC" ] || [ ! -x "$MPIEXEC" ]; then echo "SKIPPED: no mpiexec (fp8kit built without MPI)"; exit 77; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$REPO/tests/mpi/mpi_env.bash"
export OMP_NUM_THREADS=1
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
. "$REPO/tests/cli/commands.bash"
. "$REPO/tests/cli/full_device.bash"
set -f  # the patterns are fp8kit's
# The commands split over the ranks write one report into a file as before.
for c in "inspect --json -q $EX/llama_tiny_dump.h5" "sweep --json -q $EX/amax_trace.csv $EX/llama_tiny_dump.h5"; do
    # shellcheck disable=SC2086
    mpirun_bounded -n 2 "$FP8KIT" $c >"$T/report" 2>/dev/null; rc=$?
    check "${c%% *} -n 2 into a file: exit 0 and a report" $(( rc != 0 || $(wc -c <"$T/report") == 0 ))
done
# Every command, and the README's cluster commands (inspect and sweep over dumps).
for cmd in "${CMDS[@]}" "sweep --json -q $EX/amax_trace.csv $EX/llama_tiny_dump.h5"; do
    name=${cmd%% *}
    for n in 1 2; do
        # shellcheck disable=SC2086
        mpirun_bounded -n $n "$FP8KIT" $cmd >"$FULL" 2>"$T/err"; rc=$?
        k=$(grep -c "$(lost_line full)" "$T/err")
        check "mpirun -n $n $name > full device: exit nonzero with fp8kit's one line (exit $rc, $k: $(grep '^fp8kit' "$T/err" | head -3))" $(( rc == 0 || k != 1 ))
        # shellcheck disable=SC2086
        mpirun_bounded -n $n "$FP8KIT" $cmd >&- 2>"$T/err"; rc=$?
        # (mpirun may have given its descriptor 1 to another file: the write then fails instead.)
        grep -q "$(lost_line closed)\|$(lost_line full)\|^fp8kit: error: \(writing standard output failed\|-o -: write failed\)" "$T/err"; said=$?
        check "mpirun -n $n $name >&-: exit nonzero, the report was lost (exit $rc: $(grep '^fp8kit' "$T/err" | head -2))" $(( rc == 0 || said != 0 ))
    done
done
exit $fail
