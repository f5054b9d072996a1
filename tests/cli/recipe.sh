#!/usr/bin/env bash
# fp8kit recipe show: a preset as a complete recipe file that reads back as the same recipe; a
# recipe file with fields missing names them all at once (issue 20 item 16).
# Usage: bash recipe.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }

$FP8KIT recipe list > "$T/list"; check "recipe list" $?
grep -qx "te-delayed" "$T/list" && grep -qx "mxfp8" "$T/list"; check "presets listed" $?
for p in $(cat "$T/list"); do
    $FP8KIT recipe show "$p" > "$T/$p.json"; rc=$?
    $FP8KIT recipe show "$T/$p.json" > "$T/$p.again.json"
    [ $rc -eq 0 ] && cmp -s "$T/$p.json" "$T/$p.again.json"; check "recipe show $p reads back as the same recipe" $?
done
grep -q '"history_len": 1024' "$T/te-delayed.json"; check "te-delayed: history 1024" $?
# nvfp4: TE's RHT on the column-wise copies of inputs and gradients, not weights (docs/recipes.md).
python3 - "$T/nvfp4.json" "$T/nvfp4-rowwise.json" <<'PY'
import json, sys
nv, rw = (json.load(open(p))["roles"] for p in sys.argv[1:3])
assert [nv[k]["columnwise_rht"] for k in ("input", "weight", "grad")] == [True, False, True], nv
assert not any(rw[k]["columnwise_rht"] for k in ("input", "weight", "grad")), rw
PY
check "recipe show nvfp4: columnwise_rht for input and grad, not weight; nvfp4-rowwise: none" $?
# Per-role rounding (issue 16): nvfp4 and nvfp4-rowwise round gradients stochastically, as TE's
# NVFP4BlockScaling fp4_quant_bwd_grad; the other roles and presets carry no role rounding (the
# recipe-wide policy.rounding applies), so their files are as before.
python3 - "$T" <<'PY'
import json, sys, os
d = sys.argv[1]
for p in ("nvfp4", "nvfp4-rowwise"):
    r = json.load(open(os.path.join(d, p + ".json")))
    assert r["roles"]["grad"]["rounding"] == "stochastic", r["roles"]["grad"]
    assert "rounding" not in r["roles"]["input"] and "rounding" not in r["roles"]["weight"], r["roles"]
    assert r["policy"]["rounding"] == "nearest-even", r["policy"]
for p in os.listdir(d):
    if p.endswith(".json") and not p.startswith("nvfp4") and ".again" not in p:
        r = json.load(open(os.path.join(d, p)))
        assert not any("rounding" in v for v in r["roles"].values()), p
PY
check "recipe show: nvfp4 grad role rounds stochastically, no other role or preset has its own rounding" $?
# A file's role rounding is read back; a bad value names the field and the choices.
python3 - "$T/te-current.json" "$T/sr.json" "$T/badsr.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["roles"]["weight"]["rounding"] = "toward-zero"
json.dump(r, open(sys.argv[2], "w"))
r["roles"]["weight"]["rounding"] = "sideways"
json.dump(r, open(sys.argv[3], "w"))
PY
$FP8KIT recipe show "$T/sr.json" > "$T/sr.out"; rc=$?
[ $rc -eq 0 ] && python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['roles']['weight']['rounding']=='toward-zero' and 'rounding' not in r['roles']['grad']" "$T/sr.out"
check "recipe file with a role rounding reads back ($rc)" $?
$FP8KIT recipe show "$T/badsr.json" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "roles.weight: field 'rounding'" "$T/err" && grep -q "nearest-even" "$T/err"
check "bad role rounding: exit 2 naming the field ($rc): $(cat "$T/err")" $?
# Remove three fields at three depths: all three are named in one message.
grep -v '"history_len"\|"block_rows"\|"overflow"' "$T/te-delayed.json" > "$T/broken.json"
$FP8KIT recipe show "$T/broken.json" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "'history_len'" "$T/err" && grep -q "'roles.input.block_rows'" "$T/err" \
    && grep -q "'roles.grad.block_rows'" "$T/err" && grep -q "'policy.overflow'" "$T/err"
check "every missing field named at once ($rc): $(cat "$T/err")" $?
$FP8KIT inspect "$T/x" --recipe "$T/broken.json" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "missing fields" "$T/err"; check "inspect --recipe FILE: the same message ($rc)" $?
$FP8KIT recipe show no-such > /dev/null 2> "$T/err"; rc=$?
check "unknown preset: exit 2 ($rc)" $(( rc != 2 ))
exit $fail
