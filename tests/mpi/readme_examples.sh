#!/usr/bin/env bash
# Issue 47: the README's `mpirun` commands run as written (with its file names standing for small
# files here): each parses and runs under `mpirun -n 2` (exit 0 or 1: 1 is validate's mismatches),
# never a usage error (exit 2), and writes its report.
# Usage: bash readme_examples.sh /path/to/fp8kit /path/to/repo /path/to/mpiexec
set -u
FP8KIT=$1
REPO=$2
MPIEXEC=${3:-}
if [ -z "$MPIEXEC" ] || [ ! -x "$MPIEXEC" ]; then echo "SKIPPED: no mpiexec (fp8kit built without MPI)"; exit 77; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
# shellcheck source=../cli/npy.bash
. "$REPO/tests/cli/npy.bash"
mkdir -p "$T/run/dumps/rank0"
cp "$REPO/data/example/llama_tiny_dump.h5" "$T/run/dumps/rank0/a.h5"
cp "$REPO/data/example/llama_tiny_dump.h5" "$T/run/dumps/b.h5"
cp "$REPO/data/example/amax_trace.csv" "$T/trace.csv"
npy "$T/x.npy" '<f4' '(4,)' '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\xe0\x43'  # 1 2 3 448
npy "$T/codes.npy" '|u1' '(4,)' '\x38\x40\x44\x7e'                                             # e4m3 of them
grep -E '^mpirun -n [0-9]+ build/tools/fp8kit ' "$REPO/README.md" > "$T/lines"
check "the README has its mpirun commands" $(( $(wc -l <"$T/lines") < 3 ))
while IFS= read -r line; do
    args=${line#mpirun -n * build/tools/fp8kit }
    args=${args%%#*}   # the comment
    args=${args%%>*}   # the redirection
    args=${args//\'/}  # the quotes that keep patterns from the shell: fp8kit expands them
    name=${args%% *}
    (cd "$T" && set -f && eval "\"$MPIEXEC\" -n 2 \"$FP8KIT\" $args" >"$T/out" 2>"$T/err"); rc=$?
    check "README: mpirun -n 2 fp8kit $args: exit $rc ($(grep '^fp8kit' "$T/err" | head -2))" $(( rc > 1 ))
    check "README: $name wrote its report" $(( $(wc -c <"$T/out") == 0 ))
done <"$T/lines"
exit $fail
