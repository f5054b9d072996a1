#!/usr/bin/env bash
# fp8kit calibrate (issue 28, item 3) as a user runs it, on data/example/llama_tiny_dump.h5:
# the scales printed by --csv equal, bit for bit, those the libraries computed
# (tests/golden/calibration_scales.json, scripts/fixtures/make_calibration_golden.py); --json; --save
# writes a safetensors file under the tool's name; bad input exits 2 with one line naming it.
# Usage: bash calibrate.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
DUMP=$REPO/data/example/llama_tiny_dump.h5
GOLDEN=$REPO/tests/golden/calibration_scales.json
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
. "$REPO/tests/cli/full_device.bash"

"$FP8KIT" calibrate "$DUMP" --method all --csv > "$T/all.csv"; check "csv: exit 0" $?
[ "$(wc -l < "$T/all.csv")" -eq 211 ]; check "csv: 30 activation tensors (15 inputs, 15 outputs) x 7 methods" $?
grep -q '^lm_head/output,lm_head.output_scale,' "$T/all.csv"; check "csv: an output's checkpoint name" $?
# The golden file's scale bits per (tensor, method), compared with the CSV's scale_bits_f32.
n=0
for m in modelopt_max modelopt_mse modelopt_percentile llmc_static_minmax llmc_mse; do
  for t in model.layers.0.self_attn.q_proj/input model.layers.1.mlp.down_proj/input lm_head/input; do
    want=$(grep -A80 "\"$t\"" "$GOLDEN" | grep -A6 "\"$m\"" | grep -m1 scale_bits_f32 | sed 's/.*"\(0x[0-9a-f]*\)".*/\1/')
    got=$(grep "^$t,.*,$m," "$T/all.csv" | cut -d, -f6)
    [ -n "$want" ] && [ "$want" = "$got" ]; check "$t $m: $got = library $want" $?
    n=$((n + 1))
  done
done
[ $n -eq 15 ]; check "15 comparisons" $?

"$FP8KIT" calibrate "$DUMP" --method max --tensors '*/lm_head/input' --json > "$T/r.json"; check "json: exit 0" $?
grep -q '"checkpoint_name": "lm_head.input_scale"' "$T/r.json"; check "json: checkpoint name" $?
grep -q '"holdout_steps": \[' "$T/r.json"; check "json: holdout steps" $?

out=$("$FP8KIT" calibrate "$DUMP" --method static_minmax --tensors '*/lm_head/input'); check "text: exit 0" $?
printf '%s\n' "$out" | grep -q '^lm_head/input  *llmc_static_minmax .* bfloat16 '; check "text: row" $?
printf '%s\n' "$out" | grep -q 'held-out steps'; check "text: says what the statistics are on" $?

out=$("$FP8KIT" calibrate "$DUMP" --method max --tensors '*/lm_head/input' --holdout-tokens 0.25); check "by token: exit 0" $?
printf '%s\n' "$out" | grep -q 'held-out tokens'; check "by token: said" $?
"$FP8KIT" calibrate "$DUMP" --method max --holdout-tokens 0 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "holdout-tokens" "$T/err"; check "--holdout-tokens 0: exit 2 (got $rc)" $?

"$FP8KIT" calibrate "$DUMP" --method mse --tensors '*/lm_head/input' --save "$T/s.safetensors" > /dev/null; check "save: exit 0" $?
grep -q 'lm_head.input_scale' "$T/s.safetensors"; check "save: named input_scale" $?

# The command is named once: "calibrate: no tensor matches", never "calibrate: calibrate: ...".
"$FP8KIT" calibrate "$DUMP" --method max --tensors 'no/such/*' 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -qx "fp8kit: error: calibrate: no tensor of '.*' matches --tensors" "$T/err"
s=$?; check "no match: exit 2, the command named once (got $rc: $(cat "$T/err"))" $s
# --save through the output sink: a full device is a failure (exit 2, one line), never exit 0.
"$FP8KIT" calibrate "$DUMP" --method max --tensors '*/lm_head/input' --save "$FULL" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -qx "fp8kit: error: --save $FULL: write failed: No space left on device" "$T/err"
s=$?; check "--save full device: exit 2 (got $rc: $(cat "$T/err"))" $s

