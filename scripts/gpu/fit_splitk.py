#!/usr/bin/env python3
"""Fit how cuBLASLt's split-K FP8 kernels combine their partial sums, from a committed report of
splitk_combination_data.py (data/gemm_probe/splitk_combination_*.json): no GPU, no arrays. Each
case's operands are made again from its seed (numpy and ml_dtypes: splitk_acceptance.case_inputs),
and each hypothesis's D is hashed and compared with the SHA-256 of cuBLASLt's D in the report.

K is cut at the split starts the report measured for the shape (whole 128-wide k tiles); each
range is accumulated from zero by the one-CTA model (`sm90`, or `sm90-fast` for fast accumulation)
with unit scales, so a partial is the accumulator itself (fp8kit.gemm on the slice). Hypotheses:
  sequential   partials added in float32 in k order, then fl32(fl32(sa * sb) * sum)  (the model,
               `sm90[-fast]-splitk:N`, docs/gemm.md)
  reversed     the same in reverse k order
  pairwise     the partials added as a balanced tree
  scaled       each partial scaled by fl32(sa * sb) first, then added in k order
  one-cta      no split: the one-CTA model over all of K with the scales
bfloat16 outputs are the float32 result rounded to nearest even.

usage: fit_splitk.py REPORT_JSON [--max-work 3e8]   (exit 1 if `sequential` misses a case)
"""

import argparse
import hashlib
import json
import os
import sys

import fp8kit
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from splitk_inputs import case_inputs  # noqa: E402


def partials(a, b, starts, model):
    bounds = [t * 128 for t in starts] + [a.shape[1]]
    return [
        fp8kit.gemm(np.ascontiguousarray(a[:, lo:hi]), np.ascontiguousarray(b[:, lo:hi]), accum=model)
        for lo, hi in zip(bounds, bounds[1:])
    ]


def add_in_order(parts):
    total = parts[0].astype(np.float32)
    for p in parts[1:]:
        total = (total + p).astype(np.float32)
    return total


def add_pairwise(parts):
    while len(parts) > 1:
        parts = [(parts[i] + parts[i + 1]).astype(np.float32) for i in range(0, len(parts) - 1, 2)] + (
            [parts[-1]] if len(parts) % 2 else []
        )
    return parts[0]


def hypotheses(a, b, sa, sb, starts, fast):
    model = "sm90-fast" if fast else "sm90"
    parts = partials(a, b, starts, model)
    scale = np.float32(sa * sb)
    return {
        "sequential": (scale * add_in_order(parts)).astype(np.float32),
        "reversed": (scale * add_in_order(parts[::-1])).astype(np.float32),
        "pairwise": (scale * add_pairwise(parts)).astype(np.float32),
        "scaled": add_in_order([(scale * p).astype(np.float32) for p in parts]),
        "one-cta": fp8kit.gemm(a, b, scale_a=sa, scale_b=sb, accum=model),
    }


def to_bf16_bits(x):
    """float32 -> bfloat16 bits, nearest even (the epilogue's conversion); NaN -> 0x7FC0."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[np.isnan(x)] = 0x7FC0
    return r


def digest(d32, out):
    d = to_bf16_bits(d32) if out == "bf16" else d32
    return hashlib.sha256(np.ascontiguousarray(d).tobytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report")
    ap.add_argument("--max-work", type=float, default=3e8)
    args = ap.parse_args()
    report = json.load(open(args.report))
    matched, checked, left_out = {}, 0, 0
    for r in report["rows"]:
        if float(r["M"]) * r["N"] * r["K"] > args.max_work:
            left_out += 1
            continue
        starts = report["shapes"][f"{r['M']}x{r['N']}x{r['K']}"]["measured_starts_tiles"]
        a, b, sa, sb = case_inputs(r["seed"], r["M"], r["N"], r["K"], r["inputs"])
        hits = [
            h for h, d in hypotheses(a, b, sa, sb, starts, r["fast"]).items() if digest(d, r["out"]) == r["d_sha256"]
        ]
        for h in hits:
            matched[h] = matched.get(h, 0) + 1
        checked += 1
        print(
            f"{r['M']}x{r['N']}x{r['K']} {r['inputs']:6s} fast={int(r['fast'])} {r['out']:4s} "
            f"splits={len(starts)}: {', '.join(hits) or 'none'}",
            flush=True,
        )
    print(f"{checked} cases ({left_out} above --max-work left out); bit-exact per hypothesis: {matched}")
    sys.exit(0 if checked and matched.get("sequential", 0) == checked else 1)


if __name__ == "__main__":
    main()
