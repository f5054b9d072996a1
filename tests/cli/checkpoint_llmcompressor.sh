#!/usr/bin/env bash
# fp8kit checkpoint check on checkpoints written by llm-compressor 0.14.0.1 itself (issue 51):
# data/checkpoints/llmc_* from scripts/fixtures/make_llmcompressor_checkpoints.py (oneshot and
# model_free_ptq on the CPU). Every one exits 0 against llmc_original with every layer bit-exact;
# one planted fault per family (a scale changed by one step in a copy, the file still valid)
# exits 1 and names the layer.
# Usage: bash checkpoint_llmcompressor.sh /path/to/fp8kit /path/to/repo
set -u
# shellcheck source=checkpoint_setup.bash
source "$(dirname "$0")/checkpoint_setup.bash"

# Every fixture: exit 0, every quantised layer bit-exact, OK. model_free_ptq also quantises
# embed_tokens (15 layers) and that is noted as outside the config's targets.
# exact C REFERENCE LAYERS: llmc_C checked against REFERENCE exits 0, LAYERS layers bit-exact, OK;
# its report (standard output and error) is left in $out.
exact() {
  out=$("$FP8KIT" checkpoint check "$D/llmc_$1" --reference "$D/$2" 2>&1); local rc=$?
  check "llmc_$1: exit 0 (got $rc)" $rc
  local n
  n=$(printf '%s\n' "$out" | grep -c ' bit-exact ')
  [ "$n" -eq "$3" ]; check "llmc_$1: $3 layers bit-exact (got $n)" $?
  printf '%s\n' "$out" | tail -1 | grep -qx OK; check "llmc_$1: OK" $?
}
for c in fp8 fp8_dynamic fp8_block fp8_kv fp8_kv_head nvfp4 nvfp4a16 mxfp4 mxfp4a16 mxfp8 mxfp8a16 \
  mf_fp8_dynamic mf_nvfp4a16 mf_mxfp4 mf_mxfp4a16 mf_mxfp8 mf_mxfp8a16; do
  want=14
  case $c in mf_*) want=15 ;; esac
  exact "$c" llmc_original "$want"
  case $c in
    mf_*) printf '%s\n' "$out" | grep -q '^note \[outside targets\] model.embed_tokens'
      check "llmc_$c: embed_tokens noted outside targets" $? ;;
  esac
done
# FP8_BLOCK over whole 128x128 blocks (grids 1x2 and 2x1), oneshot and model_free_ptq.
for c in b128_fp8_block mf_b128_fp8_block; do
  want=7
  case $c in mf_*) want=8 ;; esac
  exact "$c" llmc_b128_original "$want"
done

# Mixture of experts (1 layer: 4 attention projections + 4 experts x 3): Qwen3-MoE, and Mixtral,
# whose experts llm-compressor saves as gate_proj / up_proj / down_proj where the original has
# w1 / w3 / w2.
for c in qwen3_moe_fp8 qwen3_moe_fp8_block qwen3_moe_nvfp4 qwen3_moe_mxfp4 mixtral_nvfp4; do
  case $c in qwen3_moe_*) ref=qwen3_moe ;; *) ref=mixtral ;; esac
  exact "$c" "llmc_${ref}_original" 16
  case $c in *nvfp4) ! printf '%s\n' "$out" | grep -q '^note \[expert gate/up scales differ\]'
    check "llmc_$c: oneshot gives each expert's gate/up one global scale" $? ;;
  esac
done
# model_free_ptq NVFP4A16 on the MoE originals (per-expert tensors; embed_tokens too: 17 layers).
# Its fused-name patterns (llmcompressor/entrypoints/model_free/microscale.py
# DEFAULT_FUSED_MAPPINGS) pair `.mlp.gate_proj` with `.mlp.up_proj` and `.w1` with `.w3`: Qwen3-MoE's
# `mlp.experts.<e>.gate_proj` / `up_proj` keep their own global scales (noted: vLLM keeps one
# per expert), Mixtral's w1 / w3 share one.
for k in qwen3_moe mixtral; do
  exact "mf_${k}_nvfp4a16" "llmc_${k}_original" 17
  n=$(printf '%s\n' "$out" | grep -c '^note \[expert gate/up scales differ\]')
  if [ $k = qwen3_moe ]; then [ "$n" -ge 1 ]; else [ "$n" -eq 0 ]; fi
  check "llmc_mf_${k}_nvfp4a16: expert gate/up global notes (got $n)" $?
