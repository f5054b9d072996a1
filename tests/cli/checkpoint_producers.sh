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

# AWQ against the unsmoothed original: every scale differs, as smoothing gives; a correct file
# exits 0, each layer noted as not replayable against that reference.
out=$("$FP8KIT" checkpoint check "$D/modelopt_w4a8" --reference "$D/original"); rc=$?
[ $rc -eq 0 ]; check "w4a8 vs original: exit 0 (got $rc)" $?
n=$(printf '%s\n' "$out" | grep -c '^note \[not replayable\]')
[ "$n" -eq 7 ]; check "w4a8 vs original: 7 layers not replayable, said (got $n)" $?
# A reference that is not the checkpoint's original up to one factor per input column (down_proj's
# rows reversed) is not excused as smoothing: that layer fails.
rm -rf "$T/wrong" && cp -r "$D/original" "$T/wrong" && chmod -R u+w "$T/wrong"
python3 - "$T/wrong/model.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
t = json.loads(raw[8:8 + n])["model.layers.0.mlp.down_proj.weight"]
rows, cols = t["shape"]
a = 8 + n + t["data_offsets"][0]
w = 2 * cols  # bfloat16 rows
body = bytes(raw[a:a + rows * w])
raw[a:a + rows * w] = b"".join(body[r * w:(r + 1) * w] for r in reversed(range(rows)))
open(path, "wb").write(raw)
PY
out=$("$FP8KIT" checkpoint check "$D/modelopt_int4_awq" --reference "$T/wrong"); rc=$?
[ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q '^  model\.layers\.0\.mlp\.down_proj .* different amax' \
  && [ "$(printf '%s\n' "$out" | grep -c '^note \[not replayable\]')" -eq 6 ]
check "int4 AWQ against a wrong reference: down_proj fails, the 6 others not replayable (got $rc)" $?

# gpu_modelopt_w4a8_max (quant_algo W4A8_AWQ, algorithm max) is bit-exact against the original
# under ModelOpt's CUDA arithmetic, while the CPU rule differs in half its scales by an ulp: one
# group scale doubled is a fault, not smoothing (the fewest differing scales over the rules count).
python3 "$REPO/tests/cli/plant_safetensors.py" "$D/gpu_modelopt_w4a8_max" "$T/gpu" model.safetensors \
  model.layers.0.mlp.down_proj.weight_scale scale
out=$("$FP8KIT" checkpoint check "$T/gpu" --reference "$D/original"); rc=$?
[ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q '^  model\.layers\.0\.mlp\.down_proj .* different amax'
check "gpu_modelopt_w4a8_max, one group scale doubled: down_proj fails (got $rc)" $?

# Without the smoothed weights a changed code is still caught where it takes a row's only +-127
# (INT8 SmoothQuant) or a group's only +-7 (INT4 AWQ): ModelOpt's max rule puts one in each.
for c in modelopt_int8_smoothquant:I8 modelopt_int4_awq:U8; do
  name=${c%%:*} dtype=${c##*:}
  rm -rf "$T/top" && cp -r "$D/$name" "$T/top" && chmod -R u+w "$T/top"
  python3 - "$T/top/model.safetensors" "$dtype" <<'PY'
import json, struct, sys
path, dtype = sys.argv[1], sys.argv[2]
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
t = head["model.layers.0.mlp.down_proj.weight"]
rows, width = t["shape"]
base = 8 + n + t["data_offsets"][0]
if dtype == "I8":  # one row holding a single +-127: make it +-126
    for r in range(rows):
        row = [v - 256 if v > 127 else v for v in raw[base + r * width: base + (r + 1) * width]]
        tops = [i for i, v in enumerate(row) if abs(v) >= 127]
        if len(tops) == 1:
            i = base + r * width + tops[0]
            raw[i] = (126 if row[tops[0]] > 0 else 256 - 126)
            break
else:  # INT4, two output rows per byte (row 2i low nibble); group 64: one group's single 7 -> 6
    cols = width
    for b in range(rows * cols):
        r2, col = divmod(b, cols)
        for half in (0, 1):
            g0 = (col // 64) * 64
            nib = lambda bb, h: (raw[base + bb] >> (4 * h)) & 0xF
            vals = [nib(r2 * cols + j, half) for j in range(g0, g0 + 64)]
            mags = [16 - v if v & 8 else v for v in vals]
            if mags.count(7) + mags.count(8) == 1 and mags[col - g0] == 7 and vals[col - g0] == 7:
                raw[base + b] = (raw[base + b] & (0xF0 if half == 0 else 0x0F)) | (6 << (4 * half))
                open(path, "wb").write(raw)
                sys.exit(0)
    sys.exit("no group with a single +7")
open(path, "wb").write(raw)
PY
  out=$("$FP8KIT" checkpoint check "$T/top" --reference "$D/original"); rc=$?
  [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q '^FAIL \[max code\] model.layers.0.mlp.down_proj.weight'
  check "$name, a top code lowered, against the unsmoothed original: exit 1, max code named (got $rc)" $?
done

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
