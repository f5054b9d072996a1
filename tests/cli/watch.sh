#!/usr/bin/env bash
# fp8kit watch (issue 27; docs/early-warning.md): planted signatures reach precision and recall
# >= 0.9 per signal (scripts/fixtures/plant_signatures.py), every warning on the bundled real run is
# supported by the data (tests/cli/watch_check.py recomputes its evidence), outputs, bad input.
# Usage: bash watch.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
PY=$REPO/.venv/bin/python
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
"$PY" -c "import h5py, ml_dtypes, numpy" 2>/dev/null || { echo "FAIL: h5py, ml_dtypes, numpy (requirements.txt) are needed"; exit 1; }

# 1. Planted signatures.
mkdir "$T/cases"
"$PY" "$REPO/scripts/fixtures/plant_signatures.py" plant "$T/cases" > "$T/plant.out"; check "plant: $(cat "$T/plant.out")" $?
$FP8KIT watch --json "$T"/cases/*.csv "$T"/cases/*.h5 > "$T/planted.json"; check "watch over the planted cases" $?
$FP8KIT watch --json "$T"/cases/clean/*.csv > "$T/clean.json"; check "watch over the cases before planting" $?
"$PY" "$REPO/scripts/fixtures/plant_signatures.py" score "$T/cases" "$T/planted.json" "$T/clean.json" > "$T/score.out"; rc=$?
cat "$T/score.out"
check "precision and recall >= 0.9 per signal" $rc
"$PY" "$REPO/tests/cli/watch_check.py" "$T/planted.json"; check "every warning on the planted cases confirmed from their files" $?

# 2. The bundled real run: every warning's evidence recomputed from the data.
D=$REPO/data/example
$FP8KIT watch --json "$D/amax_trace.csv" "$D/llama_tiny_dump.h5" > "$T/real.json"; check "watch the real run" $?
"$PY" "$REPO/tests/cli/watch_check.py" "$T/real.json"; check "no unsupported warning on the real run" $?
# Warnings a person reads: overflows of one cause (te-delayed, margin 0) are one top-level group
# listing every tensor that overflows after warm-up; at most 5 top-level warnings in all.
"$PY" - "$T/real.json" <<'PYEOF'; check "the real run: at most 5 top-level warnings, one overflow group of every late overflow" $?
import json, sys
w = json.load(open(sys.argv[1]))["warnings"]
top = [x for x in w if x["level"] == "warning"]
groups = [x for x in top if x["signal"] == "overflow-group"]
grouped = {x["tensor"] for x in w if x["signal"] == "overflow" and x["note"].startswith("grouped:")}
late = {x["tensor"] for x in w if x["signal"] == "overflow" and x["numbers"]["after_warmup"] > 0 and x["file"].endswith(".csv")}
print(len(top), "top-level:", sorted((x["signal"], x["tensor"]) for x in top))
assert len(top) <= 5, len(top)
assert len(groups) == 1 and {m["tensor"] for m in groups[0]["numbers"]["members"]} == grouped == late and len(late) >= 2
assert not [x for x in top if x["signal"] == "overflow"]
PYEOF

# A transformers checkpoint (no steps): shape, gradient and norm-weight signals only; its norm
# weights are at initialisation (all ones), which MXFP8 casts exactly: bias 0, no warning.
$FP8KIT watch --json "$REPO/data/checkpoints/original/model.safetensors" > "$T/ckpt.json"; check "watch a checkpoint" $?
"$PY" - "$T/ckpt.json" <<'PYEOF'; check "checkpoint: 3 norm weights with bias 0, no warning" $?
import json, sys
r = json.load(open(sys.argv[1]))
n = r["norm_weights"]
sys.exit(0 if len(n) == 3 and all(x["bias"] == 0 for x in n) and not r["warnings"] and r["tensors"] == [] else 1)
PYEOF

# 3. Outputs: text, CSV, thread-count invariance.
$FP8KIT watch "$D/amax_trace.csv" --top 3 > "$T/text"; check "text" $?
grep -q "evidence:" "$T/text" && grep -q "resembles: " "$T/text" && grep -q "change: " "$T/text"; check "text names evidence, case, change" $?
$FP8KIT watch "$D/llama_tiny_dump.h5" --top 1 > "$T/dtext"; check "text of a dump" $?
grep -q "^BF16 layers under nvfp4 .*step 299): 3 of 14 linear layers, the last: step_000299/model.layers.1.mlp.gate_proj" "$T/dtext"
check "text lists the BF16 layers per recipe" $?
$FP8KIT watch --csv "$D/amax_trace.csv" > "$T/csv"; check "csv" $?
head -1 "$T/csv" | grep -qx "signal,severity,file,tensor,step,step_end,evidence,resembles,advice,level,note"; check "csv header" $?
# The overflow group in the text (one line per member tensor) and in the CSV as pandas reads it
# (the group's row, and each member's own row as info).
[ "$(grep -c '^    model\.layers\..* (e[45]m[23], [0-9]* of [0-9]* after warm-up): ' "$T/text")" -ge 2 ]; check "text: the overflow group, one line per tensor" $?
"$PY" - "$T/csv" "$T/real.json" <<'PYEOF'; check "csv read by pandas: the group and its members' rows" $?
import json, sys
import pandas as pd
d = pd.read_csv(sys.argv[1])
g = d[d.signal == "overflow-group"]
members = [m["tensor"] for x in json.load(open(sys.argv[2]))["warnings"] if x["signal"] == "overflow-group" for m in x["numbers"]["members"]]
own = d[(d.signal == "overflow") & d.note.fillna("").str.startswith("grouped:")]
assert len(g) == 1 and g.level.iloc[0] == "warning" and sorted(own.tensor) == sorted(members), (len(g), len(own))
assert all(t in g.evidence.iloc[0] for t in members)
PYEOF
$FP8KIT watch --json --threads 1 "$D/amax_trace.csv" > "$T/t1" && $FP8KIT watch --json --threads 2 "$D/amax_trace.csv" > "$T/t2"
cmp -s "$T/t1" "$T/t2"; check "same report for 1 and 2 threads" $?

# replay --warn: the same trend warnings beside the replay (same recipe).
$FP8KIT replay --warn --json "$D/amax_trace.csv" > "$T/rw.json"; check "replay --warn --json" $?
"$PY" - "$T/rw.json" "$T/real.json" <<'PYEOF'; check "replay --warn gives watch's trend warnings for the trace" $?
import json, sys
a = json.load(open(sys.argv[1]))["warnings"]
b = [w for w in json.load(open(sys.argv[2]))["warnings"] if w["file"].endswith("amax_trace.csv")]
key = lambda w: (w["signal"], w["tensor"], w["step"], w["evidence"])
sys.exit(0 if a and sorted(map(key, a)) == sorted(map(key, b)) else 1)
PYEOF

# 4. Bad input: one message, exit 2.
bad() {
    local what=$1; shift
    "$FP8KIT" watch "$@" > "$T/out" 2> "$T/err"; local rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && [ ! -s "$T/out" ]; check "$what: exit 2 ($rc) $(cat "$T/err")" $?
}
bad "missing file" "$T/nope.csv"
bad "odd window" --window 7 "$D/amax_trace.csv"
bad "spike k <= 1" --spike-k 1 "$D/amax_trace.csv"
bad "current-scaling forecast recipe" --recipe te-current "$D/amax_trace.csv"
bad "csv and json" --csv --json "$D/amax_trace.csv"
bad "unknown block recipe" --block-recipe nosuch "$D/amax_trace.csv"
grep -q -- "--block-recipe" "$T/err"; check "the message names --block-recipe" $?
bad "a delayed recipe for the wgrad noise" --grad-recipes te-current,te-delayed "$D/llama_tiny_dump.h5"
grep -q -- "grad_recipes\|--grad-recipes" "$T/err"; check "the message names the gradient recipes" $?
bad "unknown norm recipe" --norm-recipe nosuch "$D/amax_trace.csv"
grep -q -- "--norm-recipe" "$T/err"; check "the message names --norm-recipe" $?
bad "bf16 fraction past 1" --bf16-fraction 2 "$D/amax_trace.csv"
printf 'step,tensor,amax\n5,a,1\n5,a,2\n' > "$T/twice.csv"
bad "a step given twice" "$T/twice.csv"
# sweep --warn: the same warnings as watch on the same inputs (issue 27 item 1: trends in sweep too),
# in --json and as text; refused with --csv.
$FP8KIT sweep --warn --json -q --no-blocks "$D/amax_trace.csv" "$D/llama_tiny_dump.h5" > "$T/sw.json"; check "sweep --warn --json" $?
$FP8KIT watch --json "$D/amax_trace.csv" "$D/llama_tiny_dump.h5" > "$T/wa.json"; check "watch --json, the same inputs" $?
"$PY" - "$T/sw.json" "$T/wa.json" <<'PYEOF'
import json, sys
sw, wa = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda w: json.dumps(w, sort_keys=True)
assert len(wa["warnings"]) > 0, "the bundled run has warnings"
assert [key(w) for w in sw["warnings"]] == [key(w) for w in wa["warnings"]], (len(sw["warnings"]), len(wa["warnings"]))
assert "classes" in sw and "tensors" in sw
PYEOF
check "sweep's warnings equal watch's" $?
$FP8KIT sweep --warn -q "$D/amax_trace.csv" > "$T/sw.txt"; check "sweep --warn (text)" $?
grep -q "early warning(s)" "$T/sw.txt"; check "the text report lists the warnings" $?
$FP8KIT sweep --warn --csv "$D/amax_trace.csv" > /dev/null 2> "$T/err"; [ $? -eq 2 ] && grep -q -- "--warn and --csv" "$T/err"; check "sweep --warn --csv: exit 2 naming both" $?

# 4. The run-level verdict from a gradient-norm file (docs/early-warning.md, "The divergence benchmark").
B=$REPO/data/divergence/bench
$FP8KIT watch --json "$D/amax_trace.csv" --grad-norm "$B/quant_hi/mx-ocp/s3/quant/loss.csv" > "$T/gn.json"
check "watch --grad-norm (a run that diverged at step 141)" $?
"$PY" - "$T/gn.json" <<'PYEOF'
import json, sys
w = [x for x in json.load(open(sys.argv[1]))["warnings"] if x["signal"] == "grad-norm-growth"]
assert len(w) == 1 and w[0]["level"] == "warning" and 20 <= w[0]["step"] <= 121, w
PYEOF
check "one grad-norm-growth warning, at least 20 steps before the divergence" $?
$FP8KIT watch --json "$D/amax_trace.csv" --grad-norm "$B/bf16_hi/bf16/s3/bf16/loss.csv" > "$T/gn0.json"
"$PY" -c "import json,sys; assert not [x for x in json.load(open(sys.argv[1]))['warnings'] if x['signal'] == 'grad-norm-growth']" "$T/gn0.json"
check "no grad-norm-growth warning on its BF16 control" $?
printf 'step,loss\n0,1\n' > "$T/nogn.csv"
$FP8KIT watch "$D/amax_trace.csv" --grad-norm "$T/nogn.csv" > /dev/null 2> "$T/err"; rc=$?
[ $rc -ne 0 ] && grep -q "nogn.csv" "$T/err" && grep -q "grad_norm" "$T/err"; check "a file without a grad_norm column: nonzero exit naming it" $?
exit $fail
