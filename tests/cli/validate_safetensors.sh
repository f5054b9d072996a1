#!/usr/bin/env bash
# validate reads FP8 codes from safetensors (issue 25): `--output model.safetensors:name` where the
# tensor is F8_E4M3, F8_E5M2 or U8 gives its stored bytes, not decoded values, through the same
# reader as inspect (its header checks included). The file is written here in the safetensors
# layout (8-byte little-endian header length, JSON header padded with spaces, data), and the codes
# are ml_dtypes' own casts of the float32 input, so a match is against an independent reference.
# A copy with one code changed must be reported as one mismatch at that index.
# Usage: bash validate_safetensors.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
PY=$REPO/.venv/bin/python
[ -x "$PY" ] || PY=python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
"$PY" - "$T/m.safetensors" <<'PYEOF' || { echo "FAIL: numpy and ml_dtypes (requirements.txt) are needed"; exit 1; }
import json, struct, sys
import ml_dtypes, numpy as np

rng = np.random.default_rng(25)
# Every binade of E4M3 and E5M2 from below the subnormals to 448 (no overflow: ml_dtypes turns
# E4M3 overflow into NaN where a saturating kernel would not), both signs, plus exact ties.
x = (np.exp2(rng.uniform(-20, np.log2(448), 4096)) * rng.choice([-1, 1], 4096)).astype("<f4").reshape(64, 64)
x.flat[:4] = [0.0, -0.0, 1.0625, 2.0**-10]     # E4M3 ties (1 + 1/16, half the smallest subnormal)
q4 = x.astype(ml_dtypes.float8_e4m3fn).view("u1")
q5 = x.astype(ml_dtypes.float8_e5m2).view("u1")
bad = q4.copy()
bad.flat[1234] ^= 0x01                           # one code planted wrong, at [19, 18]
tensors = [("x", "F32", x), ("q4", "F8_E4M3", q4), ("q5", "F8_E5M2", q5), ("u8", "U8", q4), ("bad", "F8_E4M3", bad)]
header, data, at = {}, b"", 0
for name, dtype, a in tensors:
    b = np.ascontiguousarray(a).tobytes()
    header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
    data += b
    at += len(b)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)                  # the reference writer pads the header to 8 bytes
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
PYEOF
M=$T/m.safetensors
run() { local n=$1; shift; "$FP8KIT" validate --input "$M:x" --profile cuda-satfinite --json "$@" >"$T/$n.out" 2>"$T/$n.err"; echo $? >"$T/$n.rc"; }

run e4m3 --output "$M:q4" --to e4m3
check "F8_E4M3 codes equal ml_dtypes' bit for bit: exit 0 ($(cat "$T/e4m3.rc"): $(head -c 300 "$T/e4m3.err"))" "$([ "$(cat "$T/e4m3.rc")" = 0 ]; echo $?)"
check "4096 elements compared" "$(grep -q "\"total\": 4096" "$T/e4m3.out"; echo $?)"
run e5m2 --output "$M:q5" --to e5m2
check "F8_E5M2 codes equal ml_dtypes' bit for bit: exit 0 ($(cat "$T/e5m2.rc"))" "$([ "$(cat "$T/e5m2.rc")" = 0 ]; echo $?)"
run u8 --output "$M:u8" --to e4m3
check "U8 codes read as codes: exit 0 ($(cat "$T/u8.rc"))" "$([ "$(cat "$T/u8.rc")" = 0 ]; echo $?)"

run bad --output "$M:bad" --to e4m3 --examples 10
check "one planted mismatch: exit 1 ($(cat "$T/bad.rc"))" "$([ "$(cat "$T/bad.rc")" = 1 ]; echo $?)"
check "exactly one mismatch" "$(grep -q '"mismatches": 1\b' "$T/bad.out"; echo $?)"
where=$("$PY" -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(*[(e["index"], e["position"], e["expected"], e["actual"]) for c in r["classes"].values() for e in c["examples"]])' "$T/bad.out")
check "at index 1234, position [19, 18], one code off by the planted bit ($where)" \
    "$(echo "$where" | grep -Eq "^\(1234, \[19, 18\], '0x([0-9a-f]{2})', '0x([0-9a-f]{2})'\)$"; echo $?)"

run wrongfmt --output "$M:q4" --to e5m2
check "F8_E4M3 codes with --to e5m2: exit 2 ($(cat "$T/wrongfmt.rc"))" "$([ "$(cat "$T/wrongfmt.rc")" = 2 ]; echo $?)"
check "the message names the tensor and both formats" "$(grep -q 'q4: holds e4m3 codes, but --to is e5m2' "$T/wrongfmt.err"; echo $?)"
run missing --output "$M:nope" --to e4m3
check "a missing tensor: exit 2 naming it ($(cat "$T/missing.err"))" \
    "$([ "$(cat "$T/missing.rc")" = 2 ] && grep -q "no tensor 'nope'" "$T/missing.err"; echo $?)"
run floatout --output "$M:x" --to e4m3
check "a float tensor as --output: exit 2 ($(cat "$T/floatout.err"))" "$([ "$(cat "$T/floatout.rc")" = 2 ]; echo $?)"
run scales --output "$M:q4" --to e4m3 --scales "$M:q5" --block rowwise
check "FP8 (not E8M0 or E4M3) codes as --scales: exit 2 naming them ($(cat "$T/scales.err"))" \
    "$([ "$(cat "$T/scales.rc")" = 2 ] && grep -q 'q5: holds e5m2 codes; one-byte scales are E8M0 or E4M3 codes' "$T/scales.err"; echo $?)"
exit $fail
