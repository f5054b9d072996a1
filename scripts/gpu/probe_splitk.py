#!/usr/bin/env python3
"""Probe the split-K and block-scaled kernels behind torch._scaled_mm on an sm90 GPU (issue 26).

Saves everything a CPU-side analysis needs (no fp8kit binary on the GPU machine):
  - versions and, per shape, the kernel names the profiler sees (split-K kernels are named
    `*_splitK_*` followed by `splitKreduce_kernel`);
  - boundary scans: for each probed position p, one row with a product 2^16 at k = 0 and a
    product 2^-6 at k = p. Under fast accumulation (no promotion) the small product is truncated
    away when it meets 2^16 in the same tensor-core accumulation, and survives when p lies in
    another split (its partial sum is added in float32 by the reduction). So D - 2^16 tells, per
    p, whether p shares k = 0's split: the split boundaries;
  - random cases on split-K shapes (normal, wide-exponent, adversarial; E4M3 x E4M3 and E4M3 x
    E5M2; tensorwise scales; both accumulators; float32 and bfloat16 output);
  - block-scaled cases (1x128 for A, 128x128 for B), when torch accepts them, with the call form
    that torch took and a float64 emulation's relative error to show the layout is right.

Usage: python3 probe_splitk.py OUT_DIR [SEED]   (needs a CUDA GPU and torch)
The combination fit reruns from a report of hashes instead of these arrays:
scripts/gpu/splitk_combination_data.py (on the GPU), then scripts/gpu/fit_splitk.py (any machine).
"""

import json
import os
import sys

import numpy as np
import torch

# The helpers both probes use (version record, profiler kernel names, codes, input kinds) are
# probe_scaled_mm.py's; block scales go in through its block_operands (padded scale layout).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_scaled_mm import block_operands, codes, inputs, kernels, versions  # noqa: E402

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FMT = {E4M3: "e4m3", E5M2: "e5m2"}


def mm(a_codes, b_codes, fa, fb, sa, sb, fast, out):
    a = torch.from_numpy(a_codes).cuda().view(fa)
    b = torch.from_numpy(b_codes).cuda().view(fb)
    sa_t = torch.tensor(sa, device="cuda", dtype=torch.float32)
    sb_t = torch.tensor(sb, device="cuda", dtype=torch.float32)
    d = torch._scaled_mm(a, b.t(), sa_t, sb_t, out_dtype=out, use_fast_accum=fast)
    return d


def as_saved(d):
    return d.float().cpu().numpy() if d.dtype == torch.float32 else d.view(torch.int16).cpu().numpy().view(np.uint16)


SHAPES = [
    (16, 16, 4096),
    (16, 16, 8192),
    (32, 16, 8192),
    (16, 16, 16384),
    (16, 16, 32768),
    (64, 64, 8192),
    (32, 32, 16384),
    (48, 80, 8192),
    (128, 128, 16384),
    (64, 64, 32768),
]


def shape_kernels(report):
    for M, N, K in SHAPES:
        a = codes(np.ones((M, K)), E4M3)
        b = codes(np.ones((N, K)), E4M3)
        for fast in (False, True):
            for out in (torch.float32, torch.bfloat16):
                key = f"{M}x{N}x{K} fast={int(fast)} {'f32' if out == torch.float32 else 'bf16'}"
                report["kernels"][key] = kernels(lambda: mm(a, b, E4M3, E4M3, 1.0, 1.0, fast, out))
                print(key, report["kernels"][key], flush=True)


def boundary_scan(saved):
    """Row r of one GEMM probes position p_r: a[r,0] = b[:,0] = 256 (product 2^16), a[r,p] = 2^-3
    and b[:,p] = 2^-3 for every p (product 2^-6 only where a[r,p] is set)."""
    for M, N, K in SHAPES:
        if M * N > 64 * 64:
            continue
        positions = np.arange(32, K, 32)
        for fast in (True, False):
            result = np.zeros(len(positions), np.float32)
            for start in range(0, len(positions), M):
                ps = positions[start : start + M]
                av = np.zeros((M, K), np.float32)
                bv = np.zeros((N, K), np.float32)
                av[:, 0] = 256.0
                bv[:, 0] = 256.0
                bv[:, 1:] = 2.0**-3
                for r, p in enumerate(ps):
                    av[r, p] = 2.0**-3
                d = as_saved(mm(codes(av, E4M3), codes(bv, E4M3), E4M3, E4M3, 1.0, 1.0, fast, torch.float32))
                result[start : start + len(ps)] = d[: len(ps), 0]
            saved[f"scan_{M}x{N}x{K}_fast{int(fast)}_pos"] = positions.astype(np.int32)
            saved[f"scan_{M}x{N}x{K}_fast{int(fast)}_d"] = result
            survived = positions[result != 65536.0]
            print(
                f"scan {M}x{N}x{K} fast={fast}: small product survives at {len(survived)} of {len(positions)} "
                f"positions; first ones {survived[:8].tolist()}",
                flush=True,
            )


