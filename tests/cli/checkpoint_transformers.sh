#!/usr/bin/env bash
# fp8kit checkpoint check on checkpoints written by transformers' own FineGrainedFP8 quantiser
# (data/checkpoints/tf_*, scripts/fixtures/make_transformers_fp8_checkpoints.py): float32 and
# F8_E8M0 weight_scale_inv (and the power-of-two scales in a float32 container), a Llama and a
# Qwen3-MoE and a DeepSeek-V3 (its names, 128x128 blocks), each bit-exact under transformers'
# rule on the weight its loader casts to E4M3;
# planted scale faults (negative, NaN, a transposed block grid) exit 1 and name the tensor.
# Usage: bash checkpoint_transformers.sh /path/to/fp8kit /path/to/repo
set -u
# shellcheck source=checkpoint_setup.bash
source "$(dirname "$0")/checkpoint_setup.bash"

# exact FOLDER REFERENCE LAYERS RULE: exit 0, every layer bit-exact under RULE, summary OK.
exact() {
  out=$("$FP8KIT" checkpoint check "$D/$1" --reference "$D/$2"); rc=$?
  check "$1: exit 0 (got $rc)" $rc
  n=$(printf '%s\n' "$out" | grep ' bit-exact ' | grep -c "$4, weight cast to E4M3 on load)")
  [ "$n" -eq "$3" ]; check "$1: $3 layers bit-exact under '$4' on the E4M3-cast weight (got $n)" $?
  printf '%s\n' "$out" | tail -1 | grep -qx OK; check "$1: OK" $?
  "$FP8KIT" checkpoint check "$D/$1" > /dev/null; rc=$?
  check "$1 without --reference: exit 0 (got $rc)" $rc
}
exact tf_fp8_block original 7 "transformers FineGrainedFP8"
exact tf_fp8_block_ue8m0 original 7 "transformers FineGrainedFP8 ue8m0"
exact tf_fp8_block_ue8m0_f32 original 7 "transformers FineGrainedFP8 ue8m0"
exact tf_moe_fp8_block tf_moe_original 16 "transformers FineGrainedFP8"
exact tf_moe_fp8_block_ue8m0 tf_moe_original 16 "transformers FineGrainedFP8 ue8m0"
exact ds_fp8_block ds_original 14 "transformers FineGrainedFP8"

# The rule comes from the config: the same tensors under a DeepSeek-V3 config (no `dequantize`
# key) are checked under DeepSeek's amax / 448 and are not bit-exact.
mkdir -p "$T/ds"
cp "$D/tf_fp8_block/model.safetensors" "$T/ds/"
python3 - "$D/tf_fp8_block/config.json" "$T/ds/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
q = c["quantization_config"]
c["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": q["weight_block_size"]}
json.dump(c, open(sys.argv[2], "w"))
PY
"$FP8KIT" checkpoint check "$T/ds" --reference "$D/original" > "$T/ds.txt"; rc=$?
[ $rc -eq 1 ]; check "under a DeepSeek config: exit 1 (got $rc)" $?
grep -q 'different amax' "$T/ds.txt"; check "under a DeepSeek config: amax / 448 differs" $?

