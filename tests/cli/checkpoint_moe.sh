#!/usr/bin/env bash
# fp8kit checkpoint check on the mixture-of-experts checkpoints written by ModelOpt and
# compressed-tensors themselves (data/checkpoints/moe_*, scripts/fixtures/make_moe_checkpoints.py): all 16
# weights (12 of them experts) bit-exact against the original under FP8 per-tensor, FP8 block,
# NVFP4 and MXFP4 (exit 0); a copy with one expert's input_scale removed exits 1 naming it.
# Usage: bash checkpoint_moe.sh /path/to/fp8kit /path/to/repo
set -u
# shellcheck source=checkpoint_setup.bash
source "$(dirname "$0")/checkpoint_setup.bash"

for p in modelopt ct; do
  for s in fp8 fp8_block nvfp4 mxfp4; do
    c=moe_${p}_$s
    out=$("$FP8KIT" checkpoint check "$D/$c" --reference "$D/moe_original"); rc=$?
    check "$c: exit 0" $rc
    n=$(printf '%s\n' "$out" | grep -c 'experts\.[0-3]\.[a-z_]*proj  *bit-exact ')
    [ "$n" -eq 12 ]; check "$c: 12 expert weights bit-exact (got $n)" $?
    printf '%s\n' "$out" | tail -1 | grep -qx OK; check "$c: OK" $?
  done
done

for c in moe_mixtral_modelopt_fp8 moe_mixtral_modelopt_nvfp4; do
  out=$("$FP8KIT" checkpoint check "$D/$c" --reference "$D/moe_mixtral_original"); rc=$?
  check "$c: exit 0" $rc
  n=$(printf '%s\n' "$out" | grep -c 'experts\.[0-3]\.w[123]  *bit-exact ')
  [ "$n" -eq 12 ]; check "$c: 12 expert weights bit-exact (got $n)" $?
done

# One expert's input_scale removed: the shard rewritten without it (header and data, by the
# system python3: json and struct only).
cp -r "$D/moe_modelopt_fp8" "$T/bad"
chmod -R u+w "$T/bad"
python3 - "$T/bad/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = b[8 + n:]
del h["model.layers.0.mlp.experts.2.gate_proj.input_scale"]
out, pos = b"", 0
for k, v in sorted(((k, v) for k, v in h.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0]):
    lo, hi = v["data_offsets"]
    out += data[lo:hi]
    v["data_offsets"] = [pos, pos + hi - lo]
    pos += hi - lo
s = json.dumps(h).encode()
open(p, "wb").write(struct.pack("<Q", len(s)) + s + out)
PY
out=$("$FP8KIT" checkpoint check "$T/bad" 2>&1); rc=$?
[ $rc -eq 1 ]; check "missing expert input_scale: exit 1 (got $rc)" $?
printf '%s\n' "$out" | grep -q 'missing expert input_scale.*experts\.2\.gate_proj\.input_scale'; check "missing expert input_scale: named" $?
exit $fail
