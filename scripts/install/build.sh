#!/usr/bin/env bash
# Configures and builds fp8kit (Release) into build/. CUDA kernels are built when nvcc is found.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
