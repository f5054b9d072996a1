#!/usr/bin/env python3
"""Acceptance of the split-K prediction on shapes no discovery step used (docs/gemm.md, "Split-K:
the prediction"). Needs a CUDA GPU, torch and the fp8kit module built with the CUDA kernels.

1. Shapes: drawn from --seed (numpy default_rng): --shapes with M and N from {16, 32, ..., 128},
   and --large with one side from {192, 256, 384}; K a multiple of 128 in [5120, 49152] ([8192,
   32768] for the large ones), never a K of a shape measured before (every K in
   data/gemm_probe/*.json, and SEEN_K).
2. Prediction, before any GEMM runs: fp8kit.predicted_split_k(M, N, K), written to
   OUT/predictions.json (None: not predicted, where cuBLASLt may cap its splits).
3. Independently, each shape's split starts are measured by probe_splitk.py's crafted scan (other
   inputs). The expected model is sm90[-fast]-splitk:N with the predicted N, or with the measured
   N where there is no prediction (sm90[-fast] for no split); both are fixed before any case runs.
4. Cases: per shape, both accumulators x two input kinds (normal; wide: signed 1, 1.25, 1.5, 1.75
   times powers of two over E4M3's range), float32 out, tensorwise scales in [0.01, 4). Inputs
   come from numpy and ml_dtypes only, from the case's seed, so they can be made again without a
   GPU (check_splitk_acceptance.py). D = torch._scaled_mm(...): its SHA-256 and the number of
   elements that differ from fp8kit.gemm(expected model, device="cuda") go to the report, which
   counts the shapes where a prediction was wrong.

usage: splitk_acceptance.py OUT_DIR [--seed 20261130]
"""

import argparse
import hashlib
import json
import os
import sys

import fp8kit
import numpy as np

# Every K of a split-K shape used before the committed reports: the random cases of the
# combination fit (probe_splitk.py RANDOM_SHAPES) and the H100 acceptance's shapes.
SEEN_K = {6144, 8192, 9216, 10240, 11264, 12288, 14336, 16384, 18432, 20480, 24576, 28672, 32768, 49152, 65536}
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from splitk_inputs import case_inputs  # noqa: E402

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "gemm_probe")


def measured_k():
    """Every K in the committed probe and acceptance reports."""
    ks = set(SEEN_K)
    for name in os.listdir(PROBE) if os.path.isdir(PROBE) else []:
        if name.endswith(".json"):
            report = json.load(open(os.path.join(PROBE, name)))
            for key in list(report.get("boundaries", {})) + list(report.get("shapes", {})):
                ks.add(int(key.split("x")[2]))
            ks.update(row["K"] for row in report.get("rows", []) if "K" in row)
    return ks


SIDES = (16, 32, 48, 64, 80, 96, 112, 128)


def choose_shapes(rng, count, large, seen):
    shapes = []
    while len(shapes) < count + large:
        small = len(shapes) < count
        k = 128 * int(rng.integers(40, 385) if small else rng.integers(64, 257))
        m, n = int(rng.choice(SIDES)), int(rng.choice(SIDES) if small else rng.choice((192, 256, 384)))
        shape = (m, n, k) if small or len(shapes) % 2 else (n, m, k)
        if k not in seen and shape not in shapes:
            shapes.append(shape)
    return shapes


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
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--shapes", type=int, default=24)
    ap.add_argument("--large", type=int, default=8)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from probe_scaled_mm import versions  # the GPU probes' helpers (they import torch)
    from probe_splitk import split_boundaries

    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    shapes = choose_shapes(rng, args.shapes, args.large, measured_k())
    predictions = {f"{m}x{n}x{k}": fp8kit.predicted_split_k(m, n, k) for m, n, k in shapes}
    with open(os.path.join(args.out, "predictions.json"), "w") as f:  # fixed before any GEMM
        json.dump({"seed": args.seed, "predicted_split_k": predictions}, f, indent=1)
    report = {"seed": args.seed, "versions": versions(), "shapes": {}, "rows": []}
    for m, n, k in shapes:  # the scans, before any case
        key = f"{m}x{n}x{k}"
        starts = split_boundaries(m, n, k)
        report["shapes"][key] = {
            "predicted_split_k": predictions[key],
            "measured_split_k": 0 if len(starts) == 1 else starts[1] * 128,
            "measured_starts_tiles": starts,
        }
    case_seed = args.seed * 1000
    for m, n, k in shapes:
        shape = report["shapes"][f"{m}x{n}x{k}"]
        split_k = shape["predicted_split_k"] if shape["predicted_split_k"] is not None else shape["measured_split_k"]
        for kind in ("normal", "wide"):
            case_seed += 1
            a, b, sa, sb = case_inputs(case_seed, m, n, k, kind)
            for fast in (False, True):
                model = expected_model(split_k, fast)
                d = torch_d(a, b, sa, sb, fast)
                ours = fp8kit.gemm(a, b, scale_a=sa, scale_b=sb, accum=model, device="cuda")
                report["rows"].append(
                    {
                        "M": m,
                        "N": n,
                        "K": k,
                        "inputs": kind,
                        "fast": fast,
                        "seed": case_seed,
                        "model": model,
                        "predicted": shape["predicted_split_k"] is not None,
                        "mismatches": int(np.count_nonzero(d.view(np.uint32) != ours.view(np.uint32))),
                        "d_sha256": hashlib.sha256(np.ascontiguousarray(d).tobytes()).hexdigest(),
                    }
                )
        print(
            f"{m}x{n}x{k}",
            shape["predicted_split_k"],
            shape["measured_split_k"],
            [r["mismatches"] for r in report["rows"][-4:]],
            flush=True,
        )
    rows, shapes_r = report["rows"], report["shapes"].values()
    predicted = [sh for sh in shapes_r if sh["predicted_split_k"] is not None]
    report["summary"] = {
        "shapes": len(shapes),
        "predicted": len(predicted),
        "prediction_wrong": sum(sh["predicted_split_k"] != sh["measured_split_k"] for sh in predicted),
        "cases": len(rows),
        "bit_exact": sum(r["mismatches"] == 0 for r in rows),
        "predicted_cases_bit_exact": sum(r["mismatches"] == 0 for r in rows if r["predicted"]),
        "predicted_cases": sum(r["predicted"] for r in rows),
    }
    with open(os.path.join(args.out, "splitk_acceptance.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report["summary"]))


if __name__ == "__main__":
    main()
