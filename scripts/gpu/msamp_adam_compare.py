"""Compares lib's MS-AMP LBAdamW model (fp8kit.msamp.adam with an FP32 master weight: adamw.cu's two
kernels in source order with the three FMAs MS-AMP's build makes, docs/msamp.md section 3) with what
the GPU computed in msamp_adam_probe.sh's builds (MS-AMP's flags, and the --fmad=false control), bit
for bit, along the model's own trajectory from the probe's initial weights. Prints, per build,
parameter set and step, how many weights, exp_avg codes and exp_avg_sq codes differ and whether the
two new state scales are equal; then the totals per build.
Usage: python msamp_adam_compare.py OUTDIR [SIZE] (msamp_adam_probe.sh's folder; SIZE picks
adam_{build}_SIZE.bin instead of adam_{build}.bin)."""

import pathlib
import sys

import fp8kit
import numpy as np

DTYPES = {0: "fp8", 1: "fp16"}


def read_probe(path):
    """The probe's file (format in scripts/gpu/msamp_adam_probe.cu)."""
    raw = np.fromfile(path, dtype=np.uint8)
    magic, nsets, steps, n = (int(x) for x in raw[:16].view(np.uint32))
    if magic != 0x5041534D:
        sys.exit(f"{path}: not an msamp_adam_probe output")
    pos, sets = 16, []

    def take(dtype, count):
        nonlocal pos
        size = np.dtype(dtype).itemsize * count
        a = raw[pos : pos + size].view(dtype)
        pos += size
        return a

    for _ in range(nsets):
        hyper = take(np.float64, 5).tolist()
        m_dtype, v_dtype = (DTYPES[int(x)] for x in take(np.uint32, 2))
        p0 = take(np.float32, n)
        per_step = []
        for _ in range(steps):
            g = take(np.float32, n)
            inv_m, inv_v, amax_m, amax_v, scale_m, scale_v = take(np.float32, 6).tolist()
            p, m, v = take(np.float32, n), take(np.uint16, n), take(np.uint16, n)
            per_step.append((g, (scale_m, scale_v), p, m, v))
        sets.append((hyper, (m_dtype, v_dtype), p0, per_step))
    if pos != raw.size:
        sys.exit(f"{path}: {raw.size - pos} bytes after the last set")
    return sets


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: msamp_adam_compare.py OUTDIR [SIZE]")
    folder = pathlib.Path(sys.argv[1])
    suffix = f"_{sys.argv[2]}" if len(sys.argv) == 3 else ""
    for build in ("msamp", "nofma"):
        path = folder / f"adam_{build}{suffix}.bin"
        if not path.exists():
            print(f"{build}: {path} not found, skipped")
            continue
        totals = {"p": 0, "m": 0, "v": 0, "scale": 0}
        values = 0
        for k, (hyper, (m_dtype, v_dtype), p0, per_step) in enumerate(read_probe(path)):
            lr, b1, b2, eps, decay = hyper
            sim = fp8kit.msamp.adam(
                p0,
                lr=lr,
                betas=(b1, b2),
                eps=eps,
                weight_decay=decay,
                fp16_master=False,
                exp_avg_dtype=m_dtype,
                exp_avg_sq_dtype=v_dtype,
            )
            for step, (g, scales, p, m, v) in enumerate(per_step, 1):
                sim.step(g)
                d_p = int((sim.weight.view(np.uint32) != p.view(np.uint32)).sum())
                d_m = int((sim.m_codes.astype(np.uint16) != m).sum())
                d_v = int((sim.v_bits.astype(np.uint16) != v).sum())
                ours = np.array([sim.m_scale, sim.v_scale], np.float32).view(np.uint32)
                d_s = int((ours != np.array(scales, np.float32).view(np.uint32)).sum())
                for name, d in (("p", d_p), ("m", d_m), ("v", d_v), ("scale", d_s)):
                    totals[name] += d
                values += p.size
                print(
                    f"{build} set {k} ({m_dtype}/{v_dtype}, lr {lr:g}, betas {b1:g}/{b2:g}, eps {eps:g}, "
                    f"decay {decay:g}) step {step}: p {d_p}, m {d_m}, v {d_v} differ; scales "
                    + ("equal" if d_s == 0 else f"{d_s} of 2 differ")
                )
        print(
            f"{build}: of {values} values each, p {totals['p']}, m {totals['m']}, v {totals['v']} differ; "
            f"{totals['scale']} scales differ"
        )


if __name__ == "__main__":
    main()
