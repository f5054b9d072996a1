#!/usr/bin/env bash
# Builds mufu_capture.cu (nvcc's defaults: IEEE arithmetic for the model, the approximations as
# inline PTX), runs it on the GPU and writes the two tables of numerics/fast_math.hpp into OUTDIR
# (mufu_rcp.i8, mufu_sqrt.i8) and the samples of lib's test (samples.bin), with the run's log and the GPU's name, driver and nvcc version.
# Usage: scripts/gpu/mufu_capture.sh OUTDIR [ARCH, default sm_90]. lib embeds the tables as
# `gzip -9 -n` makes them: lib/data/mufu_sm90_rcp.i8.gz, lib/data/mufu_sm90_sqrt.i8.gz; the samples
# are tests/golden/mufu/samples.bin.
set -euo pipefail
out=${1:?usage: mufu_capture.sh OUTDIR [ARCH]}
arch=${2:-sm_90}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$out"
nvcc --version | tail -1 >"$out/nvcc_version.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt"
bin=$(mktemp -d)/mufu_capture
nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch="$arch" -I"$root/numerics/include" -I"$root/emu/include" \
    -I"$here" -o "$bin" "$here/mufu_capture.cu"
cuobjdump -sass "$bin" | grep -E "MUFU|FMUL|FADD|FFMA" | sort | uniq -c | sort -rn | head -20 >"$out/sass_ops.txt" || true
"$bin" "$out/mufu_rcp.i8" "$out/mufu_sqrt.i8" "$out/samples.bin" | tee "$out/capture.log"
rm -rf "$(dirname "$bin")"
