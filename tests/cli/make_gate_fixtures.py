"""Fixtures of tests/cli/input_gate.sh, written into the folder given (nothing is committed):
  skip.h5        activations (lm_head/input, steps 0-2) and Q/K/V of one attention layer (steps 0-2)
                 that every command reads, plus step_0/outside.weight, whose raw data is stored in
                 other/bytes.bin (external storage): every command must skip it, with a note.
  bigattr.h5     step_0/big_dtype: uint8 data whose 'dtype' attribute is 10 MB; step_0/x.weight:
                 float32 data whose 'role' attribute is 10 MB (both generated here).
  big.safetensors  one tensor whose dtype string is 4 MB.
  x.npy, a.npy, b.npy  a small input for validate and a GEMM's operands.
Usage: python make_gate_fixtures.py DIR"""
import json
import os
import struct
import sys

import h5py
import numpy as np

t = sys.argv[1]
rng = np.random.default_rng(47)
os.makedirs(f"{t}/other", exist_ok=True)
with open(f"{t}/other/bytes.bin", "wb") as f:
    f.write(np.arange(64, dtype=np.float32).tobytes())

with h5py.File(f"{t}/skip.h5", "w") as f:
    for s in range(3):
        d = f.create_dataset(f"step_{s}/lm_head/input", data=rng.standard_normal((4, 16)).astype(np.float32))
        d.attrs["step"] = s
        d.attrs["role"] = "activation"
        for k in "qkv":
            d = f.create_dataset(f"step_{s}/model.layers.0.self_attn.{k}",
                                 data=rng.standard_normal((1, 2, 8, 4)).astype(np.float32))
            d.attrs["step"] = s
    d = f.create_dataset("step_0/outside.weight", shape=(64,), dtype="f4",
                         external=[(os.path.abspath(f"{t}/other/bytes.bin"), 0, 256)])
    d.attrs["step"] = 0

big = "e" * (10 << 20)
with h5py.File(f"{t}/bigattr.h5", "w") as f:
    d = f.create_dataset("step_0/big_dtype", data=np.arange(16, dtype=np.uint8))
    d.attrs["dtype"] = big
    d = f.create_dataset("step_0/x.weight", data=rng.standard_normal((4, 16)).astype(np.float32))
    d.attrs["step"] = 0
    d.attrs["role"] = "r" * (10 << 20)

header = json.dumps({"t": {"dtype": "F" * (4 << 20), "shape": [4], "data_offsets": [0, 16]}}).encode()
with open(f"{t}/big.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + bytes(16))

np.save(f"{t}/x.npy", rng.standard_normal(64).astype(np.float32))
np.save(f"{t}/a.npy", rng.integers(0, 0x7e, (16, 32), dtype=np.uint8))
np.save(f"{t}/b.npy", rng.integers(0, 0x7e, (16, 32), dtype=np.uint8))