# plant SRC DST TENSOR KIND: copy SRC, change TENSOR's scale (neg: element 1 negative; nan:
# element 1 NaN; e8m0nan: element 1 = E8M0 code 255; grid128: every scale re-gridded for 128x128
# blocks with TENSOR's stored transposed).
plant() {
  mkdir -p "$2"
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, math, struct, sys
src, dst, name, kind = sys.argv[1:5]
raw = open(src + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n]); data = raw[8 + n:]
blobs = {k: bytearray(data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in head.items() if k != "__metadata__"}
head.pop("__metadata__", None)
cfg = json.load(open(src + "/config.json"))
if kind == "neg":
    blobs[name][4:8] = struct.pack("<f", -abs(struct.unpack("<f", bytes(blobs[name][4:8]))[0]))
elif kind == "nan":
    blobs[name][4:8] = struct.pack("<f", float("nan"))
elif kind == "e8m0nan":
    blobs[name][1] = 255
elif kind == "transpose":
    head[name]["shape"] = head[name]["shape"][::-1]
elif kind == "grid128":
    cfg["quantization_config"]["weight_block_size"] = [128, 128]
    for k in list(head):
        if k.endswith(".weight_scale_inv"):
            r, c = head[k[:-len("_scale_inv")]]["shape"]
            g = [math.ceil(r / 128), math.ceil(c / 128)]
            blobs[k] = bytearray(struct.pack("<f", 1.0 / 448) * (g[0] * g[1]))
            head[k]["shape"] = g[::-1] if k == name else g
off = 0
for k in sorted(head):
    head[k]["data_offsets"] = [off, off + len(blobs[k])]
    off += len(blobs[k])
h = json.dumps(head).encode(); h += b" " * ((8 - len(h) % 8) % 8)
open(dst + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"".join(bytes(blobs[k]) for k in sorted(head)))
json.dump(cfg, open(dst + "/config.json", "w"))
PY
}
# fault NAME SRC REF TENSOR KIND CLASS: exit 1, a FAIL line of CLASS naming TENSOR.
fault() {
  plant "$D/$2" "$T/$1" "$4" "$5" || { check "$1: planted" 1; return; }
  "$FP8KIT" checkpoint check "$T/$1" --reference "$D/$3" > "$T/$1.txt"; rc=$?
  [ $rc -eq 1 ]; check "$1: exit 1 (got $rc)" $?
  grep -q "^FAIL \[$6\] $4" "$T/$1.txt"; check "$1: '$6' names $4" $?
  tail -1 "$T/$1.txt" | grep -q "$6"; check "$1: the summary counts '$6'" $?
}
DOWN=model.layers.0.mlp.down_proj.weight_scale_inv
EXP=model.layers.0.mlp.experts.2.gate_proj.weight_scale_inv
fault neg tf_fp8_block original $DOWN neg "scale sign"
fault nan tf_fp8_block original $DOWN nan "scale finite"
fault neg_f32 tf_fp8_block_ue8m0_f32 original $DOWN neg "scale sign"
fault nan_e8m0 tf_fp8_block_ue8m0 original $DOWN e8m0nan "scale finite"
fault moe_neg tf_moe_fp8_block tf_moe_original $EXP neg "scale sign"
fault moe_nan_e8m0 tf_moe_fp8_block_ue8m0 tf_moe_original $EXP e8m0nan "scale finite"
# DeepSeek-V3's 128x128 grid stored transposed: [2, 1] for down_proj [128, 192] (layout [1, 2]).
fault transposed tf_fp8_block original $DOWN grid128 "scale shape"
grep -q "shape \[2, 1\] for fp8-block weight \[128, 192\]: the layout stores \[1, 2\]" "$T/transposed.txt"
check "transposed: names the shape found and the one stored" $?
# DeepSeek-V3's names, 128x128 blocks: q_a_proj [128, 256] with its [1, 2] grid stored as [2, 1].
QA=model.layers.0.self_attn.q_a_proj.weight_scale_inv
fault ds_transposed ds_fp8_block ds_original $QA transpose "scale shape"
grep -q "shape \[2, 1\] for fp8-block weight \[128, 256\]: the layout stores \[1, 2\]" "$T/ds_transposed.txt"
check "ds_transposed: names the shape found and the one stored" $?
fault ds_neg ds_fp8_block ds_original model.layers.0.mlp.shared_experts.up_proj.weight_scale_inv neg "scale sign"
# The same grid stored right is no shape fault.
plant "$D/tf_fp8_block" "$T/grid_ok" none grid128
"$FP8KIT" checkpoint check "$T/grid_ok" > "$T/grid_ok.txt"; rc=$?
! grep -q 'scale shape\|structure' "$T/grid_ok.txt"; check "128x128 grid stored right: no shape fault" $?

exit $fail
