#!/usr/bin/env bash
# --device cuda against --device cpu on the bundled data (data/example), --json: inspect under
# per-tensor and block recipes (statistics on the GPU: counts, extremes, histograms and scales
# equal, float64 sums within tests/cli/device_json_compare.py's tolerance), sweep and validate
# (CPU either way: byte-identical); and --device cuda
# byte-identical for 1 and 8 threads. Skipped (77) with the reason where no GPU can be used.
# Usage: bash device_gpu.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
DUMP=$REPO/data/example/llama_tiny_dump.h5
TRACE=$REPO/data/example/amax_trace.csv
W=step_000100/model.layers.1.mlp.down_proj/weight
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }

"$FP8KIT" inspect "$DUMP" -q --json --steps 0 --device cuda --verbose >/dev/null 2>"$T/err"
if ! grep -q "statistics on the GPU" "$T/err"; then
    echo "skipped: no usable GPU: $(head -1 "$T/err")"
    exit 77
fi
command -v python3 >/dev/null || { echo "skipped: python3 (the JSON comparison) is missing"; exit 77; }
head -c 12288 "$TRACE" >"$T/codes.bin"   # validate's kernel "output": 64x192 codes
"$FP8KIT" recipe show te-current | sed 's/"nearest-even"/"stochastic"/; s/"te-current"/"te-current-sr"/' >"$T/sr.json"

compare() { # name, mode (close | same), command...
    local name=$1 mode=$2; shift 2
    OMP_NUM_THREADS=8 "$@" --device cpu >"$T/cpu.json" 2>"$T/err"; local rc=$?
    if [ $rc -gt 1 ]; then echo "FAIL: $name --device cpu: exit $rc: $(cat "$T/err")"; fail=1; return; fi
    OMP_NUM_THREADS=8 "$@" --device cuda >"$T/cuda.json" 2>"$T/err"; rc=$?
    if [ $rc -gt 1 ]; then echo "FAIL: $name --device cuda: exit $rc: $(cat "$T/err")"; fail=1; return; fi
    if [ "$mode" = same ]; then
        cmp -s "$T/cpu.json" "$T/cuda.json"; check "$name: cuda output byte-identical to cpu" $?
    else
        local out; out=$(python3 "$HERE/device_json_compare.py" "$T/cpu.json" "$T/cuda.json"); local r=$?
        check "$name: cuda equals cpu ($out)" $r
    fi
    OMP_NUM_THREADS=1 "$@" --device cuda >"$T/cuda1.json" 2>/dev/null
    cmp -s "$T/cuda.json" "$T/cuda1.json"; check "$name: cuda output identical for 1 and 8 threads" $?
}

compare "inspect te-current" close "$FP8KIT" inspect "$DUMP" --json -q
compare "inspect --format e5m2" close "$FP8KIT" inspect "$DUMP" --json -q --format e5m2
compare "inspect --format e2m1" close "$FP8KIT" inspect "$DUMP" --json -q --format e2m1
compare "inspect stochastic rounding" close "$FP8KIT" inspect "$DUMP" --json -q --recipe "$T/sr.json"
# Block recipes (cuda/engine: block_statistics_async, the per-tile fields by lib's summarize_tiles).
for recipe in deepseek-v3 nvfp4 nvfp4-torchao mxfp4 mxfp6-e3m2 mxfp8-torchao-floor; do
    compare "inspect $recipe (blocks)" close "$FP8KIT" inspect "$DUMP" --json -q --steps 100 --recipe $recipe
done
compare "sweep" same "$FP8KIT" sweep "$DUMP" "$TRACE" --json -q
compare "validate" same "$FP8KIT" validate --json -q --to e4m3 --profile cuda-satfinite --input "$DUMP:/$W" --output "$T/codes.bin" --shape 64x192
# GEMM (cuda/engine's GemmEngine): gemm's output byte-identical for every model the GPU has;
# validate --gemm's report the CPU's but for its "device".
python3 - "$T" <<'PY'
import sys, numpy as np
t = sys.argv[1]
rng = np.random.default_rng(5)
np.save(f"{t}/ga.npy", rng.integers(0, 0x7e, (96, 1000), dtype=np.uint8))
np.save(f"{t}/gb.npy", rng.integers(0, 0x7e, (70, 1000), dtype=np.uint8))
np.save(f"{t}/gsa.npy", rng.uniform(0.01, 4, 96).astype(np.float32))
PY
for accum in fp32 sm90 sm90-fast deepseek-128 h100tc sm90-splitk:384; do
    "$FP8KIT" gemm "$T/ga.npy" "$T/gb.npy" --scale-a "$T/gsa.npy" --accum $accum --device cpu -o "$T/dc.npy"
    "$FP8KIT" gemm "$T/ga.npy" "$T/gb.npy" --scale-a "$T/gsa.npy" --accum $accum --device cuda -o "$T/dg.npy"
    cmp -s "$T/dc.npy" "$T/dg.npy"; check "gemm --accum $accum: cuda output byte-identical to cpu" $?
done
"$FP8KIT" validate --gemm --json --a "$T/ga.npy" --b "$T/gb.npy" --scale-a "$T/gsa.npy" --output "$T/dg.npy" --device cpu |
    sed 's/"device":"cpu",//' >"$T/vc.json"
"$FP8KIT" validate --gemm --json --a "$T/ga.npy" --b "$T/gb.npy" --scale-a "$T/gsa.npy" --output "$T/dg.npy" --device cuda |
    sed 's/"device":"cuda",//' >"$T/vg.json"
cmp -s "$T/vc.json" "$T/vg.json"; check "validate --gemm: cuda report equals cpu's ($(head -c 120 "$T/vg.json"))" $?
exit $fail
