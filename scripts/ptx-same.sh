#!/usr/bin/env bash
# Whether CUDA sources compile to the same PTX at two commits: the check that a change to headers
# the kernels share (numerics/, emu/) leaves a kernel's device code as a GPU validated it. Each
# file is compiled with fp8kit_cuda's flags (cuda/CMakeLists.txt) for compute_90, and the hashes
# nvcc writes into internal-linkage names (_INTERNAL_xxxxxxxx, __N__xxxxxxxx, _cu_xxxxxxxx_NNNN),
# which differ between any two trees, are set aside before comparing. With --any-registers the
# virtual registers (%r12, %f3, ...) are renumbered in the order of their first use, the counts of
# the .reg declarations and the compiler's comment lines set aside: equal files then hold the same
# instructions on the same operands up to a one-to-one renaming of PTX's virtual registers, which
# ptxas allocates itself (refactoring inlined device functions can renumber them and change no
# instruction).
# Usage: scripts/ptx-same.sh [--any-registers] REV_A REV_B [cuda/src/FILE.cu ...]
#        (default: every cuda/src/*.cu)
# Prints "same" or "DIFFERENT" per file; exits 1 when any file differs.
set -euo pipefail
ANY_REGISTERS=0
if [ "${1:-}" = --any-registers ]; then
  ANY_REGISTERS=1
  shift
fi
[ $# -ge 2 ] || { echo "usage: scripts/ptx-same.sh [--any-registers] REV_A REV_B [cuda/src/FILE.cu ...]" >&2; exit 2; }
A=$1 B=$2
shift 2
ROOT=$(git rev-parse --show-toplevel)
TMP=$(mktemp -d)
cleanup() {
  git -C "$ROOT" worktree remove --force "$TMP/a" 2>/dev/null || true
  git -C "$ROOT" worktree remove --force "$TMP/b" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
git -C "$ROOT" worktree add -q --detach "$TMP/a" "$A"
git -C "$ROOT" worktree add -q --detach "$TMP/b" "$B"
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(cd "$TMP/b" && ls cuda/src/*.cu)
fi
ptx() {  # TREE FILE: the file's PTX with the per-tree hashes replaced
  (cd "$1" && nvcc -O3 -DNDEBUG -arch=compute_90 -ptx --expt-relaxed-constexpr -ftz=false -prec-div=true \
    -fmad=false -std=c++17 -Iemu/include -Inumerics/include -Icuda/include "$2" -o -) |
    sed -E 's/_INTERNAL_[0-9a-f]{8}/_INTERNAL_X/g; s/__N__[0-9a-f]{8}/__N__X/g; s/_cu_[0-9a-f]{8}_[0-9]+/_cu_X/g' |
    if [ "$ANY_REGISTERS" = 1 ]; then
      grep -v '^//' | python3 -c '
import re, sys
seen = {}
def rename(m):
    return seen.setdefault(m.group(0), "%%%s_%d" % (m.group(1), len(seen)))
for line in sys.stdin:
    if re.match(r"\s*(\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\b", line):
        seen.clear()  # a function has registers of its own
    line = re.sub(r"(\.reg\s+\.\w+\s+%\w+)<\d+>", r"\1<N>", line)
    sys.stdout.write(re.sub(r"%(rd|fd|rs|hh|r|f|p|h)[0-9]+\b", rename, line))
'
    else
      cat
    fi
}
status=0
for f in "${files[@]}"; do
  ptx "$TMP/a" "$f" > "$TMP/a.ptx"
  ptx "$TMP/b" "$f" > "$TMP/b.ptx"
  if [ ! -s "$TMP/a.ptx" ] || [ ! -s "$TMP/b.ptx" ]; then
    echo "ptx-same: no PTX for $f at $A or $B" >&2
    exit 2
  fi
  if cmp -s "$TMP/a.ptx" "$TMP/b.ptx"; then
    echo "same       $f"
  else
    echo "DIFFERENT  $f"
    status=1
  fi
done
exit $status
