#!/usr/bin/env python3
"""`fp8kit gemm` under every named accumulation model beside numpy's float64 GEMM, in one run,
on the same operands.

Makes random E4M3 codes A (M x K) and B (N x K, the TN layout of `fp8kit gemm`), finite only
(no NaN code), with tensorwise scales, for each shape of --shapes. Times, best of --reps:

  - `fp8kit gemm A B --accum MODEL` for every model of `fp8kit gemm --help` (the split-K ones
    with N = K / 4, four splits): the whole command, reading the .npy files and writing D;
  - fp8kit.gemm(...) (the Python binding, the same library call without the files) when the
    module imports (--python-path: the folder holding the built package);
  - numpy: the decode of both operands to float64 through ml_dtypes (float8_e4m3fn), times the
    scales, and A @ B.T (BLAS float64, not bit-exact under any model: the yardstick).

With --baseline OTHER_FP8KIT, every model runs under the other binary too, its time is printed
beside, and both outputs are compared bit for bit (the script exits 1 on a difference), so one
run measures before and after and checks that a change kept the bits.

Prints a table per shape: wall and CPU seconds (user + sys of every thread) and their ratios to
numpy's (> 1: slower than numpy); the speed-up over the baseline is the ratio of CPU times. On a
shared machine other processes take CPU time from every side and stretch wall times; each
figure is the best of its repetitions, the closest each comes to an unshared machine, and the
CPU times are the steadier comparison.

    python3 bench/gemm_vs_numpy.py [--fp8kit build/tools/fp8kit] [--baseline OLD_FP8KIT]
        [--shapes 256x256x4096,512x512x8192] [--reps 3] [--python-path build/python]
"""

import argparse
import collections
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import ml_dtypes
import numpy as np

MODELS = ("exact", "fp32", "sm90", "sm90-fast", "deepseek-128", "h100tc", "sm90-splitk", "sm90-fast-splitk")
SCALE_A, SCALE_B = 0.5, 0.25
Timing = collections.namedtuple("Timing", "wall cpu")


def model_text(model: str, k: int) -> str:
    """The --accum text: the split-K models with four splits of K / 4 products (a multiple of 128)."""
    if model.endswith("splitk"):
        return f"{model}:{max(128, (k // 4) // 128 * 128)}"
    return model


