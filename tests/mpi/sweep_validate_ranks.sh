#!/usr/bin/env bash
# Issue 19: `mpirun -n P fp8kit sweep` (dumped tensors' histogram passes, the series' replay in
# groups of 64 series and the per-series rows split over the ranks) and
# `mpirun -n P fp8kit validate` (blocks of elements split over the ranks) write, from rank 0, the
# report of one process, byte for byte (--json, --csv, text; stderr's fp8kit lines; exit status),
# for P = 1, 2, 3: sweep on the bundled example (dump, dump + trace, trace only; 76 series: two
# groups), a generated trace of 300 series (five groups; --json, --csv, text), two MS-AMP rank
# files (a step dumped twice: exit 2 after the gather), generated step dumps, and step dumps with
# two corrupt tensors on different ranks (each reported, the others swept, exit 1: for every P);
# validate on a 1.1 M-element array (17 blocks) with spread mismatches, one
# mismatch in the last block only (which decides the consistent policies), and exact codes under
# a scale; the input as .npy, HDF5 contiguous dataset and safetensors tensor (all three mapped,
# so each rank reads its own blocks). Each command is small: mpirun's start dominates.
# Usage: bash sweep_validate_ranks.sh /path/to/fp8kit /path/to/repo /path/to/mpiexec
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
"$PY" - "$T" <<'PYEOF' || { echo "FAIL: h5py, numpy and ml_dtypes from requirements.txt are needed"; exit 1; }
import sys, h5py, numpy as np, ml_dtypes
rng = np.random.default_rng(1919)
d = sys.argv[1]
def act(shape):
    return (rng.standard_normal(shape, dtype=np.float32) * np.exp(rng.standard_normal((shape[0], 1), dtype=np.float32) * 3)).astype(np.float32)
# Step dumps: three files, each two steps of three layers (chunked, gzip), 2-D (block presets run);
# bad0..2 are copies of ok0..2 with two chunks corrupted below.
import shutil
for name in ("ok",):
    for k in range(3):
        with h5py.File(f"{d}/{name}{k}.h5", "w") as f:
            for s in (2 * k, 2 * k + 1):
                for j in range(3):
                    f.create_dataset(f"step_{s:06d}/layers.{j}/mlp/output", data=act((32 * (j + 1), 64)), chunks=(16, 64), compression="gzip", shuffle=True)
                    f[f"step_{s:06d}/layers.{j}/mlp/weight"] = act((64, 32))
for k in range(3):
    shutil.copy(f"{d}/ok{k}.h5", f"{d}/bad{k}.h5")
# bad1's and bad2's layers.1 output at their first step: one chunk's deflate stream overwritten.
for k in (1, 2):
    with h5py.File(f"{d}/bad{k}.h5", "r") as f:
        info = f[f"step_{2 * k:06d}/layers.1/mlp/output"].id.get_chunk_info(1)
    with open(f"{d}/bad{k}.h5", "r+b") as f:
        f.seek(info.byte_offset + 2)
        f.write(b"\xff" * min(64, info.size - 2))
# A trace of 300 series (5 groups of Sweep::kSeriesGroup = 64, split over the ranks) x 24 steps,
# inputs, weights and gradients, with spikes (overflows) and a zero amax here and there.
with open(f"{d}/trace300.csv", "w") as f:
    f.write("step,tensor,amax\n")
    for step in range(24):
        for i in range(100):
            for kind, base in (("input", 4.0), ("weight", 0.5), ("grad_output", 1e-3)):
                a = base * np.exp(rng.standard_normal() * 0.5) * (40.0 if rng.random() < 0.02 else 1.0)
                if rng.random() < 0.005: a = 0.0
                f.write(f"{step},layers.{i}.mlp.fc{i % 3}.{kind},{a:.9g}\n")
# validate: 1100 x 1000 float32 and ml_dtypes' E4M3 codes (the reference, independent of fp8kit).
x = act((1100, 1000))
q = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
np.save(f"{d}/x.npy", x)
np.save(f"{d}/exact.npy", q)
spread = q.copy().reshape(-1)
spread[rng.choice(spread.size, 4000, replace=False)] ^= 1
np.save(f"{d}/spread.npy", spread.reshape(q.shape))
# The same input as an HDF5 contiguous dataset and a safetensors tensor (4.4 MB each: validate maps
# them, io/array_file.hpp map_array; smaller ones are read).
with h5py.File(f"{d}/x.h5", "w") as f:
    f["x"] = x
