#!/usr/bin/env python3
"""The data of the split-K combination fit (fit_splitk.py --report), reduced to what the fit needs:
per case its seed, shape, input kind, accumulator, output dtype and the SHA-256 of cuBLASLt's D,
and per shape the split starts measured by probe_splitk.py's crafted scan. The operands are made
from each case's seed by numpy and ml_dtypes only (splitk_acceptance.case_inputs), so the fit
reruns on any machine from this report. Needs a CUDA GPU and torch (not fp8kit).

Shapes: probe_splitk.py's RANDOM_SHAPES, the shapes of the combination fit (docs/gemm.md,
"Split-K"). Cases per shape: three input kinds (normal, wide, adversarial) x both accumulators x float32 and
bfloat16 out, E4M3 operands, tensorwise scales in [0.01, 4).

usage: splitk_combination_data.py OUT_JSON [--seed 20261126]
"""

import argparse
import hashlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_scaled_mm import kernels, versions  # noqa: E402
from probe_splitk import RANDOM_SHAPES, split_boundaries  # noqa: E402
from splitk_inputs import case_inputs  # noqa: E402


def scaled_mm(a, b, sa, sb, fast, out):
    at = torch.from_numpy(a).cuda().view(torch.float8_e4m3fn)
    bt = torch.from_numpy(b).cuda().view(torch.float8_e4m3fn)
    s = [torch.tensor(float(v), device="cuda") for v in (sa, sb)]
    return torch._scaled_mm(at, bt.t(), s[0], s[1], out_dtype=out, use_fast_accum=fast)


def d_bytes(d):
    """D as stored: float32, or bfloat16 as its 16-bit patterns."""
    return (d.view(torch.int16) if d.dtype == torch.bfloat16 else d).cpu().numpy().tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=20261126)
    args = ap.parse_args()
    report = {"seed": args.seed, "versions": versions(), "shapes": {}, "rows": []}
    case_seed = args.seed * 1000
    for m, n, k in RANDOM_SHAPES:
        key = f"{m}x{n}x{k}"
        starts = split_boundaries(m, n, k)
        report["shapes"][key] = {"measured_starts_tiles": starts}
        for kind in ("normal", "wide", "adversarial"):
            case_seed += 1
            a, b, sa, sb = case_inputs(case_seed, m, n, k, kind)
            for fast in (False, True):
                for out in (torch.float32, torch.bfloat16):
                    d = scaled_mm(a, b, sa, sb, fast, out)
                    report["rows"].append(
                        {
                            "M": m,
                            "N": n,
                            "K": k,
                            "inputs": kind,
                            "seed": case_seed,
                            "fast": fast,
                            "out": "f32" if out == torch.float32 else "bf16",
                            "kernels": [x for x in kernels(lambda: scaled_mm(a, b, sa, sb, fast, out)) if "nvjet" in x],
                            "d_sha256": hashlib.sha256(d_bytes(d)).hexdigest(),
                        }
                    )
        print(key, "splits at tiles", starts, flush=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(len(report["rows"]), "cases")


if __name__ == "__main__":
    main()
