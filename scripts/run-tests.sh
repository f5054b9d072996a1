#!/usr/bin/env bash
# README command 2 (and .ci/run): install, build, and run every test: the C++ suites under ctest
# (labels emu, lib, dump, validate, cli, gpu...), the Python tests, and every notebook top to bottom.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# Tests remove every file they make, also when they fail. Each suite runs with TMPDIR set to one
# fresh folder (C++ tests, tests/cli/*.sh, pytest and notebooks all create theirs under TMPDIR),
# and the run fails, listing them, if anything is left there after a suite.
test_tmp=$(mktemp -d "${TMPDIR:-/tmp}/fp8kit-tests.XXXXXX")
trap 'rm -rf "$test_tmp"' EXIT
in_test_tmp() { TMPDIR="$test_tmp" "$@"; }
check_test_tmp() {
  local left
  left=$(find "$test_tmp" -mindepth 1 -maxdepth 1 -printf '  %f\n' | head -20)
  if [ -n "$left" ]; then
    echo "== $1 left files in TMPDIR ($test_tmp); each test must remove what it creates:" >&2
    echo "$left" >&2
    exit 1
  fi
}
echo "== ctest"
(cd build && in_test_tmp ctest --output-on-failure -j"$(nproc)")
check_test_tmp ctest
# Hardening (docs/hardening.md): the CPU suite again under AddressSanitizer + UBSan (+ LeakSanitizer),
# leaving out the [exhaustive] 2^32-input loops (pure integer arithmetic, already run above, ~10x
# slower under UBSan), then every libFuzzer harness for a bounded time.
echo "== sanitizer build (build-asan: address,undefined) and ctest -LE exhaustive"
scripts/build-asan.sh
(cd build-asan && in_test_tmp ctest --output-on-failure -j"$(nproc)" -LE exhaustive)
check_test_tmp "ctest (sanitizers)"
echo "== fuzzing (${FP8KIT_FUZZ_SECONDS:-30} s per harness)"
scripts/run-fuzz.sh "${FP8KIT_FUZZ_SECONDS:-30}"
echo "== Python module: pip install into .venv"
.venv/bin/pip install -q --no-build-isolation .
if [ -d tests/python ] && ls tests/python/test_*.py >/dev/null 2>&1; then
  echo "== pytest"
  # tmp_path folders are pytest's own, under --basetemp: removed here; anything else a test leaves
  # in TMPDIR is reported.
  in_test_tmp .venv/bin/python -m pytest -q --basetemp "$test_tmp/pytest" tests/python
  rm -rf "$test_tmp/pytest"
  check_test_tmp pytest
fi
if ls notebooks/*.ipynb >/dev/null 2>&1; then
  echo "== notebooks"
  in_test_tmp .venv/bin/python scripts/run_notebooks.py notebooks/*.ipynb
  check_test_tmp notebooks
fi
echo "== all tests passed"
