#!/usr/bin/env bash
# Builds msamp_adam_probe.cu as MS-AMP builds msamp/optim/adamw.cu (msamp/optim/setup.py:
# CUDAExtension, nvcc ['-O3'], plus the flags torch's cpp_extension adds, COMMON_NVCC_FLAGS; no
# --use_fast_math, so nvcc's defaults: FMA contraction on, IEEE division and square root), runs it
# on the GPU at N and at the golden size, and keeps the build's SASS (cuobjdump) beside the outputs.
# Usage: scripts/gpu/msamp_adam_probe.sh OUTDIR [ARCH, default sm_90] [N, default 4096]. Compare with
# scripts/gpu/msamp_adam_compare.py OUTDIR. tests/golden/msamp_adam/ holds the output at
# N = 192 (tests/simulate: lib's model against it).
set -euo pipefail
out=${1:?usage: msamp_adam_probe.sh OUTDIR [ARCH] [N]}
arch=${2:-sm_90}
n=${3:-4096}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvcc --version | tail -1 >"$out/nvcc_version.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt"
flags=(-O3 -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__
    -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr -std=c++17)
# MS-AMP's build, then a control build without contraction (--fmad=false), which should equal
# the model with every multiply and add rounded on its own.
for variant in msamp: nofma:--fmad=false; do
    name=${variant%%:*}
    extra=${variant#*:}
    # shellcheck disable=SC2086
    nvcc "${flags[@]}" $extra -arch="$arch" -o "$out/probe_$name" "$here/msamp_adam_probe.cu"
    cuobjdump -sass "$out/probe_$name" >"$out/sass_$name.txt"
    "$out/probe_$name" "$out/adam_$name.bin" "$n"
    "$out/probe_$name" "$out/adam_${name}_192.bin" 192
    rm -f "$out/probe_$name"
done
