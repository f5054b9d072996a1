#!/usr/bin/env bash
# What inspect prints for real-model naming (flat safetensors names): names never cut so that rows
# cannot be told apart, the recipe's real format per role, guessed steps marked, skip notes, and
# filters that match nothing (issue 20, items 6-10).
# Usage: bash inspect_output.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
export OMP_NUM_THREADS=1
unset COLUMNS

# st FILE HEADER DATA(printf escapes): a safetensors file, header length as 8 little-endian bytes.
st() {
    local n=${#2}
    {
        printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $(((n >> 8) & 255)))\\x$(printf %02x $(((n >> 16) & 255)))\\x00\\x00\\x00\\x00\\x00"
        printf '%s' "$2"
        printf "$3"
    } > "$1"
}
V='\x00\x00\x80\x3f\x9a\x99\x99\x3e'   # float32 [1.0, 0.3]: 0.3 does not cast exactly (finite SQNR)
Q=attention.self.query.weight
h=''; d=''
for l in 3 4; do
    h="$h\"encoder.layer.$l.$Q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[$(( (l-3)*8 )),$(( (l-2)*8 ))]},"
    d="$d$V"
done
# Seven integer tensors (skipped, with a note each) after the float data.
for i in 1 2 3 4 5 6 7; do
    h="$h\"ids.$i\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[$(( 12 + 4*i )),$(( 16 + 4*i ))]},"
    d="$d\\x00\\x00\\x00\\x00"
done
st "$T/iter_100.safetensors" "{${h%,}}" "$d"
M=$T/iter_100.safetensors

# 6. Names: whole when the output is a file; within $COLUMNS keeping the layer index and tail.
$FP8KIT inspect "$M" > "$T/out"
grep -q "^  encoder.layer.3.$Q " "$T/out" && grep -q "^  encoder.layer.4.$Q " "$T/out"
check "names whole when writing to a file" $?
COLUMNS=100 $FP8KIT inspect "$M" > "$T/out"
grep -v "^  skipped" "$T/out" | awk 'length($0) > 100 { bad = 1 } END { exit bad }'
check "COLUMNS=100: no table line wider (skip notes are never cut)" $?
[ "$(grep -c 'layer.3.*query.weight ' "$T/out")" -ge 1 ] && [ "$(grep -c 'layer.4.*query.weight ' "$T/out")" -ge 1 ]
check "COLUMNS=100: cut names keep the layer index and the tail" $?
COLUMNS=100 $FP8KIT inspect "$M" --wide > "$T/out"
grep -q "^  encoder.layer.4.$Q " "$T/out"; check "--wide: whole names" $?

# 7. The real format per role.
$FP8KIT inspect "$M" --recipe mxfp8 > "$T/out"
grep -q "recipe mxfp8: activations e4m3, weights e4m3, gradients e4m3" "$T/out"; check "mxfp8: gradients e4m3 in the header" $?
$FP8KIT inspect "$M" > "$T/out"
grep -q "recipe te-current: activations e4m3, weights e4m3, gradients e5m2" "$T/out"; check "te-current header" $?
$FP8KIT inspect "$M" --format e5m2 > "$T/out"
grep -q "e5m2 for every tensor" "$T/out"; check "--format in the header" $?

# 8. A step from the file name carries *.
grep -q "^  encoder.layer.3.$Q *100\* " "$T/out"; check "step from the file name marked 100*" $?
# ... and from the parent folders, the innermost first (run/step_000100/model.safetensors).
mkdir -p "$T/run/step_000100" "$T/iter_500/sub"
cp "$M" "$T/run/step_000100/model.safetensors"
cp "$M" "$T/iter_500/sub/x.safetensors"
cp "$M" "$T/iter_500/step_7.safetensors"
$FP8KIT inspect "$T/run/step_000100/model.safetensors" > "$T/out"
grep -q "^  encoder.layer.3.$Q *100\* " "$T/out"; check "step from the parent folder marked 100*" $?
$FP8KIT inspect "$T/iter_500/sub/x.safetensors" > "$T/out"
grep -q "^  encoder.layer.3.$Q *500\* " "$T/out"; check "step from the grandparent folder marked 500*" $?
$FP8KIT inspect "$T/iter_500/step_7.safetensors" --json > "$T/out"
grep -q '"step": *7,' "$T/out" && grep -q '"step_guessed": *true' "$T/out"
check "the file name wins over its folder (step 7, step_guessed in JSON)" $?

