#!/usr/bin/env bash
# Packs what a GPU machine needs to build the Python module with the CUDA kernels for ITS Python
# (the GPU image's Python may differ from this machine's, and it lacks the Debian -dev packages):
# the static libraries fp8kit_core, fp8kit_cuda and fp8kit_cuda_engine built HERE (no LTO: any GCC links them), the
# headers python/src includes (fp8kit's, fmt, nlohmann-json, pybind11), the shared libraries
# they load (fmt, HDF5 and its dependencies, not glibc/libstdc++/libgcc_s/libcuda), the module
# sources, the Python package, its tests and the torch benchmark. On the GPU machine:
#   bash BUNDLE/build_module.sh [python3]     -> BUNDLE/pkg/fp8kit/_fp8kit.<its suffix>.so
#   PYTHONPATH=BUNDLE/pkg LD_LIBRARY_PATH=BUNDLE/lib python3 -m pytest BUNDLE/tests
# Usage: cuda/pack_python_for_gpu.sh BUNDLE   (BUILD=build-py by default)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUNDLE=${1:?usage: pack_python_for_gpu.sh BUNDLE}
BUILD=${BUILD:-$ROOT/build-py}
if [ -z "${FP8KIT_SKIP_BUILD:-}" ]; then  # set: BUILD already holds both libraries
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DFP8KIT_BUILD_PYTHON=ON -DFP8KIT_BUILD_TESTS=OFF -DFP8KIT_BUILD_TOOLS=OFF -DFP8KIT_BUILD_BENCH=OFF \
  -DFP8KIT_INSTALL=OFF -Dpybind11_DIR="$("$ROOT/.venv/bin/python" -m pybind11 --cmakedir)" > /dev/null
cmake --build "$BUILD" -j"${JOBS:-2}" --target fp8kit_core fp8kit_cuda fp8kit_cuda_engine
fi
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"/{lib,include,src,pkg,tests,bench}
cp "$BUILD/lib/libfp8kit_core.a" "$BUILD/cuda/libfp8kit_cuda.a" "$BUILD/cuda/libfp8kit_cuda_engine.a" "$BUNDLE/lib/"
strip --strip-debug "$BUNDLE"/lib/*.a
for d in lib emu numerics cuda cuda/engine; do cp -r "$ROOT/$d/include/fp8kit" "$BUNDLE/include/"; done
cp -r /usr/include/fmt /usr/include/nlohmann "$BUNDLE/include/"
cp -r "$("$ROOT/.venv/bin/python" -c 'import pybind11; print(pybind11.get_include())')/pybind11" "$BUNDLE/include/"
for l in /usr/lib/x86_64-linux-gnu/libfmt.so.9 /usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5.so; do
  cp -L "$l" "$BUNDLE/lib/$(objdump -p "$l" | awk '/SONAME/{print $2}')"
  ldd "$l" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$BUNDLE/lib/"; done
cp "$ROOT"/python/src/*.cpp "$ROOT"/python/src/*.hpp "$BUNDLE/src/"
cp -r "$ROOT/python/fp8kit" "$BUNDLE/pkg/"
cp "$ROOT"/tests/python/{conftest.py,test_device_arrays.py,test_torch.py,test_torch_linear.py} "$BUNDLE/tests/"
cp "$ROOT/bench/torch_monitor_overhead.py" "$ROOT/bench/torch_monitor_profile.py" "$ROOT/bench/torch_fake_quant_step.py" \
   "$ROOT/bench/torch_fake_quant_profile.py" \
   "$ROOT/scripts/gpu/bench_blockscaled_transposed.py" "$ROOT/cuda/tools/bench_blocks_torchao.py" "$BUNDLE/bench/"
cat > "$BUNDLE/build_module.sh" <<'SH'
#!/usr/bin/env bash
# Builds fp8kit._fp8kit for this machine's Python with the CUDA kernels (see pack_python_for_gpu.sh).
set -euo pipefail
B=$(cd "$(dirname "$0")" && pwd); PY=${1:-python3}
INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
SUF=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
CUDA=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$B/obj"
for f in "$B"/src/*.cpp; do
  c++ -O2 -fPIC -fvisibility=hidden -fopenmp -std=c++17 -DFMT_SHARED -DFP8KIT_PY_CUDA -I"$B/include" -isystem "$INC" \
      -c "$f" -o "$B/obj/$(basename "$f" .cpp).o" &
done
wait
c++ -shared -fopenmp -o "$B/pkg/fp8kit/_fp8kit$SUF" "$B"/obj/*.o "$B/lib/libfp8kit_cuda_engine.a" "$B/lib/libfp8kit_core.a" "$B/lib/libfp8kit_cuda.a" \
    "$B/lib/libfmt.so.9" "$B"/lib/libhdf5_serial.so.* -L"$CUDA/lib64" -lcudart_static -lrt -ldl -lpthread \
    -Wl,--disable-new-dtags,-rpath,"$B/lib"
echo "built $B/pkg/fp8kit/_fp8kit$SUF"
SH
chmod +x "$BUNDLE/build_module.sh"
git -C "$ROOT" rev-parse HEAD > "$BUNDLE/commit.txt"
du -sh "$BUNDLE"
