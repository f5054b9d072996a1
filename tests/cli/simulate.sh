#!/usr/bin/env bash
# fp8kit simulate msamp: bad input is one line and exit 2; the CSV reads back with pandas with
# every tensor name whole; JSON parses; several dumps are ranks; the run is deterministic.
# Usage: bash simulate.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
DUMP=$REPO/data/example/llama_tiny_dump.h5
RANKS=$REPO/data/example/msamp_ranks
PY=$REPO/.venv/bin/python
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
SEL=(--tensor '*self_attn.k_proj*')

bad() { # expected message fragment, args...
    local want=$1; shift
    "$FP8KIT" simulate msamp "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -ne 2 ]; then echo "FAIL: exit $rc (want 2) for: $*"; fail=1; fi
    if [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -q -- "$want" "$T/err"; then
        echo "FAIL: want one line with '$want' for: $*; got: $(cat "$T/err")"; fail=1; fi
    if [ -s "$T/out" ]; then echo "FAIL: output on bad input: $*"; fail=1; fi
}
bad "no/such.h5" --level O1 no/such.h5
bad "--level" --level O3 "$DUMP"
bad "must be 2..65536" --level O1 "$DUMP" --ranks 1
bad "unknown reduction order" --level O1 "$DUMP" --order spiral
bad "splits a single dump" --level O1 "$RANKS/rank0.h5" "$RANKS/rank1.h5" --ranks 8
bad "no weight gradient" --level O1 "$REPO/data/example/llama_tiny_dump.h5" --tensor '*nothing*'
bad "choose one" --level O1 "$DUMP" --csv --json
bad "optimizer adam: msamp or te-fused-adam" --level O2 "$DUMP" --optimizer adam
bad "unknown state dtype 'fp4'" --level O2 "$DUMP" --optimizer te-fused-adam --exp-avg-dtype fp4
bad "master weight dtype bf16: fp32 or fp16" --level O2 "$DUMP" --optimizer te-fused-adam --master-weight-dtype bf16
bad "msamp state dtype bf16: fp8 or fp16" --level O2 "$DUMP" --exp-avg-sq-dtype bf16
bad "master weight dtype: set for te-fused-adam only" --level O2 "$DUMP" --master-weight-dtype fp16
bad "TE build: unknown TE build 'fast'" --level O2 "$DUMP" --optimizer te-fused-adam --te-build fast
bad "TE build: set for te-fused-adam only" --level O2 "$DUMP" --te-build nvcc-default
bad "--optimizer-grad 'fp8': mean or fp8-allreduce" --level O2 "$RANKS"/rank*.h5 --optimizer-grad fp8
printf 'not a dump' >"$T/x.h5"
bad "x.h5" --level O1 "$T/x.h5"

"$FP8KIT" simulate msamp --level O1 "$DUMP" --ranks 8,64 "${SEL[@]}" --csv >"$T/a.csv" || { echo "FAIL: csv run"; fail=1; }
"$FP8KIT" simulate msamp --level O1 "$DUMP" --ranks 8,64 "${SEL[@]}" --csv >"$T/b.csv"
cmp -s "$T/a.csv" "$T/b.csv" || { echo "FAIL: two runs differ"; fail=1; }
"$PY" - "$T/a.csv" <<'PYEOF' || fail=1
import sys
import pandas as pd
d = pd.read_csv(sys.argv[1])
assert list(d.columns) == ["section", "tensor", "step", "ranks", "path", "order", "metric", "value"], d.columns
assert set(d.tensor) == {"model.layers.0.self_attn.k_proj", "model.layers.1.self_attn.k_proj"}, set(d.tensor)
assert set(d.ranks) == {8, 64} and set(d.step) == {0, 100, 299} and set(d.path) == {"ddp", "non-ddp"}
assert set(d.order.dropna()) == {"rank", "ring", "tree"}
PYEOF
"$FP8KIT" simulate msamp --level O2 "$RANKS"/rank*.h5 "${SEL[@]}" --json >"$T/o2.json" || { echo "FAIL: O2 json run"; fail=1; }
"$PY" - "$T/o2.json" <<'PYEOF' || fail=1
import json, sys
j = json.load(open(sys.argv[1]))
rows = [r for r in j["rows"] if r["section"] == "optimizer"]
assert {r["tensor"] for r in rows} == {"model.layers.1.self_attn.k_proj"}
m = {r["metric"]: r["value"] for r in rows}
assert m["steps_applied"] == 2 and 0 < m["m_rel_error"] < 1 and m["update_rel_error"] > 0, m
assert all(r["ranks"] == 4 for r in j["rows"])
PYEOF
# MS-AMP's LBAdamW with FP16 exp_avg (exp_avg_dtype=torch.float16): the report names the dtypes,
# and its first moment is far closer to FP32 than with the default E4M3 exp_avg
"$FP8KIT" simulate msamp --level O2 "$RANKS"/rank*.h5 "${SEL[@]}" --exp-avg-dtype fp16 --json >"$T/o2_fp16.json" ||
    { echo "FAIL: O2 msamp fp16 run"; fail=1; }
"$PY" - "$T/o2.json" "$T/o2_fp16.json" <<'PYEOF' || fail=1
import json, sys
fp8, fp16 = (json.load(open(f)) for f in sys.argv[1:3])
assert fp8["state_dtypes"] == {"exp_avg": "fp8", "exp_avg_sq": "fp16", "master": "fp16"}, fp8["state_dtypes"]
assert fp16["state_dtypes"] == {"exp_avg": "fp16", "exp_avg_sq": "fp16", "master": "fp16"}, fp16["state_dtypes"]
m = lambda j: {r["metric"]: r["value"] for r in j["rows"] if r["section"] == "optimizer"}
assert m(fp16)["m_rel_error"] < m(fp8)["m_rel_error"] / 10, (m(fp16)["m_rel_error"], m(fp8)["m_rel_error"])
PYEOF
# TE FusedAdam: FP16 states are far closer to FP32 than FP8 states on the same dumps
for d in fp8 fp16; do
    "$FP8KIT" simulate msamp --level O2 "$RANKS"/rank*.h5 "${SEL[@]}" --optimizer te-fused-adam \
        --exp-avg-dtype $d --exp-avg-sq-dtype $d --json >"$T/te_$d.json" || { echo "FAIL: TE $d run"; fail=1; }
done
"$PY" - "$T/te_fp8.json" "$T/te_fp16.json" <<'PYEOF' || fail=1
import json, sys
def metrics(f):
    j = json.load(open(f))
    assert j["optimizer"] == "te-fused-adam", j.get("optimizer")
    return {r["metric"]: r["value"] for r in j["rows"] if r["section"] == "optimizer"}, j["state_dtypes"]
m8, d8 = metrics(sys.argv[1])
m16, d16 = metrics(sys.argv[2])
assert d8 == {"exp_avg": "fp8", "exp_avg_sq": "fp8", "master": "fp32"}, d8
assert json.load(open(sys.argv[1]))["te_build"] == "fast-math"
assert m8["steps_applied"] == 2 and m16["steps_applied"] == 2
assert 0 < m16["m_rel_error"] < m8["m_rel_error"] < 1, (m8, m16)
assert 0 < m16["update_rel_error"] < m8["update_rel_error"], (m8, m16)
PYEOF
# O2 end to end: the optimizer fed the FP8 all-reduce drifts further from FP32 than fed the mean
"$FP8KIT" simulate msamp --level O2 "$RANKS"/rank*.h5 "${SEL[@]}" --optimizer-grad fp8-allreduce --json >"$T/o2f.json" \
    || { echo "FAIL: O2 fp8-allreduce run"; fail=1; }
"$PY" - "$T/o2.json" "$T/o2f.json" <<'PYEOF' || fail=1
import json, sys
def m(f):
    j = json.load(open(f))
    return j, {r["metric"]: r["value"] for r in j["rows"] if r["section"] == "optimizer"}
j0, m0 = m(sys.argv[1])
j1, m1 = m(sys.argv[2])
assert j0["optimizer_grad"] == "mean" and j1["optimizer_grad"] == "fp8-allreduce"
assert any("FP8 all-reduce" in n for n in j1["notes"]), j1["notes"]
assert 0 < m0["update_rel_error"] < m1["update_rel_error"], (m0, m1)
PYEOF
# O2 on the bundled single-rank dump (no exp_avg_sq: states from zero, the three dumped gradients in
# order), and the gradient meta's scale carried from step to step (old_scale = the previous scale)
"$FP8KIT" simulate msamp --level O2 "$DUMP" --ranks 8 --tensor '*layers.0.self_attn.k_proj*' --json >"$T/o2one.json" \
    || { echo "FAIL: O2 on the bundled dump"; fail=1; }
"$PY" - "$T/o2one.json" <<'PYEOF' || fail=1
import json, sys
j = json.load(open(sys.argv[1]))
m = {r["metric"]: r["value"] for r in j["rows"] if r["section"] == "optimizer"}
assert m["steps_applied"] == 3 and 0 < m["update_rel_error_step1"] and 0 < m["update_rel_error"], m
assert any("exp_avg_sq not dumped" in n for n in j["notes"]), j["notes"]
for path in ("ddp", "non-ddp"):
    r = {(x["step"], x["metric"]): x["value"] for x in j["rows"]
         if x["section"] == "allreduce" and x["path"] == path and x["order"] in ("", None)}
    assert r[(0, "old_scale")] == 1, path
    assert r[(100, "old_scale")] == r[(0, "scale")] and r[(299, "old_scale")] == r[(100, "scale")], path
PYEOF
"$FP8KIT" simulate msamp --level O1 "$DUMP" --ranks 8 "${SEL[@]}" >"$T/text" || { echo "FAIL: text run"; fail=1; }
grep -q "FP8 all-reduce, 8 ranks, ddp path" "$T/text" || { echo "FAIL: summary header"; fail=1; }
exit $fail
