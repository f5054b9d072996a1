#!/usr/bin/env python3
"""Rerun a split-K acceptance (splitk_acceptance.py) from its committed report, without a GPU: each
case's inputs are made again from its seed (numpy and ml_dtypes, as the GPU run made them), D is
computed with fp8kit.gemm under the case's expected model on the CPU, and its SHA-256 must equal
the hash of cuBLASLt's D in the report for every case the report lists as bit-exact (and differ
for the others). Cases above --max-work multiply-adds are left out and counted.

usage: check_splitk_acceptance.py REPORT_JSON [--max-work 2e8]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report")
    ap.add_argument("--max-work", type=float, default=2e8)
    args = ap.parse_args()
    rows = json.load(open(args.report))["rows"]
    checked = left_out = bad = 0
    for r in rows:
        if float(r["M"]) * r["N"] * r["K"] > args.max_work:
            left_out += 1
            continue
        a, b, sa, sb = case_inputs(r["seed"], r["M"], r["N"], r["K"], r["inputs"])
        d = fp8kit.gemm(a, b, scale_a=sa, scale_b=sb, accum=r["model"])
        same = hashlib.sha256(np.ascontiguousarray(d).tobytes()).hexdigest() == r["d_sha256"]
        if same != (r["mismatches"] == 0):
            bad += 1
            print(f"DIFFERS: {r['M']}x{r['N']}x{r['K']} {r['inputs']} fast={r['fast']} {r['model']}")
        checked += 1
    print(f"{checked} cases rerun on the CPU ({left_out} above --max-work left out): {bad} disagree with the report")
    sys.exit(1 if bad or not checked else 0)


if __name__ == "__main__":
    main()