# 9. Skip notes: five, then how many more; file names kept; excluded tensors not listed.
$FP8KIT inspect "$M" > "$T/out"
[ "$(grep -c "^  skipped .*iter_100.safetensors: ids\.[0-9]: I32 tensor" "$T/out")" -eq 5 ]; check "five skip notes with the file name" $?
grep -q "and 2 more skipped" "$T/out"; check "'and 2 more' after five notes" $?
$FP8KIT inspect "$M" --include 'encoder.*' > "$T/out"
! grep -q "skipped ids" "$T/out" && grep -q "skipped: 0" "$T/out"; check "tensors left out by --include are not skip notes" $?
cp "$M" "$T/other.safetensors"
$FP8KIT inspect "$M" "$T/other.safetensors" > "$T/out"
grep -A1 "^lowest SQNR" "$T/out" | grep -q "safetensors: encoder.layer"; check "top-5 lists name the file in multi-file runs" $?

# 16. JSON and CSV carry the exponent histogram (CSV also the sums): under te-current the scale is
# 448 (amax 1), so 1.0 -> 448 (2^8) and 0.3 -> 134.4 (2^7).
$FP8KIT inspect "$M" --json --include '*layer.3*' > "$T/json"
tr -d ' \n' < "$T/json" | grep -q '"exp_hist":{"zero":0,"nonfinite":0,"log2":{"7":1,"8":1}}'; check "JSON exp_hist" $?
$FP8KIT inspect "$M" --csv --include '*layer.3*' > "$T/csv"
grep -q ",exp_hist_7,1$" "$T/csv" && grep -q ",exp_hist_8,1$" "$T/csv" && grep -q ",exp_hist_zero,0$" "$T/csv"
check "CSV exp_hist rows" $?
grep -q ",sum_x2,1.09" "$T/csv" && grep -q ",sum_err2," "$T/csv"; check "CSV sums" $?

# 14. Roles: biases and norm parameters are weights (guessed); --role and __metadata__ set them.
R='{"__metadata__":{"role:custom.act":"gradient","role:ids":"no-such-role"},"a.output.LayerNorm.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a.query.bias":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"custom.act":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},"x.input":{"dtype":"F32","shape":[2],"data_offsets":[24,32]}}'
st "$T/roles.safetensors" "$R" "$V$V$V$V"
$FP8KIT inspect "$T/roles.safetensors" --wide > "$T/out"
grep -q "^  a.output.LayerNorm.bias .* weight\* " "$T/out" && grep -q "^  a.query.bias .* weight\* " "$T/out"
check "biases and LayerNorm parameters guessed as weights" $?
grep -q "^  custom.act .* grad  *f32  e5m2 " "$T/out"; check "__metadata__ role:NAME sets the role (no *)" $?
grep -q "no-such-role" "$T/out"; check "a bad __metadata__ role is noted" $?
$FP8KIT inspect "$T/roles.safetensors" --wide --role 'x.*=weight' --role '*=gradient' > "$T/out"
grep -q "^  x.input .* weight  *f32  e4m3 " "$T/out" && grep -q "^  a.query.bias .* grad " "$T/out"
check "--role PATTERN=ROLE, first match wins" $?
$FP8KIT inspect "$T/roles.safetensors" --role 'x=bogus' > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "expected PATTERN=ROLE" "$T/err"; check "--role with a bad role: exit 2 ($rc)" $?
printf 'step,tensor,amax\n0,l.LayerNorm.bias,1\n1,l.LayerNorm.bias,1\n' > "$T/bias.csv"
$FP8KIT replay "$T/bias.csv" > "$T/out"; grep -q "l.LayerNorm.bias  *weight " "$T/out"; check "replay classes a bias as a weight" $?

# 10. Filters that match nothing: say so, show names that exist, exit 2.
$FP8KIT inspect "$M" --include '*nothing*' > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "no tensor matches --include '\*nothing\*'" "$T/err" && grep -q "encoder.layer.3" "$T/err"
check "--include matching nothing: exit 2 with names that exist ($rc)" $?
$FP8KIT inspect "$M" --steps 5 > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "no tensor matches --steps 5" "$T/err" && grep -q "(step 100)" "$T/err"
check "--steps matching nothing: exit 2 with the steps that exist ($rc)" $?

exit $fail
