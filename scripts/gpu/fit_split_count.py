#!/usr/bin/env python3
"""Refit cuBLASLt's split count from the committed measurements, and check fp8kit's prediction.

Measurements (H200, cuBLASLt 130100): the split starts of probe_splitk.py step `scan2`
(splitk_boundaries.json: `boundaries`), and the split starts that splitk_acceptance.py scanned on
each of its shapes (`shapes`). For a shape, tiles = ceil(K / 128) and S is its number of splits.

1. The divisor: S = floor(tiles / c) fits a shape when c lies in (tiles / (S + 1), tiles / S]
   (S = 1: c > tiles / 2). The interval is intersected over the shapes where cuBLASLt did not cap
   its splits (S_rule * M * N <= fp8kit's limit, below) and printed.
2. The cap: among all shapes, the largest S_rule * M * N where S = S_rule held and the smallest
   where cuBLASLt took fewer splits, S_rule = floor(10 tiles / 201) (c = 20.1).
3. fp8kit.predicted_split_k (lib's rule) against every measured shape and every tensorwise case of
   the older acceptance reports (`rows`, whose expected models came from boundary scans): where it
   predicts (not None), it must equal the measurement.

Exit 0 when the interval holds 20.1, the limit lies between the two values of 2, and no prediction
is wrong.

usage: fit_split_count.py JSON [JSON ...]
"""

import json
import math
import re
import sys

import fp8kit

LIMIT = fp8kit._fp8kit.split_prediction_limit  # lib's kSplitPredictionLimit (lib/include/fp8kit/gemm/model.hpp)


def rule_splits(k):
    return (k + 127) // 128 * 10 // 201


def shapes_of(report):
    """(M, N, K, measured split size in products, 0 for none) of each scanned shape."""
    scanned = dict(report.get("boundaries", {}))
    for key, row in report.get("shapes", {}).items():
        scanned[key] = {"split_starts_tiles": row["measured_starts_tiles"]}
    for key, row in scanned.items():
        m, n, k = (int(x) for x in key.split("x"))
        starts = row["split_starts_tiles"]
        yield m, n, k, (starts[1] * 128 if len(starts) > 1 else 0)


def older_cases(report):
    """(M, N, K, split size) of the tensorwise cases of an older acceptance report."""
    for row in report.get("rows", []):
        if row.get("scaling") != "tensor":
            continue
        hit = re.search(r"splitk:(\d+)", row["model"])
        if row["model"] in ("sm90", "sm90-fast") or hit:
            yield row["M"], row["N"], row["K"], int(hit.group(1)) if hit else 0


def splits_of(k, size):
    tiles = (k + 127) // 128
    return math.ceil(tiles / (size // 128)) if size else 1


def main():
    reports = [(p, json.load(open(p))) for p in sys.argv[1:]]
    shapes = sorted({s for _, r in reports for s in shapes_of(r)})
    lo, hi, held, capped = 0.0, math.inf, 0.0, math.inf
    for m, n, k, size in shapes:
        s, tiles, load = splits_of(k, size), (k + 127) // 128, rule_splits(k) * m * n
        if s == max(rule_splits(k), 1):
            held = max(held, load)
        elif s < rule_splits(k):
            capped = min(capped, load)
        if load <= LIMIT:
            lo, hi = max(lo, tiles / (s + 1)), min(hi, tiles / s if s > 1 else math.inf)
    print(f"{len(shapes)} scanned shapes: S = floor(tiles / c) fits every uncapped one for c in ({lo:.4f}, {hi:.4f}]")
    print(f"cap: S = S_rule held up to S_rule * M * N = {held:.0f}; fewer splits from {capped:.0f}; limit {LIMIT:.0f}")
    ok = lo < 20.1 <= hi and held <= LIMIT < capped
    checked = unpredicted = 0
    cases = [(p, s) for p, _ in reports[:1] for s in shapes] + [(p, s) for p, r in reports for s in older_cases(r)]
    for source, (m, n, k, size) in cases:
        got = fp8kit.predicted_split_k(m, n, k)
        if got is None:
            unpredicted += 1
            continue
        checked += 1
        if got != size:
            ok = False
            print(f"MISMATCH {source}: {m}x{n}x{k}: measured {size}, predicted {got}")
    print(f"{checked} split sizes predicted and checked ({unpredicted} not predicted): {'all agree' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
