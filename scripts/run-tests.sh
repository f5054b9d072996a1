#!/usr/bin/env bash
# README command 2 (and .ci/run): install, build, and run every test: the C++ suites under ctest
# (labels emu, lib, dump, validate, cli, gpu...), the Python tests, and every notebook top to bottom.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
echo "== ctest"
(cd build && ctest --output-on-failure -j"$(nproc)")
# Hardening (docs/hardening.md): the CPU suite again under AddressSanitizer + UBSan (+ LeakSanitizer),
# leaving out the [exhaustive] 2^32-input loops (pure integer arithmetic, already run above, ~10x
# slower under UBSan), then every libFuzzer harness for a bounded time.
echo "== sanitizer build (build-asan: address,undefined) and ctest -LE exhaustive"
scripts/build-asan.sh
(cd build-asan && ctest --output-on-failure -j"$(nproc)" -LE exhaustive)
echo "== fuzzing (${FP8KIT_FUZZ_SECONDS:-30} s per harness)"
scripts/run-fuzz.sh "${FP8KIT_FUZZ_SECONDS:-30}"
echo "== Python module: pip install into .venv"
.venv/bin/pip install -q --no-build-isolation .
if [ -d tests/python ] && ls tests/python/test_*.py >/dev/null 2>&1; then
  echo "== pytest"
  .venv/bin/python -m pytest -q tests/python
fi
if ls notebooks/*.ipynb >/dev/null 2>&1; then
  echo "== notebooks"
  .venv/bin/python scripts/run_notebooks.py notebooks/*.ipynb
fi
echo "== all tests passed"
