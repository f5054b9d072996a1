#!/usr/bin/env bash
# fp8kit checkpoint check (issue 28) as a user runs it: on checkpoints written by compressed-tensors
# and ModelOpt themselves (data/checkpoints, scripts/fixtures/make_quant_checkpoints.py) every weight is
# bit-exact against the original (exit 0); --json and --csv; a copy with one code flipped exits 1
# and names the layer; a missing folder exits 2.
# Usage: bash checkpoint.sh /path/to/fp8kit /path/to/repo
set -u
# shellcheck source=checkpoint_setup.bash
source "$(dirname "$0")/checkpoint_setup.bash"

for c in ct_fp8 ct_nvfp4 modelopt_nvfp4 modelopt_mxfp4; do
  out=$("$FP8KIT" checkpoint check "$D/$c" --reference "$D/original"); rc=$?
  check "$c: exit 0" $rc
  n=$(printf '%s\n' "$out" | grep -c ' bit-exact ')
  [ "$n" -eq 7 ]; check "$c: 7 layers bit-exact (got $n)" $?
  printf '%s\n' "$out" | tail -1 | grep -qx OK; check "$c: OK" $?
done

"$FP8KIT" checkpoint check "$D/modelopt_fp8" --json > "$T/r.json"; check "json exit 0" $?
grep -q '"loaded as model.layers.0.self_attn.attn.k_scale"' "$T/r.json"; check "json: k_scale mapped for vLLM" $?
grep -q '"producer": "modelopt"' "$T/r.json"; check "json: producer" $?
grep -q '"tensorrt_llm"' "$T/r.json"; check "json: KV names per engine" $?
"$FP8KIT" checkpoint check "$D/modelopt_fp8" | grep -q '^    SGLang: *renamed *loaded as model.layers.0.self_attn.attn.v_scale$'; check "text: SGLang's fate of v_scale" $?

"$FP8KIT" checkpoint check "$D/ct_nvfp4" --reference "$D/original" --csv > "$T/r.csv"; check "csv exit 0" $?
head -1 "$T/r.csv" | grep -q '^module,scheme,excluded,scale_convention,verdict,'; check "csv header" $?
[ "$(grep -c ',nvfp4,0,.*,bit-exact,0,0,' "$T/r.csv")" -eq 7 ]; check "csv: 7 nvfp4 rows bit-exact" $?

# The shard's last tensor is v_proj.weight (F8_E4M3): flip one exponent bit of its last code.
cp -r "$D/ct_fp8" "$T/bad"
chmod u+w "$T/bad/model.safetensors"
size=$(stat -c %s "$T/bad/model.safetensors")
last=$(od -An -tu1 -j $((size - 1)) -N1 "$T/bad/model.safetensors" | tr -d ' ')
printf "$(printf '\\%03o' $((last ^ 0x40)))" | dd of="$T/bad/model.safetensors" bs=1 seek=$((size - 1)) conv=notrunc status=none
out=$("$FP8KIT" checkpoint check "$T/bad" --reference "$D/original"); rc=$?
[ $rc -eq 1 ]; check "one flipped code: exit 1 (got $rc)" $?
printf '%s\n' "$out" | grep -q 'v_proj  *codes differ  *codes differing  *1/8192'; check "one flipped code: named in v_proj" $?

"$FP8KIT" checkpoint check "$T/no_such_dir" 2> "$T/err"; rc=$?
[ $rc -eq 2 ]; check "missing folder: exit 2 (got $rc)" $?
grep -q 'no_such_dir' "$T/err"; check "missing folder: named" $?
"$FP8KIT" checkpoint check "$D/original" 2> "$T/err"; rc=$?
[ $rc -eq 2 ]; check "unquantised folder: exit 2 (got $rc)" $?
exit $fail