def make_operands(m: int, n: int, k: int, seed: int):
    """E4M3 codes with every finite value possible: 0x7F and 0xFF (NaN) redrawn as 0x00."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (m, k), dtype=np.uint8)
    b = rng.integers(0, 256, (n, k), dtype=np.uint8)
    for x in (a, b):
        x[(x & 0x7F) == 0x7F] = 0
    return a, b


def best_of(reps: int, fn):
    """Best wall time, best CPU time (user + sys of this process and of the commands it waited
    for: every thread of numpy's BLAS, of the module's OpenMP, of `fp8kit gemm`) and the result."""
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(reps):
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, cpu_seconds() - c0)
    return Timing(best, best_cpu), result


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def numpy_gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    fa = a.view(ml_dtypes.float8_e4m3fn).astype(np.float64) * SCALE_A
    fb = b.view(ml_dtypes.float8_e4m3fn).astype(np.float64) * SCALE_B
    return fa @ fb.T


def run_cli(binary: str, files, model: str, out: str) -> None:
    a, b = files
    cmd = [binary, "gemm", a, b, "--scale-a", str(SCALE_A), "--scale-b", str(SCALE_B), "--accum", model, "-o", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def import_fp8kit(path):
    if not path:
        return None
    sys.path.insert(0, path)
    try:
        import fp8kit  # noqa: PLC0415 (optional: only with --python-path)

        return fp8kit
    except ImportError as e:
        print(f"fp8kit module not imported from {path}: {e}", file=sys.stderr)
        return None


def bench_shape(args, shape, tmp, fp8kit_py) -> bool:
    m, n, k = shape
    a, b = make_operands(m, n, k, args.seed)
    files = (os.path.join(tmp, "a.npy"), os.path.join(tmp, "b.npy"))
    np.save(files[0], a)
    np.save(files[1], b)
    t_np, ref = best_of(args.reps, lambda: numpy_gemm(a, b))
    print(f"\n{m} x {n} x {k} (M x N x K), E4M3, tensorwise scales {SCALE_A} and {SCALE_B}; best of {args.reps}")
    print("wall and CPU (user + sys) seconds; x np: the time over numpy's (wall / wall, CPU / CPU)")
    head = f"{'model':<24} {'wall s':>8} {'CPU s':>8} {'x np':>6} {'CPU x np':>8}"
    if fp8kit_py:
        head += f" | {'py wall s':>9} {'x np':>6}"
    if args.baseline:
        head += f" | {'base wall':>9} {'base CPU':>8} {'x np':>6} {'CPU x np':>8} {'speed-up':>8} {'bits':>5}"
    print(head)
    print(f"{'numpy f64 decode + @':<24} {t_np.wall:>8.4f} {t_np.cpu:>8.4f} {1.0:>6.2f} {1.0:>8.2f}")
    same = True
    for model in args.models.split(","):
        text = model_text(model, k)
        out_new, out_old = os.path.join(tmp, "new.npy"), os.path.join(tmp, "old.npy")
        t_new, _ = best_of(args.reps, lambda: run_cli(args.fp8kit, files, text, out_new))
        d = np.load(out_new)
        line = f"{text:<24} {t_new.wall:>8.4f} {t_new.cpu:>8.4f} {t_new.wall / t_np.wall:>6.2f}"
        line += f" {t_new.cpu / t_np.cpu:>8.2f}"
        if fp8kit_py:
            t_py, d_py = best_of(args.reps, lambda: fp8kit_py.gemm(a, b, "e4m3", "e4m3", SCALE_A, SCALE_B, accum=text))
            line += f" | {t_py.wall:>9.4f} {t_py.wall / t_np.wall:>6.2f}"
            same &= d_py.view(np.uint32).tobytes() == d.view(np.uint32).tobytes()
        if args.baseline:
            t_old, _ = best_of(args.baseline_reps, lambda: run_cli(args.baseline, files, text, out_old))
            equal = np.load(out_old).view(np.uint32).tobytes() == d.view(np.uint32).tobytes()
            same &= equal
            line += f" | {t_old.wall:>9.4f} {t_old.cpu:>8.4f} {t_old.wall / t_np.wall:>6.2f}"
            line += f" {t_old.cpu / t_np.cpu:>8.2f} {t_old.cpu / t_new.cpu:>8.2f} {'same' if equal else 'DIFF':>5}"
        # How far the model is from float64: a sanity check that both sides computed D.
        err = float(np.max(np.abs(d.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-300))
        print(line + f"  rel. to f64 {err:.0e}")
    return same


def parse_shapes(text: str):
    shapes = []
    for item in text.split(","):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise SystemExit(f"--shapes: '{item}' is not MxNxK with three positive integers")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fp8kit", default="build/tools/fp8kit", help="the fp8kit binary")
    ap.add_argument("--baseline", help="another fp8kit binary: timed beside and its outputs compared bit for bit")
    ap.add_argument("--shapes", default="256x256x4096,512x512x8192", help="M x N x K, comma-separated")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (best is kept)")
    ap.add_argument("--baseline-reps", type=int, default=1, help="repetitions of the baseline binary")
    ap.add_argument("--python-path", help="folder holding the built fp8kit package (also times fp8kit.gemm)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of: " + " ".join(MODELS))
    ap.add_argument("--seed", type=int, default=49)
    args = ap.parse_args()
    for label, path in (("--fp8kit", args.fp8kit), ("--baseline", args.baseline)):
        if path and not os.access(path, os.X_OK):
            raise SystemExit(f"{label}: '{path}' is not an executable file")
    shapes = parse_shapes(args.shapes)
    unknown = [x for x in args.models.split(",") if x not in MODELS]
    if unknown:
        raise SystemExit(f"--models: unknown {', '.join(unknown)} (choose from {', '.join(MODELS)})")
    fp8kit_py = import_fp8kit(args.python_path)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    print(f"numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}; load average {os.getloadavg()[0]:.2f}")
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            same &= bench_shape(args, shape, tmp, fp8kit_py)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    if not same:
        print("DIFFERENT BITS: an output differs between the binaries (or the Python call)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