done
n=$("$FP8KIT" checkpoint check "$D/llmc_mixtral_nvfp4" --reference "$D/llmc_mixtral_original" | grep -c 'experts\.[0-9]\.gate_proj .*fused global scale')
[ "$n" -ge 1 ]; check "llmc_mixtral_nvfp4: expert gate/up share the fused global (got $n gate_proj)" $?

# NVFP4: the fused q/k/v and gate/up members that are not their group's largest are bit-exact
# only under llm-compressor's fused global scale.
n=$("$FP8KIT" checkpoint check "$D/llmc_nvfp4" --reference "$D/llmc_original" | grep -c 'llm-compressor fused global scale')
[ "$n" -ge 4 ]; check "llmc_nvfp4: fused global scale used (got $n layers)" $?
# FP8 KV: llm-compressor's self_attn.k_scale / v_scale, loaded by vLLM, dropped by TensorRT-LLM.
"$FP8KIT" checkpoint check "$D/llmc_fp8_kv" --engine vllm > /dev/null; rc=$?
[ $rc -eq 0 ]; check "llmc_fp8_kv --engine vllm: exit 0 (got $rc)" $?
"$FP8KIT" checkpoint check "$D/llmc_fp8_kv" --engine trtllm > "$T/trt.txt"; rc=$?
[ $rc -eq 1 ] && grep -q '^FAIL \[kv scale dropped\] model.layers.0.self_attn.k_scale' "$T/trt.txt"
check "llmc_fp8_kv --engine trtllm: exit 1, k_scale dropped (got $rc)" $?
# Per KV head (strategy attn_head, [2, 1, 1]): vLLM loads it per head (a note), SGLang's load fails.
"$FP8KIT" checkpoint check "$D/llmc_fp8_kv_head" > "$T/head.txt"; rc=$?
[ $rc -eq 0 ] && grep -q '^note \[kv scale per-head\] model.layers.0.self_attn.k_scale: vLLM loaded' "$T/head.txt"
check "llmc_fp8_kv_head: exit 0, vLLM per-head load noted (got $rc)" $?
"$FP8KIT" checkpoint check "$D/llmc_fp8_kv_head" --engine vllm > /dev/null; rc=$?
[ $rc -eq 0 ]; check "llmc_fp8_kv_head --engine vllm: exit 0 (got $rc)" $?
"$FP8KIT" checkpoint check "$D/llmc_fp8_kv_head" --engine sglang > "$T/head.txt"; rc=$?
[ $rc -eq 1 ] && grep -q '^FAIL \[kv scale per-head\] model.layers.1.self_attn.v_scale: SGLang' "$T/head.txt"
check "llmc_fp8_kv_head --engine sglang: exit 1, per-head scale refused (got $rc)" $?

