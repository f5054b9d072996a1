#!/usr/bin/env bash
# --device auto|cpu|cuda on inspect, sweep and validate, without needing a GPU (CI has none): an
# unknown value and --device cuda where no GPU can be used are one line and exit 2 with nothing on
# stdout; auto and cpu print the same report (auto is the CPU); --verbose says where the statistics
# run and why, and cuda succeeds exactly when auto --verbose reports a usable GPU. tests/cli/device_gpu.sh compares cuda with cpu on a GPU.
# Usage: bash device.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
DUMP=$REPO/data/example/llama_tiny_dump.h5
TRACE=$REPO/data/example/amax_trace.csv
W=step_000100/model.layers.1.mlp.down_proj/weight
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
export OMP_NUM_THREADS=2
head -c 12288 "$TRACE" >"$T/codes.bin"   # validate's kernel "output": 64x192 codes

declare -A CMD
CMD[inspect]="inspect $DUMP --json -q --steps 100 --include *layers.1.*"
CMD[sweep]="sweep $DUMP --json -q --tensor *layers.1.*"
CMD[validate]="validate --json -q --to e4m3 --profile cuda-satfinite --input $DUMP:/$W --output $T/codes.bin --shape 64x192"

for c in inspect sweep validate; do
    set -f  # the patterns are fp8kit's, not the shell's
    # shellcheck disable=SC2086
    run() { "$FP8KIT" ${CMD[$c]} "$@"; }
    run --device gpu >"$T/out" 2>"$T/err"; rc=$?
    check "$c --device gpu: exit 2" $(( rc != 2 ))
    check "$c --device gpu: one line naming --device" $(( $(wc -l <"$T/err") != 1 ))
    grep -q "^fp8kit: error: --device 'gpu': expected auto, cpu or cuda$" "$T/err"; check "$c --device gpu: message" $?
    check "$c --device gpu: nothing on stdout" $(( $(wc -c <"$T/out") != 0 ))

    run --device cpu >"$T/cpu" 2>/dev/null; rc=$?
    check "$c --device cpu runs" $(( rc > 1 ))
    run >"$T/default" 2>/dev/null
    cmp -s "$T/cpu" "$T/default"; check "$c: the default (auto) prints what cpu prints" $?
    run --device cpu --verbose >/dev/null 2>"$T/err"
    grep -q "^fp8kit $c: statistics on the CPU (--device cpu)$" "$T/err"; check "$c --device cpu --verbose says CPU" $?

    run --device auto --verbose >"$T/auto" 2>"$T/err"
    cmp -s "$T/cpu" "$T/auto"; check "$c --device auto --verbose: the same report" $?
    grep -q "^fp8kit $c: statistics on the CPU (" "$T/err"; check "$c --device auto --verbose: the CPU" $?
    run --device cuda >"$T/out" 2>"$T/cerr"; rc=$?
    # Why cuda cannot run, as auto --verbose reports it: the build, or the driver (CI: nvcc, no GPU).
    why=$(sed -n "s/^fp8kit $c: statistics on the CPU (\(.*\))$/\1/p" "$T/err" |
          sed -n 's/^\(this fp8kit was built without CUDA .*\)$/\1/p; s/^auto: .*; \(no usable CUDA GPU: .*\)$/\1/p')
    if [ -n "$why" ]; then
        check "$c --device cuda without a GPU: exit 2" $(( rc != 2 ))
        check "$c --device cuda without a GPU: one line" $(( $(wc -l <"$T/cerr") != 1 ))
        grep -qxF "fp8kit: error: --device cuda: $why" "$T/cerr"; check "$c --device cuda names the reason ($why)" $?
        check "$c --device cuda without a GPU: nothing on stdout" $(( $(wc -c <"$T/out") != 0 ))
    else
        grep -q "; a GPU is usable)$" "$T/err"; check "$c --device auto --verbose: a GPU is usable" $?
        check "$c --device cuda with a GPU runs" $(( rc > 1 ))
        run --device cuda --verbose >/dev/null 2>"$T/err"
        grep -q "^fp8kit $c: statistics on the" "$T/err"; check "$c --device cuda --verbose says where" $?
    fi
    set +f
done

# Without CUDA built in, the reason is the build; with it, the driver's (CI: nvcc, no GPU).
"$FP8KIT" inspect "$DUMP" -q --json --device auto --verbose >/dev/null 2>"$T/err"
if grep -q "built without CUDA" "$T/err"; then
    grep -qxE "fp8kit inspect: statistics on the CPU \(this fp8kit was built without CUDA \((FP8KIT_CUDA=OFF|no nvcc was found when it was built)\)\)" "$T/err"
    check "a build without CUDA says so" $?
fi
# A CUDA build on a machine without the NVIDIA driver (no libcuda.so.1): "no driver was found",
# not the runtime's "CUDA driver version is insufficient", which asks for a driver upgrade.
if ! grep -q "built without CUDA" "$T/err" && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    "$FP8KIT" inspect "$DUMP" -q --json --device cuda >/dev/null 2>"$T/err"
    grep -qxF "fp8kit: error: --device cuda: no usable CUDA GPU: no NVIDIA GPU driver was found (libcuda.so.1 is not installed)" "$T/err"
    s=$?; check "no driver installed: --device cuda says so ($(head -c 200 "$T/err"))" $s
fi
exit $fail
