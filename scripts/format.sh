#!/usr/bin/env bash
# Applies the project's formatting in place: clang-format 14 (.clang-format) to every tracked C,
# C++ and CUDA file, and ruff (pyproject.toml [tool.ruff]) to python/, tests/python and scripts/:
# its safe lint fixes (import order, unused imports), then `ruff format`. scripts/check-format.sh
# checks the same. Run it on a clean work tree and commit the result as one commit.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-clang-format-14}
ruff=${RUFF:-.venv/bin/ruff}
command -v "$clang_format" >/dev/null || { echo "format: $clang_format not found (scripts/install/install-deps.sh installs clang-format)" >&2; exit 2; }
[ -x "$ruff" ] || ruff=$(command -v ruff) || { echo "format: ruff not found (requirements.txt installs it into .venv)" >&2; exit 2; }
git ls-files -z -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh' | xargs -0 -r -n 50 -P "$(nproc)" "$clang_format" -i --style=file
py_dirs=(python tests/python scripts)
"$ruff" check --no-cache --fix --quiet "${py_dirs[@]}"
"$ruff" format --no-cache --quiet "${py_dirs[@]}"
git status --short
