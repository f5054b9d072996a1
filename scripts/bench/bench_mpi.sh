#!/usr/bin/env bash
# Issue 19: `mpirun -n P fp8kit inspect` on one node, P = RANKS, over a dump of FILES files made
# with scripts/bench/make_big_dump.py (GIB GiB each, kind KIND), data in the page cache. For each P:
# wall time with the default threads (cores / ranks on the node) and with --threads 1 per rank,
# the rate in GB/s of tensor data, and a byte compare of the --json report with P = 1's.
# Reference rates: `cat` of the files (the read rate of the page cache) and h5py reading one
# file's tensors on one core (libhdf5 read-and-decompress).
# Usage: OUT=/tmp/b KIND=gzip FILES=8 GIB=1 RANKS="1 2 4 8 16" bash scripts/bench/bench_mpi.sh FP8KIT
set -uo pipefail
FP8KIT=$1
PY=${PY:-python3}
OUT=${OUT:-/tmp/bench_mpi} KIND=${KIND:-gzip} FILES=${FILES:-8} GIB=${GIB:-1} RANKS=${RANKS:-"1 2 4 8 16"}
MODES=${MODES:-"default 1"}
# Open MPI refuses to run as root unless told (CI and the benchmark host run as root).
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT"
here=$(cd "$(dirname "$0")" && pwd)
files=()
for k in $(seq 0 $((FILES - 1))); do
    f=$OUT/${KIND}_$k.h5
    files+=("$f")
    [ -s "$f" ] || "$PY" "$here/make_big_dump.py" "$f" "$GIB" "$KIND" >/dev/null &
done
wait
bytes=$(( $(du -cb "${files[@]}" | tail -1 | cut -f1) ))
now() { date +%s.%N; }
t0=$(now); cat "${files[@]}" >/dev/null; t1=$(now)
cat_rate=$(echo "$bytes $t0 $t1" | awk '{printf "%.2f", $1 / ($3 - $2) / 1e9}')
echo "dump: $FILES x $KIND, $(echo "$bytes" | awk '{printf "%.2f", $1 / 2^30}') GiB on disk; cat: $cat_rate GB/s; cores: $(nproc)"
t0=$(now)
"$PY" - "${files[0]}" <<'PYEOF'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    # visititems stops at the first callback that returns a value: read, then return None.
    f.visititems(lambda n, o: (o[()], None)[1] if isinstance(o, h5py.Dataset) else None)
PYEOF
t1=$(now)
echo "h5py, one file on one core: $(echo "$bytes $FILES $t0 $t1" | awk '{printf "%.3f", $1 / $2 / ($4 - $3) / 1e9}') GB/s (file bytes)"
rm -f "$OUT/ref_$KIND"  # the first run of this kind is the reference
echo "| ranks | threads/rank | wall s | GB/s | speed-up | share of cat | same as P=1 |"
echo "|---|---|---|---|---|---|---|"
for mode in $MODES; do
    base=""
    for p in $RANKS; do
        targs=()
        [ "$mode" != default ] && targs=(--threads "$mode")
        t0=$(now)
        mpirun --oversubscribe --bind-to none -n "$p" "$FP8KIT" inspect -q --json "${targs[@]}" "${files[@]}" >"$OUT/out_$p" 2>"$OUT/err_$p"
        rc=$?
        t1=$(now)
        s=$(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}')
        [ -z "$base" ] && base=$s
        [ -f "$OUT/ref_$KIND" ] || cp "$OUT/out_$p" "$OUT/ref_$KIND"
        same=$(cmp -s "$OUT/ref_$KIND" "$OUT/out_$p" && echo yes || echo NO)
        thr=$mode
        [ "$mode" = default ] && thr="$(( $(nproc) / p > 0 ? $(nproc) / p : 1 )) (default)"
        echo "| $p | $thr | $s | $(echo "$bytes $s" | awk '{printf "%.2f", $1 / $2 / 1e9}') | $(echo "$base $s" | awk '{printf "%.2f", $1 / $2}') | $(echo "$bytes $s $cat_rate" | awk '{printf "%.0f%%", 100 * $1 / $2 / 1e9 / $3}') | $same (exit $rc) |"
    done
done
