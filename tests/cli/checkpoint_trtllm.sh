#!/usr/bin/env bash
# fp8kit checkpoint check on ModelOpt 0.47's TensorRT-LLM checkpoint exports and the HF exports of
# the same quantisations (data/checkpoints/*modelopt_trtllm_*,
# scripts/fixtures/make_modelopt_trtllm_checkpoints.py, written on the CPU and on an H200): every
# folder exits 0 with every weight bit-exact against its original; a copy with a fault planted
# in rank0.safetensors exits 1 naming it. The tp = 2 exports (*_tp2, ModelOpt's
# inference_tensor_parallel=2) exit 0 bit-exact; one without its rank1.safetensors exits 2 in one
# line; a code flipped in rank1.safetensors is named with its rank.
# Usage: bash checkpoint_trtllm.sh /path/to/fp8kit /path/to/repo
set -u
# shellcheck source=checkpoint_setup.bash
source "$(dirname "$0")/checkpoint_setup.bash"

# folder, reference, bit-exact weights
while read -r c ref n; do
  for p in "" gpu_; do
    out=$("$FP8KIT" checkpoint check "$D/$p$c" --reference "$D/$ref"); rc=$?
    check "$p$c: exit 0" $rc
    got=$(printf '%s\n' "$out" | grep -c ' bit-exact  ')
    [ "$got" -eq "$n" ]; check "$p$c: $n weights bit-exact (got $got)" $?
    printf '%s\n' "$out" | tail -1 | grep -qx OK; check "$p$c: OK" $?
  done
done <<'LIST'
modelopt_trtllm_fp8 original 5
modelopt_trtllm_nvfp4 original 5
modelopt_trtllm_fp8_pcpt original 5
modelopt_trtllm_nvfp4_hf original 7
moe_mixtral_linear_modelopt_trtllm_fp8 moe_mixtral_original 4
moe_mixtral_linear_modelopt_trtllm_nvfp4 moe_mixtral_original 10
moe_mixtral_linear_modelopt_trtllm_fp8_hf moe_mixtral_original 16
moe_mixtral_linear_modelopt_trtllm_nvfp4_hf moe_mixtral_original 16
moe_mixtral_linear_modelopt_trtllm_fp8_pcpt_hf moe_mixtral_original 16
LIST

# The tp = 2 exports (no gpu_ twins): the same counts, the tp size told.
while read -r c ref n; do
  out=$("$FP8KIT" checkpoint check "$D/$c" --reference "$D/$ref"); rc=$?
  check "$c: exit 0" $rc
  got=$(printf '%s\n' "$out" | grep -c ' bit-exact  ')
  [ "$got" -eq "$n" ]; check "$c: $n weights bit-exact (got $got)" $?
  printf '%s\n' "$out" | tail -1 | grep -qx OK; check "$c: OK" $?
  printf '%s\n' "$out" | grep -q 'tp_size 2: rank0.safetensors to rank1.safetensors'; check "$c: tp_size 2 told" $?
done <<'LIST'
modelopt_trtllm_fp8_tp2 original 5
modelopt_trtllm_nvfp4_tp2 original 5
moe_mixtral_linear_modelopt_trtllm_fp8_tp2 moe_mixtral_original 4
moe_mixtral_linear_modelopt_trtllm_nvfp4_tp2 moe_mixtral_original 10
LIST

out=$("$FP8KIT" checkpoint check "$D/modelopt_trtllm_fp8" --reference "$D/original")
printf '%s\n' "$out" | grep -q 'transformer.layers.0.attention.qkv .*<- model.layers.0.self_attn.q_proj, model.layers.0.self_attn.k_proj, model.layers.0.self_attn.v_proj'
check "qkv listed with its Hugging Face sources" $?
printf '%s\n' "$out" | grep -q 'TensorRT-LLM: loaded .*kv_cache_scaling_factor'; check "kv_cache_scaling_factor: loaded by TensorRT-LLM" $?

