#!/usr/bin/env bash
# fp8kit checkpoint check (issue 51) as a user runs it: checkpoints under llm-compressor's fused
# NVFP4 rule and transformers' FineGrainedFP8 rules (data/checkpoints/llmc_nvfp4_fused,
# tf_fp8_block*: scripts/fixtures/make_transcribed_checkpoints.py, make_transformers_fp8_checkpoints.py)
# pass; the summary line counts what
# failed, by class; --engine turns one engine's concerns into failures; a bad --engine exits 2.
# Usage: bash checkpoint_producers.sh /path/to/fp8kit /path/to/repo
set -u
# shellcheck source=checkpoint_setup.bash
source "$(dirname "$0")/checkpoint_setup.bash"

for c in llmc_nvfp4_fused tf_fp8_block tf_fp8_block_ue8m0 tf_fp8_block_ue8m0_f32; do
  out=$("$FP8KIT" checkpoint check "$D/$c" --reference "$D/original"); rc=$?
  check "$c: exit 0" $rc
  n=$(printf '%s\n' "$out" | grep -c ' bit-exact ')
  [ "$n" -eq 7 ]; check "$c: 7 layers bit-exact (got $n)" $?
  printf '%s\n' "$out" | tail -1 | grep -qx OK; check "$c: OK" $?
done

# AWQ against the unsmoothed original: comparisons fail, no finding does; the count is theirs.
out=$("$FP8KIT" checkpoint check "$D/modelopt_w4a8" --reference "$D/original"); rc=$?
[ $rc -eq 1 ]; check "w4a8 vs original: exit 1 (got $rc)" $?
last=$(printf '%s\n' "$out" | tail -1)
printf '%s\n' "$last" | grep -Eq '^FAILED \([1-9][0-9]* failed: [0-9]+ [a-z]'; check "summary counts by class: $last" $?
printf '%s\n' "$last" | grep -vq '(0 failed'; check "summary is not '0 failed'" $?

# llm-compressor's FP8 KV names on the attention: TensorRT-LLM never reads them.
mkdir -p "$T/kv"
python3 - "$D/ct_fp8" "$T/kv" <<'PY'
import json, struct, sys
src, dst = sys.argv[1], sys.argv[2]
raw = open(src + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n]); data = raw[8 + n:]
end = len(data)
for k in ("k_scale", "v_scale"):
    head["model.layers.0.self_attn." + k] = {"dtype": "BF16", "shape": [1], "data_offsets": [end, end + 2]}
    data += b"\x10\x3c"; end += 2
h = json.dumps(head).encode(); h += b" " * ((8 - len(h) % 8) % 8)
open(dst + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
c = json.load(open(src + "/config.json"))
c["quantization_config"]["kv_cache_scheme"] = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}
json.dump(c, open(dst + "/config.json", "w"))
PY
check "plant llm-compressor KV names" $?
"$FP8KIT" checkpoint check "$T/kv" > "$T/none.txt"; rc=$?
[ $rc -eq 0 ]; check "no --engine: exit 0 (got $rc)" $?
grep -q '^note \[kv scale dropped\] model.layers.0.self_attn.k_scale' "$T/none.txt"; check "no --engine: TensorRT-LLM's drop is a note" $?
"$FP8KIT" checkpoint check "$T/kv" --engine vllm > /dev/null; rc=$?
[ $rc -eq 0 ]; check "--engine vllm: exit 0 (got $rc)" $?
"$FP8KIT" checkpoint check "$T/kv" --engine trtllm > "$T/trt.txt"; rc=$?
[ $rc -eq 1 ]; check "--engine trtllm: exit 1 (got $rc)" $?
grep -q '^FAIL \[kv scale dropped\] model.layers.0.self_attn.k_scale' "$T/trt.txt"; check "--engine trtllm: the drop fails" $?
tail -1 "$T/trt.txt" | grep -q 'kv scale dropped'; check "--engine trtllm: summary names the class" $?
"$FP8KIT" checkpoint check "$T/kv" --engine tgi 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "tgi" "$T/err"; check "--engine tgi: exit 2 naming it (got $rc)" $?

exit $fail
