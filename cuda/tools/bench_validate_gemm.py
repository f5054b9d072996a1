#!/usr/bin/env python3
"""validate --gemm on the GPU against the CPU, on cuBLASLt's own output (docs/performance.md,
"GEMM validation on the GPU"). For each shape: E4M3 x E4M3 operands from torch.rand, tensorwise
scales 0.75 and 1.25, D from torch._scaled_mm (float32 out, the split accumulator: the `sm90`
model's kernel), written as .npy; then the wall time of

    fp8kit validate --gemm --a A.npy --b B.npy --scale-a 0.75 --scale-b 1.25 --output D.npy --json
        --device cuda        (every shape)
        --device cpu         (shapes up to --cpu-max multiply-adds)

and the model each one names. One run, one table; `--json FILE` keeps the rows.

usage: bench_validate_gemm.py FP8KIT_CLI [--shapes 1024,4096,8192] [--cpu-max 2^31] [--json FILE]
"""

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def operands(n, folder):
    g = torch.Generator(device="cuda").manual_seed(n)
    a = (torch.rand(n, n, device="cuda", generator=g) * 2 - 1).to(torch.float8_e4m3fn)
    b = (torch.rand(n, n, device="cuda", generator=g) * 2 - 1).to(torch.float8_e4m3fn)
    sa, sb = torch.tensor(0.75, device="cuda"), torch.tensor(1.25, device="cuda")
    d = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32, use_fast_accum=False)
    torch.cuda.synchronize()
    np.save(folder / "a.npy", a.view(torch.uint8).cpu().numpy())
    np.save(folder / "b.npy", b.view(torch.uint8).cpu().numpy())
    np.save(folder / "d.npy", d.cpu().numpy())


def validate(cli, folder, device):
    argv = [cli, "validate", "--gemm", "--a", str(folder / "a.npy"), "--b", str(folder / "b.npy")]
    argv += ["--scale-a", "0.75", "--scale-b", "1.25", "--output", str(folder / "d.npy"), "--json", "--device", device]
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if p.returncode > 1:
        raise SystemExit(f"{' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()}")
    return seconds, json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cli")
    ap.add_argument("--shapes", default="1024,4096,8192")
    ap.add_argument("--cpu-max", type=float, default=2.0**31)
    ap.add_argument("--json")
    args = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    rows = []
    for n in (int(x) for x in args.shapes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            operands(n, folder)
            row = {"shape": f"{n}^3"}
            row["cuda_s"], r = validate(args.cli, folder, "cuda")
            row["cuda_matched"], row["cuda_exact_from"] = r["matched"], r["exact_from"]
            row["cuda_not_run"] = sorted(r["not_run"])
            if float(n) ** 3 <= args.cpu_max:
                row["cpu_s"], c = validate(args.cli, folder, "cpu")
                row["cpu_matched"] = c["matched"]
                row["same_mismatches"] = c["mismatches"] == r["mismatches"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"{'shape':>7} {'cuda s':>8} {'cpu s':>8} {'cpu/cuda':>9}  matched (cuda / cpu)  exact from")
    for r in rows:
        cpu = r.get("cpu_s")
        ratio = f"{cpu / r['cuda_s']:.1f}x" if cpu else "-"
        print(
            f"{r['shape']:>7} {r['cuda_s']:8.2f} {cpu if cpu else float('nan'):8.2f} {ratio:>9}  "
            f"{r['cuda_matched']} / {r.get('cpu_matched', '-')}  {r['cuda_exact_from']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
