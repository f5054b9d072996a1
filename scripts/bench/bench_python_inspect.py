#!/usr/bin/env python3
"""Python reads through the same thread pool as the CLI (issue 22, "Python gets the same speed"):
wall seconds of `fp8kit inspect --json` (CLI), `fp8kit.inspect` and a pass of `fp8kit.read_dump`
over one dump, each with 1 and 2 threads (OMP_NUM_THREADS, which the pool reads as the CLI's
--threads; parallel/pool.cpp), and h5py reading every dataset, data in the page cache. Each
Python run is a fresh process, so the pool starts with the thread count asked for. Also checks
that fp8kit.inspect's numbers equal the CLI's JSON (the same inspect::analyse).
Usage: .venv/bin/python scripts/bench/bench_python_inspect.py DUMP.h5 [FP8KIT] [THREADS="1 2"] [REPS=3]"""

import json
import os
import subprocess
import sys
import time

dump = sys.argv[1]
cli_bin = sys.argv[2] if len(sys.argv) > 2 else "build/tools/fp8kit"
threads = [int(t) for t in (sys.argv[3] if len(sys.argv) > 3 else "1 2").split()]
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
PY = {
    "fp8kit.inspect": "import fp8kit, sys; fp8kit.inspect(sys.argv[1])",
    "fp8kit.read_dump": "import fp8kit, sys\nfor info, a in fp8kit.read_dump(sys.argv[1]): a.sum()",
    # (visititems stops at the first callback that returns something other than None: the
    # names are collected first, as in bench_inspect.sh, so that every dataset is read)
    "h5py read": "import h5py, sys\nf = h5py.File(sys.argv[1], 'r')\nn = []\n"
    "f.visititems(lambda k, o: n.append(k) if isinstance(o, h5py.Dataset) else None)\n"
    "for k in n: f[k][...]",
    "import fp8kit (start-up only)": "import fp8kit",
}


def best(cmd, env):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        t.append(time.perf_counter() - t0)
    return min(t)


subprocess.run(["cat", dump], stdout=subprocess.DEVNULL, check=True)  # into the page cache
gib = os.path.getsize(dump) / 2**30
print(f"dump {dump} ({gib:.2f} GiB), best of {reps}, load average {os.getloadavg()[0]:.1f}")
print("| reader | threads | s |\n|---|---|---|")
for n in threads:
    env = dict(os.environ, OMP_NUM_THREADS=str(n))
    print(
        f"| fp8kit inspect --json (CLI) | {n} | {best([cli_bin, 'inspect', '-q', dump, '--json', '--threads', str(n)], env):.2f} |"
    )
    for name, code in PY.items():
        if name in ("h5py read", "import fp8kit (start-up only)") and n != threads[0]:
            continue
        print(
            f"| {name} | {n if name == 'fp8kit.inspect' or name == 'fp8kit.read_dump' else 1} | {best([sys.executable, '-c', code, dump], env):.2f} |"
        )
print(f"load average after: {os.getloadavg()[0]:.1f}")
# The same numbers: fp8kit.inspect against the CLI's JSON, tensor by tensor.
import fp8kit  # noqa: E402

rows = fp8kit.inspect(dump)
rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
cli = json.loads(
    subprocess.run([cli_bin, "inspect", dump, "--json"], capture_output=True, text=True, check=True).stdout
)
tensors = cli["tensors"] if isinstance(cli, dict) else cli
assert len(rows) == len(tensors), (len(rows), len(tensors))
for r, c in zip(rows, tensors):
    for k in ("amax", "sum_x2", "sum_err2", "underflow", "overflow"):
        assert r[k] == c[k], (r["name"], k, r[k], c[k])
print(f"fp8kit.inspect equals the CLI's JSON on all {len(rows)} tensors (amax, sums, counts)")