BOUNDARY_SHAPES = [
    (16, 16, K) for K in (4096, 6144, 8192, 9216, 10240, 12288, 14336, 16384, 20480, 24576, 32768, 49152, 65536)
] + [(64, 32, 20480), (16, 48, 9216), (32, 32, 12288), (48, 80, 12288), (64, 64, 24576)]


def split_boundaries(M, N, K, fast=True):
    """The k tiles (of 128) that start a split. B is 256 at the first k of every tile. Row r of A
    is 256 at the first k of tile t_r (a product 2^16) and 2^-9 at the first k of tile t_r + 1 (a
    product 2^-1). Under fast accumulation the small product is truncated away when it meets 2^16
    in one CTA's accumulator (unit 2^3), and survives (65536.5) when tile t_r + 1 starts another
    CTA's range, whose partial the reduction adds in float32. Returns the starting tiles, 0 first."""
    tiles = K // 128
    starts = [0]
    bv = np.zeros((N, K), np.float32)
    bv[:, ::128] = 256.0
    b = codes(bv, E4M3)
    for t0 in range(0, tiles - 1, M):
        ts = list(range(t0, min(t0 + M, tiles - 1)))
        av = np.zeros((M, K), np.float32)
        for r, t in enumerate(ts):
            av[r, t * 128] = 256.0
            av[r, (t + 1) * 128] = 2.0**-9
        d = as_saved(mm(codes(av, E4M3), b, E4M3, E4M3, 1.0, 1.0, fast, torch.float32))
        starts += [t + 1 for r, t in enumerate(ts) if d[r, 0] != 65536.0]
    return starts


