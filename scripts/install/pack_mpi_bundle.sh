#!/usr/bin/env bash
# Packs an MPI build of fp8kit with Debian's Open MPI launcher, its components, help texts and
# every shared library they load, for a machine that has no Open MPI (the benchmark host):
#   scripts/install/pack_mpi_bundle.sh build/tools/fp8kit OUT_DIR
# then on that machine: source OUT_DIR/env.sh; mpirun -n 4 fp8kit inspect ...
# Open MPI is moved with OPAL_PREFIX (its install-dirs framework rebuilds every path from it) and
# PMIx's components with PMIX_MCA_mca_base_component_path. glibc itself is not packed.
set -euo pipefail
BIN=$1
OUT=$2
ARCH=x86_64-linux-gnu
OMPI=/usr/lib/$ARCH/openmpi
PMIX=/usr/lib/$ARCH/pmix2
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/usr/bin" "$OUT/usr/lib/$ARCH" "$OUT/usr/share" "$OUT/etc"
cp "$BIN" "$OUT/bin/fp8kit"
strip "$OUT/bin/fp8kit"
cp -a "$OMPI" "$OUT/usr/lib/$ARCH/openmpi"
rm -rf "$OUT/usr/lib/$ARCH/openmpi/include" "$OUT/usr/lib/$ARCH/openmpi/lib/"*.a
rm -f "$OUT/usr/lib/$ARCH/openmpi/lib/"*.so  # development links
# Network transports this single-node bundle does not use (InfiniBand verbs, libfabric, UCX, PSM):
# their components and libraries are most of the bundle's size. Shared memory and TCP remain.
for c in atomic_ucx btl_ofi btl_openib mtl_ofi mtl_psm mtl_psm2 osc_ucx pml_ucx spml_ucx sshmem_ucx; do
    rm -f "$OUT/usr/lib/$ARCH/openmpi/lib/openmpi3/mca_$c.so"
done
cp -a "$PMIX" "$OUT/usr/lib/$ARCH/pmix2"
rm -rf "$OUT/usr/lib/$ARCH/pmix2/include" "$OUT/usr/lib/$ARCH/pmix2/lib/"*.a
cp -a /usr/share/openmpi "$OUT/usr/share/openmpi"
cp -a /usr/share/pmix "$OUT/usr/share/pmix" 2>/dev/null || true
cp -a /etc/openmpi "$OUT/etc/openmpi"
cp -L "$(readlink -f /usr/bin/mpirun)" "$OUT/usr/bin/orterun"
cp -L /usr/bin/orted "$OUT/usr/bin/orted"
ln -s orterun "$OUT/usr/bin/mpirun"
# Every library that the binaries and components load, except glibc's own.
objs=("$OUT/bin/fp8kit" "$OUT/usr/bin/orterun" "$OUT/usr/bin/orted" "$OUT/usr/lib/$ARCH/openmpi/lib/openmpi3/"*.so "$PMIX"/lib/pmix/*.so)
ldd "${objs[@]}" 2>/dev/null | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
    case $(basename "$lib") in
        libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libresolv.so.*) continue ;;
    esac
    cp -L "$lib" "$OUT/lib/"
done
cat > "$OUT/env.sh" <<ENV
# source this: the packed Open MPI and fp8kit first on the paths.
B=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
export PATH=\$B/bin:\$B/usr/bin:\$PATH
export LD_LIBRARY_PATH=\$B/lib:\$B/usr/lib/$ARCH/openmpi/lib:\$B/usr/lib/$ARCH/pmix2/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export OPAL_PREFIX=\$B/usr OPAL_SYSCONFDIR=\$B/etc/openmpi OPAL_LIBDIR=\$B/usr/lib/$ARCH/openmpi/lib
export OPAL_PKGLIBDIR=\$B/usr/lib/$ARCH/openmpi/lib/openmpi3 OPAL_PKGDATADIR=\$B/usr/share/openmpi OPAL_DATADIR=\$B/usr/share
export PMIX_INSTALL_PREFIX=\$B/usr PMIX_MCA_mca_base_component_path=\$B/usr/lib/$ARCH/pmix2/lib/pmix
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENV
du -sh "$OUT"
