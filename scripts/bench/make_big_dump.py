#!/usr/bin/env python3
"""A large synthetic dump for throughput measurements (scripts/bench/bench_inspect.sh), not for analysis:
N float32 / bf16 tensors of 16M elements each, activation-like values (normal times a
log-normal per-row scale), half stored chunked with shuffle + deflate level 1, as training dumps are (KIND mixed, the default);
KIND gzip: every tensor float32 with shuffle + deflate; f32 / bf16: every tensor uncompressed
(contiguous) float32 / bfloat16 bits.
FIRST_STEP (default 0) numbers the steps (8 tensors a step) from there, so that several files
make one run's distinct steps (sweep refuses a step dumped twice).
Usage: make_big_dump.py OUT.h5 [GiB] [mixed|gzip|f32|bf16] [FIRST_STEP]"""

import sys

import h5py
import numpy as np

out = sys.argv[1]
gib = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
kind = sys.argv[3] if len(sys.argv) > 3 else "mixed"
first_step = int(sys.argv[4]) if len(sys.argv) > 4 else 0
assert kind in ("mixed", "gzip", "f32", "bf16"), kind
rows, cols = 4096, 4096
rng = np.random.default_rng(0)
nbytes = 0
with h5py.File(out, "w") as f:
    i = 0
    while nbytes < gib * (1 << 30):
        x = (
            rng.standard_normal((rows, cols), dtype=np.float32)
            * np.exp(rng.standard_normal((rows, 1), dtype=np.float32) * 2)
        ).astype(np.float32)
        g = f.create_group(f"step_{first_step + i // 8:06d}/layer{i % 8}")
        if kind == "f32":
            ds = g.create_dataset("output", data=x)
            nbytes += x.nbytes
        elif kind == "gzip" or (kind == "mixed" and i % 2 == 0):
            ds = g.create_dataset(
                "output", data=x, chunks=(256, cols), compression="gzip", compression_opts=1, shuffle=True
            )
            nbytes += x.nbytes
        else:
            b = (x.view(np.uint32) >> 16).astype(np.uint16)  # bf16 bits (truncated; fine for timing)
            ds = g.create_dataset("input", data=b)
            ds.attrs["dtype"] = "bfloat16"
            nbytes += b.nbytes
        ds.attrs["role"] = "activation"
        i += 1
print(f"{out}: {i} tensors, {nbytes / (1 << 30):.2f} GiB of tensor data")
