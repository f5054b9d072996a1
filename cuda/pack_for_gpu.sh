#!/usr/bin/env bash
# Builds the GPU programs HERE (a machine with nvcc and the project's Debian -dev packages, no GPU
# needed) and packs them with the shared libraries a bare GPU machine may lack into
# build-gpu-bundle/ (ignored by git via /build*/). Carry that folder to the GPU machine; then
# cuda/validate_on_gpu.sh and cuda/bench_on_gpu.sh use it instead of building there (the GPU
# image has nvcc, CMake and torch but not fmt, Catch2, Eigen, HDF5, nlohmann-json).
# Binaries are built on Debian 12 (glibc 2.36) and run on newer glibc.
# FP8KIT_BUNDLE=DIR packs into DIR instead; the bundle then also holds this checkout's GPU scripts
# under DIR/tree/cuda/ (for a GPU machine that gets another checkout), run as
#   FP8KIT_BUNDLE=DIR bash DIR/tree/cuda/validate_on_gpu.sh   (or bench_on_gpu.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BUNDLE=${FP8KIT_BUNDLE:-$ROOT/build-gpu-bundle}
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null
cmake --build "$BUILD" -j"${JOBS:-2}" --target test_gpu fp8kit_exhaustive_check fp8kit_cuda_bench fp8kit_cuda_gemm_bench fp8kit
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
cp "$BUILD/tests/gpu/test_gpu" "$BUILD/cuda/fp8kit_exhaustive_check" "$BUILD/cuda/fp8kit_cuda_bench" "$BUILD/cuda/fp8kit_cuda_gemm_bench" \
   "$BUILD/tools/fp8kit" "$BUNDLE/bin/"
strip --strip-unneeded "$BUNDLE"/bin/*
# Every shared library they load except glibc, libstdc++ and libgcc_s (newer ones are on the GPU
# machine, and an older libstdc++ on the path would break compute-sanitizer and torch) and the
# driver (libcuda comes with the GPU).
for b in "$BUNDLE"/bin/*; do ldd "$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$BUNDLE/lib/"; done
git -C "$ROOT" rev-parse HEAD > "$BUNDLE/commit.txt"
git -C "$ROOT" status --porcelain --untracked-files=no | grep -q . && echo "(with uncommitted changes)" >> "$BUNDLE/commit.txt"
if [ -n "${FP8KIT_BUNDLE:-}" ]; then
    mkdir -p "$BUNDLE/tree/cuda/tools"
    cp "$ROOT/cuda/bench_on_gpu.sh" "$ROOT/cuda/validate_on_gpu.sh" "$ROOT/cuda/gemm_model_on_gpu.sh" "$BUNDLE/tree/cuda/"
    cp "$ROOT/cuda/tools/bench_torch.py" "$ROOT/cuda/tools/bench_gemm_torch.py" "$ROOT/cuda/tools/bench_blocks_torchao.py" "$BUNDLE/tree/cuda/tools/"
fi
du -sh "$BUNDLE"; ls "$BUNDLE/bin" "$BUNDLE/lib"
