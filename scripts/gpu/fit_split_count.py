#!/usr/bin/env python3
"""Refit cuBLASLt's split count from the committed split boundaries, and check fp8kit's prediction.

Reads data/gemm_probe/splitk_boundaries.json (the split starts `probe_splitk.py` step `scan2`
measured on an H200, cuBLASLt 130100), and for each shape takes tiles = K / 128 and S, the number
of splits. A rule S = floor(tiles / c) fits a shape when c lies in (tiles / (S + 1), tiles / S]
(for S = 1: c > tiles / 2, no split); the script intersects those intervals over every shape and
prints the interval. Then it checks fp8kit.predicted_split_k (lib's rule, c = 20.1) against every
measured split size, and against the models of the tensorwise cases of the acceptance reports
given after the boundaries file (their expected models were taken from boundary scans). Exit 0 when the interval is not empty, holds 20.1, and every prediction agrees.

usage: fit_split_count.py BOUNDARIES_JSON [ACCEPTANCE_JSON ...]
"""

import json
import math
import re
import sys

import fp8kit


def measured(boundaries):
    """(M, N, K, split size in products or 0) of every measured shape."""
    for shape, row in boundaries["boundaries"].items():
        m, n, k = (int(x) for x in shape.split("x"))
        sizes = row["tiles_per_split"]
        yield m, n, k, (sizes[0] * 128 if len(sizes) > 1 else 0)


def interval(shapes):
    lo, hi = 0.0, math.inf
    for _, _, k, size in shapes:
        tiles = k // 128
        s = max(1, math.ceil(tiles / (size // 128))) if size else 1
        lo, hi = max(lo, tiles / (s + 1)), min(hi, tiles / s if s > 1 else math.inf)
    return lo, hi


def accepted(path):
    """(M, N, K, split size) of every tensorwise case of an acceptance report with at most 128 x 128
    outputs: the split size of its expected model, 0 for sm90 / sm90-fast (no split)."""
    for row in json.load(open(path)).get("rows", []):
        if row.get("scaling") != "tensor" or row["M"] > 128 or row["N"] > 128:
            continue
        hit = re.search(r"splitk:(\d+)", row["model"])
        if row["model"] in ("sm90", "sm90-fast") or hit:
            yield row["M"], row["N"], row["K"], int(hit.group(1)) if hit else 0


def main():
    boundaries = json.load(open(sys.argv[1]))
    shapes = list(measured(boundaries))
    lo, hi = interval(shapes)
    print(
        f"{len(shapes)} measured shapes (cuBLASLt {boundaries['versions'].get('cublasLt_version')}): "
        f"S = floor(tiles / c) fits every one for c in ({lo:.4f}, {hi:.4f}]"
    )
    ok = lo < 20.1 <= hi
    checked = 0
    for source, rows in [(sys.argv[1], shapes)] + [(p, list(accepted(p))) for p in sys.argv[2:]]:
        for m, n, k, size in rows:
            got = fp8kit.predicted_split_k(m, n, k)
            checked += 1
            if got != size:
                ok = False
                print(f"MISMATCH {source}: {m}x{n}x{k}: measured {size}, predicted {got}")
    print(f"{checked} split sizes checked against fp8kit.predicted_split_k: {'all agree' if ok else 'DISAGREE'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