"$FP8KIT" calibrate "$DUMP" --method entropy 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "_compute_amax_entropy" "$T/err"; check "entropy (undefined for FP8 in ModelOpt): exit 2, why (got $rc)" $?
[ "$(wc -l < "$T/err")" -eq 1 ] && grep -q "entropy" "$T/err"; check "entropy: one line naming it" $?
"$FP8KIT" calibrate "$DUMP" --method nosuch 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "nosuch" "$T/err"; check "unknown method: exit 2 (got $rc)" $?
"$FP8KIT" calibrate "$DUMP" --method modelopt_percentile --granularity channel 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "HistogramCalibrator" "$T/err"; check "percentile per channel: exit 2, why (got $rc)" $?
"$FP8KIT" calibrate "$DUMP" --method modelopt_mse --granularity channel --tensors '*/lm_head/input' --csv > "$T/ch.csv"; check "mse per channel: exit 0" $?
[ "$(grep -c '^lm_head/input,' "$T/ch.csv")" -eq 64 ]; check "mse per channel: 64 rows" $?
"$FP8KIT" calibrate "$T/missing.h5" --method max 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "missing.h5" "$T/err"; check "missing dump: exit 2, named (got $rc)" $?
"$FP8KIT" calibrate "$DUMP" --method max --tensors 'nothing*' 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "tensors" "$T/err"; check "no tensor matched: exit 2 (got $rc)" $?
"$FP8KIT" calibrate "$DUMP" --method max --method mse --save "$T/x.safetensors" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ ! -e "$T/x.safetensors" ]; check "--save with two methods: exit 2, nothing written (got $rc)" $?
"$FP8KIT" calibrate "$DUMP" --method max --holdout-steps 'x-y' 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "holdout-steps" "$T/err"; check "bad --holdout-steps: exit 2 (got $rc)" $?
# ModelOpt's NVFP4 weight scale sweep: one step of a weight, saved under ModelOpt's export names
"$FP8KIT" calibrate "$DUMP" --method modelopt_nvfp4_sweep --tensors 'step_000299/lm_head/weight' --save "$T/w.safetensors" > "$T/sw.txt"; check "nvfp4 sweep: exit 0" $?
grep -q 'block scales differ from the max rule' "$T/sw.txt"; check "nvfp4 sweep: text" $?
grep -q '"lm_head.weight_scale":{"data_offsets":\[0,1024\],"dtype":"F8_E4M3","shape":\[256,4\]}' "$T/w.safetensors"; check "nvfp4 sweep save: weight_scale F8_E4M3 [256,4]" $?
grep -q '"lm_head.weight_scale_2":{"data_offsets":\[1024,1028\],"dtype":"F32","shape":\[\]}' "$T/w.safetensors"; check "nvfp4 sweep save: weight_scale_2 F32 []" $?
"$FP8KIT" calibrate "$DUMP" --method modelopt_nvfp4_sweep --tensors '*/lm_head/weight' --holdout-steps none 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "one-shot" "$T/err"; check "nvfp4 sweep on 3 steps: exit 2, why (got $rc)" $?
# --save for ModelOpt writes the KV scales under the names, dtype and shape ModelOpt's HF export
# writes (its own file: data/checkpoints/modelopt_fp8, `<attn>.k_proj.k_scale`, `<attn>.v_proj.v_scale`, F32 []).
"$FP8KIT" calibrate "$REPO/data/example/llama_tiny_kv.h5" --method modelopt_max --tensors '*/model.layers.0.self_attn.k' \
  --tensors '*/model.layers.0.self_attn.v' --save "$T/kv.safetensors" > /dev/null; check "save KV (modelopt_max): exit 0" $?
python3 - "$T/kv.safetensors" "$REPO/data/checkpoints/modelopt_fp8/model.safetensors" <<'PY'
import json, struct, sys
def head(p):
    with open(p, "rb") as f:
        h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    return {k: (v["dtype"], v["shape"]) for k, v in h.items() if k.endswith(("k_scale", "v_scale"))}
saved, modelopt = head(sys.argv[1]), head(sys.argv[2])
assert len(modelopt) == 2 and saved == modelopt, (saved, modelopt)
PY
check "save KV (modelopt_max): ModelOpt's own names, dtype and shape" $?

# --scheme nvfp4 (issue 51): each producer's NVFP4 activation scale, bit for bit against the
# producers' own code (tests/golden/calibration_nvfp4_input_scales.json,
# scripts/fixtures/make_calibration_nvfp4_golden.py), under the names, dtype and shape of the
# producers' own checkpoints (data/checkpoints/modelopt_nvfp4, llmc_nvfp4: same module names).
for m in modelopt_max llmc_static_minmax; do
  "$FP8KIT" calibrate "$DUMP" --method $m --tensors '*/input' --scheme nvfp4 --save "$T/n_$m.safetensors" > /dev/null
  check "save nvfp4 ($m): exit 0" $?
done
python3 - "$T" "$REPO/tests/golden/calibration_nvfp4_input_scales.json" "$REPO/data/checkpoints" <<'PY'
import json, struct, sys
def load(p):
    with open(p, "rb") as f:
        h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        data = f.read()
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items()}
T, golden, ckpt = sys.argv[1:]
g = json.load(open(golden))["tensors"]
for m, suffix, producer in (("modelopt_max", "input_scale", "modelopt_nvfp4"),
                            ("llmc_static_minmax", "input_global_scale", "llmc_nvfp4")):
    saved = load("%s/n_%s.safetensors" % (T, m))
    want = {k[: -len("/input")] + "." + suffix: e[m] for k, e in g.items() if k.endswith("/input")}
    assert sorted(saved) == sorted(want), (m, sorted(saved))
    for k, w in want.items():
        dtype, shape, raw = saved[k]
        assert (dtype, shape) == ("F32", w["shape"]), (m, k, dtype, shape)
        assert "0x%08x" % struct.unpack("<I", raw)[0] == w["bits_f32"], (m, k, raw.hex(), w)
    real = {k: v[:2] for k, v in load("%s/%s/model.safetensors" % (ckpt, producer)).items()
            if k.endswith((".input_scale", ".input_global_scale"))}
    assert real and all(k in saved and saved[k][:2] == v for k, v in real.items()), (m, real)
PY
check "save nvfp4: the producers' bits (golden), names, dtype and shape (their checkpoints)" $?
"$FP8KIT" calibrate "$DUMP" --method modelopt_mse --tensors '*/lm_head/input' --scheme nvfp4 --save "$T/n.safetensors" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ ! -e "$T/n.safetensors" ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q "modelopt_mse" "$T/err"
s=$?; check "--scheme nvfp4 with modelopt_mse: exit 2, one line, nothing written (got $rc: $(cat "$T/err"))" $s
"$FP8KIT" calibrate "$DUMP" --method max --tensors '*/lm_head/input' --scheme nvfp4 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--save" "$T/err"; check "--scheme without --save: exit 2 (got $rc)" $?
"$FP8KIT" calibrate "$DUMP" --method max --scheme mxfp4 --save "$T/n.safetensors" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "mxfp4" "$T/err"; check "--scheme mxfp4: exit 2, named (got $rc)" $?

exit $fail
