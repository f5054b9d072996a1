#!/usr/bin/env bash
# ctest package.consumer: installs fp8kit's build tree into a temporary prefix, then configures,
# builds and runs the consumer project of this folder against it: once with only fp8kit::emu and
# every third-party package fp8kit::core needs made unfindable (emu must need none), once with
# fp8kit::core. Usage: run.sh BUILD_DIR SOURCE_DIR [CMAKE]
set -euo pipefail
build=$1 src=$2 cmake=${3:-cmake}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fp8kit_package.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$cmake" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 \
    || { cat "$tmp/install.log" >&2; fail "cmake --install $build"; }
for f in fp8kitConfig.cmake fp8kitConfigVersion.cmake; do
    [ -n "$(find "$tmp/prefix" -name "$f")" ] || fail "cmake --install left out $f"
done

configure_build_run() {  # name, program, extra cmake arguments...
    local name=$1 prog=$2
    shift 2
    "$cmake" -S "$src/tests/package" -B "$tmp/$name" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
        "$@" >"$tmp/$name.log" 2>&1 \
        || { cat "$tmp/$name.log" >&2; fail "$name: configure"; }
    "$cmake" --build "$tmp/$name" >>"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log" >&2; fail "$name: build"; }
    "$tmp/$name/$prog" || fail "$name: $prog"
}
configure_build_run emu uses_emu -DFP8KIT_CONSUMER_CORE=OFF \
    -DCMAKE_DISABLE_FIND_PACKAGE_OpenMP=ON -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_HDF5=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
configure_build_run core uses_core -DFP8KIT_CONSUMER_CORE=ON
echo "package: ok"
