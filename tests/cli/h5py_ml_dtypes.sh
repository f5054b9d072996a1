#!/usr/bin/env bash
# h5py's natural save of ml_dtypes arrays (issue 20 item 15): bfloat16 becomes 2-byte opaque data
# with no tag and no 'dtype' attribute, float8 1-byte opaque. The first is read as bfloat16 (the
# only 2-byte ml_dtypes type: float16 is an HDF5 float); the second is a failed input whose
# message says how to tag it; a tagged one reads. The file is written by h5py itself.
# Usage: bash h5py_ml_dtypes.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
PY=$REPO/.venv/bin/python
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
"$PY" - "$T/ml.h5" <<'PYEOF' || { echo "FAIL: h5py/ml_dtypes from requirements.txt are needed"; exit 1; }
import sys, h5py, numpy as np, ml_dtypes
with h5py.File(sys.argv[1], "w") as f:
    f["bf16/weight"] = np.array([1.0, -2.5, 3.0], dtype=ml_dtypes.bfloat16)       # opaque V2, no tag
    f["fp8/weight"] = np.array([1.0, 448.0], dtype=ml_dtypes.float8_e4m3fn)       # opaque V1, no tag
    d = f.create_dataset("fp8_tagged/weight", data=np.array([1.0, 448.0], dtype=ml_dtypes.float8_e4m3fn))
    d.attrs["dtype"] = "float8_e4m3fn"
PYEOF
$FP8KIT inspect "$T/ml.h5" --json > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 1 ]; check "one failed input (the untagged FP8), exit 1 ($rc)" $?
grep -q '"name": "bf16/weight"' "$T/out" && grep -q '"dtype": "bf16"' "$T/out" && grep -q '"amax": 3.0' "$T/out"
check "untagged 2-byte opaque read as bfloat16 (amax 3)" $?
grep -q '"name": "fp8_tagged/weight"' "$T/out" && grep -q '"amax": 448.0' "$T/out"; check "tagged FP8 read" $?
grep -q "fp8/weight: opaque1 data without a 'dtype' attribute: which 8-bit format? Tag it" "$T/err"
check "untagged FP8: a failed input saying how to tag it: $(cat "$T/err")" $?
exit $fail
