#!/usr/bin/env bash
# Speed of `fp8kit checkpoint check` (issue 28's target: >= 80% of the rate at which the files can
# be read) on a multi-GB compressed-tensors FP8 checkpoint (scripts/bench/make_big_checkpoint.py), against
# `cat SHARDS > /dev/null` in the same run, page cache warm (each timed after one untimed read).
# Prints one line per measurement (seconds, GB/s of shard bytes) and the ratio; plus the load.
# Arithmetic with awk (the GPU machine's image has no bc).
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
        awk -v a="$s" -v b="$e" 'BEGIN {printf "%.6f\n", b - a}'
    done | median
}
cat "$OUT"/*.safetensors > /dev/null  # warm the page cache
t_cat=$(timed sh -c "cat '$OUT'/*.safetensors > /dev/null")
printf 'shard bytes %d (%.2f GB); load %s\n' "$bytes" "$(awk -v b="$bytes" 'BEGIN {print b / 1e9}')" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-36s %8.3f s %7.3f GB/s\n' "cat > /dev/null" "$t_cat" "$(awk -v b="$bytes" -v t="$t_cat" 'BEGIN {print b / t / 1e9}')"
for t in ${THREADS:-1 2}; do
    t_chk=$(OMP_NUM_THREADS=$t timed "$BIN" checkpoint check "$OUT")
    printf '%-36s %8.3f s %7.3f GB/s  %5.1f%% of cat\n' "checkpoint check (OMP_NUM_THREADS=$t)" "$t_chk" \
        "$(awk -v b="$bytes" -v t="$t_chk" 'BEGIN {print b / t / 1e9}')" "$(awk -v c="$t_cat" -v t="$t_chk" 'BEGIN {print 100 * c / t}')"
done
