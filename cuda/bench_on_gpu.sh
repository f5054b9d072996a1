#!/usr/bin/env bash
# Benchmark of fp8kit's CUDA kernels (prebuilt by cuda/pack_for_gpu.sh when build-gpu-bundle/
# exists, else built here) next to torch in the same run (2^28 float32 elements, CUDA
# events, median of 50 runs): builds fp8kit_cuda_bench for sm_90, runs it, then
# cuda/tools/bench_torch.py (torch eager and torch.compile) prints the joint table.
# Under 5 minutes on an H100 box. Output in $OUT (default ./fp8kit-bench-logs).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$PWD/fp8kit-bench-logs}
BUILD=${BUILD:-/tmp/fp8kit-build-gpu}
LOG2N=${LOG2N:-28}
RUNS=${RUNS:-50}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.memory --format=csv; } | tee "$OUT/machine.txt"
BUNDLE=${FP8KIT_BUNDLE:-$ROOT/build-gpu-bundle}
if [ -x "$BUNDLE/bin/fp8kit_cuda_bench" ]; then  # prebuilt by cuda/pack_for_gpu.sh
    BENCH="$BUNDLE/bin/fp8kit_cuda_bench"
    LIBS="$BUNDLE/lib"
else
    export PATH="$PATH:/usr/local/cuda/bin"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
          -DFP8KIT_BUILD_BENCH=OFF > "$OUT/configure.log" 2>&1 &&
      timeout 240 cmake --build "$BUILD" -j"$(nproc)" --target fp8kit_cuda_bench > "$OUT/build.log" 2>&1 ||
      { tail -40 "$OUT/configure.log" "$OUT/build.log"; echo "FAIL: build (logs in $OUT)"; exit 1; }
    BENCH="$BUILD/cuda/fp8kit_cuda_bench"
    LIBS=""
fi
LD_LIBRARY_PATH="${LIBS:+$LIBS:}${LD_LIBRARY_PATH:-}" timeout 120 "$BENCH" "$LOG2N" "$RUNS" | tee "$OUT/bench_fp8kit.csv" ||
  { echo "FAIL: fp8kit_cuda_bench"; exit 1; }
timeout 240 python3 "$ROOT/cuda/tools/bench_torch.py" "$OUT/bench_fp8kit.csv" "$LOG2N" "$RUNS" 2>"$OUT/torch_stderr.log" |
  tee "$OUT/bench_table.txt"
rc=${PIPESTATUS[0]}
[ $rc -eq 0 ] || { tail -20 "$OUT/torch_stderr.log"; echo "FAIL: bench_torch.py (exit $rc)"; exit 1; }
# The NVFP4 / MX block rows beside torchao's own quantisers (torchao importable: on a machine
# without network, install its wheel first; docs/performance.md "Issue 48").
if python3 -c "import torchao" 2>/dev/null; then
  timeout 300 python3 "$ROOT/cuda/tools/bench_blocks_torchao.py" "$OUT/bench_fp8kit.csv" "$LOG2N" "$RUNS" \
    2>"$OUT/torchao_stderr.log" | tee "$OUT/bench_blocks_table.txt" || echo "bench_blocks_torchao.py failed (see $OUT/torchao_stderr.log)"
else
  echo "torchao not importable: no block-row peers (docs/performance.md)"
fi
echo "table in $OUT/bench_table.txt"
