#!/usr/bin/env python3
"""fp8kit's bulk float32 -> E4M3/E5M2 beside ml_dtypes' astype, in one run, on the same numbers.

Makes 256 MiB of float32 (sign random, magnitude 2^U(-20, 20): zeros-free, covering the
subnormal range, the normal range and overflow of both formats), times ml_dtypes
`x.astype(ml_dtypes.float8_e4m3fn)` and `float8_e5m2` on it (best of --reps), writes it to a
file that bench_convert reads (FP8KIT_BENCH_INPUT), runs bench_convert with
--benchmark_format=json and prints one table: elements/s, GB/s (5 bytes per element: 4 read,
1 written; 10^9 bytes), ratio to ml_dtypes' elements/s, and % of the memory bandwidth measured by
the same program (streaming copy counting read + write, and a read-only sum).

On a shared machine other processes take CPU time from both sides; every figure is the best of
its repetitions (--reps for ml_dtypes, --benchmark_repetitions for bench_convert), the closest
each comes to an unshared machine.

    python3 bench/compare_ml_dtypes.py [--bench build/bench/bench_convert] [--reps 5]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import ml_dtypes
import numpy as np

SIZE_BYTES = 256 << 20


def make_input(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = SIZE_BYTES // 4
    mag = np.exp2(rng.uniform(-20.0, 20.0, n)).astype(np.float32)
    sign = np.where(rng.integers(0, 2, n, dtype=np.uint8) == 1, np.float32(-1), np.float32(1))
    return mag * sign


def time_astype(x: np.ndarray, dtype, reps: int):
    """Best wall time and best process CPU time of reps conversions (seconds). astype runs on one
    thread, so the CPU time is what it would take on a core of its own."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        y = x.astype(dtype)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
        del y
    return best, best_cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default="build/bench/bench_convert", help="the bench_convert binary")
    ap.add_argument("--reps", type=int, default=5, help="ml_dtypes repetitions (best is kept)")
    ap.add_argument("--min-time", default="1", help="--benchmark_min_time for bench_convert (seconds)")
    ap.add_argument("--json-out", help="also write all raw figures to this JSON file")
    args = ap.parse_args()
    if not os.access(args.bench, os.X_OK):
        print(f"--bench {args.bench}: not an executable (build it: cmake --build build --target bench_convert)",
              file=sys.stderr)
        return 2

    x = make_input(1)
    n = x.size
    ml, ml_cpu = {}, {}
    for fmt, dtype in (("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2)):
        wall, cpu = time_astype(x, dtype, args.reps)
        ml[fmt], ml_cpu[fmt] = n / wall, n / cpu

    with tempfile.NamedTemporaryFile(prefix="fp8kit_bench_", suffix=".f32", delete=False) as f:
        x.tofile(f)
        input_path = f.name
    try:
        env = dict(os.environ, FP8KIT_BENCH_INPUT=input_path)
        run = subprocess.run([args.bench, "--benchmark_format=json", f"--benchmark_min_time={args.min_time}",
                              f"--benchmark_repetitions={args.reps}", "--benchmark_report_aggregates_only=false"],
                             env=env, check=True, capture_output=True, text=True)
    finally:
        os.unlink(input_path)
    report = json.loads(run.stdout)
    rows = {}  # best repetition of each benchmark
    for b in report["benchmarks"]:
        if b.get("error_occurred") or b.get("run_type") != "iteration":
            continue
        name = b.get("run_name", b["name"])
        if name not in rows or b["items_per_second"] > rows[name]["items_per_second"]:
            rows[name] = b

    def gbps(name):
        return rows[name]["bytes_per_second"] / 1e9

    copy_bw, read_bw = gbps("copy/real_time"), gbps("read_sum/real_time")
    ctx = report["context"]
    print(f"machine: {platform.processor() or platform.machine()}, {ctx.get('num_cpus')} CPUs, "
          f"OpenMP threads {ctx.get('omp_threads')}; numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}")
    print(f"input: {n} float32 ({SIZE_BYTES >> 20} MiB), same bytes for ml_dtypes and fp8kit")
    print(f"memory bandwidth (GB/s = 1e9 B/s): copy {copy_bw:.2f} (read+write counted), read-only sum {read_bw:.2f}")
    print(f"best of {args.reps} repetitions each; load average at the end: {os.getloadavg()[0]:.2f}")
    print("ml_dtypes per CPU-second (one thread, as if it had a core to itself): "
          + ", ".join(f"{k} {v / 1e6:.1f} Melem/s" for k, v in ml_cpu.items()))
    print()
    hdr = f"{'conversion':<34} {'path':<8} {'Melem/s':>9} {'GB/s':>7} {'x ml_dtypes':>11} {'% copy':>7} {'% read':>7}"
    print(hdr)
    print("-" * len(hdr))
    out = {"ml_dtypes": ml, "ml_dtypes_per_cpu_second": ml_cpu, "copy_GBps": copy_bw, "read_sum_GBps": read_bw,
           "fp8kit": {}}
    for fmt in ("e4m3", "e5m2"):
        e = ml[fmt]
        print(f"{'ml_dtypes astype float8_' + fmt + ('fn' if fmt == 'e4m3' else ''):<34} {'numpy':<8} "
              f"{e / 1e6:>9.1f} {e * 5 / 1e9:>7.2f} {1.0:>11.1f} {100 * e * 5 / 1e9 / copy_bw:>6.1f}% "
              f"{100 * e * 5 / 1e9 / read_bw:>6.1f}%")
        for path_arg, path in ((2, "avx512"), (1, "avx2"), (0, "scalar")):
            name = f"encode_{fmt}_satfinite/path:{path_arg}/real_time"
            if name not in rows:
                print(f"{'fp8kit ' + fmt + ' satfinite':<34} {path:<8} (not run on this CPU)")
                continue
            eps = rows[name]["items_per_second"]
            g = eps * 5 / 1e9
            out["fp8kit"][f"{fmt}/{path}"] = eps
            print(f"{'fp8kit ' + fmt + ' satfinite':<34} {path:<8} {eps / 1e6:>9.1f} {g:>7.2f} "
                  f"{eps / e:>11.1f} {100 * g / copy_bw:>6.1f}% {100 * g / read_bw:>6.1f}%")
    print()
    print("one core, data in L2, per CPU-second (compute capacity, unaffected by other processes):")
    for fmt in ("e4m3", "e5m2"):
        for path_arg, path in ((2, "avx512"), (1, "avx2"), (0, "scalar")):
            name = f"encode_in_l2_{fmt}_satfinite/path:{path_arg}"
            if name not in rows:
                continue
            b = rows[name]
            eps = b["items_per_second"]  # computed by Google Benchmark from CPU time
            out["fp8kit"][f"{fmt}/{path}/in_l2_per_core"] = eps
            print(f"  fp8kit {fmt} {path:<7} {eps / 1e6:>9.1f} Melem/s = {eps * 5 / 1e9:6.2f} GB/s-equivalent, "
                  f"{eps / ml_cpu[fmt]:6.1f}x ml_dtypes per CPU-second")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"summary": out, "bench": report}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
