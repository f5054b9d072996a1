#!/usr/bin/env bash
# fp8kit inspect / sweep / validate with --device cpu against --device cuda (issue 23 item 4;
# docs/performance.md, "--device"). Run on the GPU machine with a CUDA-built CLI bundle
# (BUILD=build-cuda scripts/install/pack_cli_bundle.sh):
#   bash scripts/bench/bench_device.sh build-inspect-bundle/fp8kit.sh [WORK_DIR]
# Writes dumps of a few GiB under WORK_DIR (default /tmp/fp8kit_bench_device; removed at the end)
# with scripts/bench/make_big_dump.py (needs h5py; ml_dtypes for validate's codes) and prints one wall
# time per command. The page cache holds the files after they are written: host-side best case.
set -u
F=$1
W=${2:-/tmp/fp8kit_bench_device}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
mkdir -p "$W"
trap 'rm -rf "$W"' EXIT
t() { # label, command...
    local l=$1; shift
    local s=$EPOCHREALTIME; "$@" >"$W/out.txt" 2>"$W/err.txt"; local rc=$?; local e=$EPOCHREALTIME
    printf '%-44s %s s rc=%d %s\n' "$l" "$(awk -v a="$s" -v b="$e" 'BEGIN{printf "%6.2f", b-a}')" $rc "$(head -c 160 "$W/err.txt")"
}
for d in cpu cuda cpu cuda; do t "example dump: inspect $d" "$F" inspect "$REPO/data/example/llama_tiny_dump.h5" --json -q --device "$d"; done
"$PY" "$HERE/make_big_dump.py" "$W/f32.h5" 1 f32 >/dev/null
"$PY" "$HERE/make_big_dump.py" "$W/bf16.h5" 1 bf16 >/dev/null
"$PY" "$HERE/make_big_dump.py" "$W/gz.h5" 0.5 gzip >/dev/null
for f in f32 bf16 gz; do
    "$F" inspect "$W/$f.h5" -q --json >/dev/null  # into the page cache
    for th in 1 2 4 8 16; do
        for d in cpu cuda; do t "$f: inspect --threads $th $d" "$F" inspect "$W/$f.h5" --json -q --device "$d" --threads "$th"; done
    done
done
for d in cpu cuda; do t "f32: sweep --tensor 'layer0*' $d" "$F" sweep "$W/f32.h5" --json -q --tensor 'layer0*' --device "$d"; done
"$PY" -c "
import numpy as np, ml_dtypes
x = (np.random.default_rng(1).standard_normal((4 * 4096, 4096), dtype=np.float32) * 30).astype(np.float32)
x.tofile('$W/in.bin'); x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8).tofile('$W/codes.bin')"
for d in cpu cuda cpu cuda; do
    t "validate 2^26 f32 $d" "$F" validate --json -q --to e4m3 --profile ml_dtypes --input "$W/in.bin" --dtype f32 \
        --shape 16384x4096 --output "$W/codes.bin" --device "$d"
done
