#!/usr/bin/env bash
# fp8kit validate on NVFP4 and MX kernel output as torchao 0.18 wrote it (tests/golden/
# torchao_mx_modes.{json,bin}, scripts/fixtures/golden/torchao_mx_modes.py): packed E2M1 codes with E4M3
# block scales, E4M3 codes with E8M0 scales, the scales row-major and in cuBLAS's swizzled 128x4
# layout (torchao's to_blocked). Exit 0 bit-exact, 1 mismatches, 2 bad input.
# Usage: bash validate_nvfp4_mx.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # description, condition status
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi
}
PY=$(command -v python3) || { echo "skipped: python3 not found (it reads the golden file's index)"; exit 77; }

G="$REPO/tests/golden/torchao_mx_modes"
# The raw arrays of the swizzle case, cut out of the golden blob at the offsets its index gives.
"$PY" - "$G" "$T" <<'EOF' || exit 1
import json, sys
g, t = sys.argv[1], sys.argv[2]
man = json.load(open(g + ".json"))
blob = open(g + ".bin", "rb").read()
s = man["swizzle"]
def cut(ref, name):
    off, n = ref
    open(f"{t}/{name}", "wb").write(blob[off:off + n])
cut(s["input"], "x.bin")
for k in ("mx", "nvfp4"):
    for part in ("codes", "scales", "swizzled"):
        cut(s[k][part], f"{k}_{part}.bin")
EOF

X="--input $T/x.bin --dtype bf16 --shape 130x128"
MX="$FP8KIT validate $X --output $T/mx_codes.bin --to e4m3 --round nearest-even --overflow saturate-all --nan signed-all-ones --block mx32 --scales-dtype e8m0"
NV="$FP8KIT validate $X --output $T/nvfp4_codes.bin --to e2m1 --packed --round nearest-even --overflow saturate-all --nan positive-max --block 1x16 --scales-dtype e4m3"

out=$($MX --scales "$T/mx_scales.bin"); rc=$?
check "MXFP8 with row-major E8M0 scales is bit-exact" $(( rc != 0 ))
out=$($MX --scales "$T/mx_swizzled.bin" --scales-layout swizzled); rc=$?
check "MXFP8 with swizzled E8M0 scales is bit-exact" $(( rc != 0 ))
echo "$out" | grep -q "BIT-EXACT"; check "bit-exact is reported" $?

out=$($NV --scales "$T/nvfp4_scales.bin"); rc=$?
check "packed NVFP4 with row-major E4M3 scales is bit-exact" $(( rc != 0 ))
out=$($NV --scales "$T/nvfp4_swizzled.bin" --scales-layout swizzled --global-scale 1); rc=$?
check "packed NVFP4 with swizzled E4M3 scales and global scale 1 is bit-exact" $(( rc != 0 ))
out=$($NV --scales "$T/nvfp4_swizzled.bin" --scales-layout swizzled --scales-are scale); rc=$?
check "packed NVFP4 in torchao's order (--scales-are scale) is bit-exact" $(( rc != 0 ))

# A different global scale moves every block: mismatches, exit 1.
out=$($NV --scales "$T/nvfp4_scales.bin" --global-scale 2); rc=$?
check "a wrong global scale exits 1" $(( rc != 1 ))

# Bad input: exit 2 with one line naming the file or option.
err=$($NV --scales "$T/nvfp4_swizzled.bin" 2>&1 >/dev/null); rc=$?
check "swizzled scales read as row-major exit 2" $(( rc != 2 ))
echo "$err" | grep -q "nvfp4_swizzled.bin: wrong size"; check "the scale file is named" $?
err=$($MX --scales "$T/mx_scales.bin" --global-scale 2 2>&1 >/dev/null); rc=$?
check "--global-scale with E8M0 scales exits 2" $(( rc != 2 ))
err=$($FP8KIT validate $X --output "$T/nvfp4_codes.bin" --to e4m3 --packed --profile cuda-satfinite 2>&1 >/dev/null); rc=$?
check "--packed with --to e4m3 exits 2" $(( rc != 2 ))
echo "$err" | grep -q "only E2M1"; check "the message says why" $?
err=$($FP8KIT validate $X --output "$T/mx_codes.bin" --to e2m1 --packed --profile cuda-satfinite 2>&1 >/dev/null); rc=$?
check "unpacked codes given as packed exit 2" $(( rc != 2 ))
err=$($FP8KIT validate --input "$T/x.bin" --dtype bf16 --shape 130x128 --output "$T/mx_codes.bin" --to e4m3 --profile cuda-satfinite --scales "$T/mx_scales.bin" --block 128x128 --scales-layout swizzled 2>&1 >/dev/null); rc=$?
check "--scales-layout swizzled with 128x128 blocks exits 2" $(( rc != 2 ))

exit $fail
