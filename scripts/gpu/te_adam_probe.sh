#!/usr/bin/env bash
# Builds te_adam_probe.cu with TransformerEngine's flags for multi_tensor/adam.cu (-O3
# --use_fast_math; transformer_engine/common/CMakeLists.txt) and with nvcc's defaults (-O3), runs
# both on the GPU, and keeps each build's SASS (cuobjdump) beside its output.
# Usage: scripts/gpu/te_adam_probe.sh OUTDIR [ARCH, default sm_90] [N, default 8192]. Compare with
# scripts/gpu/te_adam_compare.py OUTDIR. tests/golden/te_adam/ holds the outputs at N = 512
# (tests/simulate: lib's model against them).
set -euo pipefail
out=${1:?usage: te_adam_probe.sh OUTDIR [ARCH]}
arch=${2:-sm_90}
n=${3:-8192}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvcc --version | tail -1 >"$out/nvcc_version.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt"
for variant in fast_math:"-O3 --use_fast_math" default:"-O3"; do
    name=${variant%%:*}
    flags=${variant#*:}
    # shellcheck disable=SC2086
    nvcc $flags -arch="$arch" -o "$out/probe_$name" "$here/te_adam_probe.cu"
    cuobjdump -sass "$out/probe_$name" >"$out/sass_$name.txt"
    "$out/probe_$name" "$out/adam_$name.bin" "$n"
    rm -f "$out/probe_$name"
done
