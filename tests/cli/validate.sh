#!/usr/bin/env bash
# fp8kit validate as a user runs it: .npy files written here with printf (no Python), exit codes
# 0 (bit-exact), 1 (mismatches) and 2 (bad input, one line naming the file).
# Usage: bash validate.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # description, condition status
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi
}

. "$(dirname "$0")/npy.bash"

# float32 inputs: 1.0, 1.0625 (tie 1|1.125), 1.1875 (tie 1.125|1.25), 448, 500 (overflows), -2.
X='\x00\x00\x80\x3f\x00\x00\x88\x3f\x00\x00\x98\x3f\x00\x00\xe0\x43\x00\x00\xfa\x43\x00\x00\x00\xc0'
npy "$T/x.npy" '<f4' '(6,)' "$X"
# E4M3 under cuda-satfinite (nearest-even, saturate): 0x38 0x38 0x3a 0x7e 0x7e 0xc0.
npy "$T/ok.npy" '|u1' '(6,)' '\x38\x38\x3a\x7e\x7e\xc0'
npy "$T/away.npy" '|u1' '(6,)' '\x38\x39\x3a\x7e\x7e\xc0'     # ties away from zero
npy "$T/nosat.npy" '|u1' '(6,)' '\x38\x38\x3a\x7e\x7f\xc0'    # 500 -> NaN instead of 448
npy "$T/f4.npy" '<f4' '(6,)' "$X"                             # wrong dtype for codes
npy "$T/2d.npy" '|u1' '(2, 3)' '\x38\x38\x3a\x7e\x7e\xc0'     # shape mismatch
npy "$T/fortran.npy" '<f4' '(2, 3)' "$X" True
head -c 20 "$T/x.npy" > "$T/cut.npy"                          # truncated header
printf '\x38\x38\x3a\x7e\x7e' > "$T/short.bin"                # one code short

V="$FP8KIT validate --to e4m3 --profile cuda-satfinite --input $T/x.npy"

out=$($V --output "$T/ok.npy"); rc=$?
check "bit-exact output exits 0" $(( rc != 0 ))
echo "$out" | grep -q "6 bit-exact, 0 mismatches: BIT-EXACT"; check "bit-exact is reported" $?
echo "$out" | grep -q "profile cuda-satfinite"; check "profile cuda-satfinite named" $?

out=$($V --output "$T/away.npy"); rc=$?
check "ties-away output exits 1" $(( rc != 1 ))
echo "$out" | grep -q "^  tie: 1$"; check "one tie mismatch" $?
echo "$out" | grep -q "expected 0x38 = 1, got 0x39 = 1.125"; check "tie example shows both codes" $?
echo "$out" | grep -q "equals nearest-away, saturate-all"; check "nearest-away policy named" $?

out=$($V --output "$T/nosat.npy" --json); rc=$?
check "non-saturating output exits 1" $(( rc != 1 ))
echo "$out" | grep -A1 '"overflow": {' | grep -q '"count": 1'; check "one overflow mismatch (json)" $?

bad() { # description, expected text in stderr, args...
    local what=$1 text=$2; shift 2
    err=$($FP8KIT validate --to e4m3 --profile cuda-satfinite "$@" 2>&1 >/dev/null); rc=$?
    check "$what exits 2" $(( rc != 2 ))
    echo "$err" | grep -q -- "$text"; check "$what names '$text'" $?
    [ "$(echo "$err" | wc -l)" -eq 1 ]; check "$what is one line" $?
}
bad "wrong size" "$T/short.bin: wrong size" --input "$T/x.npy" --output "$T/short.bin"
bad "wrong dtype" "$T/f4.npy: wrong dtype" --input "$T/x.npy" --output "$T/f4.npy"
bad "shape mismatch" "shape mismatch: $T/x.npy is 6, $T/2d.npy is 2 x 3" --input "$T/x.npy" --output "$T/2d.npy"
bad "truncated header" "$T/cut.npy: truncated" --input "$T/cut.npy" --output "$T/ok.npy"
bad "fortran order" "$T/fortran.npy: fortran_order" --input "$T/fortran.npy" --output "$T/ok.npy"
bad "missing file" "$T/none.npy: cannot open" --input "$T/none.npy" --output "$T/ok.npy"

# One path syntax (issue 20 item 11): file.h5:/x and file.h5:x name the same dataset;
# model.safetensors:name is read through the dump reader.
DUMP=$REPO/data/example/llama_tiny_dump.h5
printf '\x38' > "$T/one_code.bin"
for src in "$DUMP:/step_000000/lm_head/weight" "$DUMP:step_000000/lm_head/weight"; do
    $FP8KIT validate --to e4m3 --profile torch --input "$src" --output "$T/one_code.bin" >/dev/null 2>"$T/err"; rc=$?
    [ $rc -eq 2 ] && grep -q "wrong size" "$T/err" && ! grep -q "needs its element type" "$T/err"
    check "$src: dataset read (then the 1-byte output is refused)" $?
done
$FP8KIT validate --to e4m3 --profile torch --input "$DUMP:no/such" --output "$T/one_code.bin" >/dev/null 2>"$T/err"; rc=$?
check "missing HDF5 dataset: exit 2 ($rc)" $(( rc != 2 ))
H='{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
printf "\\x$(printf %02x ${#H})\\x00\\x00\\x00\\x00\\x00\\x00\\x00%s\\x00\\x00\\x80\\x3f\\x9a\\x99\\x99\\x3e" "$H" > "$T/m.safetensors"
printf '\x38\x2a' > "$T/st_codes.bin"     # e4m3 of 1.0 and 0.3 (nearest-even: 0.3125)
out=$($FP8KIT validate --to e4m3 --profile torch --input "$T/m.safetensors:x" --output "$T/st_codes.bin"); rc=$?
check "model.safetensors:x read by validate, bit-exact ($rc)" $(( rc != 0 ))
echo "$out" | grep -q "2 bit-exact"; check "both safetensors elements compared" $?
$FP8KIT validate --to e4m3 --profile torch --input "$T/m.safetensors:y" --output "$T/st_codes.bin" >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "no tensor 'y'" "$T/err" && grep -q "e.g. x" "$T/err"; check "missing safetensors tensor named, with one that exists ($rc)" $?

# Mismatch positions as multi-dimensional indices (issue 20 item 16): element 1 of a 2x3 array is [0, 1].
npy "$T/x23.npy" '<f4' '(2, 3)' "$X"
npy "$T/away23.npy" '|u1' '(2, 3)' '\x38\x39\x3a\x7e\x7e\xc0'
out=$($FP8KIT validate --to e4m3 --profile cuda-satfinite --input "$T/x23.npy" --output "$T/away23.npy"); rc=$?
check "2-D mismatch exits 1 ($rc)" $(( rc != 1 ))
echo "$out" | grep -q "^    \[0, 1\] (element 1) input"; check "2-D mismatch shown at [0, 1]" $?
$FP8KIT validate --to e4m3 --profile cuda-satfinite --input "$T/x23.npy" --output "$T/away23.npy" --json | tr -d ' \n' \
    | grep -q '"index":1,.*"position":\[0,1\]'; check "JSON position [0, 1]" $?

exit $fail
