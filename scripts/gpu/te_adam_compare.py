"""Compares lib's TransformerEngine FusedAdam model (fp8kit.msamp.te_fused_adam, its FP32 reference
path: the AdamW update of transformer_engine/common/multi_tensor/adam.cu in float with the four FMAs
nvcc makes, IEEE division and square root) with what the GPU computed in te_adam_probe.sh's two
builds, bit for bit, step by step along the model's own trajectory. Prints, per build,
hyperparameter set and step, how many of p, m, v differ and by at most how many ulps.
Usage: python te_adam_compare.py OUTDIR (te_adam_probe.sh's folder)."""

import pathlib
import sys

import fp8kit
import numpy as np


def read_probe(path):
    raw = np.fromfile(path, dtype=np.uint32)
    magic, nsets, steps, n = (int(x) for x in raw[:4])
    if magic != 0x50414554:
        sys.exit(f"{path}: not a te_adam_probe output")
    f = raw[4:].view(np.float32)
    pos, sets = 0, []
    for _ in range(nsets):
        hyper = f[pos : pos + 5].tolist()
        pos += 5
        p0, m0, v0 = (f[pos + k * n : pos + (k + 1) * n] for k in range(3))
        pos += 3 * n
        per_step = []
        for _ in range(steps):
            g, p, m, v = (f[pos + k * n : pos + (k + 1) * n] for k in range(4))
            pos += 4 * n
            per_step.append((g, p, m, v))
        sets.append((hyper, (p0, m0, v0), per_step))
    return sets


def ulps(a, b):
    ia = a.view(np.int32).astype(np.int64)
    ib = b.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return np.abs(ia - ib)


def main():
    folder = pathlib.Path(sys.argv[1])
    for build in ("default", "fast_math"):
        total = 0
        for k, (hyper, (p0, m0, v0), per_step) in enumerate(read_probe(folder / f"adam_{build}.bin")):
            lr, b1, b2, eps, decay = hyper
            sim = fp8kit.msamp.te_fused_adam(
                p0,
                m0,
                v0,
                lr=lr,
                betas=(b1, b2),
                eps=eps,
                weight_decay=decay,
                exp_avg_dtype="fp32",
                exp_avg_sq_dtype="fp32",
            )
            for step, (g, p, m, v) in enumerate(per_step, 1):
                sim.step(g, g)
                row = []
                for name, ours, gpu in (("p", sim.ref_weight, p), ("m", sim.ref_m, m), ("v", sim.ref_v, v)):
                    d = ours.view(np.uint32) != gpu.view(np.uint32)
                    total += int(d.sum())
                    row.append(f"{name} {int(d.sum())} differ (max {int(ulps(ours, gpu).max())} ulp)")
                print(
                    f"{build} set {k} (lr {lr:g}, betas {b1:g}/{b2:g}, eps {eps:g}, decay {decay:g}) step {step}: "
                    + ", ".join(row)
                )
        print(f"{build}: {total} values differ in all")


if __name__ == "__main__":
    main()