import json, struct
head = json.dumps({"x": {"dtype": "F32", "shape": list(x.shape), "data_offsets": [0, x.nbytes]}}).encode()
head += b" " * (-len(head) % 8)
with open(f"{d}/x.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(head)) + head + x.tobytes())
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
  "sweep-example-all|0|sweep --json --no-blocks $E/amax_trace.csv $E/llama_tiny_dump.h5"
  "sweep-trace300-json|0|sweep --json $T/trace300.csv"
  "sweep-trace300-csv|0|sweep --csv --format all $T/trace300.csv"
  "sweep-trace300-text|0|sweep --wide --top 3 $T/trace300.csv"
  "sweep-msamp-twice|2|sweep --json $E/msamp_ranks/rank0.h5 $E/msamp_ranks/rank1.h5"
  "sweep-steps-csv|0|sweep --csv --format all $T/ok0.h5 $T/ok1.h5 $T/ok2.h5"
  "sweep-steps-text|0|sweep --wide $T/ok0.h5 $T/ok1.h5 $T/ok2.h5"
  "sweep-corrupt|1|sweep --json $T/bad0.h5 $T/bad1.h5 $T/bad2.h5"
  "sweep-corrupt-text|1|sweep --wide $T/bad0.h5 $T/bad1.h5 $T/bad2.h5"
  "sweep-corrupt-csv|1|sweep --csv $T/bad0.h5 $T/bad1.h5 $T/bad2.h5"
  "validate-spread-text|1|validate --profile cuda-satfinite --to e4m3 --input $T/x.npy --output $T/spread.npy"
  "validate-last-json|1|validate --json --profile ml_dtypes --to e4m3 --input $T/x.npy --output $T/last.npy"
  "validate-h5-json|1|validate --json --profile ml_dtypes --to e4m3 --input $T/x.h5:/x --output $T/last.npy"
  "validate-safetensors-text|1|validate --profile cuda-satfinite --to e4m3 --input $T/x.safetensors:x --output $T/spread.npy"
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
        mpirun_bounded -n $p "$FP8KIT" "${args[@]}" >"$T/out" 2>"$T/err"
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
# The corrupt sweep (bad1's tensor read by rank 1 of 3, bad2's by rank 2) names both corrupt
# tensors, in tensor order, one line each, lists them in "errors", and sweeps every other tensor:
# 34 of the 36 dumped, the same outcomes as the intact files give for the tensors both have.
mpirun_bounded -n 3 "$FP8KIT" sweep --json "$T"/bad*.h5 >"$T/out" 2>"$T/err"
grep '^fp8kit: error' "$T/err" >"$T/err.lines"
if [ "$(wc -l <"$T/err.lines")" != 2 ] || ! head -1 "$T/err.lines" | grep -q "bad1.h5: step_000002/layers.1/mlp/output: " ||
   ! tail -1 "$T/err.lines" | grep -q "bad2.h5: step_000004/layers.1/mlp/output: "; then
    echo "FAIL: the corrupt sweep does not name bad1's and bad2's tensors, in order: $(cat "$T/err.lines")"; fail=1
fi
"$FP8KIT" sweep --json "$T"/ok*.h5 >"$T/ok.json" 2>/dev/null
"$PY" - "$T/out" "$T/ok.json" <<'PYEOF' || fail=1
import json, sys
bad, ok = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert [(e["name"], e["file"].rsplit("/", 1)[1]) for e in bad["errors"]] == [
    ("step_000002/layers.1/mlp/output", "bad1.h5"), ("step_000004/layers.1/mlp/output", "bad2.h5")], bad["errors"]
assert ok["errors"] == [], ok["errors"]
rows = {t["tensor"]: t for t in bad["tensors"]}
good = {t["tensor"]: t for t in ok["tensors"]}
assert set(rows) == set(good), (set(rows), set(good))
for name, t in rows.items():
    dumped = [o["dumped"] for o in t["outcomes"]]
    want = 4 if name == "layers.1.mlp.output" else 6  # two of its six steps failed
    assert t["steps"] == want and max(dumped) == want, (name, t["steps"], dumped)
    if name != "layers.1.mlp.output":  # untouched series: the intact files' numbers exactly
        assert t == good[name], name
PYEOF
# The last-block mismatch decides the policies: the report must not claim ml_dtypes' policy.
mpirun_bounded -n 3 "$FP8KIT" validate --json --profile ml_dtypes --to e4m3 --input "$T/x.npy" --output "$T/last.npy" >"$T/out" 2>"$T/err"
"$PY" - "$T/out" <<'PYEOF' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["mismatches"] == 1, r["mismatches"]
assert "ml_dtypes" not in r["consistent_profiles"], r["consistent_profiles"]
PYEOF
# --progress: rank 0's progress line on stderr (stderr is a pipe here), nothing of it on stdout,
# which stays one process's report; -q/--quiet leaves it out.
for c in "sweep --json $T/trace300.csv|groups of series" "validate --json --profile ml_dtypes --to e4m3 --input $T/x.npy --output $T/last.npy|blocks of 65536" \
         "inspect --json $T/ok0.h5|tensors"; do
    # shellcheck disable=SC2206
    args=(${c%%|*})
    "$FP8KIT" "${args[@]}" >"$T/ref" 2>/dev/null
    mpirun_bounded -n 2 "$FP8KIT" "${args[@]}" --progress >"$T/out" 2>"$T/err"
    if ! cmp -s "$T/ref" "$T/out"; then echo "FAIL: ${args[0]} --progress changed stdout"; fail=1; fi
    if ! tr '\r' '\n' <"$T/err" | grep -q "\] [0-9]*/[0-9]* ${c#*|}"; then echo "FAIL: ${args[0]} --progress drew no progress line"; fail=1; fi
    mpirun_bounded -n 2 "$FP8KIT" "${args[@]}" --progress -q >"$T/out" 2>"$T/err"
    if tr '\r' '\n' <"$T/err" | grep -q "\] [0-9]*/"; then echo "FAIL: ${args[0]} -q still drew a progress line"; fail=1; fi
done
[ $fail -eq 0 ] && echo "PASS: $n comparisons identical to one process (P = 1, 2, 3)"
exit $fail
