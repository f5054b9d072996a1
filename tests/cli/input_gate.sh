#!/usr/bin/env bash
# The input gate (lib/io, fp8kit/io/gate.hpp; docs/hardening.md, "Reading inputs"), command by
# command:
# 1. A FIFO given as an input is refused without blocking (each run under `timeout`; an open() of a
#    FIFO waits for a writer): validate --output, gemm A, recipe show, inspect --recipe, checkpoint
#    check on a folder holding a FIFO named *.safetensors, and the dump readers (inspect, sweep,
#    replay, calibrate, kv). A device (/dev/zero) is refused too. One message naming the file.
# 2. A 10 MB HDF5 'dtype' attribute (inspect, sweep, replay, validate, calibrate, kv, simulate msamp,
#    watch), a 10 MB 'role' attribute and a 4 MB safetensors dtype string are quoted short (every
#    output line under 2000 bytes).
# 3. A dataset stored outside the file is skipped with a note by every command that reads dumps:
#    inspect, sweep, replay, calibrate, kv (text: "skipped ...", JSON: "skipped").
# 4. A TransformerEngine tensor_dumps/ folder given to inspect is read as the layout docs/dumps.md
#    documents; a folder without one is refused with the globs to use.
# Fixtures: tests/cli/make_gate_fixtures.py (h5py, generated here). Exit 77 without h5py.
# Usage: bash input_gate.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
PY="$REPO/.venv/bin/python"
[ -x "$PY" ] || PY=python3
"$PY" -c "import h5py" 2>/dev/null || { echo "SKIP: no Python with h5py to write the fixtures"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
"$PY" "$REPO/tests/cli/make_gate_fixtures.py" "$T" || { echo "FAIL: fixtures"; exit 1; }
mkfifo "$T/fifo"

# refused NAME PATTERN CMD...: CMD exits nonzero within 20 s (not killed by timeout), and its
# stderr names the refused file with PATTERN (what it is).
refused() {
    local name=$1 pat=$2; shift 2
    timeout 20 "$@" >"$T/out" 2>"$T/err"; local rc=$?
    check "$name: exits nonzero without blocking (rc $rc)" $((rc == 0 || rc == 124 || rc == 137))
    cat "$T/out" "$T/err" | grep -q "$pat"; check "$name: the message says $pat" $?
}
refused "validate --output FIFO" "fifo: a FIFO, not a regular file" \
    "$FP8KIT" validate --to e4m3 --profile torch --input "$T/x.npy" --output "$T/fifo"
refused "validate --input FIFO" "fifo: a FIFO, not a regular file" \
    "$FP8KIT" validate --to e4m3 --profile torch --input "$T/fifo" --dtype f32 --output "$T/x.npy"
refused "gemm FIFO B" "fifo: a FIFO, not a regular file" "$FP8KIT" gemm "$T/fifo" "$T/b.npy" -o "$T/d.npy"
refused "gemm A FIFO" "fifo: a FIFO, not a regular file" "$FP8KIT" gemm "$T/a.npy" "$T/fifo" -o "$T/d.npy"
refused "recipe show FIFO" "fifo: a FIFO, not a regular file" "$FP8KIT" recipe show "$T/fifo"
refused "inspect --recipe FIFO" "fifo: a FIFO, not a regular file" "$FP8KIT" inspect --recipe "$T/fifo" "$T/skip.h5"
refused "recipe show /dev/zero" "zero: a device, not a regular file" "$FP8KIT" recipe show /dev/zero
refused "gemm /dev/zero B" "zero: a device, not a regular file" "$FP8KIT" gemm /dev/zero "$T/b.npy" -o "$T/d.npy"
CK=$REPO/data/checkpoints/ct_fp8
mkdir "$T/ckpt" && cp "$CK/config.json" "$T/ckpt/" && mkfifo "$T/ckpt/model.safetensors"
refused "checkpoint check: a FIFO named *.safetensors" "model.safetensors: a FIFO, not a regular file" \
    "$FP8KIT" checkpoint check "$T/ckpt"
mkdir "$T/ckpt2" && mkfifo "$T/ckpt2/config.json" && cp "$CK/model.safetensors" "$T/ckpt2/"
refused "checkpoint check: a FIFO config.json" "config.json: a FIFO, not a regular file" \
    "$FP8KIT" checkpoint check "$T/ckpt2"
refused "inspect FIFO" "fifo: a FIFO, not a regular file" "$FP8KIT" inspect "$T/fifo"
refused "sweep FIFO" "fifo: a FIFO, not a regular file" "$FP8KIT" sweep "$T/fifo"
refused "replay FIFO" "fifo: a FIFO, not a regular file" "$FP8KIT" replay "$T/fifo"
refused "calibrate FIFO" "fifo: a FIFO, not a regular file" "$FP8KIT" calibrate "$T/fifo" --method max
refused "kv FIFO" "fifo: a FIFO, not a regular file" "$FP8KIT" kv "$T/fifo"
refused "simulate msamp FIFO" "fifo: a FIFO, not a regular file" "$FP8KIT" simulate msamp "$T/fifo" --level O1 --ranks 8
refused "watch FIFO" "fifo: a FIFO, not a regular file" "$FP8KIT" watch "$T/fifo"

# 2. Big strings quoted short: no line of any output over 2000 bytes, and the cut is said.
short() {
    local name=$1; shift
    timeout 60 "$@" >"$T/out" 2>"$T/err"; local rc=$?
    check "$name: finished (rc $rc)" $((rc == 124 || rc == 137 || rc > 2))
    local longest
    longest=$(cat "$T/out" "$T/err" | awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }')
    check "$name: longest output line $longest bytes (< 2000)" $((longest >= 2000))
    cat "$T/out" "$T/err" | grep -q "bytes)"; check "$name: the quoted string says it was cut" $?
}
short "inspect: 10 MB dtype and role attributes" "$FP8KIT" inspect "$T/bigattr.h5"
short "inspect --json: 10 MB dtype and role attributes" "$FP8KIT" inspect --json "$T/bigattr.h5"
grep -q "attribute role='rrrr.*(10485760 bytes)" "$T/out"; check "inspect --json: the role note quoted" $?
short "sweep: 10 MB dtype attribute" "$FP8KIT" sweep "$T/bigattr.h5"
grep -q "unsupported dtype 'eeee.*(10485760 bytes)" "$T/out" "$T/err"; check "sweep: the dtype quoted" $?
short "replay: 10 MB dtype attribute" "$FP8KIT" replay "$T/bigattr.h5"
short "inspect: 4 MB safetensors dtype" "$FP8KIT" inspect "$T/big.safetensors"
grep -q "unsupported dtype 'FFFF.*(4194304 bytes)" "$T/out" "$T/err"; check "safetensors: the dtype quoted" $?

short "validate: 10 MB dtype attribute" "$FP8KIT" validate --to e4m3 --profile torch --input "$T/x.npy" --output "$T/bigattr.h5:/step_0/big_dtype"
short "calibrate: 10 MB dtype attribute" "$FP8KIT" calibrate "$T/bigattr.h5" --method modelopt_max
short "kv: 10 MB dtype attribute" "$FP8KIT" kv "$T/bigattr.h5"
short "simulate msamp: 10 MB dtype attribute" "$FP8KIT" simulate msamp "$T/bigattr.h5" --level O1 --ranks 8
grep -q "unsupported dtype 'eeee.*(10485760 bytes)" "$T/err"; check "simulate msamp: the dtype quoted" $?
short "watch: 10 MB dtype and role attributes" "$FP8KIT" watch "$T/bigattr.h5"
grep -q "unsupported dtype 'eeee.*(10485760 bytes)" "$T/err"; check "watch: the dtype quoted" $?
mkdir "$T/ckpt3" && cp "$CK/config.json" "$T/ckpt3/" && cp "$T/big.safetensors" "$T/ckpt3/model.safetensors"
short "checkpoint check: 4 MB safetensors dtype" "$FP8KIT" checkpoint check "$T/ckpt3"

# 3. Skipped datasets noted by every command that reads dumps (text and JSON).
noted() {
    local name=$1; shift
    "$@" >"$T/out" 2>"$T/err"; local rc=$?
    check "$name: exit 0 (rc $rc)" $rc
    grep -q "skipped.*outside.weight: raw data stored outside the file" "$T/out" "$T/err"; check "$name: notes the skipped dataset" $?
}
noted_json() {
    local name=$1; shift
    "$@" >"$T/out.json" 2>"$T/err"; local rc=$?
    check "$name: exit 0 (rc $rc)" $rc
    "$PY" - "$T/out.json" <<'PYEOF'; check "$name: JSON 'skipped' names the dataset" $?
import json, sys
j = json.load(open(sys.argv[1]))
# Every report's skipped items are objects (docs/schemas/README.md): file, name, message.
assert all(isinstance(s, dict) and set(s) == {"file", "name", "message"} for s in j["skipped"]), j.get("skipped")
assert any(s["name"].endswith("outside.weight") and s["message"].startswith("raw data stored outside the file")
           for s in j["skipped"]), j.get("skipped")
PYEOF
}
noted "inspect" "$FP8KIT" inspect "$T/skip.h5"
noted_json "inspect --json" "$FP8KIT" inspect "$T/skip.h5" --json
noted_json "watch --json" "$FP8KIT" watch "$T/skip.h5" --json
noted "sweep" "$FP8KIT" sweep "$T/skip.h5" --no-blocks
noted_json "sweep --json" "$FP8KIT" sweep "$T/skip.h5" --no-blocks --json
noted "sweep --csv" "$FP8KIT" sweep "$T/skip.h5" --no-blocks --csv
noted "replay" "$FP8KIT" replay "$T/skip.h5"
noted_json "replay --json" "$FP8KIT" replay "$T/skip.h5" --json
noted "calibrate" "$FP8KIT" calibrate "$T/skip.h5" --method modelopt_max
noted_json "calibrate --json" "$FP8KIT" calibrate "$T/skip.h5" --method modelopt_max --json
noted "kv" "$FP8KIT" kv "$T/skip.h5" --no-attention --format e4m3 --policy tensor
noted_json "kv --json" "$FP8KIT" kv "$T/skip.h5" --no-attention --format e4m3 --policy tensor --json

# 4. Folders: TE's tensor_dumps/ read as its documented layout; a folder without one refused.
D=$REPO/data/te/dumps
for dir in "$D/tensor_dumps" "$D/tensor_dumps/" "$D"; do
    out=$("$FP8KIT" inspect --wide "$dir" 2>&1); rc=$?
    check "inspect $dir: exit 0 (rc $rc)" $rc
    echo "$out" | grep -q "8 tensors, 921 elements, from 5 file(s)"; check "inspect $dir: the 5 files of both layouts" $?
done
mkdir "$T/empty"
out=$("$FP8KIT" inspect "$T/empty" 2>&1); rc=$?
check "inspect on a folder without dumps: exit nonzero" $((rc == 0))
echo "$out" | grep -q "empty/rank_\*/\*.pt' '.*empty/rank_\*/iter_\*/\*.pt'"; check "the message names the globs to use" $?
"$FP8KIT" sweep "$D/tensor_dumps" --no-blocks --json >"$T/te.json" 2>"$T/err"; rc=$?
check "sweep on a tensor_dumps folder: exit 0 or 1 (rc $rc)" $((rc > 1))
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["tensors"], j' "$T/te.json"; check "sweep on a tensor_dumps folder: its tensors swept" $?
out=$("$FP8KIT" sweep "$T/empty" 2>&1); rc=$?
check "sweep on a folder without dumps: exit nonzero" $((rc == 0))
echo "$out" | grep -q "empty/rank_\*/\*.pt'"; check "sweep: the message names the globs to use" $?

# 5. Only the named files are opened (strace), by the commands that read dumps, arrays and folders and
#    that tests/cli/read_only_named.sh does not trace: calibrate, kv, gemm, checkpoint check, watch,
#    inspect on a folder (skip.h5's outside.weight has its bytes in other/bytes.bin: never opened).
if command -v strace >/dev/null; then
    # only NAME ALLOWED CMD...: CMD opens no path outside the system's folders other than those
    # matching the extended regular expression ALLOWED.
    only() {
        local name=$1 allowed=$2; shift 2
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
            strace -f -qq -e trace=open,openat -o "$T/trace" timeout 60 "$@" >"$T/out" 2>"$T/err"; local rc=$?
        check "$name: finished (rc $rc)" $((rc == 124 || rc > 2))
        local bad
        bad=$(grep -o 'open[a-z]*([^"]*"[^"]*"' "$T/trace" | sed 's/.*"\(.*\)"/\1/' |
            grep -Ev '^(/lib|/usr/lib|/usr/local/lib|/etc/ld\.so|/proc/|/sys/|/dev/null$|/usr/share/locale|/usr/lib/locale)' |
            grep -Ev '\.so(\.[0-9]+)*$' | grep -Ev "$allowed" | sort -u)
        check "$name: opens only the named files${bad:+ (also opened: $(echo $bad))}" "$([ -z "$bad" ]; echo $?)"
    }
    only "calibrate" "^$T/skip.h5\$" "$FP8KIT" calibrate "$T/skip.h5" --method modelopt_max
    only "kv" "^$T/skip.h5\$" "$FP8KIT" kv "$T/skip.h5" --no-attention
    only "gemm" "^$T/((a|b|d)\.npy|\.d\.npy\.[A-Za-z0-9]+\.partial|)\$" "$FP8KIT" gemm "$T/a.npy" "$T/b.npy" -o "$T/d.npy"
    C=$REPO/data/checkpoints/ct_fp8
    only "checkpoint check" "^$C(/|\$)" "$FP8KIT" checkpoint check "$C"
    only "watch" "^$REPO/data/example/amax_trace.csv\$" "$FP8KIT" watch "$REPO/data/example/amax_trace.csv"
    only "inspect a tensor_dumps folder" "^$REPO/data/te/dumps/tensor_dumps(/|\$)" "$FP8KIT" inspect "$REPO/data/te/dumps/tensor_dumps"
else
    echo "skip: strace is not installed: the 'only the named files' checks did not run"
fi

exit $fail
