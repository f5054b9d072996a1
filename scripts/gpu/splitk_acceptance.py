#!/usr/bin/env python3
"""Acceptance of the split-K prediction on shapes no discovery step used (docs/gemm.md, "Split-K:
the prediction"). Needs a CUDA GPU, torch and the fp8kit module built with the CUDA kernels.

1. Shapes: drawn from --seed (numpy default_rng): M and N from {16, 32, ..., 128} and K a
   multiple of 128 in [5120, 49152], none of them a K that discovery or an earlier acceptance
   used (SEEN_K); then LARGE shapes (M or N above 128), where the rule predicts no split.
2. Prediction, before any GEMM runs: N = fp8kit.predicted_split_k(M, N, K), written to
   OUT/predictions.json; the expected model is sm90[-fast]-splitk:N, or sm90[-fast] for 0.
3. Cases: per shape, both accumulators x two input kinds (normal; wide: signed 1, 1.25, 1.5, 1.75
   times powers of two over E4M3's range), float32 out, tensorwise scales in [0.01, 4). Inputs
   come from numpy and ml_dtypes only, from the case's seed, so they can be made again without a
   GPU (check_splitk_acceptance.py). D = torch._scaled_mm(...): its SHA-256 and the number of
   elements that differ from fp8kit.gemm(expected model, device="cuda") go to the report.
4. Independently, the split boundaries of each shape are measured by probe_splitk.py's crafted
   scan (other inputs), and the report counts the shapes where the prediction was wrong.

usage: splitk_acceptance.py OUT_DIR [--seed 20261130]
"""

import argparse
import hashlib
import json
import os
import sys

import fp8kit
import ml_dtypes
import numpy as np

# Every K of a split-K shape used before: the boundary scans (discovery), the random cases of the
# combination fit, and the acceptances of data/gemm_probe/.
SEEN_K = {6144, 8192, 9216, 10240, 11264, 12288, 14336, 16384, 18432, 20480, 24576, 28672, 32768, 49152, 65536}
SIDES = (16, 32, 48, 64, 80, 96, 112, 128)
E4M3_MAX = 448.0


def choose_shapes(rng, count, large):
    shapes = []
    while len(shapes) < count:
        k = 128 * int(rng.integers(40, 385))
        shape = (int(rng.choice(SIDES)), int(rng.choice(SIDES)), k)
        if k not in SEEN_K and shape not in shapes:
            shapes.append(shape)
    while len(shapes) < count + large:
        k = 128 * int(rng.integers(64, 257))
        shape = (int(rng.choice((192, 256, 384))), int(rng.choice(SIDES)), k)
        if k not in SEEN_K and shape not in shapes:
            shapes.append((shape[1], shape[0], k) if len(shapes) % 2 else shape)
    return shapes


def operand(rng, kind, rows, k):
    """E4M3 codes (uint8) from numpy and ml_dtypes only."""
    if kind == "normal":
        x = rng.normal(0.0, 1.0, (rows, k)) * 2.0 ** rng.integers(-4, 5)
    else:
        x = rng.choice([1.0, 1.25, 1.5, 1.75], (rows, k)) * 2.0 ** rng.integers(-9, 9, (rows, k))
        x *= rng.choice([-1.0, 1.0], (rows, k))
    x = np.clip(x, -E4M3_MAX, E4M3_MAX).astype(np.float32)
    return x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def case_inputs(seed, m, n, k, kind):
    rng = np.random.default_rng(seed)
    a, b = operand(rng, kind, m, k), operand(rng, kind, n, k)
    sa, sb = np.float32(rng.uniform(0.01, 4)), np.float32(rng.uniform(0.01, 4))
    return a, b, sa, sb


def expected_model(split_k, fast):
    base = "sm90-fast" if fast else "sm90"
    return f"{base}-splitk:{split_k}" if split_k else base


def torch_d(a, b, sa, sb, fast):
    import torch  # here: check_splitk_acceptance.py makes the inputs again without torch

    at = torch.from_numpy(a).cuda().view(torch.float8_e4m3fn)
    bt = torch.from_numpy(b).cuda().view(torch.float8_e4m3fn)
    s = [torch.tensor(float(v), device="cuda") for v in (sa, sb)]
    d = torch._scaled_mm(at, bt.t(), s[0], s[1], out_dtype=torch.float32, use_fast_accum=fast)
    return d.cpu().numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--shapes", type=int, default=24)
    ap.add_argument("--large", type=int, default=4)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from probe_scaled_mm import versions  # the GPU probes' helpers (they import torch)
    from probe_splitk import split_boundaries

    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    shapes = choose_shapes(rng, args.shapes, args.large)
    predictions = {f"{m}x{n}x{k}": fp8kit.predicted_split_k(m, n, k) for m, n, k in shapes}
    with open(os.path.join(args.out, "predictions.json"), "w") as f:  # fixed before any GEMM
        json.dump({"seed": args.seed, "predicted_split_k": predictions}, f, indent=1)
    report = {"seed": args.seed, "versions": versions(), "shapes": {}, "rows": []}
    case_seed = args.seed * 1000
    for m, n, k in shapes:
        key = f"{m}x{n}x{k}"
        starts = split_boundaries(m, n, k)
        measured = 0 if len(starts) == 1 else starts[1] * 128
        report["shapes"][key] = {
            "predicted_split_k": predictions[key],
            "measured_split_k": measured,
            "measured_starts_tiles": starts,
        }
        for kind in ("normal", "wide"):
            case_seed += 1
            a, b, sa, sb = case_inputs(case_seed, m, n, k, kind)
            for fast in (False, True):
                model = expected_model(predictions[key], fast)
                d = torch_d(a, b, sa, sb, fast)
                ours = fp8kit.gemm(a, b, scale_a=sa, scale_b=sb, accum=model, device="cuda")
                row = {
                    "M": m,
                    "N": n,
                    "K": k,
                    "inputs": kind,
                    "fast": fast,
                    "seed": case_seed,
                    "model": model,
                    "mismatches": int(np.count_nonzero(d.view(np.uint32) != ours.view(np.uint32))),
                    "d_sha256": hashlib.sha256(np.ascontiguousarray(d).tobytes()).hexdigest(),
                }
                report["rows"].append(row)
        print(
            key,
            report["shapes"][key]["predicted_split_k"],
            measured,
            [r["mismatches"] for r in report["rows"][-4:]],
            flush=True,
        )
    rows, shapes_r = report["rows"], report["shapes"].values()
    report["summary"] = {
        "shapes": len(shapes),
        "prediction_wrong": sum(s["predicted_split_k"] != s["measured_split_k"] for s in shapes_r),
        "cases": len(rows),
        "bit_exact": sum(r["mismatches"] == 0 for r in rows),
    }
    with open(os.path.join(args.out, "splitk_acceptance.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report["summary"]))


if __name__ == "__main__":
    main()
