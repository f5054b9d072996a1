#!/usr/bin/env python3
"""Re-check the arrays probe_scaled_mm.py saved (probe_arrays.npz: A, B, scales and
torch._scaled_mm's D per case) against fp8kit's models with `fp8kit validate --gemm --json`, on
any machine: no GPU needed. Prints one line per case: mismatching elements per model.

Usage: python3 check_probe_arrays.py FP8KIT_BINARY probe_arrays.npz"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    binary, path = sys.argv[1], sys.argv[2]
    z = np.load(path)
    cases = sorted({k.rsplit("_", 1)[0] for k in z.files})
    total = {}
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            d = z[c + "_d"]
            out = "bf16" if d.dtype == np.uint16 else "f32"
            fb = "e5m2" if "_e5m2_" in c else "e4m3"
            files = {}
            for part in ("a", "b", "d", "sa", "sb"):
                if f"{c}_{part}" in z.files:
                    files[part] = os.path.join(tmp, part + ".npy")
                    np.save(files[part], z[f"{c}_{part}"])
            args = [
                binary,
                "validate",
                "--gemm",
                "--a",
                files["a"],
                "--b",
                files["b"],
                "--b-format",
                fb,
                "--output",
                files["d"],
                "--out-dtype",
                out,
                "--json",
            ]
            for part, opt in (("sa", "--scale-a"), ("sb", "--scale-b")):
                if part in files:
                    args += [opt, files[part]]
            r = subprocess.run(args, capture_output=True, text=True)
            if r.returncode not in (0, 1):
                print(c, "error", r.stderr.strip())
                continue
            v = json.loads(r.stdout)
            print(f"{c:40s} matched={v['matched']} {v['mismatches']}", flush=True)
            for m, n in v["mismatches"].items():
                total[m] = total.get(m, 0) + n
    print("total mismatches per model:", total)


if __name__ == "__main__":
    main()