def boundary_scan2(report):
    rows = {}
    for M, N, K in BOUNDARY_SHAPES:
        names = kernels(
            lambda: mm(
                codes(np.ones((M, K)), E4M3), codes(np.ones((N, K)), E4M3), E4M3, E4M3, 1.0, 1.0, True, torch.float32
            )
        )
        starts = split_boundaries(M, N, K)
        sizes = [b - a for a, b in zip(starts, starts[1:] + [K // 128])]
        rows[f"{M}x{N}x{K}"] = {
            "split_starts_tiles": starts,
            "tiles_per_split": sizes,
            "kernel": [n for n in names if "nvjet" in n],
        }
        print(f"{M}x{N}x{K}: {len(starts)} splits, tiles {sizes}, {rows[f'{M}x{N}x{K}']['kernel']}", flush=True)
    report["boundaries"] = rows


def operand(rng, kind, shape, f):
    lim = 448 if f == E4M3 else 57344
    return codes(np.clip(inputs(rng, kind, shape, f), -lim, lim), f)


RANDOM_SHAPES = [(16, 16, 8192), (32, 16, 8192), (16, 16, 16384), (64, 64, 8192), (48, 80, 8192), (32, 32, 16384)]


def random_cases(saved, rng, shapes):
    """The operands of one (shape, format, kind) are saved once, under rand_<shape>_<b>_<kind>_a/_b;
    each variant saves its scales and D."""
    for M, N, K in shapes:
        for fb in (E4M3, E5M2):
            for kind in ("normal", "wide", "adversarial"):
                a, b = operand(rng, kind, (M, K), E4M3), operand(rng, kind, (N, K), fb)
                sa, sb = np.float32(rng.uniform(0.01, 4)), np.float32(rng.uniform(0.01, 4))
                base = f"rand_{M}x{N}x{K}_{FMT[fb]}_{kind}"
                saved[base + "_a"], saved[base + "_b"] = a, b
                saved[base + "_sa"], saved[base + "_sb"] = sa, sb
                for fast in (False, True):
                    for out in (torch.float32, torch.bfloat16):
                        key = f"{base}_fast{int(fast)}_{'f32' if out == torch.float32 else 'bf16'}"
                        saved[key + "_d"] = as_saved(mm(a, b, E4M3, fb, sa, sb, fast, out))
        print("random cases done for", M, N, K, flush=True)


def block_call(a, b, sa, sb, out, fast):
    """torch's block-scaled _scaled_mm (probe_scaled_mm.block_operands gives the scale layouts)."""
    return torch._scaled_mm(*block_operands(a, b, sa, sb), out_dtype=out, use_fast_accum=fast)


def decode(c, f):
    return torch.from_numpy(c).view(f).float().numpy().astype(np.float64)


def block_cases(saved, report, rng):
    rows = []
    for M, N, K in [(128, 128, 512), (256, 384, 1024), (128, 256, 4096)]:
        for kind in ("normal", "wide", "adversarial"):
            a, b = operand(rng, kind, (M, K), E4M3), operand(rng, kind, (N, K), E4M3)
            sa = (2.0 ** rng.integers(-6, 4, (M, K // 128)) * rng.uniform(1, 2, (M, K // 128))).astype(np.float32)
            sb = (2.0 ** rng.integers(-6, 4, (N // 128, K // 128)) * rng.uniform(1, 2, (N // 128, K // 128))).astype(
                np.float32
            )
            ad, bd = decode(a, E4M3), decode(b, E4M3)
            ref = np.zeros((M, N))
            for kb in range(K // 128):
                ks = slice(kb * 128, kb * 128 + 128)
                ref += (ad[:, ks] @ bd[:, ks].T) * sa[:, kb : kb + 1] * np.repeat(sb[:, kb], 128)[None, :N]
            for fast in (False, True):
                for out in (torch.float32, torch.bfloat16):
                    key = f"block_{M}x{N}x{K}_{kind}_fast{int(fast)}_{'f32' if out == torch.float32 else 'bf16'}"
                    try:
                        d = block_call(a, b, sa, sb, out, fast)
                        names = kernels(lambda: block_call(a, b, sa, sb, out, fast))
                    except Exception as e:  # noqa: BLE001
                        rows.append({"case": key, "error": str(e)[:400]})
                        print(key, "error", str(e)[:200], flush=True)
                        continue
                    dd = d.double().cpu().numpy()
                    rel = float(np.linalg.norm(dd - ref) / max(np.linalg.norm(ref), 1e-300))
                    saved[key + "_a"], saved[key + "_b"] = a, b
                    saved[key + "_sa"], saved[key + "_sb"] = sa, sb
                    saved[key + "_d"] = as_saved(d)
                    rows.append({"case": key, "rel_err_vs_float64": rel, "kernels": names})
                    print(key, "rel", rel, names, flush=True)
    report["block"] = rows


def main():
    outdir = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 20261126
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(seed)
    report = {"seed": seed, "versions": versions(), "kernels": {}}
    # One file per step (the device tool brings back files of at most 16 MiB).
    steps = (
        ("kernels", lambda s: shape_kernels(report)),
        ("scan", boundary_scan),
        ("scan2", lambda s: boundary_scan2(report)),
        ("random1", lambda s: random_cases(s, rng, RANDOM_SHAPES[:3])),
        ("random2", lambda s: random_cases(s, rng, RANDOM_SHAPES[3:])),
        ("block", lambda s: block_cases(s, report, rng)),
    )
    skip = set(os.environ.get("PROBE_SKIP", "").split(","))
    for name, step in steps:
        if name in skip:
            continue
        saved = {}
        try:
            step(saved)
        except Exception as e:  # noqa: BLE001  (keep what the other steps found)
            report[f"{name}_error"] = repr(e)[:1000]
            print(name, "failed:", repr(e)[:500], flush=True)
        if saved:
            np.savez_compressed(os.path.join(outdir, f"splitk_{name}.npz"), **saved)
        with open(os.path.join(outdir, "splitk_probe.json"), "w") as f:
            json.dump(report, f, indent=1)
    print(json.dumps(report["versions"]))


if __name__ == "__main__":
    main()
