#!/usr/bin/env bash
# fp8kit checkpoint check on gpt-oss MXFP4 experts written by triton_kernels' own
# downcast_to_mxfp, called as gpt_oss/triton/moe.py quantize_mx4 calls it
# (data/checkpoints/gptoss_triton_*, scripts/fixtures/make_gptoss_triton_checkpoints.py), in
# gpt-oss's original/ layout and transformers' HF layout: bit-exact under triton_kernels' rule
# (ROUND_UP scales; E2M1 ties to even at d80d2866, ties away at 9e1e203f, before triton #8110),
# not under the OCP floor rule; one planted code and one planted scale exit 1 and are named.
# Usage: bash checkpoint_gptoss.sh /path/to/fp8kit /path/to/repo
set -u
# shellcheck source=checkpoint_setup.bash
source "$(dirname "$0")/checkpoint_setup.bash"

# exact FOLDER REFERENCE RULE: exit 0, both expert tensors bit-exact under RULE, summary OK.
exact() {
  out=$("$FP8KIT" checkpoint check "$D/$1" --reference "$D/$2"); rc=$?
  check "$1: exit 0 (got $rc)" $rc
  n=$(printf '%s\n' "$out" | grep ' bit-exact ' | grep -cF "[gpt-oss (triton_kernels downcast_to_mxfp ROUND_UP, $3)]")
  [ "$n" -eq 2 ]; check "$1: 2 expert tensors bit-exact under '$3' (got $n)" $?
  printf '%s\n' "$out" | tail -1 | grep -qx OK; check "$1: OK" $?
  "$FP8KIT" checkpoint check "$D/$1" > /dev/null; rc=$?
  check "$1 without --reference: exit 0 (got $rc)" $rc
}
exact gptoss_triton_original gptoss_triton_original_ref "ties to even"
exact gptoss_triton_hf gptoss_triton_hf_ref "ties to even"
exact gptoss_triton_aug25_original gptoss_triton_original_ref "ties away (before triton #8110)"
exact gptoss_triton_aug25_hf gptoss_triton_hf_ref "ties away (before triton #8110)"

# plant SRC DST TENSOR BYTE KIND: copy SRC with byte BYTE of TENSOR changed (code: the low
# nibble's lowest bit flipped, one E2M1 code; scale: the E8M0 code plus one).
plant() {
  mkdir -p "$2"
  cp "$1/config.json" "$2/"
  python3 - "$1/model.safetensors" "$2/model.safetensors" "$3" "$4" "$5" <<'PY'
import json, struct, sys
src, dst, name, i, kind = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
raw = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
at = 8 + n + json.loads(raw[8:8 + n])[name]["data_offsets"][0] + i
raw[at] = raw[at] ^ 0x01 if kind == "code" else raw[at] + 1
open(dst, "wb").write(raw)
PY
}
# fault NAME SRC REF TENSOR BYTE KIND MODULE CLASS COUNT: exit 1, MODULE's verdict CLASS with
# COUNT differing (codes or scales), the summary counting CLASS.
fault() {
  plant "$D/$2" "$T/$1" "$4" "$5" "$6" || { check "$1: planted" 1; return; }
  "$FP8KIT" checkpoint check "$T/$1" --reference "$D/$3" > "$T/$1.txt"; rc=$?
  [ $rc -eq 1 ]; check "$1: exit 1 (got $rc)" $?
  grep -qE "^  $7 +$8 " "$T/$1.txt"; check "$1: '$8' names $7" $?
  grep -E "^  $7 +$8 " "$T/$1.txt" | grep -qE "$9"; check "$1: $9" $?
  tail -1 "$T/$1.txt" | grep -q "1 failed: 1 $8"; check "$1: the summary counts one '$8'" $?
}
G=model.layers.0.mlp.experts
fault code_orig gptoss_triton_original gptoss_triton_original_ref block.0.mlp.mlp1_weight.blocks 1234 code \
  block.0.mlp.mlp1_weight rounding "codes differing +1/49152 +scales differing +0 "
fault scale_orig gptoss_triton_original gptoss_triton_original_ref block.0.mlp.mlp2_weight.scales 321 scale \
  block.0.mlp.mlp2_weight "different amax" "scales differing +1 "
fault code_hf gptoss_triton_hf gptoss_triton_hf_ref $G.down_proj_blocks 777 code \
  $G.down_proj rounding "codes differing +1/24576 +scales differing +0 "
fault scale_hf gptoss_triton_hf gptoss_triton_hf_ref $G.gate_up_proj_scales 99 scale \
  $G.gate_up_proj "different amax" "scales differing +1 "

# The two tie rules tell the fixtures apart: the August 2025 codes under the ties-to-even rule
# alone are not bit-exact (so the verdict above is the second rule's), nor the OCP floor's.
out=$("$FP8KIT" checkpoint check "$D/gptoss_triton_aug25_original" --reference "$D/gptoss_triton_original_ref")
! printf '%s\n' "$out" | grep -q "ties to even)\]"; check "aug25: not bit-exact under ties to even" $?
! printf '%s\n' "$out" | grep -q "OCP MX floor"; check "aug25: no expert tensor left to the OCP floor rule" $?
exit $fail
