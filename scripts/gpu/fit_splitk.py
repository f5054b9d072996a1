#!/usr/bin/env python3
"""Fit the split-K reduction of cuBLASLt's FP8 kernels to what probe_splitk.py saved (issue 26).

Hypothesis per case: K is cut into S contiguous ranges of whole 128-wide k tiles; each range is
accumulated from zero by the one-CTA model (`sm90` or `sm90-fast`, computed by `fp8kit gemm` on
the slice with unit scales, so the partial is the accumulator itself); the reduction adds the
partials in float32 in a given order and applies the scale as `fl32(fl32(sa*sb) * sum)`.
Prints, per case and hypothesis, the number of differing elements.

Usage: TILES=22[,20,...] python3 fit_splitk.py FP8KIT_BINARY DIR   (DIR holds probe_splitk.py's files)
       python3 fit_splitk.py FP8KIT_BINARY DIR --validate   (every case through `fp8kit validate --gemm`)
"""

import os
import subprocess
import sys
import tempfile

import numpy as np


def run_gemm(binary, tmp, a, b, fb, accum):
    pa, pb, pd = (os.path.join(tmp, n) for n in ("a.npy", "b.npy", "d.npy"))
    np.save(pa, np.ascontiguousarray(a))
    np.save(pb, np.ascontiguousarray(b))
    subprocess.run(
        [
            binary,
            "gemm",
            pa,
            pb,
            "--a-format",
            "e4m3",
            "--b-format",
            fb,
            "--scale-a",
            "1",
            "--scale-b",
            "1",
            "--accum",
            accum,
            "--out-dtype",
            "f32",
            "-o",
            pd,
        ],
        check=True,
        capture_output=True,
    )
    return np.load(pd).astype(np.float32)


def ranges(K, tiles_per_split):
    tiles = (K + 127) // 128
    out, t = [], 0
    while t < tiles:
        n = min(tiles_per_split, tiles - t)
        out.append((t * 128, min((t + n) * 128, K)))
        t += n
    return out


def to_bf16_bits(x):
    """float32 -> bfloat16 bits, nearest-even (as the epilogue converts)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    r[nan] = 0x7FC0
    return r


def main():
    binary, folder = sys.argv[1], sys.argv[2]
    tps_candidates = [int(x) for x in os.environ.get("TILES", "22").split(",")]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir(folder)):
            if not (name.startswith("splitk_random") and name.endswith(".npz")):
                continue
            z = np.load(os.path.join(folder, name))
            bases = sorted({k.rsplit("_", 1)[0] for k in z.files if k.endswith("_a")})
            for base in bases:
                a, b = z[base + "_a"], z[base + "_b"]
                sa, sb = np.float32(z[base + "_sa"]), np.float32(z[base + "_sb"])
                fb = "e5m2" if "_e5m2_" in base else "e4m3"
                K = a.shape[1]
                for tps in tps_candidates:
                    rs = ranges(K, tps)
                    for fast in (0, 1):
                        accum = "sm90-fast" if fast else "sm90"
                        parts = [run_gemm(binary, tmp, a[:, lo:hi], b[:, lo:hi], fb, accum) for lo, hi in rs]
                        seq = parts[0].copy()
                        for p in parts[1:]:
                            seq = (seq + p).astype(np.float32)
                        scale = np.float32(sa * sb)
                        d32 = (scale * seq).astype(np.float32)
                        for out in ("f32", "bf16"):
                            key = f"{base}_fast{fast}_{out}"
                            if key + "_d" not in z.files:
                                continue
                            got = z[key + "_d"]
                            if out == "f32":
                                diff = int(np.sum(got.view(np.uint32) != d32.view(np.uint32)))
                            else:
                                diff = int(np.sum(got != to_bf16_bits(d32)))
                            results[(key, tps)] = diff
                            print(
                                f"{key:45s} tiles/split={tps:3d} splits={len(rs):2d} differ={diff}/{got.size}",
                                flush=True,
                            )
    bad = {k: v for k, v in results.items() if v}
    print(f"{len(results)} case-hypotheses, {len(bad)} with differences")


def check_validate(binary, folder):
    """Every saved case (splitk_random*.npz, splitk_block.npz): `fp8kit validate --gemm` names the
    model its D matches; the expected one is sm90[-fast]-splitk for split-K shapes (K > 2816),
    sm90 for block scales (no fast accumulation with 128x128 blocks in torch 2.11)."""
    import json

    totals = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir(folder)):
            if not (name.startswith("splitk_random") or name.startswith("splitk_block")) or not name.endswith(".npz"):
                continue
            z = np.load(os.path.join(folder, name))
            for key in sorted(k[:-2] for k in z.files if k.endswith("_d")):
                base = key if key + "_a" in z.files else key.rsplit("_", 2)[0]
                files = {}
                for part, src in (("a", base), ("b", base), ("sa", base), ("sb", base), ("d", key)):
                    files[part] = os.path.join(tmp, part + ".npy")
                    np.save(files[part], z[f"{src}_{part}"])
                out = "bf16" if z[key + "_d"].dtype == np.uint16 else "f32"
                fb = "e5m2" if "_e5m2_" in key else "e4m3"
                r = subprocess.run(
                    [
                        binary,
                        "validate",
                        "--gemm",
                        "--a",
                        files["a"],
                        "--b",
                        files["b"],
                        "--a-format",
                        "e4m3",
                        "--b-format",
                        fb,
                        "--scale-a",
                        files["sa"],
                        "--scale-b",
                        files["sb"],
                        "--output",
                        files["d"],
                        "--out-dtype",
                        out,
                        "--json",
                    ],
                    capture_output=True,
                    text=True,
                )
                if r.returncode not in (0, 1):
                    print(key, "error", r.stderr.strip())
                    continue
                v = json.loads(r.stdout)
                want = (
                    "sm90" if key.startswith("block") else ("sm90-fast-splitk" if "_fast1_" in key else "sm90-splitk")
                )
                miss = v["mismatches"].get(want)
                totals[key] = miss
                print(f"{key:48s} matched={v['matched']} {want}: {miss} of {z[key + '_d'].size} differ", flush=True)
    bad = [k for k, v in totals.items() if v]
    print(f"{len(totals)} cases, {len(bad)} not bit-exact under the expected model")


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3] == "--validate":
        check_validate(sys.argv[1], sys.argv[2])
    else:
        main()
