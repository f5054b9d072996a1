#!/usr/bin/env bash
# fp8kit checkpoint check on the ModelOpt FP8 per-channel/per-token, MXFP8 (ModelOpt,
# compressed-tensors) and W4A8 checkpoints the libraries wrote (data/checkpoints,
# scripts/fixtures/make_quant_checkpoints_more.py): 7 layers bit-exact each (W4A8_AWQ against the weights
# ModelOpt quantised, modelopt_w4a8_smoothed); against the unsmoothed original W4A8_AWQ exits 1 and
# says why; a changed MXFP8 scale byte exits 1 and names the layer.
# Usage: bash checkpoint_schemes.sh /path/to/fp8kit /path/to/repo
set -u
# shellcheck source=checkpoint_setup.bash
source "$(dirname "$0")/checkpoint_setup.bash"

for spec in modelopt_fp8_pcpt:fp8-per-channel:original modelopt_mxfp8:mxfp8:original ct_mxfp8:mxfp8:original \
            modelopt_w4a8_max:w4a8-int4:original modelopt_w4a8:w4a8-int4:modelopt_w4a8_smoothed; do
  IFS=: read -r c scheme ref <<< "$spec"
  out=$("$FP8KIT" checkpoint check "$D/$c" --reference "$D/$ref"); rc=$?
  check "$c: exit 0" $rc
  n=$(printf '%s\n' "$out" | grep -c ' bit-exact ')
  [ "$n" -eq 7 ]; check "$c: 7 layers bit-exact (got $n)" $?
  n=$(printf '%s\n' "$out" | grep -c "^  model\.layers\.0\.[a-z_.]*  *$scheme ")
  [ "$n" -eq 7 ]; check "$c: 7 layers $scheme (got $n)" $?
  printf '%s\n' "$out" | tail -1 | grep -qx OK; check "$c: OK" $?
done

out=$("$FP8KIT" checkpoint check "$D/modelopt_w4a8" --reference "$D/original"); rc=$?
[ $rc -eq 0 ]; check "W4A8_AWQ against the unsmoothed original: exit 0, not replayable there (got $rc)" $?
printf '%s\n' "$out" | grep -q 'note \[awq smoothing\]'; check "W4A8_AWQ: the smoothing named" $?

# ct_mxfp8's shard ends with v_proj.weight_scale (E8M0 bytes): flip bit 6 of its last scale.
cp -r "$D/ct_mxfp8" "$T/bad"
chmod u+w "$T/bad/model.safetensors"
size=$(stat -c %s "$T/bad/model.safetensors")
last=$(od -An -tu1 -j $((size - 1)) -N1 "$T/bad/model.safetensors" | tr -d ' ')
printf "$(printf '\\%03o' $((last ^ 0x40)))" | dd of="$T/bad/model.safetensors" bs=1 seek=$((size - 1)) conv=notrunc status=none
out=$("$FP8KIT" checkpoint check "$T/bad" --reference "$D/original"); rc=$?
[ $rc -eq 1 ]; check "MXFP8 changed scale: exit 1 (got $rc)" $?
printf '%s\n' "$out" | grep -q 'v_proj  *different amax  *codes differing  *[0-9]*/8192  *scales differing  *1 '; check "MXFP8 changed scale: named in v_proj" $?
n=$(printf '%s\n' "$out" | grep -c ' bit-exact ')
[ "$n" -eq 6 ]; check "MXFP8 changed scale: the other 6 layers bit-exact (got $n)" $?
exit $fail