# A copy with rank0.safetensors rewritten by the system python3 (json and struct only).
edit() {  # edit DIR PYTHON-STATEMENTS [FILE] (h: header dict, data: bytes; set_f32(name, value))
  python3 - "$1/${3:-rank0.safetensors}" "$2" <<'PY'
import json, struct, sys
p, stmts = sys.argv[1], sys.argv[2]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = bytearray(b[8 + n:])
def set_f32(name, v):
    lo = h[name]["data_offsets"][0]
    data[lo:lo + 4] = struct.pack("<f", v)
exec(stmts)
out, pos = b"", 0
for k, v in sorted(((k, v) for k, v in h.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0]):
    lo, hi = v["data_offsets"]
    out += bytes(data[lo:hi])
    v["data_offsets"] = [pos, pos + hi - lo]
    pos += hi - lo
s = json.dumps(h).encode()
open(p, "wb").write(struct.pack("<Q", len(s)) + s + out)
PY
}
L=transformer.layers.0
cp -r "$D/modelopt_trtllm_fp8" "$T/neg" && chmod -R u+w "$T/neg"
edit "$T/neg" "set_f32('$L.attention.qkv.weights_scaling_factor', -0.01)"
out=$("$FP8KIT" checkpoint check "$T/neg" 2>&1); rc=$?
[ $rc -eq 1 ]; check "negative qkv scale: exit 1 (got $rc)" $?
printf '%s\n' "$out" | grep -q "scale sign.*$L.attention.qkv.weights_scaling_factor"; check "negative qkv scale: named" $?

cp -r "$D/modelopt_trtllm_fp8" "$T/nokv" && chmod -R u+w "$T/nokv"
edit "$T/nokv" "[h.pop('$L.attention.' + k + '_cache_scaling_factor') for k in ('kv', 'k', 'v')]"
out=$("$FP8KIT" checkpoint check "$T/nokv" 2>&1); rc=$?
[ $rc -eq 1 ]; check "no KV scale: exit 1 (got $rc)" $?
printf '%s\n' "$out" | grep -q "kv scale missing.*$L.attention.kv_cache_scaling_factor.*Required but not provided"; check "no KV scale: named" $?

cp -r "$D/modelopt_trtllm_fp8" "$T/code" && chmod -R u+w "$T/code"
edit "$T/code" "lo = h['$L.mlp.fc.weight']['data_offsets'][0]; data[lo + 100] ^= 1"
out=$("$FP8KIT" checkpoint check "$T/code" --reference "$D/original" 2>&1); rc=$?
[ $rc -eq 1 ]; check "flipped fc code: exit 1 (got $rc)" $?
printf '%s\n' "$out" | grep -q "^  $L.mlp.fc  .* 1/24576 "; check "flipped fc code: 1 code of mlp.fc" $?

# Two ranks, rank1.safetensors missing: refused in one line naming it, exit 2.
cp -r "$D/modelopt_trtllm_fp8_tp2" "$T/tp2" && chmod -R u+w "$T/tp2" && rm "$T/tp2/rank1.safetensors"
out=$("$FP8KIT" checkpoint check "$T/tp2" 2>&1); rc=$?
[ $rc -eq 2 ]; check "rank1 missing: exit 2 (got $rc)" $?
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ]; check "rank1 missing: one line" $?
printf '%s\n' "$out" | grep -q "tp2: a TensorRT-LLM checkpoint of tp_size 2 without rank1.safetensors"; check "rank1 missing: named" $?

# A code of rank1's qkv flipped (row 100: rank1's k rows): that layer fails, named with rank1.
cp -r "$D/modelopt_trtllm_fp8_tp2" "$T/code1" && chmod -R u+w "$T/code1"
edit "$T/code1" "lo = h['$L.attention.qkv.weight']['data_offsets'][0]; data[lo + 100 * 128 + 3] ^= 1" rank1.safetensors
out=$("$FP8KIT" checkpoint check "$T/code1" --reference "$D/original" 2>&1); rc=$?
[ $rc -eq 1 ]; check "rank1 code flipped: exit 1 (got $rc)" $?
printf '%s\n' "$out" | grep -q "^  $L.attention.qkv  .* 1/32768 .* in rank1.safetensors$"; check "rank1 code flipped: 1 code of qkv, in rank1" $?
printf '%s\n' "$out" | grep -q "^  $L.mlp.fc  .*bit-exact"; check "rank1 code flipped: fc still bit-exact" $?
exit $fail
