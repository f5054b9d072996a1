#!/usr/bin/env bash
# fp8kit gemm and validate --gemm as a user runs them: .npy files written with printf (no
# Python); a small GEMM with a known result, and every bad input exits 2 with one line naming
# the file or argument, leaving no output file.
# Usage: bash gemm.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # description, condition status
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi
}
. "$(dirname "$0")/npy.bash"
# E4M3: 0x38 = 1, 0x40 = 2, 0x48 = 4. A = [[1, 2], [4, 1]], B = [[2, 2]] -> D = [[6], [10]] * 2 * 0.5.
npy "$T/a.npy" '|u1' '(2, 2)' '\x38\x40\x48\x38'
npy "$T/b.npy" '|u1' '(1, 2)' '\x40\x40'
npy "$T/b3.npy" '|u1' '(1, 3)' '\x40\x40\x40'
npy "$T/f4.npy" '<f4' '(2, 2)' '\x00\x00\x80\x3f\x00\x00\x80\x3f\x00\x00\x80\x3f\x00\x00\x80\x3f'
npy "$T/sa.npy" '<f4' '(2,)' '\x00\x00\x00\x40\x00\x00\x00\x40'   # rowwise 2, 2
npy "$T/sbad.npy" '<f4' '(3,)' '\x00\x00\x00\x40\x00\x00\x00\x40\x00\x00\x00\x40'

"$FP8KIT" gemm "$T/a.npy" "$T/b.npy" --scale-a "$T/sa.npy" --scale-b 0.5 --accum exact -o "$T/d.npy"
check "gemm runs" $?
# float32 6 = 0x40c00000, 10 = 0x41200000, after the 128-byte header.
tail -c 8 "$T/d.npy" | od -An -tx1 | tr -d ' \n' | grep -qx '0000c04000002041'
check "gemm D = [[6], [10]]" $?
"$FP8KIT" gemm "$T/a.npy" "$T/b.npy" --scale-a 2 --scale-b 0.5 --out-dtype bf16 -o "$T/h.npy"
tail -c 4 "$T/h.npy" | od -An -tx1 | tr -d ' \n' | grep -qx 'c0402041'
check "gemm bf16 bits [[0x40c0], [0x4120]]" $?
"$FP8KIT" validate --gemm --a "$T/a.npy" --b "$T/b.npy" --scale-a 2 --scale-b 0.5 --output "$T/d.npy" > "$T/v.txt"
check "validate --gemm exit 0 on a model's output" $?
grep -q "matches model exact" "$T/v.txt"
check "validate --gemm names the model" $?

bad() { # description, expected text in stderr, args...
    local what=$1 want=$2
    shift 2
    "$FP8KIT" "$@" 2> "$T/err" > /dev/null
    local rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q -- "$want" "$T/err"
    check "$what (exit $rc: $(cat "$T/err"))" $?
}
bad "K differs" "b3.npy" gemm "$T/a.npy" "$T/b3.npy" -o "$T/x.npy"
bad "codes not uint8" "f4.npy" gemm "$T/f4.npy" "$T/b.npy" -o "$T/x.npy"
bad "missing file" "nothere.npy" gemm "$T/nothere.npy" "$T/b.npy" -o "$T/x.npy"
bad "unknown format" "--a-format" gemm "$T/a.npy" "$T/b.npy" --a-format e9m9 -o "$T/x.npy"
bad "e8m0 operand" "e8m0" gemm "$T/a.npy" "$T/b.npy" --b-format e8m0 -o "$T/x.npy"
bad "scale shape" "sbad.npy" gemm "$T/a.npy" "$T/b.npy" --scale-a "$T/sbad.npy" -o "$T/x.npy"
bad "scale not a number" "--scale-b" gemm "$T/a.npy" "$T/b.npy" --scale-b 1e99 -o "$T/x.npy"
bad "unknown model" "--accum" gemm "$T/a.npy" "$T/b.npy" --accum sm80 -o "$T/x.npy"
bad "out dtype" "--out-dtype" gemm "$T/a.npy" "$T/b.npy" --out-dtype f16 -o "$T/x.npy"
bad "unwritable output" "nodir" gemm "$T/a.npy" "$T/b.npy" -o "$T/nodir/x.npy"
[ ! -e "$T/x.npy" ]
check "no output file after errors" $?
bad "validate --gemm wrong output shape" "a.npy" validate --gemm --a "$T/a.npy" --b "$T/b.npy" --output "$T/a.npy"
bad "validate --gemm needs --a/--b" "--a" validate --gemm --output "$T/d.npy"
bad "gemm --device unknown" "--device 'gpu'" gemm "$T/a.npy" "$T/b.npy" --device gpu -o "$T/x.npy"
bad "validate --gemm --device unknown" "--device 'gpu'" validate --gemm --a "$T/a.npy" --b "$T/b.npy" --output "$T/d.npy" --device gpu
# --device cpu and auto: the CPU, the same output; --verbose says so.
"$FP8KIT" gemm "$T/a.npy" "$T/b.npy" --scale-a "$T/sa.npy" --scale-b 0.5 --accum sm90 --device cpu --verbose -o "$T/c.npy" 2>"$T/err"
grep -qxF "fp8kit gemm: GEMM models on the CPU (--device cuda runs them on the GPU)" "$T/err"
check "gemm --device cpu --verbose says the CPU" $?
# --device cuda: where no GPU can be used (CI), exit 2 naming why; with one, the exact model is
# refused naming it, and the other models give the CPU's bytes (tests/cli/device_gpu.sh compares more).
"$FP8KIT" gemm "$T/a.npy" "$T/b.npy" --accum sm90 --device cuda -o "$T/g.npy" 2>"$T/err" >/dev/null
rc=$?
if [ $rc -ne 0 ]; then
    check "gemm --device cuda without a GPU: exit 2 ($rc)" $(( rc != 2 ))
    grep -qE "^fp8kit: error: --device cuda: (this fp8kit was built without CUDA|no usable CUDA GPU)" "$T/err"
    check "gemm --device cuda without a GPU names why ($(cat "$T/err"))" $?
    bad "validate --gemm --device cuda without a GPU" "--device cuda: " validate --gemm --a "$T/a.npy" --b "$T/b.npy" --output "$T/d.npy" --device cuda
    [ ! -e "$T/g.npy" ]; check "gemm --device cuda without a GPU writes nothing" $?
else
    bad "gemm --device cuda --accum exact" "--device cuda: the exact model has no CUDA kernel" gemm "$T/a.npy" "$T/b.npy" --accum exact --device cuda -o "$T/x.npy"
    "$FP8KIT" gemm "$T/a.npy" "$T/b.npy" --accum sm90 -o "$T/c.npy"
    cmp -s "$T/c.npy" "$T/g.npy"; check "gemm --device cuda: the CPU's bytes" $?
fi
exit $fail
