#!/usr/bin/env bash
# fp8kit checkpoint check on what ModelOpt 0.47 writes for its non-NVFP4 presets
# (scripts/fixtures/make_modelopt_presets.py) and on its TensorRT-LLM export with a padded
# vocabulary at tp_size 2 (scripts/fixtures/make_modelopt_trtllm_vocab_pad.py): every fixture
# exits 0 with and without --reference, every layer bit-exact; one fault planted at a time in a
# copy (a weight code flipped, a scale changed, a scale's shape or dtype wrong, a scale missing;
# a padding row nonzero, a real vocabulary row changed) exits 1 and is named.
# Usage: bash checkpoint_modelopt_presets_more.sh /path/to/fp8kit /path/to/repo
set -u
# shellcheck source=checkpoint_setup.bash
source "$(dirname "$0")/checkpoint_setup.bash"

# plant SRC DST FILE KIND TENSOR: a copy of SRC with one fault in TENSOR of FILE: flip (the lowest
# bit of the first code), scale (the first scale doubled, or one E8M0 step up), shape, dtype,
# missing, negate (the last element's sign bit), lastrow (a byte of the last row), through
# tests/cli/plant_safetensors.py.
plant() {
  local fault
  case $4 in
    flip) fault=xor:0:0x01 ;; scale) fault=scale ;; shape) fault=shape:fold ;; dtype) fault=dtype:narrow ;;
    missing) fault=drop ;; negate) fault=xor:-1:0x80 ;; lastrow) fault=xor:-1:0x40 ;;
  esac
  python3 "$REPO/tests/cli/plant_safetensors.py" "$1" "$2" "$3" "$5" "$fault"
}

# expect_fault NAME DIR REF PATTERN: exit 1 and a FAIL line / summary naming PATTERN.
expect_fault() {
  out=$("$FP8KIT" checkpoint check "$2" --reference "$3" 2>&1); rc=$?
  [ $rc -eq 1 ]; check "$1: exit 1 (got $rc)" $?
  printf '%s\n' "$out" | grep -E '^FAIL|^FAILED' | grep -Eq "$4"; check "$1: named ($4)" $?
}

# preset folder, its --reference, layers compared[, the layer the faults go into]
presets="modelopt_fp8_affine_kv:original:7 modelopt_mxfp4_mlp_weight_only:original:3
modelopt_w4a8_mxfp4_fp8:original:7 modelopt_int4_awq:modelopt_int4_awq_smoothed:7
modelopt_int4_blockwise_weight_only:original:7 modelopt_int8_default:original:7
modelopt_int8_smoothquant:modelopt_int8_smoothquant_smoothed:7 modelopt_int8_weight_only:original:7
modelopt_fp8_block:original:7
moe_modelopt_int8_weight_only:moe_mixtral_original:16:model.layers.0.block_sparse_moe.experts.0.w1
moe_modelopt_int4_blockwise_weight_only:moe_mixtral_original:16:model.layers.0.block_sparse_moe.experts.1.w3"
for p in $presets; do
  IFS=: read -r c ref n w <<< "$p"
  w=${w:-model.layers.0.mlp.down_proj}
  "$FP8KIT" checkpoint check "$D/$c" > /dev/null; rc=$?
  check "$c: exit 0 without --reference (got $rc)" $rc
  out=$("$FP8KIT" checkpoint check "$D/$c" --reference "$D/$ref"); rc=$?
  check "$c: exit 0 against $ref (got $rc)" $rc
  got=$(printf '%s\n' "$out" | grep -c ' bit-exact ')
  [ "$got" -eq "$n" ]; check "$c: $n layers bit-exact (got $got)" $?
  if printf '%s\n' "$out" | grep -q 'not checked'; then check "$c: nothing left unchecked" 1; fi
  plant "$D/$c" "$T/p" model.safetensors flip $w.weight
  expect_fault "$c: a flipped code" "$T/p" "$D/$ref" 'rounding|codes differ'
  plant "$D/$c" "$T/p" model.safetensors scale $w.weight_scale
  expect_fault "$c: a changed scale" "$T/p" "$D/$ref" 'different amax'
  plant "$D/$c" "$T/p" model.safetensors shape $w.weight_scale
  expect_fault "$c: a scale's shape" "$T/p" "$D/$ref" 'scale shape|structure'
  plant "$D/$c" "$T/p" model.safetensors dtype $w.weight_scale
  expect_fault "$c: a scale's dtype" "$T/p" "$D/$ref" 'structure.*dtype|[0-9]+ structure'
  plant "$D/$c" "$T/p" model.safetensors missing $w.weight_scale
  expect_fault "$c: a missing scale" "$T/p" "$D/$ref" 'has no scale tensor|[0-9]+ structure'
