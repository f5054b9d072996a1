#!/usr/bin/env bash
# fp8kit replay and sweep as a user runs them: a hand-worked TE sequence read back bit for bit
# from --csv, the committed real traces and dump, and bad input (exit 2, one line naming file:line).
set -u
FP8KIT=$1
REPO=$2
EX=$REPO/data/example
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMP_NUM_THREADS=1

# TE delayed scaling, L = 2, max, E4M3: step 0 casts with 1; fl32(448/3) = 149.333328 (0x43155555);
# the spike 6 recorded at step 2 sets fl32(448/6) = 74.6666641 (0x42955555) for steps 3 and 4
# (exactly L = 2 steps); step 2 overflows (6 * 149.33 = 896 > 464).
printf 'tensor,step,amax\nblk.input,0,3\nblk.input,1,3\nblk.input,2,6\nblk.input,3,3\nblk.input,4,3\nblk.input,5,3\n' >"$TMP/t.csv"
"$FP8KIT" replay "$TMP/t.csv" --recipe te-delayed --history 2 --algo max --margin 0 --format e4m3 --csv >"$TMP/out" 2>"$TMP/err" \
    || fail "replay --csv: $(cat "$TMP/err")"
cat >"$TMP/want" <<'WANT'
step,tensor,amax,scale,headroom,overflow
0,blk.input,3,1,0.00669642857,0
1,blk.input,3,149.333328,0.999999966,0
2,blk.input,6,149.333328,1.99999993,1
3,blk.input,3,74.6666641,0.499999983,0
4,blk.input,3,74.6666641,0.499999983,0
5,blk.input,3,149.333328,0.999999966,0
WANT
diff "$TMP/want" "$TMP/out" >/dev/null || fail "replay --csv differs: $(diff "$TMP/want" "$TMP/out")"
# The printed scale reads back as the same float32.
python3 - "$TMP/out" <<'PY' || fail "scale does not read back as the float32"
import struct, sys
rows = open(sys.argv[1]).read().split("\n")[1:-1]
bits = [struct.unpack("<I", struct.pack("<f", float(r.split(",")[3])))[0] for r in rows]
assert bits[1] == 0x43155555 and bits[3] == 0x42955555, [hex(b) for b in bits]
PY

# Megatron's defaults (history 1, most_recent) on the same trace: 6 steps, the spike overflows.
"$FP8KIT" replay "$TMP/t.csv" --recipe megatron --format e4m3 >"$TMP/out" || fail "megatron"
grep -Eq "^blk.input +activation +e4m3 +6 +1 " "$TMP/out" || fail "megatron summary: $(cat "$TMP/out")"

# The real traces.
"$FP8KIT" replay "$EX/amax_trace.csv" >"$TMP/out" 2>"$TMP/err" || fail "example trace: $(cat "$TMP/err")"
grep -q "60 tensors" "$TMP/out" || fail "example trace: tensor count"
grep -Eq "^model.layers.0.self_attn.q_proj.grad_output +gradient +e5m2" "$TMP/out" || fail "gradients not E5M2"
"$FP8KIT" replay "$EX/dlfw_inspect.log" --json --tensor '*layers.1.mlp.down_proj*' >"$TMP/json" || fail "log --json"
grep -q '"tensor": "model.layers.1.mlp.down_proj_gradient"' "$TMP/json" || fail "log --json: tensor"
[ "$(grep -c '"tensor":' "$TMP/json")" -eq 1 ] || fail "--tensor did not select one series"
"$FP8KIT" replay "$EX/amax_trace.csv" --recipe te-current --csv --tensor '*q_proj.input' >"$TMP/out" || fail "te-current"
awk -F, 'NR > 1 && $6 != 0 { exit 1 }' "$TMP/out" || fail "current scaling overflowed"

# A dump as a trace: amax per dumped step (steps 0, 100, 299), optimizer state left out.
"$FP8KIT" replay "$EX/llama_tiny_dump.h5" --recipe te-current --csv --tensor 'lm_head.wgrad' >"$TMP/out" 2>"$TMP/err" \
    || fail "replay of a dump: $(cat "$TMP/err")"
