#!/usr/bin/env bash
# Issue 19: `mpirun -n P fp8kit sweep` and `mpirun -n P fp8kit validate` on one node, P = RANKS,
# default threads per rank (cores / ranks on the node), inside one time budget (BUDGET seconds,
# data included: a run is only started while the time left allows it, and each has a timeout).
#  - sweep: FILES dump files of GIB GiB each made with scripts/bench/make_big_dump.py (KIND), the
#    histogram passes only (--no-blocks) over all of them; then with the block presets over the
#    first file alone (BLOCK_RANKS), which costs about 3 CPU-s per 16 M-element tensor.
#  - sweep over a trace alone: TRACE_SERIES series (inputs, weights, gradients) x TRACE_STEPS
#    steps of random amax (the replay of 74 recipes per series, split by groups of 64 series).
#  - validate: an input .npy of VAL_GIB GiB float32 and its E4M3 codes (ml_dtypes' codes of one
#    16 M-element tile, repeated: exact codes, so every element is compared and matches).
# For each run: wall time of the whole mpirun, GB/s of tensor data (sweep: file bytes; validate:
# input + codes bytes), speed-up against P = 1, that rate's share of `cat`'s (the page cache's
# read rate) and a byte compare of the --json report with P = 1's. Everything also goes to
# $OUT/results.md.
# Usage: OUT=/tmp/b bash scripts/bench/bench_mpi_sweep_validate.sh FP8KIT
set -uo pipefail
FP8KIT=$1
PY=${PY:-python3}
OUT=${OUT:-/tmp/bench_mpi_sv} KIND=${KIND:-gzip} FILES=${FILES:-8} GIB=${GIB:-1} RANKS=${RANKS:-"1 2 4 8 16"}
BLOCK_RANKS=${BLOCK_RANKS:-"1 2 4 8 16"} TRACE_SERIES=${TRACE_SERIES:-20000} TRACE_STEPS=${TRACE_STEPS:-200} VAL_GIB=${VAL_GIB:-8} BUDGET=${BUDGET:-450} RUN_TIMEOUT=${RUN_TIMEOUT:-120}
DATA=${DATA:-$OUT/data}
START=$(date +%s)
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT" "$DATA"
here=$(cd "$(dirname "$0")" && pwd)
log() { echo "$@" | tee -a "$OUT/results.md"; }
now() { date +%s.%N; }
left() { echo $((BUDGET - ($(date +%s) - START))); }
# The data: dump files in parallel, the validate arrays beside them.
files=()
for k in $(seq 0 $((FILES - 1))); do
    f=$DATA/${KIND}_steps_$k.h5
    files+=("$f")
    # Steps numbered on from the files before (sweep refuses a step dumped twice).
    [ -s "$f" ] || "$PY" "$here/make_big_dump.py" "$f" "$GIB" "$KIND" $((k * 1000)) >/dev/null &
done
if [ ! -s "$DATA/q.npy" ]; then
"$PY" - "$DATA" "$VAL_GIB" <<'PYEOF' &
import sys, numpy as np
try:
    import ml_dtypes
    e4m3 = ml_dtypes.float8_e4m3fn
except ImportError:  # a host with torch but no ml_dtypes: torch's cast (the same codes)
    e4m3 = None
d, gib = sys.argv[1], float(sys.argv[2])
tile = 1 << 24
n = int(gib * (1 << 30) / 4) // tile * tile
rng = np.random.default_rng(19)
x = (rng.standard_normal(tile, dtype=np.float32) * np.exp(rng.standard_normal(tile, dtype=np.float32) * 2)).astype(np.float32)
if e4m3 is not None:
    q = x.astype(e4m3).view(np.uint8)
else:
    import torch
    q = torch.from_numpy(x).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