done

w=model.layers.0.mlp.down_proj
# The companions ModelOpt writes with every quantised linear: a lost input_scale (FP8, W8A8),
# a negative one, a lost SmoothQuant pre_quant_scale.
plant "$D/modelopt_int8_default" "$T/p" model.safetensors missing $w.input_scale
expect_fault "int8_default: a missing input_scale" "$T/p" "$D/original" 'missing input_scale'
plant "$D/modelopt_fp8_affine_kv" "$T/p" model.safetensors missing model.layers.0.mlp.up_proj.input_scale
expect_fault "fp8_affine_kv: a missing input_scale" "$T/p" "$D/original" 'missing input_scale'
plant "$D/modelopt_int8_default" "$T/p" model.safetensors negate $w.input_scale
expect_fault "int8_default: a negative input_scale" "$T/p" "$D/original" 'input scale'
plant "$D/modelopt_int8_smoothquant" "$T/p" model.safetensors missing $w.pre_quant_scale
expect_fault "int8_smoothquant: a missing pre_quant_scale" "$T/p" "$D/modelopt_int8_smoothquant_smoothed" \
  'missing pre_quant_scale'
plant "$D/modelopt_int8_default" "$T/p" model.safetensors scale model.layers.0.self_attn.q_proj.input_scale
expect_fault "int8_default: q_proj's input_scale changed" "$T/p" "$D/original" 'shared input_scale'
plant "$D/modelopt_fp8_affine_kv" "$T/p" model.safetensors scale model.layers.0.mlp.up_proj.input_scale
expect_fault "fp8_affine_kv: up_proj's input_scale changed" "$T/p" "$D/original" 'shared input_scale'
plant "$D/modelopt_int8_smoothquant" "$T/p" model.safetensors flip model.layers.0.self_attn.v_proj.pre_quant_scale
expect_fault "int8_smoothquant: v_proj's pre_quant_scale changed" "$T/p" "$D/modelopt_int8_smoothquant_smoothed" \
  'shared pre_quant_scale'
plant "$D/modelopt_fp8_affine_kv" "$T/p" model.safetensors missing model.layers.0.self_attn.k_proj.k_bias
expect_fault "fp8_affine_kv: a missing k_bias" "$T/p" "$D/original" 'kv bias'
plant "$D/modelopt_fp8_affine_kv" "$T/p" model.safetensors negate model.layers.0.self_attn.v_proj.v_scale
expect_fault "fp8_affine_kv: a negative v_scale" "$T/p" "$D/original" 'kv scale'

# Without a rule for the scheme: named as not checked, never a failure, never "bit-exact".
plant "$D/modelopt_int8_weight_only" "$T/u" model.safetensors missing $w.weight_scale
python3 - "$T/u/hf_quant_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["quantization"]["quant_algo"] = "MXINT8"; json.dump(c, open(sys.argv[1], "w"))
PY
out=$("$FP8KIT" checkpoint check "$T/u"); rc=$?
check "I8 codes under an unknown quant_algo: exit 0 (got $rc)" $rc
printf '%s\n' "$out" | grep -q "^note \[not checked\] $w.weight: not checked"; check "... named not checked" $?

