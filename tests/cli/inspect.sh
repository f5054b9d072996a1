#!/usr/bin/env bash
# fp8kit inspect as a user runs it: the example dump, output modes, and bad input (exit 1 with the
# good tensors still reported; exit 2 for bad arguments).
set -u
FP8KIT=$1
REPO=$2
DUMP=$REPO/data/example/llama_tiny_dump.h5
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMP_NUM_THREADS=1

COLUMNS=100 "$FP8KIT" inspect "$DUMP" >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 0 ] || fail "example dump: exit $rc: $(cat "$TMP/err")"
grep -q "273 tensors" "$TMP/out" || fail "example dump: tensor count missing"
grep -q "recipe te-current" "$TMP/out" || fail "default recipe not te-current"
[ -s "$TMP/err" ] && fail "stderr not empty when stderr is not a terminal: $(cat "$TMP/err")"
width=$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$TMP/out")
[ "$width" -le 100 ] || fail "terminal output is $width columns wide"

"$FP8KIT" inspect "$DUMP" --json --steps 100 --include '*layers.1.self_attn.q_proj/*' >"$TMP/json" || fail "--json failed"
[ "$(grep -c '"name":' "$TMP/json")" -eq 6 ] || fail "--json: expected 6 tensors"
grep -q '"format": "e5m2"' "$TMP/json" || fail "--json: gradients not e5m2 by default"
grep -q '"recipe_role": "grad"' "$TMP/json" || fail "--json: no grad role"

"$FP8KIT" inspect "$DUMP" --csv --steps 0 --include '*lm_head/wgrad' >"$TMP/csv" || fail "--csv failed"
head -1 "$TMP/csv" | grep -qx "file,name,step,role,dtype,format,stat,value" || fail "--csv header"
grep -q ",step_000000/lm_head/wgrad,0,gradient,f32,e5m2,numel,16384$" "$TMP/csv" || fail "--csv numel row"

"$FP8KIT" inspect "$DUMP" --format e4m3 --json --include '*grad_output' >"$TMP/json2" || fail "--format e4m3"
grep -q '"format": "e5m2"' "$TMP/json2" && fail "--format e4m3 did not override the gradients' format"

# Options before the files: each --include takes one pattern, not the files after it.
"$FP8KIT" inspect --include '*lm_head/weight' --include '*lm_head/wgrad' "$DUMP" --steps 0 --csv >"$TMP/csv2" || fail "--include before FILE"
[ "$(cut -d, -f2 "$TMP/csv2" | sort -u | grep -c step_)" -eq 2 ] || fail "two --include patterns: expected 2 tensors"

# Bad input: the good file is still reported, each failure named on stderr, exit 1.
echo "not a dump" >"$TMP/text.h5"
"$FP8KIT" inspect "$DUMP" "$TMP/missing.h5" "$TMP/text.h5" >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] || fail "bad input: exit $rc, expected 1"
grep -q "273 tensors" "$TMP/out" || fail "bad input: good tensors not reported"
grep -q "missing.h5: cannot open: No such file or directory" "$TMP/err" || fail "missing file not named: $(cat "$TMP/err")"
grep -q "text.h5: neither an HDF5 file" "$TMP/err" || fail "foreign file not named"
"$FP8KIT" inspect "$TMP/missing_*.h5" >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] || fail "unmatched glob: exit $rc"
grep -q "no file matches" "$TMP/err" || fail "unmatched glob not named"

# Bytes from a corrupt file that are not UTF-8 still give valid JSON (replaced), exit 1.
printf '\x09\x00\x00\x00\x00\x00\x00\x00{"a\xff":{}}' >"$TMP/bad.safetensors"
"$FP8KIT" inspect "$TMP/bad.safetensors" --json >"$TMP/bad.json" 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] || fail "non-UTF-8 header: exit $rc $(cat "$TMP/err")"
grep -q '"summary"' "$TMP/bad.json" || fail "non-UTF-8 header: JSON not written"
grep -q "bad.safetensors: not a valid safetensors file: header is not JSON" "$TMP/err" || fail "non-UTF-8 header not named"

# Bad arguments: exit 2 with one line naming the option.
"$FP8KIT" inspect "$DUMP" --steps 5-3 2>"$TMP/err" >/dev/null; rc=$?
[ $rc -eq 2 ] && grep -q "steps" "$TMP/err" || fail "bad --steps: exit $rc $(cat "$TMP/err")"
"$FP8KIT" inspect "$DUMP" --recipe te-delayed 2>"$TMP/err" >/dev/null; rc=$?
[ $rc -eq 2 ] && grep -q "earlier steps" "$TMP/err" || fail "delayed recipe: exit $rc $(cat "$TMP/err")"
"$FP8KIT" inspect "$DUMP" --recipe no-such-recipe 2>"$TMP/err" >/dev/null; rc=$?
[ $rc -eq 2 ] || fail "unknown recipe: exit $rc"
"$FP8KIT" inspect "$DUMP" --format e9m9 2>"$TMP/err" >/dev/null; rc=$?
[ $rc -eq 2 ] && grep -q -- "--format" "$TMP/err" || fail "bad --format: exit $rc"
"$FP8KIT" inspect "$DUMP" --json --csv 2>/dev/null >/dev/null; rc=$?
[ $rc -eq 2 ] || fail "--json --csv: exit $rc"
echo "ok"
