#!/usr/bin/env bash
# GPU checks and figures of the kCvtDir cast path (cuda/src/element.cuh, numerics/cvt_directed.hpp):
# toward-zero / nearest-away into E4M3 / E5M2 and nearest-even / toward-zero / nearest-away into
# E4M3FNUZ / E5M2FNUZ. Runs from the bundle cuda/pack_for_gpu.sh makes (FP8KIT_BUNDLE, default
# ./build-gpu-bundle):
#   1. test_gpu, the cases that take the path (every format, policy and input type; the dense
#      in-range case; the scaled casts);
#   2. fp8kit_exhaustive_check --formats=fp8 under each of the three roundings: all 2^32 float32
#      inputs of every FP8 format and every overflow and NaN policy against emu::convert;
#   3. the bench rows (median of 20 at 2^28) beside the copy and torch's peers.
# Usage: scripts/gpu/cvt_directed_check.sh [OUTDIR, default ./cvt-directed-logs] [PARTS, default
# "test exhaustive bench"]. Exit 0 only when every part run passes.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${1:-$PWD/cvt-directed-logs}
PARTS=" ${2:-test exhaustive bench} "
BUNDLE=${FP8KIT_BUNDLE:-$ROOT/build-gpu-bundle}
for b in test_gpu fp8kit_exhaustive_check fp8kit_cuda_bench; do
    [ -x "$BUNDLE/bin/$b" ] || { echo "cvt_directed_check: no $BUNDLE/bin/$b (run cuda/pack_for_gpu.sh)"; exit 2; }
done
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$OUT"
{ date -u; cat "$BUNDLE/commit.txt"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$OUT/machine.txt"
fail=0
if [[ $PARTS == *" test "* ]]; then
    "$BUNDLE/bin/test_gpu" "directed cvt path equals encode_array on dense in-range data" \
        "quantize equals encode_array for every format*" \
        "scaled quantize equals encode*" >"$OUT/test_gpu.log" 2>&1 || fail=1
    tail -3 "$OUT/test_gpu.log"
fi
if [[ $PARTS == *" exhaustive "* ]]; then
    for r in toward-zero nearest-away nearest-even; do
        "$BUNDLE/bin/fp8kit_exhaustive_check" --formats=fp8 --rounding=$r >"$OUT/exhaustive_$r.log" 2>&1 || fail=1
        tail -2 "$OUT/exhaustive_$r.log"
    done
fi
if [[ $PARTS == *" bench "* ]]; then
    rows="=copy_d2d,=cast_f32_e4m3_toward_zero,=cast_f32_e4m3_nearest_away,=cast_f32_e4m3fnuz_rne,=cast_f32_e4m3_rne_nosat"
    FP8KIT_BENCH_ONLY=$rows "$BUNDLE/bin/fp8kit_cuda_bench" 28 20 | tee "$OUT/bench_fp8kit.csv" || fail=1
    python3 "$ROOT/cuda/tools/bench_torch.py" "$OUT/bench_fp8kit.csv" 28 20 2>"$OUT/torch_stderr.log" |
        tee "$OUT/bench_table.txt" || fail=1
fi
echo "cvt_directed_check: $([ $fail -eq 0 ] && echo PASS || echo FAIL) (logs in $OUT)"
exit $fail
