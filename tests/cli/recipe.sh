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