# plant DIR TENSOR INDEX MODE: change element INDEX of TENSOR in a copy of DIR's model.safetensors
# (MODE: up = one step up in the stored encoding, neg = sign flipped, nan = NaN); same size, same header.
plant() {
  rm -rf "$T/p"
  cp -r "$D/$1" "$T/p"
  python3 - "$T/p/model.safetensors" "$2" "$3" "$4" <<'PY'
import json, struct, sys
path, name, idx, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
t = json.loads(raw[8:8 + n])[name]
w = {"BF16": 2, "F32": 4, "F8_E4M3": 1, "U8": 1}[t["dtype"]]
at = 8 + n + t["data_offsets"][0] + idx * w
v = int.from_bytes(raw[at:at + w], "little")
top = 1 << (8 * w - 1)
if mode == "up":
    v += 1
elif mode == "neg":
    v ^= top
elif mode == "nan":
    v = {2: 0x7FC0, 4: 0x7FC00000}[w]
raw[at:at + w] = v.to_bytes(w, "little")
open(path, "wb").write(raw)
PY
}
# expect_fault WHAT LAYER [ARGS...]: exit 1 and a line naming LAYER as not bit-exact or failed.
expect_fault() {
  what=$1 layer=$2
  shift 2
  "$FP8KIT" checkpoint check "$T/p" "$@" > "$T/out.txt" 2>&1; rc=$?
  [ $rc -eq 1 ]; check "$what: exit 1 (got $rc)" $?
  grep -E "^(FAIL \[[^]]*\] )?  *$layer[ .:]" "$T/out.txt" | grep -qv ' bit-exact '
  check "$what: names $layer" $?
  tail -1 "$T/out.txt" | grep -q '^FAILED ([1-9]'; check "$what: summary FAILED" $?
}
L=model.layers.1
R=(--reference "$D/llmc_original")
plant llmc_fp8 "$L.self_attn.o_proj.weight_scale" 0 up
expect_fault "FP8 per tensor weight_scale +1 ulp" "$L.self_attn.o_proj" "${R[@]}"
plant llmc_fp8_dynamic "$L.mlp.down_proj.weight_scale" 5 up
expect_fault "FP8 per channel weight_scale +1 ulp" "$L.mlp.down_proj" "${R[@]}"
plant llmc_fp8_block "$L.mlp.gate_proj.weight_scale" 0 up
expect_fault "FP8 block weight_scale +1 ulp" "$L.mlp.gate_proj" "${R[@]}"
plant llmc_nvfp4 "$L.self_attn.k_proj.weight_global_scale" 0 up
expect_fault "NVFP4 weight_global_scale of a fused member +1 ulp" "$L.self_attn.k_proj" "${R[@]}"
plant llmc_nvfp4a16 "$L.mlp.up_proj.weight_scale" 7 up
expect_fault "NVFP4 block scale +1 step" "$L.mlp.up_proj" "${R[@]}"
plant llmc_mxfp4 "$L.self_attn.v_proj.weight_scale" 3 up
expect_fault "MXFP4 E8M0 scale x2" "$L.self_attn.v_proj" "${R[@]}"
plant llmc_mf_mxfp8a16 "$L.self_attn.q_proj.weight_scale" 2 up
expect_fault "model_free MXFP8 E8M0 scale x2" "$L.self_attn.q_proj" "${R[@]}"
plant llmc_mf_b128_fp8_block "model.layers.0.mlp.down_proj.weight_scale" 1 up
expect_fault "model_free FP8 block scale (block 0,1) +1 ulp" "model.layers.0.mlp.down_proj" \
  --reference "$D/llmc_b128_original"
plant llmc_mixtral_nvfp4 "model.layers.0.block_sparse_moe.experts.2.up_proj.weight_global_scale" 0 up
expect_fault "Mixtral expert up_proj weight_global_scale +1 ulp" "model.layers.0.block_sparse_moe.experts.2.up_proj" \
  --reference "$D/llmc_mixtral_original"
plant llmc_qwen3_moe_fp8_block "model.layers.0.mlp.experts.1.down_proj.weight_scale" 0 up
expect_fault "Qwen3-MoE expert FP8 block scale +1 ulp" "model.layers.0.mlp.experts.1.down_proj" \
  --reference "$D/llmc_qwen3_moe_original"
plant llmc_fp8 "$L.mlp.up_proj.weight_scale" 0 neg
expect_fault "FP8 negative weight_scale (no reference)" "$L.mlp.up_proj"
plant llmc_fp8_kv "$L.self_attn.k_scale" 0 nan
"$FP8KIT" checkpoint check "$T/p" > "$T/out.txt" 2>&1; rc=$?
[ $rc -eq 1 ]; check "KV k_scale NaN: exit 1 (got $rc)" $?
grep -q "$L.self_attn.k_scale" "$T/out.txt"; check "KV k_scale NaN: names it" $?
plant llmc_fp8_kv_head "$L.self_attn.v_scale" 1 neg
"$FP8KIT" checkpoint check "$T/p" > "$T/out.txt" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "^FAIL \[kv scale value\] $L.self_attn.v_scale" "$T/out.txt"
check "KV per-head v_scale negative: exit 1, named (got $rc)" $?

exit $fail
