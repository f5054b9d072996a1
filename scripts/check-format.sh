#!/usr/bin/env bash
# Checks that the tree is formatted: C, C++ and CUDA files with clang-format 14 (.clang-format),
# Python under python/, tests/python and scripts/ with ruff (pyproject.toml [tool.ruff]: lint, then
# `ruff format --check`). Changes nothing; scripts/format.sh applies the same tools. Exit 1 with the
# files that differ. run-tests.sh (README command 2) runs it first.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-clang-format-14}
ruff=${RUFF:-.venv/bin/ruff}
command -v "$clang_format" >/dev/null || { echo "check-format: $clang_format not found (scripts/install/install-deps.sh installs clang-format)" >&2; exit 2; }
[ -x "$ruff" ] || ruff=$(command -v ruff) || { echo "check-format: ruff not found (requirements.txt installs it into .venv)" >&2; exit 2; }
status=0
# Every tracked C, C++ and CUDA file (git ls-files: build trees and untracked files are not looked at).
mapfile -d '' cxx < <(git ls-files -z -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh')
# One clang-format process for all of them; each file that differs is named in its warnings.
mapfile -t bad < <("$clang_format" --dry-run --style=file "${cxx[@]}" 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning: code should be clang-formatted.*/\1/p' | uniq)
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} of ${#cxx[@]} C/C++/CUDA files differ from clang-format (.clang-format); scripts/format.sh applies it:" >&2
  printf '  %s\n' "${bad[@]:0:40}" >&2
  if ((${#bad[@]} > 40)); then echo "  ... and $((${#bad[@]} - 40)) more" >&2; fi
  status=1
fi
py_dirs=(python tests/python scripts)
"$ruff" check --no-cache --quiet "${py_dirs[@]}" || { echo "check-format: ruff check found the problems above" >&2; status=1; }
"$ruff" format --no-cache --check --output-format concise "${py_dirs[@]}" || { echo "check-format: ruff format would change the files above (scripts/format.sh applies it)" >&2; status=1; }
[ $status = 0 ] && echo "check-format: ${#cxx[@]} C/C++/CUDA files and the Python of ${py_dirs[*]} are formatted"
exit $status