X = np.lib.format.open_memmap(f"{d}/x.npy", mode="w+", dtype=np.float32, shape=(n // 4096, 4096))
Q = np.lib.format.open_memmap(f"{d}/q.npy.tmp", mode="w+", dtype=np.uint8, shape=(n // 4096, 4096))
for k in range(n // tile):
    X.reshape(-1)[k * tile:(k + 1) * tile] = x
    Q.reshape(-1)[k * tile:(k + 1) * tile] = q
X.flush(); Q.flush(); del X, Q
import os; os.replace(f"{d}/q.npy.tmp", f"{d}/q.npy")
PYEOF
fi
if [ ! -s "$DATA/trace.csv" ]; then
"$PY" - "$DATA/trace.csv" "$TRACE_SERIES" "$TRACE_STEPS" <<'PYEOF' &
import sys, numpy as np
out, S, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(5)
kinds = ("input", "weight", "grad_output")
names = [f"layers.{i // 3}.mlp.fc.{kinds[i % 3]}" for i in range(S)]
base = np.array([(4.0, 0.5, 1e-3)[i % 3] for i in range(S)])
with open(out + ".tmp", "w") as f:
    f.write("step,tensor,amax\n")
    for t in range(T):
        a = base * np.exp(rng.standard_normal(S) * 0.5) * np.where(rng.random(S) < 0.01, 40.0, 1.0)
        f.write("".join(f"{t},{n},{x:.6g}\n" for n, x in zip(names, a)))
import os; os.replace(out + ".tmp", out)
PYEOF
fi
wait
for f in "${files[@]}" "$DATA/x.npy" "$DATA/q.npy" "$DATA/trace.csv"; do
    [ -s "$f" ] || { log "FAIL: $f was not made ($PY needs h5py, numpy and ml_dtypes or torch)"; exit 1; }
done
dump_bytes=$(( $(du -cb "${files[@]}" | tail -1 | cut -f1) ))
val_bytes=$(( $(du -cb "$DATA/x.npy" "$DATA/q.npy" | tail -1 | cut -f1) ))
t0=$(now); cat "${files[@]}" "$DATA/x.npy" "$DATA/q.npy" >/dev/null; t1=$(now)
cat_rate=$(echo "$dump_bytes $val_bytes $t0 $t1" | awk '{printf "%.2f", ($1 + $2) / ($4 - $3) / 1e9}')
log "host: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; fp8kit $("$FP8KIT" --version 2>/dev/null | head -1)"
log "trace: $TRACE_SERIES series x $TRACE_STEPS steps, $(stat -c %s "$DATA/trace.csv" | awk '{printf "%.0f", $1 / 1e6}') MB"
log "data made in $(( $(date +%s) - START )) s: dump $FILES x $GIB GiB $KIND ($(echo "$dump_bytes" | awk '{printf "%.2f", $1 / 2^30}') GiB on disk); validate $(echo "$val_bytes" | awk '{printf "%.2f", $1 / 2^30}') GiB (x.npy + q.npy); cat: $cat_rate GB/s"
# bench LABEL BYTES RANKS -- ARGS...: one table, P = 1 first (its report is the reference).
bench() {
    local label=$1 bytes=$2 ranks=$3
    shift 4
    log ""
    log "### $label: fp8kit $*"
    log "| ranks | threads/rank | wall s | GB/s | speed-up | share of cat | report = P=1's |"
    log "|---|---|---|---|---|---|---|"
    local base="" p s rc same
    for p in $ranks; do
        if [ "$(left)" -lt 15 ]; then log "| $p | - | not run: the time budget is spent | | | | |"; continue; fi
        local limit=$RUN_TIMEOUT
        [ "$(left)" -lt "$limit" ] && limit=$(left)
        t0=$(now)
        timeout "$limit" mpirun --oversubscribe --bind-to none -n "$p" "$FP8KIT" "$@" >"$OUT/$label.$p.out" 2>"$OUT/$label.$p.err"
        rc=$?
        t1=$(now)
        s=$(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}')
        if [ $rc = 124 ]; then log "| $p | - | > $s (timed out) | | | | |"; continue; fi
        [ -z "$base" ] && base=$s
        [ -f "$OUT/$label.ref" ] || cp "$OUT/$label.$p.out" "$OUT/$label.ref"
        same=$(cmp -s "$OUT/$label.ref" "$OUT/$label.$p.out" && echo yes || echo NO)
        log "| $p | $(( $(nproc) / p > 0 ? $(nproc) / p : 1 )) | $s | $(echo "$bytes $s" | awk '{printf "%.2f", $1 / $2 / 1e9}') | $(echo "$base $s" | awk '{printf "%.2f", $1 / $2}') | $(echo "$bytes $s $cat_rate" | awk '{printf "%.0f%%", 100 * $1 / $2 / 1e9 / $3}') | $same (exit $rc) |"
    done
}
first_bytes=$(stat -c %s "${files[0]}")
bench sweep-passes "$dump_bytes" "$RANKS" -- sweep --json --no-blocks "${files[@]}"
bench validate "$val_bytes" "$RANKS" -- validate --json --profile ml_dtypes --to e4m3 --input "$DATA/x.npy" --output "$DATA/q.npy"
bench sweep-trace "$(stat -c %s "$DATA/trace.csv")" "$RANKS" -- sweep --json "$DATA/trace.csv"
bench sweep-blocks "$first_bytes" "$BLOCK_RANKS" -- sweep --json "${files[0]}"
log ""
log "total $(( $(date +%s) - START )) s"
# Only the reports' heads come back (the data stays).
for f in "$OUT"/*.err; do [ -s "$f" ] && { echo "== $f"; head -c 2000 "$f"; }; done >"$OUT/stderr.txt"
rm -f "$OUT"/*.out "$OUT"/*.ref
