"""Compares two fp8kit --json reports, --device cuda against --device cpu (tests/cli/device_gpu.sh).

Everything must be equal (keys in order, strings, counts, extremes, histograms, scales) except the
numbers made from the two binary64 sums, which the GPU adds in another order
(cuda/include/fp8kit/cuda/kernels.hpp, statistics(); docs/cuda.md "Statistics kernel"):
sum_x2, sum_err2 and mse within 1e-9 relative, sqnr_db = 10 log10(sum_x2 / sum_err2) within
1e-7 dB (1e-9 relative on each sum moves it by at most 10 * 2e-9 / ln 10 ~ 1e-8 dB).
Usage: python3 device_json_compare.py CPU.json CUDA.json  (prints one line; exit 1 on a difference)
"""
import json
import math
import sys

RELATIVE = {"sum_x2", "sum_err2", "mse"}
DB = {"sqnr_db"}


def close(key, a, b):
    if a == b:
        return True
    if not (isinstance(a, float) and isinstance(b, float)) or not (math.isfinite(a) and math.isfinite(b)):
        return False
    if key in RELATIVE:
        return abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    if key in DB:
        return abs(a - b) <= 1e-7
    return False


def walk(a, b, path, key, stats):
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            raise AssertionError(f"{path}: keys differ: {list(a)} vs {list(b)}")
        for k in a:
            walk(a[k], b[k], f"{path}.{k}", k, stats)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            raise AssertionError(f"{path}: lengths differ: {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}[{i}]", key, stats)
    else:
        if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            raise AssertionError(f"{path}: {a!r} vs {b!r}")
        if not close(key, a, b):
            raise AssertionError(f"{path}: cpu {a!r} vs cuda {b!r}")
        stats["values"] += 1
        if a != b:
            stats["within_tolerance"] += 1


def main():
    cpu = json.load(open(sys.argv[1]))
    gpu = json.load(open(sys.argv[2]))
    stats = {"values": 0, "within_tolerance": 0}
    try:
        walk(cpu, gpu, "$", "", stats)
    except AssertionError as e:
        print(f"differs: {e}")
        return 1
    print(f"{stats['values']} values equal, {stats['within_tolerance']} of them sums within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
