#!/usr/bin/env bash
# fp8kit kv (issue 28, item 4) as a user runs it, on data/example/llama_tiny_kv.h5 (post-rotary
# Q/K/V of a trained 2-layer Llama, captured by fp8kit.torch.Monitor; scripts/fixtures/make_kv_capture.py):
# text, --csv and --json run and say what they hold; the same numbers for 1 and 2 threads; bad
# input (unknown format / policy, missing file, a dump without Q/K/V, a tensor that is not 4-D)
# exits 2 with one line naming it. The numbers themselves are checked against an independent
# numpy transcription in tests/python/test_kv.py.
# Usage: bash kv.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
CAP=$REPO/data/example/llama_tiny_kv.h5
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }

"$FP8KIT" kv "$CAP" --no-attention --csv > "$T/all.csv"; check "csv: exit 0" $?
# 2 layers x 3 tensors (q, k, v) x 4 heads x 4 formats x 8 policies, plus the header
[ "$(wc -l < "$T/all.csv")" -eq 769 ]; check "csv: 768 rows" $?
grep -q '^model.layers.1.self_attn,k,3,e4m3,vllm_first_batch,' "$T/all.csv"; check "csv: a row per layer, tensor, head, format, policy" $?

out=$("$FP8KIT" kv "$CAP" --format e4m3 --policy one --policy tensor); check "text: exit 0" $?
printf '%s\n' "$out" | grep -q '^2 layers, 4 steps'; check "text: says what it read" $?
printf '%s\n' "$out" | grep -q 'FP8 attention'; check "text: FP8 attention table" $?
printf '%s\n' "$out" | grep -q '^model.layers.0.self_attn  *v  *e4m3  *tensor '; check "text: summary row" $?

"$FP8KIT" kv "$CAP" --format nvfp4 --policy token_head --bucket 64 --json > "$T/r.json"; check "json: exit 0" $?
grep -q '"positions": \[' "$T/r.json" && grep -q '"last": 63' "$T/r.json"; check "json: position buckets of 64" $?
OMP_NUM_THREADS=1 "$FP8KIT" kv "$CAP" --format e4m3 --policy head --json > "$T/t1.json"
OMP_NUM_THREADS=2 "$FP8KIT" kv "$CAP" --format e4m3 --policy head --json > "$T/t2.json"
cmp -s "$T/t1.json" "$T/t2.json"; check "the same report for 1 and 2 threads" $?

"$FP8KIT" kv "$CAP" --format fp16 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q "fp16" "$T/err"; check "unknown format: exit 2, one line (got $rc)" $?
"$FP8KIT" kv "$CAP" --policy max 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "'max'" "$T/err"; check "unknown policy: exit 2 (got $rc)" $?
"$FP8KIT" kv "$T/missing.h5" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "missing.h5" "$T/err"; check "missing dump: exit 2, named (got $rc)" $?
"$FP8KIT" kv "$REPO/data/example/llama_tiny_dump.h5" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "llama_tiny_dump.h5.*no Q/K/V" "$T/err"; check "no Q/K/V: exit 2, file named (got $rc)" $?
"$FP8KIT" kv "$CAP" --bucket 0 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "bucket" "$T/err"; check "--bucket 0: exit 2 (got $rc)" $?
# The producers' KV policies (issue 51): ModelOpt's HF export (amax / 448, no clamp) is `tensor`'s
# number, its TensorRT-LLM export clamps to >= 1; llm-compressor's observer is calibrate's
# llmc_minmax (checked against llm-compressor itself in tests/golden), bit for bit.
"$FP8KIT" kv "$CAP" --format e4m3 --policy modelopt_hf --policy tensor --policy modelopt_trtllm --policy llmc_minmax --no-attention --json > "$T/p.json"; check "producer policies: exit 0" $?
"$FP8KIT" calibrate "$CAP" --method llmc_minmax --tensors '*/model.layers.0.self_attn.k' --json > "$T/c.json"; check "calibrate llmc_minmax: exit 0" $?
python3 - "$T/p.json" "$T/c.json" <<'PY'
import json, sys
kv, cal = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
s = {(r["policy"]): r["scale"] for r in kv["rows"] if r["layer"] == "model.layers.0.self_attn" and r["tensor"] == "k" and r["head"] == 0}
assert s["modelopt_hf"] == s["tensor"] and s["modelopt_hf"] < 1, s
assert s["modelopt_trtllm"] == 1.0, s
c = [r["scale"] for r in cal["rows"]]
assert len(c) == 1 and s["llmc_minmax"] == c[0], (s, c)
PY
check "modelopt_hf = amax/448 unclamped, modelopt_trtllm = 1, llmc_minmax = calibrate's" $?
# `--policy modelopt` is ModelOpt's HF export (what data/checkpoints/modelopt_fp8 stores: amax / 448,
# no clamp), not the TensorRT-LLM export's max(amax / 448, 1).
"$FP8KIT" kv "$CAP" --format e4m3 --policy modelopt --no-attention --json > "$T/m.json"; check "--policy modelopt: exit 0" $?
python3 - "$T/p.json" "$T/m.json" <<'PY'
import json, sys
p, m = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
pick = lambda d, pol: [r["scale"] for r in d["rows"] if r["policy"] == pol]
got = pick(m, "modelopt_hf")
assert got and got == pick(p, "modelopt_hf"), (got, {r["policy"] for r in m["rows"]})
assert all(x < 1 for x in got), got
PY
check "--policy modelopt = modelopt_hf (HF export, unclamped)" $?

exit $fail
