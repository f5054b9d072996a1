#!/usr/bin/env bash
# Headers that claim a huge tensor with nothing written (issue 20 item 1): HDF5 chunked datasets
# of 2^33 and 2^40 float32 whose chunks were never written (a few KB of file). validate checks the
# --output's dtype and shape against --input before reading any data, so a wrong --output fails
# at once, naming it; inspect and replay (with --max-elements raised) count the fill value as one
# run in O(1). Each command runs under `timeout`: the old behaviour (reading 2^40 elements, or
# allocating 32 GiB) fails by time or exit status. The file is written by h5py.
# Usage: bash fill_only.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
PY=$REPO/.venv/bin/python
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
"$PY" - "$T/fill.h5" <<'PYEOF' || { echo "skipped: h5py from requirements.txt is needed"; exit 77; }
import sys, h5py
with h5py.File(sys.argv[1], "w") as f:
    for name, n, dt in (("in", 2**33, "f4"), ("out_f32", 2**33, "f4"), ("out_short", 2**32, "u1")):
        f.create_dataset(name, shape=(n,), chunks=(2**20,), dtype=dt, fillvalue=0.25 if dt == "f4" else 0)
    for step in (1, 2):
        f.create_dataset(f"step_{step}/layer.input", shape=(2**40,), chunks=(2**20,), dtype="f4", fillvalue=0.25)
        f.create_dataset(f"step_{step}/layer.weight", shape=(2**20, 2**20), chunks=(256, 4096), dtype="f4", fillvalue=0.5)
PYEOF
[ "$(stat -c %s "$T/fill.h5")" -lt 100000 ]; check "the fixture is a few KB" $?

# A regression would allocate the input's 32 GiB: capped at 8 GB of address space so it fails
# with bad_alloc instead of taking the machine's memory (not under AddressSanitizer, whose shadow
# memory needs a large address space).
ldd "$FP8KIT" 2>/dev/null | grep -q libasan || ulimit -v 8000000

# validate: the output's dtype, then its shape, are checked before the input's 32 GiB are read.
timeout 30 "$FP8KIT" validate --to e4m3 --profile torch --input "$T/fill.h5:/in" --output "$T/fill.h5:/out_f32" > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "fill.h5:/out_f32: wrong dtype" "$T/err"
st=$?; check "validate: wrong --output dtype named before reading the input ($rc: $(head -c 300 "$T/err"))" $st
timeout 30 "$FP8KIT" validate --to e4m3 --profile torch --input "$T/fill.h5:/in" --output "$T/fill.h5:/out_short" > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "shape mismatch: .*fill.h5:/in is 8589934592, .*fill.h5:/out_short is 4294967296" "$T/err"
st=$?; check "validate: wrong --output shape named before reading the input ($rc: $(head -c 300 "$T/err"))" $st

# inspect and replay: 2^40 elements of fill value, one run each.
timeout 30 "$FP8KIT" inspect "$T/fill.h5" --include 'step_1/*' --max-elements 2199023255552 --json > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 0 ] && grep -q '"numel": 1099511627776' "$T/out" && grep -q '"amax": 0.25' "$T/out"
st=$?; check "inspect: 2^40 fill-only elements counted ($rc: $(head -c 300 "$T/err"))" $st
timeout 30 "$FP8KIT" replay "$T/fill.h5" --recipe te-delayed --max-elements 2199023255552 > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 0 ] && grep -q "layer.input" "$T/out"
st=$?; check "replay: 2^40 fill-only elements per step read as their amax ($rc: $(head -c 300 "$T/err"))" $st

# sweep: the same 2^40-element runs go into the magnitude histogram and (2-D) the block presets'
# statistics in O(1); a 1-D row of 2^40 is too wide for a rowwise block and is noted.
timeout 30 "$FP8KIT" sweep "$T/fill.h5" --max-elements 2199023255552 --json > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 0 ] && grep -q '"tensor":"layer.weight"' "$T/out" && grep -q '"tensor":"layer.input"' "$T/out" \
    && grep -q 'step_1/layer.input: block recipes skipped: .*wider than a rowwise block' "$T/out"
st=$?; check "sweep: 2^40 fill-only elements per step, O(1) ($rc: $(head -c 300 "$T/err"))" $st

# An allocation that fails names the file and the dataset (one line, exit 2): a 2^27-element
# tensor (one chunk written, the rest fill value) needs the block presets' 256 MiB strip, refused
# under a 250 MB address-space cap (less than the strip alone, whatever the reader holds).
if ! ldd "$FP8KIT" 2>/dev/null | grep -q libasan; then
    "$PY" - "$T/part.h5" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    for step in (1, 2):
        d = f.create_dataset(f"step_{step}/part.weight", shape=(2**15, 2**12), chunks=(128, 4096), dtype="f4", fillvalue=0.5)
        d[0:128, :] = np.linspace(-3, 3, 128 * 4096, dtype="f4").reshape(128, 4096)
PYEOF
    (ulimit -v 250000; timeout 30 "$FP8KIT" sweep "$T/part.h5" > "$T/out" 2> "$T/err"); rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q "part.h5: step_1/part.weight: out of memory while reading its 134217728 elements" "$T/err"
    st=$?; check "sweep: out of memory names the file and dataset ($rc: $(head -c 300 "$T/err"))" $st
fi
exit $fail
