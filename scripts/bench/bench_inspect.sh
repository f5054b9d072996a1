#!/usr/bin/env bash
# Throughput and peak RSS of `fp8kit inspect` per thread count (issue 22), against the rates at
# which the same data can merely be read: h5py reading every dataset (libhdf5 decompressing on one
# core) and `cat FILE > /dev/null`, all in the same run, data in the page cache.
# Dumps (scripts/bench/make_big_dump.py, GIB each): gzip+shuffle float32, uncompressed float32 and
# uncompressed bfloat16. One row per dump and thread count: seconds, GB/s of tensor data, x h5py,
# % of cat, peak RSS (/usr/bin/time -v "Maximum resident set size"); plus the load average.
# Usage: bench_inspect.sh [FP8KIT_BINARY]   (LD_LIBRARY_PATH set by the caller if bundled)
#   THREADS="1 2"  thread counts (--threads N)     KINDS="gzip f32 bf16"   GIB=2.0
#   CPUS=0,1       taskset CPU list for every run (empty: no taskset)   REPS=2 (best of)
#   STAT=median    the median of the REPS runs instead of the best (for shared, noisy machines)
#   PY=python3     a Python with h5py             SWEEP=1: one `sweep --no-blocks` row too
set -u
BIN=${1:-build/tools/fp8kit}
OUT=${OUT:-/tmp/bench-inspect}
PY=${PY:-python3}
mkdir -p "$OUT"
export STAT=${STAT:-best} BIN THREADS=${THREADS:-"1 2"} KINDS=${KINDS:-"gzip f32 bf16"} CPUS=${CPUS-0,1} REPS=${REPS:-2} SWEEP=${SWEEP:-0}
for kind in $KINDS; do
    [ -s "$OUT/dump_$kind.h5" ] || "$PY" "$(dirname "$0")/make_big_dump.py" "$OUT/dump_$kind.h5" "${GIB:-2.0}" "$kind"
done
"$PY" - "$OUT" <<'PY'
import os, subprocess, sys, time
import h5py
out = sys.argv[1]
bin_ = os.environ["BIN"]
threads = [int(t) for t in os.environ["THREADS"].split()]
cpus = os.environ["CPUS"]
reps = int(os.environ["REPS"])
pin = ["taskset", "-c", cpus] if cpus else []

def timed(cmd, env=None):
    """Best (STAT=median: median) wall time of `reps` runs and the largest peak RSS (KiB) that
    /usr/bin/time -v saw."""
    times, rss = [], 0
    for _ in range(reps):
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-v"] + pin + cmd, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env=env, text=True)
        dt = time.perf_counter() - t
        if p.returncode != 0:
            print("FAILED", cmd, p.stderr[-800:])
        for line in p.stderr.splitlines():
            if "Maximum resident set size" in line:
                rss = max(rss, int(line.split()[-1]))
        times.append(dt)
    times.sort()
    return (times[len(times) // 2] if os.environ["STAT"] == "median" else times[0]), rss

H5PY = ("import h5py, sys\nf = h5py.File(sys.argv[1], 'r')\nn = []\n"
        "f.visititems(lambda k, o: n.append(k) if isinstance(o, h5py.Dataset) else None)\n"
        "for k in n: f[k][...]\n")
print(f"host: {os.cpu_count()} CPUs, runs pinned to {cpus or 'all'}; load average before: "
      f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
print("| dump | reader | threads | s | GB/s | x h5py | % of cat | peak RSS MiB |")
print("|---|---|---|---|---|---|---|---|")
for kind in os.environ["KINDS"].split():
    dump = f"{out}/dump_{kind}.h5"
    with h5py.File(dump, "r") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        nbytes = sum(f[n].size * f[n].dtype.itemsize for n in names)
    gb = nbytes / 1e9
    subprocess.run(["cat", dump], stdout=subprocess.DEVNULL)  # into the page cache
    cat, cat_rss = timed(["cat", dump])
    cat_rate = os.path.getsize(dump) / 1e9 / cat
    h5, h5_rss = timed([sys.executable, "-c", H5PY, dump])
    # GB/s: tensor bytes per second (cat: file bytes; the same for the uncompressed dumps).
    def row(reader, th, s, rss, size=gb):
        print(f"| {kind} ({nbytes / 2**30:.2f} GiB) | {reader} | {th} | {s:.2f} | {size / s:.2f} | "
              f"{h5 / s:.2f} | {100 * (size / s) / cat_rate:.0f} | {rss / 1024:.0f} |", flush=True)
    row("cat FILE >/dev/null", 1, cat, cat_rss, os.path.getsize(dump) / 1e9)
    row("h5py read", 1, h5, h5_rss)
    for th in threads:
        s, rss = timed([bin_, "inspect", dump, "--quiet", "--json", "--threads", str(th)])
        row("fp8kit inspect", th, s, rss)
    if os.environ["SWEEP"] == "1":
        s, rss = timed([bin_, "sweep", dump, "--no-blocks", "--json", "--threads", str(threads[-1])])
        row("fp8kit sweep --no-blocks", threads[-1], s, rss)
print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
PY
