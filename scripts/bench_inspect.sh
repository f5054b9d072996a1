#!/usr/bin/env bash
# Throughput of `fp8kit inspect` and `fp8kit sweep` on a dump of >= 2 GiB against the rate at which
# the same data can merely be read and decompressed (h5py reading every dataset), both on 2 CPU
# cores (taskset) with OpenMP 2 threads, data in the page cache; peak RSS of each.
# Usage: bench_inspect.sh [FP8KIT_BINARY]   (LD_LIBRARY_PATH set by the caller if bundled)
set -u
BIN=${1:-build/tools/fp8kit}
OUT=${OUT:-/tmp/bench-inspect}
mkdir -p "$OUT"
DUMP=/tmp/fp8kit_big_dump.h5
python3 scripts/make_big_dump.py "$DUMP" "${GIB:-2.0}"
ls -l "$DUMP"
export OMP_NUM_THREADS=2
python3 - "$BIN" "$DUMP" <<'PY'
import resource, subprocess, sys, time
import h5py
bin_, dump = sys.argv[1], sys.argv[2]
def read_all():
    with h5py.File(dump, "r") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        total = 0
        for n in names:
            total += f[n][...].nbytes
    return total
import os, tempfile
peak = {}
def vmhwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
def timed(cmd):
    # Peak RSS: VmHWM of the program's own address space (after exec), polled until it exits;
    # getrusage would also count the Python parent's pages copied at fork.
    key = cmd[1] if cmd[0] == bin_ else "h5py read"
    err = tempfile.TemporaryFile()
    t = time.perf_counter()
    p = subprocess.Popen(["taskset", "-c", "0,1"] + cmd, stdout=subprocess.DEVNULL, stderr=err)
    hwm = 0
    while p.poll() is None:
        hwm = max(hwm, vmhwm(p.pid))
        time.sleep(0.02)
    dt = time.perf_counter() - t
    peak[key] = max(peak.get(key, 0), hwm)
    if p.returncode not in (0, 1):
        err.seek(0)
        print("FAILED", cmd, err.read().decode()[-500:])
    return dt, p.returncode
# Baseline: h5py read (libhdf5 decompression) pinned to the same two cores, in a child process.
base = []
for _ in range(2):
    base.append(timed([sys.executable, "-c", f"import h5py\nf=h5py.File({dump!r},'r')\nn=[]\nf.visititems(lambda k,o: n.append(k) if isinstance(o,h5py.Dataset) else None)\nfor k in n: f[k][...]"])[0])
nbytes = read_all()
rss0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
ins = [timed([bin_, "inspect", dump, "--quiet", "--json"]) for _ in range(2)]
rss_inspect = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sw = [timed([bin_, "sweep", dump, "--no-blocks", "--json"]) for _ in range(1)]
rss_sweep = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
gb = nbytes / 1e9
b, i, s = min(base), min(t for t, _ in ins), min(t for t, _ in sw)
print(f"tensor data {nbytes/2**30:.2f} GiB")
print(f"read+decompress (h5py, 2 cores): {b:.2f} s  {gb/b:.2f} GB/s   runs {['%.2f' % x for x in base]}")
print(f"fp8kit inspect (2 threads):      {i:.2f} s  {gb/i:.2f} GB/s   runs {['%.2f' % t for t, _ in ins]} rc {[r for _, r in ins]}  -> {100*b/i:.0f}% of the read rate")
print(f"fp8kit sweep --no-blocks:        {s:.2f} s  {gb/s:.2f} GB/s   rc {[r for _, r in sw]}  -> {s/i:.2f}x one inspect pass")
print("peak RSS (VmHWM): " + ", ".join(f"{k} {v/1024:.0f} MiB" for k, v in peak.items()))
PY
