#!/usr/bin/env bash
# The AddressSanitizer + UndefinedBehaviorSanitizer build (library, CLI, tests; no CUDA, no
# benchmarks) into build-asan/. Any report aborts the process (-fno-sanitize-recover=all), so a
# finding fails the test that hit it. Run its tests with: (cd build-asan && ctest -LE exhaustive)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFP8KIT_SANITIZE=address,undefined \
  -DFP8KIT_CUDA=OFF -DFP8KIT_BUILD_BENCH=OFF "$@" >/dev/null
cmake --build build-asan -j"$(nproc)"
