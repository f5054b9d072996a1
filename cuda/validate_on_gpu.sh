#!/usr/bin/env bash
# GPU validation of fp8kit's CUDA kernels (run from anywhere on a machine with an sm_89+ GPU and
# 16 CPU cores; about 10 minutes on an H100 box):
#   1. build with CUDA for sm_90, or use the programs cuda/pack_for_gpu.sh built elsewhere;
#   2. test_gpu: every kernel against the CPU reference, bit for bit (random and adversarial
#      inputs, shapes not divisible by the block sizes);
#   3. fp8kit_exhaustive_check: the conversion kernels and the cvt.rn.satfinite path on all 2^32
#      float32 inputs for every format and policy, and all f16/bf16 inputs (0 mismatches = pass);
#   4. compute-sanitizer memcheck, racecheck and initcheck (reads of device memory never written)
#      on test_gpu (six-policy quick mode), run beside 3;
#   5. (part "cli", bundles only) tests/cli/device_gpu.sh: the CLI's --device cuda against
#      --device cpu on data/example, per-tensor and block recipes;
#   6. (part "fast_math") scripts/gpu/mufu_capture.sh: numerics/fast_math.hpp (the --use_fast_math
#      arithmetic of lib's TE FusedAdam model) against this GPU on all 2^32 inputs of MUFU.RCP and
#      MUFU.SQRT and on the flushing add, multiply and FMA, and the captured tables equal to
#      lib/data's (sm_90 only: another architecture's tables may differ).
# Logs go to $OUT (default ./fp8kit-gpu-logs); the last line says PASS or FAIL.
# FP8KIT_VALIDATE_PARTS (default "test_gpu exhaustive sanitizers cli") runs only the parts named, for a
# machine that limits one command's time (H100, 2026-11-27: test_gpu 85 s; the exhaustive check and
# the sanitizers side by side 508 s): the validation is every part passing at one commit.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$PWD/fp8kit-gpu-logs}
BUILD=${BUILD:-/tmp/fp8kit-build-gpu}
JOBS=$(nproc)
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
RCDIR=$(mktemp -d)  # exit codes of the background runs (kept out of $OUT: few files come back)
: > "$SUMMARY"
fail=0
step() {  # step NAME STATUS
    if [ "$2" -eq 0 ]; then echo "ok    $1" | tee -a "$SUMMARY"; else echo "FAIL  $1 (exit $2)" | tee -a "$SUMMARY"; fail=1; fi
}
start=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvcc --version | tail -2; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# Prebuilt programs from cuda/pack_for_gpu.sh (build-gpu-bundle/, carried to a GPU machine that
# lacks the project's -dev packages) are used when present; otherwise build here.
BUNDLE=${FP8KIT_BUNDLE:-$ROOT/build-gpu-bundle}
if [ -x "$BUNDLE/bin/test_gpu" ] && [ -x "$BUNDLE/bin/fp8kit_exhaustive_check" ]; then
    echo "== prebuilt programs from $BUNDLE (commit $(cat "$BUNDLE/commit.txt" 2>/dev/null))"
    TEST="$BUNDLE/bin/test_gpu"
    CHECKER="$BUNDLE/bin/fp8kit_exhaustive_check"
    LIBS="$BUNDLE/lib"
else
    echo "== build ($BUILD)"
    export PATH="$PATH:/usr/local/cuda/bin"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
          -DFP8KIT_BUILD_BENCH=OFF > "$OUT/configure.log" 2>&1 &&
      timeout 300 cmake --build "$BUILD" -j"$JOBS" --target test_gpu fp8kit_exhaustive_check > "$OUT/build.log" 2>&1
    rc=$?
    step build $rc
    if [ $rc -ne 0 ]; then tail -40 "$OUT/configure.log" "$OUT/build.log"; echo "FAIL (build; logs in $OUT)"; exit 1; fi
    TEST="$BUILD/tests/gpu/test_gpu"
    CHECKER="$BUILD/cuda/fp8kit_exhaustive_check"
    LIBS=""
fi
# Only our programs see the bundled libraries (libfmt, libgomp, libcudart).
run() { LD_LIBRARY_PATH="${LIBS:+$LIBS:}${LD_LIBRARY_PATH:-}" "$@"; }

