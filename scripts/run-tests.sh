#!/usr/bin/env bash
# README command 2 (and .ci/run): install, build, and run every test: the C++ suites under ctest
# (labels emu, lib, dump, validate, cli, gpu...), the Python tests, and every notebook top to bottom.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, printed as a table when the run ends (also when it fails), so the tail of
# a CI log says where the time went.
stage_names=() stage_starts=()
stage() { stage_names+=("$1"); stage_starts+=("$SECONDS"); echo "== [${SECONDS} s] $1"; }
stage_table() {
  local i end
  echo "== stage times (wall seconds; total ${SECONDS} s):"
  for i in "${!stage_names[@]}"; do
    end=${stage_starts[$((i + 1))]:-$SECONDS}
    printf '   %6d  %s\n' "$((end - stage_starts[i]))" "${stage_names[$i]}"
  done
}
trap stage_table EXIT
stage "install dependencies"
scripts/install/install-deps.sh
# Formatting first (seconds): clang-format 14 (.clang-format) and ruff (pyproject.toml).
stage "check formatting (scripts/check-format.sh)"
scripts/check-format.sh
# With ccache (scripts/install/install-deps.sh installs it), the Python module's build (pip install below,
# in build-pip/) reuses the Release build's objects of the library: same flags, and build-pip sits
# at the depth of build/ with the same generator, so the relative paths ccache hashes are equal.
if command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-$PWD/build/ccache}" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  # pip's build compiles the CUDA kernels too when nvcc is found (pyproject.toml FP8KIT_CUDA=AUTO):
  # the same objects as build/'s, so they come from the cache instead of a second nvcc run.
  export CMAKE_CUDA_COMPILER_LAUNCHER=ccache
fi
export CMAKE_GENERATOR="Unix Makefiles"
# Every `cmake --build` on every core, also those that pass no -j: pip's build of the module
# (scikit-build-core runs `cmake --build build-pip` with no -j, so Make built it on one core while
# the other idled) and tests/package's consumer build.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
# Without a GPU the CUDA kernels cannot run here: nvcc compiles them to PTX only (compute_90, the
# whole front end and NVVM, which is what a source change can break), leaving out ptxas's sm_90
# machine code (about a third of nvcc's CPU time), and with NVVM's and the host compiler's
# optimisation off (-Xcicc -O0, -O0: code nothing here runs; cuda/src/cast.cu 30.1 -> 12.4 s of
# CPU on the 2-core machine). The optimised sm_90 build is checked where it runs:
# cuda/pack_for_gpu.sh builds it for every GPU validation (docs/validation.md).
have_gpu=false
if nvidia-smi -L >/dev/null 2>&1; then have_gpu=true; fi
cuda_args=()
if ! $have_gpu; then
  cuda_args=(-DCMAKE_CUDA_ARCHITECTURES=90-virtual "-DCMAKE_CUDA_FLAGS_RELEASE=-O0 -Xcicc -O0 -DNDEBUG")
