#!/usr/bin/env bash
# Small HDF5 files whose headers demand large work (issue: hardening round 2, issue 25 section 2):
# seconds and peak RSS of `fp8kit inspect` on each. Figures: docs/performance.md.
# Usage: scripts/bench/bench_hostile_hdf5.sh [build/tools/fp8kit]   (needs .venv with h5py; /usr/bin/time)
set -euo pipefail
cd "$(dirname "$0")/../.."
FP8KIT=${1:-build/tools/fp8kit}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
.venv/bin/python - "$T" <<'PY'
import sys, zlib
import h5py, numpy as np
d = sys.argv[1]
with h5py.File(f"{d}/chunks_2e20.h5", "w") as f:      # 2^20 one-element chunks
    f.create_dataset("x", data=np.arange(1 << 20, dtype="<f4"), chunks=(1,))
with h5py.File(f"{d}/gzip_2gib_chunk.h5", "w") as f:  # one 2 GiB gzip chunk in a 2 MB file
    ds = f.create_dataset("x", shape=(1 << 29,), dtype="<f4", chunks=(1 << 29,), compression="gzip")
    c = zlib.compressobj(9)
    ds.id.write_direct_chunk((0,), b"".join(c.compress(bytes(1 << 24)) for _ in range(128)) + c.flush())
with h5py.File(f"{d}/nested_1e4.h5", "w") as f:       # 10,000 nested groups
    g = f
    for _ in range(10000):
        g = g.create_group("g")
    g["x"] = np.ones(4, "<f4")
with h5py.File(f"{d}/datasets_1e5.h5", "w") as f:     # 100,000 tiny datasets
    for i in range(100000):
        f[f"t{i}"] = np.full(4, i, "<f4")
with h5py.File(f"{d}/steps_1e5.h5", "w") as f:       # 10^4 tensors x 10 steps: 100,000 tiny datasets for sweep
    for s in range(10):
        g = f.create_group(f"step_{s}")
        for i in range(10000):
            g[f"layers.{i // 8}.t{i % 8}.weight"] = np.full(4, i + s + 1, "<f4")
with h5py.File(f"{d}/fill_2e40.h5", "w") as f:        # 2^40 float32, nothing written
    f.create_dataset("x", shape=(1 << 40,), dtype="<f4", chunks=(1 << 20,))
with h5py.File(f"{d}/fill_2e40_steps.h5", "w") as f:  # 2^40 float32 at two steps, nothing written
    for step in (1, 2):
        f.create_dataset(f"step_{step}/layer.input", shape=(1 << 40,), dtype="<f4", chunks=(1 << 20,), fillvalue=0.25)
with h5py.File(f"{d}/part_2e40_steps.h5", "w") as f:  # 2^40 float32 at two steps, two chunks written each
    for step in (1, 2):
        ds = f.create_dataset(f"step_{step}/layer.input", shape=(1 << 40,), dtype="<f4", chunks=(1 << 20,), fillvalue=0.25)
        ds[1 << 30:(1 << 30) + (1 << 20)] = np.linspace(-8, 8, 1 << 20, dtype="<f4")
        ds[-(1 << 20):] = np.full(1 << 20, step, "<f4")
with h5py.File(f"{d}/wrap_2e62.h5", "w") as f:        # 2^62 + 4 float32: bytes wrap past 2^64
    f.create_dataset("x", shape=((1 << 62) + 4,), dtype="<f4", chunks=(1 << 20,))
PY
printf '%-22s %10s %8s %12s  %s\n' file size exit seconds "peak RSS"
for f in chunks_2e20 gzip_2gib_chunk nested_1e4 datasets_1e5 fill_2e40 wrap_2e62; do
    set +e
    /usr/bin/time -f "%e %M" -o "$T/time" "$FP8KIT" inspect -q "$T/$f.h5" >/dev/null 2>"$T/err"
    rc=$?
    set -e
    read -r s kb < <(tail -n 1 "$T/time")  # GNU time writes "Command exited with non-zero status N" first
    printf '%-22s %10s %8s %12s  %s MB\n' "$f" "$(stat -c %s "$T/$f.h5")" "$rc" "$s" "$((kb / 1024))"
done
# Within a raised --max-elements: the fill value as one run (inspect's statistics, replay's amax).
for cmd in inspect replay; do
    set +e
    /usr/bin/time -f "%e %M" -o "$T/time" "$FP8KIT" $cmd "$T/fill_2e40_steps.h5" --max-elements $((1 << 41)) \
        $([ $cmd = inspect ] && echo -q) >/dev/null 2>"$T/err"
    rc=$?
    set -e
    read -r s kb < <(tail -n 1 "$T/time")  # GNU time writes "Command exited with non-zero status N" first
    printf '%-22s %10s %8s %12s  %s MB\n' "$cmd fill_2e40 x2" "$(stat -c %s "$T/fill_2e40_steps.h5")" "$rc" "$s" "$((kb / 1024))"
done
# Partly written (issue 20 item 1): the unwritten chunks are fill-value runs; inspect and sweep.
for cmd in "inspect -q" "sweep --no-blocks"; do
    set +e
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e %M" -o "$T/time" "$FP8KIT" $cmd "$T/part_2e40_steps.h5" --max-elements $((1 << 41)) >/dev/null 2>"$T/err"
    rc=$?
    set -e
    read -r s kb < <(tail -n 1 "$T/time")
    printf '%-22s %10s %8s %12s  %s MB\n' "${cmd%% *} part_2e40 x2" "$(stat -c %s "$T/part_2e40_steps.h5")" "$rc" "$s" "$((kb / 1024))"
done
# 10^5 tiny datasets again (issue 20 item 4): JSON output (streamed tensor by tensor) and one thread.
for args in "--json" "--threads 1" "--json --threads 1"; do
    set +e
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e %M" -o "$T/time" "$FP8KIT" inspect -q "$T/datasets_1e5.h5" $args >/dev/null 2>"$T/err"
    rc=$?
    set -e
    read -r s kb < <(tail -n 1 "$T/time")  # GNU time writes "Command exited with non-zero status N" first
    printf '%-22s %10s %8s %12s  %s MB\n' "datasets_1e5 $args" "$(stat -c %s "$T/datasets_1e5.h5")" "$rc" "$s" "$((kb / 1024))"
done
# sweep over 100,000 tiny datasets (10^4 tensors x 10 steps; issue 20 item 4): text, --json, --csv.
for args in "" "--json" "--csv"; do
    set +e
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e %M %U" -o "$T/time" "$FP8KIT" sweep "$T/steps_1e5.h5" $args >/dev/null 2>"$T/err"
    rc=$?
    set -e
    read -r s kb u < <(tail -n 1 "$T/time")
    printf '%-22s %10s %8s %12s  %s MB, %s s user\n' "sweep steps_1e5 ${args:-text}" "$(stat -c %s "$T/steps_1e5.h5")" "$rc" "$s" "$((kb / 1024))" "$u"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
