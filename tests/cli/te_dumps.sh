#!/usr/bin/env bash
# inspect reads TransformerEngine DumpTensors output (issue 23): data/te/ holds files written by
# real torch.save (scripts/fixtures/make_te_fixtures.py, torch 2.11), in both path layouts, with the
# quantized entry pickled under TE's reconstructor names. inspect lists both entries and compares
# TE's codes with the reference (one planted mismatch). Hostile pickles are crafted here with
# Python's stdlib (pickle opcodes written by hand, never loaded): inspect must refuse each with
# one line naming the file and the global, exit nonzero, and run nothing (a marker file that the
# payload would create must not appear).
# Usage: bash te_dumps.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
PY=$REPO/.venv/bin/python
[ -x "$PY" ] || PY=python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
D=$REPO/data/te/dumps/tensor_dumps

out=$("$FP8KIT" inspect --wide "$D"/rank_*/*.pt "$D"/rank_*/iter_*/*.pt 2>&1); rc=$?
check "inspect of both layouts exits 0 (got $rc)" $((rc != 0))
echo "$out" | grep -q "8 tensors, 921 elements, from 5 file(s)"; check "8 tensors from 5 files" $?
echo "$out" | grep -Eq "^  quantized +10\* weight\* e4m3"; check "quantized entry listed as e4m3 codes" $?
echo "$out" | grep -Eq "^  high_precision +20\* grad\* +bf16"; check "old layout: step 20 from iter_000020/" $?
echo "$out" | grep -q "layers_0_fc1_activation (.*): e4m3, scale_inv 0.03125: bit-exact, 128 codes"; check "activation codes bit-exact" $?
echo "$out" | grep -q "layers_0_fc1_weight (.*): e4m3, .*: 1 of 128 codes differ (direction 1); first at \[0, 5\]"; check "planted mismatch found at [0, 5]" $?
json=$("$FP8KIT" inspect --json "$D"/rank_0/*.pt 2>/dev/null)
echo "$json" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); t=d["te_quantized"]; assert [c["mismatches"] for c in t]==[0,1], t' ; check "JSON te_quantized mismatches [0, 1]" $?

# Hostile pickles inside a valid torch.save zip layout (entries STORED, one archive folder).
"$PY" - "$T" <<'PYEOF' || { echo "FAIL: could not write the hostile files"; exit 1; }
import sys, zipfile
t = sys.argv[1]
marker = t + "/ran"
def write(name, pkl, entries=()):
    with zipfile.ZipFile(f"{t}/{name}.pt", "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{name}/data.pkl", pkl)
        z.writestr(f"{name}/byteorder", "little")
        for n, b in entries:
            z.writestr(n, b)
cmd = f"touch {marker}".encode()
# GLOBAL os system; REDUCE with ("touch marker",)
write("os_system", b"\x80\x02cos\nsystem\nX" + len(cmd).to_bytes(4, "little") + cmd + b"\x85R.")
write("builtins_eval", b"\x80\x02cbuiltins\neval\nX" + len(cmd).to_bytes(4, "little") + cmd + b"\x85R.")
# REDUCE of an allowed, non-callable global (a dtype)
write("reduce_dtype", b"\x80\x02ctorch\nfloat32\n)R.")
# an entry escaping the archive folder
write("escape", b"\x80\x02}.", [("escape/../../x", b"evil")])
PYEOF
for f in os_system builtins_eval reduce_dtype escape; do
  err=$("$FP8KIT" inspect "$T/$f.pt" 2>&1 >/dev/null); rc=$?
  check "$f: refused, exit nonzero (got $rc)" $((rc == 0))
  lines=$(echo "$err" | grep -c "fp8kit: error: .*$f.pt")
  check "$f: one error line naming the file ($lines)" $((lines != 1))
done
"$FP8KIT" inspect "$T/os_system.pt" 2>&1 | grep -q "refused global os.system"; check "os.system named" $?
"$FP8KIT" inspect "$T/builtins_eval.pt" 2>&1 | grep -q "refused global builtins.eval"; check "builtins.eval named" $?
"$FP8KIT" inspect "$T/reduce_dtype.pt" 2>&1 | grep -q "REDUCE of torch.float32: refused"; check "REDUCE of a non-callable named" $?
"$FP8KIT" inspect "$T/escape.pt" 2>&1 | grep -q "escapes the archive's folder"; check "escaping entry named" $?
[ ! -e "$T/ran" ]; check "nothing ran" $?
head -c 1500 "$D/rank_0/layers_0_fc1_activation_iter_000010.pt" > "$T/trunc.pt"
"$FP8KIT" inspect "$T/trunc.pt" 2>&1 | grep -q "trunc.pt: .*truncated or not a zip archive"; check "truncated archive named" $?
exit $fail