fi
stage "build (Release${cuda_args:+; CUDA as PTX only, no GPU})"
scripts/install/build.sh "${cuda_args[@]}"
# Tests remove every file they make, also when they fail. Each suite runs with TMPDIR set to one
# fresh folder (C++ tests, tests/cli/*.sh, pytest and notebooks all create theirs under TMPDIR),
# and the run fails, listing them, if anything is left there after a suite.
test_tmp=$(mktemp -d "${TMPDIR:-/tmp}/fp8kit-tests.XXXXXX")
trap 'rm -rf "$test_tmp"; stage_table' EXIT
# OMP_WAIT_POLICY=passive: ctest runs two test processes at once and each OpenMP loop in them uses
# every core, so a thread that waits at a barrier must sleep, not spin on a core the other process
# needs (libgomp's default spins first). It changes no result, only who gets the CPU.
in_test_tmp() { TMPDIR="$test_tmp" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}" "$@"; }
check_test_tmp() {
  local left
  left=$(find "$test_tmp" -mindepth 1 -maxdepth 1 -printf '  %f\n' | head -20)
  if [ -n "$left" ]; then
    echo "== $1 left files in TMPDIR ($test_tmp); each test must remove what it creates:" >&2
    echo "$left" >&2
    exit 1
  fi
}
stage "ctest"
# --timeout: a test that hangs fails after 20 minutes, named in the log, instead of holding the run
# to CI's limit (a hung mpirun did: ctest's default is no limit). The slowest test, a 2^32-input
# sweep, takes about 450 s on CI's 2 cores. Tests that set their own TIMEOUT keep it.
ctest_timeout=1200
(cd build && in_test_tmp ctest --output-on-failure -j"$(nproc)" --timeout "$ctest_timeout")
check_test_tmp ctest
# Hardening (docs/hardening.md): the CPU suite again under AddressSanitizer + UBSan (+ LeakSanitizer),
# leaving out the [exhaustive] 2^32-input loops (pure integer arithmetic, already run above, ~10x
# slower under UBSan), then every libFuzzer harness for a bounded time.
stage "sanitizer build (build-asan: address,undefined)"
scripts/install/build-asan.sh
stage "ctest -LE exhaustive (sanitizers)"
# cli.determinism and cli.threads_identical are left out here: they rerun paths the other sanitized
# tests run once, at many thread counts, for a property (equal bits) that the sanitizers do not
# check; the Release ctest above runs them.
(cd build-asan && in_test_tmp ctest --output-on-failure -j"$(nproc)" --timeout "$ctest_timeout" -LE exhaustive \
  -E '^cli\.(determinism|threads_identical)$')
check_test_tmp "ctest (sanitizers)"
stage "fuzzing (build, then at most ${FP8KIT_FUZZ_SECONDS:-30} s per harness, $(nproc) at a time)"
scripts/test/run-fuzz.sh "${FP8KIT_FUZZ_SECONDS:-30}"
stage "Python module: pip install into .venv"
# Without a GPU the module's CUDA kernels cannot run here, so this build leaves them out (CI: nvcc
# doubled the stage on 2 cores, 329 -> 661 s); with a GPU they are built and
# tests/python/test_device_arrays.py runs them. CMAKE_ARGS comes after pyproject.toml's cmake.args,
# so it wins (scikit-build-core). A user's own `pip install .` keeps FP8KIT_CUDA=AUTO.
# CC/CXX: the compilers build/ was configured with, by the same names. Left unset, pip's build
# takes Python's own (x86_64-linux-gnu-g++: the same binary), and ccache, which hashes the
# compiler's name, then finds none of build/'s objects (14 of 222 hits in a fresh clone).
pip_env=(CC="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' build/CMakeCache.txt)"
  CXX="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' build/CMakeCache.txt)")
if ! $have_gpu; then pip_env+=(CMAKE_ARGS="-DFP8KIT_CUDA=OFF"); fi
env "${pip_env[@]}" .venv/bin/pip install -q --no-build-isolation .
if [ -d tests/python ] && ls tests/python/test_*.py >/dev/null 2>&1; then
  stage "pytest"
  # tmp_path folders are pytest's own, under --basetemp: removed here; anything else a test leaves
  # in TMPDIR is reported. -n: pytest-xdist, one worker per core; --dist loadfile keeps each file's
  # tests in one worker, in order, so a module fixture is made once (--basetemp holds a folder per
  # worker).
  in_test_tmp .venv/bin/python -m pytest -q -n "$(nproc)" --dist loadfile --durations=10 --basetemp "$test_tmp/pytest" tests/python
  rm -rf "$test_tmp/pytest"
  check_test_tmp pytest
fi
if ls notebooks/*.ipynb >/dev/null 2>&1; then
  stage "notebooks"
  in_test_tmp .venv/bin/python scripts/test/run_notebooks.py --jobs "$(nproc)" notebooks/*.ipynb
  check_test_tmp notebooks
fi
stage "done"
echo "== all tests passed"
