#!/usr/bin/env bash
# Speed of `fp8kit checkpoint check` (issue 28's target: >= 80% of the rate at which the files can
# be read) on a multi-GB compressed-tensors FP8 checkpoint (scripts/make_big_checkpoint.py), against
# `cat SHARDS > /dev/null` in the same run, page cache warm (each timed after one untimed read).
# Prints one line per measurement (seconds, GB/s of shard bytes) and the ratio; plus the load.
# Usage: bench_checkpoint_check.sh [FP8KIT_BINARY]
#   OUT=/tmp/bench-ckpt  GIB=2.0  REPS=3 (median)  PY=python3 (with numpy)  THREADS="1 2"
set -u
BIN=${1:-build/tools/fp8kit}
OUT=${OUT:-/tmp/bench-ckpt}
PY=${PY:-python3}
REPS=${REPS:-3}
[ -s "$OUT/model.safetensors.index.json" ] || "$PY" "$(dirname "$0")/make_big_checkpoint.py" "$OUT" "${GIB:-2.0}" || exit 2
bytes=$(cat "$OUT"/*.safetensors | wc -c)
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
timed() {  # prints the median wall seconds of REPS runs of "$@"
    for _ in $(seq "$REPS"); do
        s=$(date +%s.%N); "$@" > /dev/null 2>&1; rc=$?; e=$(date +%s.%N)
        [ $rc -le 1 ] || { echo "FAIL: $* exited $rc" >&2; exit 1; }
        echo "$e - $s" | bc -l
    done | median
}
cat "$OUT"/*.safetensors > /dev/null  # warm the page cache
t_cat=$(timed sh -c "cat '$OUT'/*.safetensors > /dev/null")
printf 'shard bytes %d (%.2f GB); load %s\n' "$bytes" "$(echo "$bytes / 1000000000" | bc -l)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-36s %8.3f s %7.3f GB/s\n' "cat > /dev/null" "$t_cat" "$(echo "$bytes / $t_cat / 1000000000" | bc -l)"
for t in ${THREADS:-1 2}; do
    t_chk=$(OMP_NUM_THREADS=$t timed "$BIN" checkpoint check "$OUT")
    printf '%-36s %8.3f s %7.3f GB/s  %5.1f%% of cat\n' "checkpoint check (OMP_NUM_THREADS=$t)" "$t_chk" \
        "$(echo "$bytes / $t_chk / 1000000000" | bc -l)" "$(echo "100 * $t_cat / $t_chk" | bc -l)"
done
