#!/usr/bin/env bash
# Packs the release fp8kit CLI built here with the shared libraries a bare machine may lack into
# build-inspect-bundle/ (ignored by git via /build*/), with a wrapper fp8kit.sh that sets
# LD_LIBRARY_PATH. For benchmarks on the device machine, whose image lacks the project's Debian
# -dev libraries: `bash scripts/bench/bench_inspect.sh build-inspect-bundle/fp8kit.sh` there.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BUNDLE=$ROOT/build-inspect-bundle
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$BUILD" -j"${JOBS:-2}" --target fp8kit
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
cp "$BUILD/tools/fp8kit" "$BUNDLE/bin/"
strip --strip-unneeded "$BUNDLE/bin/fp8kit"
# Every shared library it loads except glibc, libstdc++ and libgcc_s (newer ones are there).
ldd "$BUNDLE/bin/fp8kit" | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$BUNDLE/lib/"; done
printf '#!/bin/sh\nd=$(dirname "$0")\nLD_LIBRARY_PATH="$d/lib" exec "$d/bin/fp8kit" "$@"\n' > "$BUNDLE/fp8kit.sh"
chmod +x "$BUNDLE/fp8kit.sh"
git -C "$ROOT" rev-parse HEAD > "$BUNDLE/commit.txt"
du -sh "$BUNDLE"
