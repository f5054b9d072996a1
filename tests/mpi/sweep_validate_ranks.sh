#!/usr/bin/env bash
# Issue 19: `mpirun -n P fp8kit sweep` (dumped tensors' histogram passes split over the ranks) and
# `mpirun -n P fp8kit validate` (blocks of elements split over the ranks) write, from rank 0, the
# report of one process, byte for byte (--json, --csv, text; stderr's fp8kit lines; exit status),
# for P = 1, 2, 3: sweep on the bundled example (dump, dump + trace, trace only), two MS-AMP rank
# files (a step dumped twice: exit 2 after the gather), generated step dumps, and step dumps with
# two corrupt tensors on different ranks (one process stops at the first in tensor order, exit 2:
# so must every P); validate on a 1.1 M-element array (17 blocks) with spread mismatches, one
# mismatch in the last block only (which decides the consistent policies), and exact codes under
# a scale. Each command is small: mpirun's start dominates.
# Usage: bash sweep_validate_ranks.sh /path/to/fp8kit /path/to/repo /path/to/mpiexec
set -u
FP8KIT=$1
REPO=$2
MPIEXEC=${3:-}
if [ -z "$MPIEXEC" ] || [ ! -x "$MPIEXEC" ]; then echo "SKIPPED: no mpiexec (fp8kit built without MPI)"; exit 77; fi
PY=$REPO/.venv/bin/python
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# CI runs as root on 2 cores: Open MPI refuses root and more ranks than cores unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail=0
"$PY" - "$T" <<'PYEOF' || { echo "FAIL: h5py, numpy and ml_dtypes from requirements.txt are needed"; exit 1; }
import sys, h5py, numpy as np, ml_dtypes
rng = np.random.default_rng(1919)
d = sys.argv[1]
def act(shape):
    return (rng.standard_normal(shape, dtype=np.float32) * np.exp(rng.standard_normal((shape[0], 1), dtype=np.float32) * 3)).astype(np.float32)
# Step dumps: three files, each two steps of three layers (chunked, gzip), 2-D (block presets run).
for name in ("ok", "bad"):
    for k in range(3):
        with h5py.File(f"{d}/{name}{k}.h5", "w") as f:
            for s in (2 * k, 2 * k + 1):
                for j in range(3):
                    f.create_dataset(f"step_{s:06d}/layers.{j}/mlp/output", data=act((32 * (j + 1), 64)), chunks=(16, 64), compression="gzip", shuffle=True)
                    f[f"step_{s:06d}/layers.{j}/mlp/weight"] = act((64, 32))
# bad1's and bad2's layers.1 output at their first step: one chunk's deflate stream overwritten.
for k in (1, 2):
    with h5py.File(f"{d}/bad{k}.h5", "r") as f:
        info = f[f"step_{2 * k:06d}/layers.1/mlp/output"].id.get_chunk_info(1)
    with open(f"{d}/bad{k}.h5", "r+b") as f:
        f.seek(info.byte_offset + 2)
        f.write(b"\xff" * min(64, info.size - 2))