[ "$(cut -d, -f1 "$TMP/out" | tr '\n' ' ')" = "step 0 100 299 " ] || fail "dump steps: $(cat "$TMP/out")"
"$FP8KIT" replay "$EX/llama_tiny_dump.h5" >"$TMP/out" || fail "replay of a dump"
grep -q "76 tensors" "$TMP/out" || fail "dump: expected 76 series (60 + 15 wgrad + weight_fp8)"
grep -q "exp_avg" "$TMP/out" && fail "dump: optimizer state replayed"

# Sweep: traces and the dump together.
"$FP8KIT" sweep "$EX/amax_trace.csv" "$EX/llama_tiny_dump.h5" --no-blocks >"$TMP/out" 2>"$TMP/err" \
    || fail "sweep: $(cat "$TMP/err")"
grep -q "^  gradients: history" "$TMP/out" || fail "sweep: no gradient recommendation"
grep -q "dB .* SQNR than TE's default" "$TMP/out" || fail "sweep: no SQNR comparison"
# Recipes are evaluated in parallel: the numbers must not depend on the thread count.
OMP_NUM_THREADS=2 "$FP8KIT" sweep "$EX/amax_trace.csv" "$EX/llama_tiny_dump.h5" --no-blocks >"$TMP/out2" 2>&1 || fail "sweep, 2 threads"
cmp -s "$TMP/out" "$TMP/out2" || fail "sweep differs between 1 and 2 threads"
"$FP8KIT" sweep "$EX/dlfw_inspect.log" --csv >"$TMP/csv" || fail "sweep --csv"
head -1 "$TMP/csv" | grep -q "^scope,name,class,candidate,kind,history,algo,margin,format,grid,blockwise,steps,overflow_steps,first_step_overflows" || fail "sweep --csv header"
[ "$(grep -c '^tensor,' "$TMP/csv")" -eq $((15 * 63)) ] || fail "sweep --csv: expected 15 tensors x 63 recipes"

# Bad input: exit 2 and one line naming file:line.
printf 'step,tensor,amax\n0,a,1\n1,a,1e\n' >"$TMP/bad.csv"
"$FP8KIT" replay "$TMP/bad.csv" >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] || fail "bad value: exit $rc"
[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "bad value: not one line: $(cat "$TMP/err")"
grep -q "$TMP/bad.csv:3: amax '1e' is not a number" "$TMP/err" || fail "bad value message: $(cat "$TMP/err")"
printf 'iteration,amax\n0,1\n' >"$TMP/nostep.csv"
"$FP8KIT" sweep "$TMP/nostep.csv" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] || fail "missing column: exit $rc"
grep -q "nostep.csv:1: the header has no 'step' column" "$TMP/err" || fail "missing column message: $(cat "$TMP/err")"
"$FP8KIT" replay "$TMP/t.csv" --recipe te-current --history 4 >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "not delayed" "$TMP/err" || fail "--history on current scaling: exit $rc $(cat "$TMP/err")"
"$FP8KIT" replay "$TMP/t.csv" --recipe mxfp8 >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "needs the tensor data" "$TMP/err" || fail "block recipe on a trace: exit $rc $(cat "$TMP/err")"
# The recipe's needs are checked before the trace is read: a trace that would fail to read (a
# missing file) reports the recipe, not the file.
"$FP8KIT" replay "$TMP/missing.csv" --recipe mxfp8 >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "needs the tensor data" "$TMP/err" && ! grep -q "missing.csv" "$TMP/err" \
    || fail "block recipe checked before reading: exit $rc $(cat "$TMP/err")"
"$FP8KIT" replay "$TMP/missing.csv" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "missing.csv: cannot open" "$TMP/err" || fail "missing file: exit $rc"
"$FP8KIT" replay "$TMP/t.csv" --tensor 'nothing*' >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] || fail "--tensor matching nothing: exit $rc"
echo "replay.sh: all passed"