PARTS=" ${FP8KIT_VALIDATE_PARTS:-test_gpu exhaustive sanitizers cli fast_math} "
wanted() { [[ "$PARTS" == *" $1 "* ]]; }
for part in $PARTS; do
    case "$part" in test_gpu | exhaustive | sanitizers | cli | fast_math) ;;
    *) echo "FP8KIT_VALIDATE_PARTS: unknown part '$part' (known: test_gpu exhaustive sanitizers cli fast_math)"; exit 2 ;;
    esac
done
echo "parts:$PARTS" | tee -a "$SUMMARY"

if wanted test_gpu; then
echo "== test_gpu"
run timeout 240 "$TEST" > "$OUT/test_gpu.log" 2>&1
rc=$?
tail -5 "$OUT/test_gpu.log"
step test_gpu $rc
fi

# Sanitizers beside the exhaustive check (which is CPU-bound): few CPU threads for them.
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san_pid=
if wanted sanitizers; then
(
  export FP8KIT_GPU_TEST_QUICK=1 OMP_NUM_THREADS=2
  run timeout 300 "$SAN" --tool memcheck --leak-check full --error-exitcode 1 "$TEST" > "$OUT/memcheck.log" 2>&1
  echo $? > "$RCDIR/memcheck.rc"
  # racecheck is the slowest (about 5 minutes over the whole quick test_gpu on the H100, 2026-11-27)
  run timeout 450 "$SAN" --tool racecheck --error-exitcode 1 "$TEST" > "$OUT/racecheck.log" 2>&1
  echo $? > "$RCDIR/racecheck.rc"
  run timeout 300 "$SAN" --tool initcheck --error-exitcode 1 "$TEST" > "$OUT/initcheck.log" 2>&1
  echo $? > "$RCDIR/initcheck.rc"
) &
san_pid=$!
fi

if wanted exhaustive; then
echo "== exhaustive check (all 2^32 float32 inputs, every format and policy)"
export OMP_NUM_THREADS=$JOBS
run timeout 420 "$CHECKER" 2>&1 | tee "$OUT/exhaustive.log" | grep -E "MISMATCH|exhaustive check|f16/bf16|s, mismatches"
rc=${PIPESTATUS[0]}
step exhaustive_check $rc
fi

if wanted cli; then
if [ -x "${BUNDLE}/bin/fp8kit" ] && [ -n "$LIBS" ]; then
    echo "== the CLI's --device cuda (tests/cli/device_gpu.sh)"
    run timeout 300 bash "$ROOT/tests/cli/device_gpu.sh" "$BUNDLE/bin/fp8kit" "$ROOT" > "$OUT/cli_device.log" 2>&1
    rc=$?
    grep -E "^(ok|FAIL|skipped)" "$OUT/cli_device.log" | tail -20
    step cli_device_gpu $rc
else
    echo "== the CLI's --device cuda: no bundled fp8kit (cuda/pack_for_gpu.sh packs it)" | tee -a "$SUMMARY"
fi
fi

if wanted fast_math; then
    echo "== numerics/fast_math.hpp against this GPU (scripts/gpu/mufu_capture.sh)"
    fm_dir=$(mktemp -d)
    PATH="$PATH:/usr/local/cuda/bin" timeout 300 bash "$ROOT/scripts/gpu/mufu_capture.sh" "$fm_dir" > "$OUT/fast_math.log" 2>&1
    rc=$?
    for t in rcp sqrt; do  # the tables lib embeds must be this GPU's
        if [ $rc -eq 0 ] && ! gzip -dc "$ROOT/lib/data/mufu_sm90_$t.i8.gz" | cmp -s - "$fm_dir/mufu_$t.i8"; then
            echo "lib/data/mufu_sm90_$t.i8.gz differs from this GPU's table" | tee -a "$OUT/fast_math.log"; rc=1
        fi
    done
    grep -E "mismatches|differs|deltas" "$OUT/fast_math.log"
    rm -rf "$fm_dir"
    step fast_math $rc
fi

if [ -n "$san_pid" ]; then
wait $san_pid
for tool in memcheck racecheck initcheck; do
    rc=$(cat "$RCDIR/$tool.rc" 2>/dev/null || echo 99)
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test cases" "$OUT/$tool.log" | tail -3
    step "compute-sanitizer $tool" "$rc"
done
fi

echo "elapsed $(( $(date +%s) - start )) s" | tee -a "$SUMMARY"
if [ $fail -eq 0 ]; then echo "PASS (logs in $OUT)" | tee -a "$SUMMARY"; else echo "FAIL (logs in $OUT)" | tee -a "$SUMMARY"; fi
exit $fail