# ... and its E8M0 scales (an MX INT8 layout: U8 [rows, cols/32]) still checked for NaN (255).
python3 - "$T/u/model.safetensors" "$w.weight_scale" <<'PY'
import json, struct, sys
path, name = sys.argv[1:3]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n]); data = raw[8 + n:]
scales = bytes([127] * (128 * 6 - 1) + [255])
head[name] = {"dtype": "U8", "shape": [128, 6], "data_offsets": [len(data), len(data) + len(scales)]}
h = json.dumps(head).encode(); h += b" " * ((8 - len(h) % 8) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + data + scales)
PY
out=$("$FP8KIT" checkpoint check "$T/u"); rc=$?
[ $rc -eq 1 ]; check "unknown scheme, an E8M0 scale 255: exit 1 (got $rc)" $?
printf '%s\n' "$out" | grep -q "^note \[not checked\] $w.weight"; check "... still noted not checked" $?
printf '%s\n' "$out" | grep -q "^FAIL \[scale finite\] $w.weight_scale"; check "... the NaN scale named" $?

# TensorRT-LLM, tp_size 2, vocab_size 33: 34 rows, the last ModelOpt's zero padding.
v=modelopt_trtllm_fp8_vocab33_tp2
vref=$D/modelopt_trtllm_vocab33_original
out=$("$FP8KIT" checkpoint check "$D/$v" --reference "$vref"); rc=$?
check "$v: exit 0 (got $rc)" $rc
n=$(printf '%s\n' "$out" | grep -c '^note \[vocab padding\]')
[ "$n" -eq 2 ]; check "$v: embedding and lm_head padding noted (got $n)" $?
"$FP8KIT" checkpoint check "$D/$v" > /dev/null; check "$v: exit 0 without --reference" $?
for tn in transformer.vocab_embedding.weight lm_head.weight; do
  plant "$D/$v" "$T/v" rank1.safetensors lastrow $tn
  expect_fault "$v: $tn padding row nonzero" "$T/v" "$vref" 'vocab padding'
  plant "$D/$v" "$T/v" rank0.safetensors flip $tn
  expect_fault "$v: $tn real row changed" "$T/v" "$vref" 'vocab rows'
done
plant "$D/$v" "$T/v" rank0.safetensors flip transformer.layers.0.mlp.fc.weight
expect_fault "$v: a flipped fc code" "$T/v" "$vref" 'rounding|codes differ'

# TensorRT-LLM's mlp.fc and mlp.gate (gate_proj, up_proj) read one input: one activation scale.
cp -r "$D/$v" "$T/g" && for r in 0 1; do
  plant "$D/$v" "$T/v" rank$r.safetensors scale transformer.layers.0.mlp.gate.activation_scaling_factor
  cp "$T/v/rank$r.safetensors" "$T/g/"
done
expect_fault "$v: mlp.gate's activation scale changed on every rank" "$T/g" "$vref" 'shared input_scale'

# tp_size 4: 36 rows (3 of padding), and each of the 2 KV heads repeated twice in qkv.
v=modelopt_trtllm_fp8_vocab33_tp4
out=$("$FP8KIT" checkpoint check "$D/$v" --reference "$vref"); rc=$?
check "$v: exit 0 (got $rc)" $rc
printf '%s\n' "$out" | grep -q '^  transformer.layers.0.attention.qkv  *bit-exact'; check "$v: qkv bit-exact" $?
printf '%s\n' "$out" | grep -q '^note \[vocab padding\] lm_head.weight: rows 33 to 35'; check "$v: 3 padding rows" $?
plant "$D/$v" "$T/v" rank3.safetensors lastrow transformer.layers.0.attention.qkv.weight
expect_fault "$v: a flipped code in rank3's repeated v head" "$T/v" "$vref" 'rounding|codes differ'
plant "$D/$v" "$T/v" rank3.safetensors lastrow lm_head.weight
expect_fault "$v: lm_head padding row nonzero" "$T/v" "$vref" 'vocab padding'

exit $fail