# validate: 1100 x 1000 float32 and ml_dtypes' E4M3 codes (the reference, independent of fp8kit).
x = act((1100, 1000))
q = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
np.save(f"{d}/x.npy", x)
np.save(f"{d}/exact.npy", q)
spread = q.copy().reshape(-1)
spread[rng.choice(spread.size, 4000, replace=False)] ^= 1
np.save(f"{d}/spread.npy", spread.reshape(q.shape))
last = q.copy().reshape(-1)
last[-7] ^= 1
np.save(f"{d}/last.npy", last.reshape(q.shape))
PYEOF
E=$REPO/data/example
n=0
# label|exit|command line (after fp8kit)
cases=(
  "sweep-example-json|0|sweep --json --tensor model.layers.1.mlp* $E/amax_trace.csv $E/llama_tiny_dump.h5"
  "sweep-example-csv|0|sweep --csv --tensor model.layers.1.mlp.up* $E/llama_tiny_dump.h5"
  "sweep-trace-only|0|sweep --json $E/dlfw_inspect.log"
  "sweep-msamp-twice|2|sweep --json $E/msamp_ranks/rank0.h5 $E/msamp_ranks/rank1.h5"
  "sweep-steps-csv|0|sweep --csv --format all $T/ok0.h5 $T/ok1.h5 $T/ok2.h5"
  "sweep-steps-text|0|sweep --wide $T/ok0.h5 $T/ok1.h5 $T/ok2.h5"
  "sweep-corrupt|2|sweep --json $T/bad0.h5 $T/bad1.h5 $T/bad2.h5"
  "validate-spread-text|1|validate --profile cuda-satfinite --to e4m3 --input $T/x.npy --output $T/spread.npy"
  "validate-last-json|1|validate --json --profile ml_dtypes --to e4m3 --input $T/x.npy --output $T/last.npy"
  "validate-scaled-json|1|validate --json --profile ml_dtypes --to e4m3 --scale 0.25 --input $T/x.npy --output $T/exact.npy"
)
for c in "${cases[@]}"; do
    label=${c%%|*}
    rest=${c#*|}
    want=${rest%%|*}
    # shellcheck disable=SC2206
    args=(${rest#*|})
    "$FP8KIT" "${args[@]}" >"$T/ref" 2>"$T/ref.err"
    ref_rc=$?
    if [ $ref_rc -ne "$want" ]; then echo "FAIL: $label one process: exit $ref_rc, expected $want: $(head -3 "$T/ref.err")"; fail=1; continue; fi
    if [ "$want" != 2 ] && [ ! -s "$T/ref" ]; then echo "FAIL: $label one process wrote nothing"; fail=1; continue; fi
    for p in 1 2 3; do
        "$MPIEXEC" -n $p "$FP8KIT" "${args[@]}" >"$T/out" 2>"$T/err"
        rc=$?
        if [ $rc -ne "$want" ]; then echo "FAIL: $label -n $p: exit $rc, expected $want: $(head -3 "$T/err")"; fail=1; continue; fi
        if ! cmp -s "$T/ref" "$T/out"; then echo "FAIL: $label -n $p differs from one process"; diff "$T/ref" "$T/out" | head -5; fail=1; continue; fi
        # fp8kit's lines are rank 0's alone, as one process writes them (mpirun adds its own
        # notes on a nonzero exit).
        grep '^fp8kit' "$T/err" >"$T/err.fp8kit"
        grep '^fp8kit' "$T/ref.err" >"$T/ref.fp8kit"
        if ! cmp -s "$T/ref.fp8kit" "$T/err.fp8kit"; then echo "FAIL: $label -n $p: stderr differs"; diff "$T/ref.fp8kit" "$T/err.fp8kit" | head -5; fail=1; continue; fi
        n=$((n + 1))
    done
done
# The corrupt sweep names the first corrupt tensor in tensor order (bad1's, read by rank 1 of 3;
# rank 2 fails on bad2's), as one process does.
"$MPIEXEC" -n 3 "$FP8KIT" sweep --json "$T"/bad*.h5 >"$T/out" 2>"$T/err"
if ! grep -q "bad1.h5: step_000002/layers.1/mlp/output" "$T/err" || grep -q "bad2.h5" "$T/err"; then
    echo "FAIL: the corrupt sweep does not name bad1's tensor alone: $(grep '^fp8kit' "$T/err")"; fail=1
fi
# The last-block mismatch decides the policies: the report must not claim ml_dtypes' policy.
"$MPIEXEC" -n 3 "$FP8KIT" validate --json --profile ml_dtypes --to e4m3 --input "$T/x.npy" --output "$T/last.npy" >"$T/out" 2>"$T/err"
"$PY" - "$T/out" <<'PYEOF' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["mismatches"] == 1, r["mismatches"]
assert "ml_dtypes" not in r["consistent_profiles"], r["consistent_profiles"]
PYEOF
[ $fail -eq 0 ] && echo "PASS: $n comparisons identical to one process (P = 1, 2, 3)"
exit $fail
