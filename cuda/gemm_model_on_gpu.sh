#!/usr/bin/env bash
# The CUDA GEMM model on a GPU machine, in one command (docs/gemm.md "The CUDA model",
# docs/performance.md "GEMM model on the GPU"): test_gpu's [gemm] cases (kernel against lib's CPU
# model, bit for bit), then fp8kit_cuda_gemm_bench (8192^3 under sm90 and sm90-fast, CUDA events,
# median of 5) and cuBLASLt's time for the same GEMM through torch._scaled_mm, in the same run.
# Programs from cuda/pack_for_gpu.sh: FP8KIT_BUNDLE=DIR bash gemm_model_on_gpu.sh
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUNDLE=${FP8KIT_BUNDLE:-$HERE/../build-gpu-bundle}
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "programs of commit $(cat "$BUNDLE/commit.txt" | tr '\n' ' ')"
fail=0
SIZE=${SIZE:-8192}
echo "== test_gpu [gemm]"
timeout "${TEST_TIMEOUT:-180}" "$BUNDLE/bin/test_gpu" "[gemm]" 2>&1 | tail -n 25 || fail=1
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
        echo "== compute-sanitizer --tool $tool test_gpu [gemm] (quick)"
        FP8KIT_GPU_TEST_QUICK=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 "$BUNDLE/bin/test_gpu" "[gemm]" 2>&1 | tail -n 30 || fail=1
    done
fi
echo "== fp8kit_cuda_gemm_bench $SIZE^3"
timeout "${BENCH_TIMEOUT:-120}" "$BUNDLE/bin/fp8kit_cuda_gemm_bench" "$SIZE" "$SIZE" "$SIZE" "${REPS:-5}" sm90 sm90-fast || fail=1
echo "== cuBLASLt (torch._scaled_mm) $SIZE^3"
timeout 90 python3 "$HERE/tools/bench_gemm_torch.py" "$SIZE" "$SIZE" "$SIZE" 10 || fail=1
[ $fail -eq 0 ] && echo PASS || echo FAIL
