#!/usr/bin/env bash
# Issue 47: lost standard output is never success, for every command. Each command's report into
# a full device (tests/cli/full_device.bash) exits nonzero with one line saying so; into a closed standard output (`>&-`) exits
# nonzero saying the report was lost (io::finish_stdout; tests/mpi/output_lost.sh: under mpirun).
# Usage: bash output_lost.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
export OMP_NUM_THREADS=1
. "$REPO/tests/cli/commands.bash"
. "$REPO/tests/cli/full_device.bash"
set -f  # the patterns are fp8kit's
for cmd in "${CMDS[@]}"; do
    name=${cmd%% *}
    # shellcheck disable=SC2086
    "$FP8KIT" $cmd >"$T/out" 2>"$T/err"; rc=$?
    check "$name: runs (exit $rc: $(head -c 200 "$T/err"))" $(( rc > 1 || $(wc -c <"$T/out") == 0 ))
    # shellcheck disable=SC2086
    "$FP8KIT" $cmd >"$FULL" 2>"$T/err"; rc=$?
    n=$(grep -c "$(lost_line full)" "$T/err")
    check "$name > full device: exit 2 with one line (exit $rc, $n: $(head -c 300 "$T/err"))" $(( rc != 2 || n != 1 ))
    # shellcheck disable=SC2086
    "$FP8KIT" $cmd >&- 2>"$T/err"; rc=$?
    grep -q "$(lost_line closed)" "$T/err"; said=$?
    check "$name >&-: exit 2, the report was lost (exit $rc: $(head -c 300 "$T/err"))" $(( rc != 2 || said != 0 ))
done
exit $fail
