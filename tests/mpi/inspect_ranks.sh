#!/usr/bin/env bash
# Issue 19: `mpirun -n P fp8kit inspect` writes, from rank 0, the report of one process, byte for
# byte, for P = 1, 2, 3 (--json and --csv): on the bundled example dump, the MS-AMP rank files, and
# a dump of several files where one tensor's chunk is corrupt (that tensor is an error, exit 1,
# every other tensor still reported, whichever rank read it).
# Usage: bash inspect_ranks.sh /path/to/fp8kit /path/to/repo /path/to/mpiexec
set -u
FP8KIT=$1
REPO=$2
MPIEXEC=${3:-}
if [ -z "$MPIEXEC" ] || [ ! -x "$MPIEXEC" ]; then echo "SKIPPED: no mpiexec (fp8kit built without MPI)"; exit 77; fi
PY=$REPO/.venv/bin/python
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$REPO/tests/mpi/mpi_env.bash"
fail=0
"$PY" - "$T" <<'PYEOF' || { echo "FAIL: h5py from requirements.txt is needed"; exit 1; }
import sys, h5py, numpy as np
rng = np.random.default_rng(19)
d = sys.argv[1]
def act(shape):
    return (rng.standard_normal(shape, dtype=np.float32) * np.exp(rng.standard_normal((shape[0], 1), dtype=np.float32) * 3)).astype(np.float32)
for k in range(3):
    with h5py.File(f"{d}/part{k}.h5", "w") as f:
        for j in range(3):
            f.create_dataset(f"layers.{j}/mlp/output", data=act((64 * (j + 1), 96)), chunks=(16, 96), compression="gzip", shuffle=True)
            f[f"layers.{j}/mlp/weight"] = act((96, 32))
# part1's layers.1 output: one chunk's deflate stream overwritten (the listing still succeeds).
with h5py.File(f"{d}/part1.h5", "r") as f:
    info = f["layers.1/mlp/output"].id.get_chunk_info(2)
with open(f"{d}/part1.h5", "r+b") as f:
    f.seek(info.byte_offset + 2)
    f.write(b"\xff" * min(64, info.size - 2))
PYEOF
EX="$REPO/data/example/llama_tiny_dump.h5"
cases=("example|$EX" "msamp|$REPO/data/example/msamp_ranks/rank*.h5" "corrupt|$T/part0.h5 $T/part1.h5 $T/part2.h5")
n=0
for c in "${cases[@]}"; do
    label=${c%%|*}
    # shellcheck disable=SC2206
    files=(${c#*|})
    fmts=(--json --csv)
    [ "$label" = example ] && fmts+=("--json --recipe mxfp8")
    [ "$label" = msamp ] && fmts=(--json)
    for fmt in "${fmts[@]}"; do
        # shellcheck disable=SC2086
        "$FP8KIT" inspect -q $fmt "${files[@]}" >"$T/ref" 2>"$T/ref.err"
        ref_rc=$?
        want=0
        [ "$label" = corrupt ] && want=1
        if [ $ref_rc -ne $want ]; then echo "FAIL: $label $fmt one process: exit $ref_rc, expected $want: $(head -3 "$T/ref.err")"; fail=1; continue; fi
        for p in 1 2 3; do
            # shellcheck disable=SC2086
            mpirun_bounded -n $p "$FP8KIT" inspect -q $fmt "${files[@]}" >"$T/out" 2>"$T/err"
            rc=$?
            if [ $rc -ne $want ]; then echo "FAIL: $label $fmt -n $p: exit $rc, expected $want: $(head -3 "$T/err")"; fail=1; continue; fi
            if ! cmp -s "$T/ref" "$T/out"; then echo "FAIL: $label $fmt -n $p differs from one process"; diff "$T/ref" "$T/out" | head -5; fail=1; continue; fi
            # fp8kit's error lines are rank 0's alone, as one process writes them (mpirun adds
            # its own note on a nonzero exit).
            grep '^fp8kit' "$T/err" >"$T/err.fp8kit"
            if ! cmp -s "$T/ref.err" "$T/err.fp8kit"; then echo "FAIL: $label $fmt -n $p: stderr differs"; diff "$T/ref.err" "$T/err.fp8kit" | head -5; fail=1; continue; fi
            n=$((n + 1))
        done
    done
done
# The corrupt tensor is named, and every other tensor of the three files is in the report.
mpirun_bounded -n 3 "$FP8KIT" inspect -q --json "$T"/part*.h5 >"$T/out" 2>"$T/err"
if ! grep -q 'part1.h5: layers.1/mlp/output' "$T/err"; then echo "FAIL: the corrupt tensor is not named: $(cat "$T/err")"; fail=1; fi
"$PY" - "$T/out" <<'PYEOF' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
names = [(t["file"].rsplit("/", 1)[1], t["name"]) for t in r["tensors"]]
assert len(names) == 17 and ("part1.h5", "layers.1/mlp/output") not in names, names
assert r["summary"]["failed"] == 1 and len(r["errors"]) == 1, r["errors"]
PYEOF
# A usage error is said once (rank 0), with exit 2.
mpirun_bounded -n 3 "$FP8KIT" inspect --recipe nonsense "$EX" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -ne 2 ] || [ "$(grep -c 'fp8kit: error' "$T/err")" -ne 1 ]; then echo "FAIL: usage error under -n 3: exit $rc: $(cat "$T/err")"; fail=1; fi
# A command that does not split (formats) runs once, on rank 0: one table, not three.
mpirun_bounded -n 3 "$FP8KIT" formats >"$T/out" 2>"$T/err"
"$FP8KIT" formats >"$T/ref"
if ! cmp -s "$T/ref" "$T/out"; then echo "FAIL: fp8kit formats under -n 3 wrote more than one report"; fail=1; fi
[ $fail -eq 0 ] && echo "PASS: $n comparisons identical to one process (P = 1, 2, 3)"
exit $fail
