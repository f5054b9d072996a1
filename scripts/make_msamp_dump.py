#!/usr/bin/env python3
"""Writes data/example/msamp_ranks/rank{0..3}.h5: a dump with several ranks and several steps that
holds exp_avg and exp_avg_sq, for `fp8kit simulate msamp` (docs/msamp.md, "The bundled dumps").

Made with numpy from the real tensors of data/example/llama_tiny_dump.h5 (no GPU, no torch):
  - parameters: the 7 Linear layers of model.layers.1, starting from their real weight, exp_avg
    and wgrad at step 100;
  - steps 100, 101, 102 (named as in the source run; AdamW's step count is step + 1): the step-t gradient is g_t = g * (1 + 0.3 z_t), z_t ~ N(0, 1) per element, g the
    real step-100 wgrad; rank r holds g_{t,r} = g_t * (1 + 0.5 n_{t,r}), n ~ N(0, 1), so the ranks'
    gradients differ as data-parallel micro-batches do, around a real gradient's scale and shape;
  - the optimizer: torch.optim.AdamW's update (lr 3e-3, betas (0.9, 0.999), eps 1e-8, weight
    decay 0.01, as scripts/make_example_dump.py trains) in float32 on the rank mean, starting from the real
    exp_avg and exp_avg_sq = exp_avg^2 * (1 - beta2) / (1 - beta1)^2 (the second moment a run with
    |g| ~ |m| / (1 - beta1) would have: an assumption, the bundled dump has no exp_avg_sq);
  - every rank file holds /step_{t:06d}/{module}/wgrad; rank 0 also holds weight, exp_avg and
    exp_avg_sq after step t.
Run: .venv/bin/python scripts/make_msamp_dump.py (deterministic: seed 24)."""
import os

import h5py
import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC = os.path.join(ROOT, "data", "example", "llama_tiny_dump.h5")
OUT = os.path.join(ROOT, "data", "example", "msamp_ranks")
RANKS, STEPS = 4, 3
LR, B1, B2, EPS, WD = 3e-3, 0.9, 0.999, 1e-8, 0.01
f32 = np.float32


def adamw(w, m, v, g, t):
    """torch.optim.AdamW (single-tensor, float32): decay, moments, bias-corrected update."""
    w = w * f32(1 - LR * WD)
    m = f32(B1) * m + f32(1 - B1) * g
    v = f32(B2) * v + f32(1 - B2) * (g * g)
    bc1, bc2 = 1 - B1 ** t, 1 - B2 ** t
    denom = np.sqrt(v) / f32(np.sqrt(bc2)) + f32(EPS)
    return (w - f32(LR / bc1) * (m / denom)).astype(f32), m.astype(f32), v.astype(f32)


def main():
    rng = np.random.default_rng(24)
    os.makedirs(OUT, exist_ok=True)
    src = h5py.File(SRC, "r")
    base = src["step_000100"]
    mods = sorted(k for k in base if k.startswith("model.layers.1."))
    files = [h5py.File(os.path.join(OUT, f"rank{r}.h5"), "w") for r in range(RANKS)]
    for r, f in enumerate(files):
        f.attrs["description"] = (f"rank {r} of {RANKS}: synthetic multi-rank, multi-step dump from the real step-100 "
                                  "tensors of llama_tiny_dump.h5; made by scripts/make_msamp_dump.py")
    for mod in mods:
        g = base[mod]["wgrad"][...].astype(f32)
        w = base[mod]["weight"][...].astype(f32)
        m = base[mod]["exp_avg"][...].astype(f32)
        v = (m * m * f32((1 - B2) / (1 - B1) ** 2)).astype(f32)
        for t in range(100, 100 + STEPS):
            gt = (g * (1 + f32(0.3) * rng.standard_normal(g.shape).astype(f32))).astype(f32)
            ranks = [(gt * (1 + f32(0.5) * rng.standard_normal(g.shape).astype(f32))).astype(f32) for _ in range(RANKS)]
            mean = (np.sum(np.stack(ranks).astype(np.float64), axis=0) / RANKS).astype(f32)
            w, m, v = adamw(w, m, v, mean, t + 1)
            for r, f in enumerate(files):
                grp = f.require_group(f"step_{t:06d}/{mod}")
                items = [("wgrad", ranks[r], "gradient")]
                if r == 0:
                    items += [("weight", w, "weight"), ("exp_avg", m, "optimizer_state"),
                              ("exp_avg_sq", v, "optimizer_state")]
                for name, arr, role in items:
                    ds = grp.create_dataset(name, data=arr, compression="gzip", shuffle=True)
                    ds.attrs["step"] = t
                    ds.attrs["role"] = role
    for f in files:
        f.close()


if __name__ == "__main__":
    main()
