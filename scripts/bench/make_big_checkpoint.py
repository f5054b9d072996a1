#!/usr/bin/env python3
"""Writes a multi-GB compressed-tensors FP8 (per-tensor) checkpoint folder for the `fp8kit
checkpoint check` speed benchmark (scripts/bench/bench_checkpoint_check.sh): the layout of
data/checkpoints/ct_fp8 (written by compressed-tensors 0.20.0 itself: its config.json is copied,
with the model's sizes changed), scaled to Llama-7B-like layers: hidden 4096, intermediate 11008,
q/k/v/o 4096 x 4096, gate/up 11008 x 4096, down 4096 x 11008 (F8_E4M3 codes, random finite), a
BF16 [1] weight_scale and input_scale each, shards of at most 2 GB with
model.safetensors.index.json. Layers are added until GIB of FP8 weights are written.

    python3 scripts/bench/make_big_checkpoint.py OUT_DIR [GIB=2.0]
"""

import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..", "data", "checkpoints", "ct_fp8", "config.json")
HIDDEN, INTER = 4096, 11008
PROJ = [
    ("self_attn.q_proj", HIDDEN, HIDDEN),
    ("self_attn.k_proj", HIDDEN, HIDDEN),
    ("self_attn.v_proj", HIDDEN, HIDDEN),
    ("self_attn.o_proj", HIDDEN, HIDDEN),
    ("mlp.gate_proj", INTER, HIDDEN),
    ("mlp.up_proj", INTER, HIDDEN),
    ("mlp.down_proj", HIDDEN, INTER),
]
SHARD = 2 << 30


def bf16(v):
    return struct.pack("<f", v)[2:]  # exact for the values used (powers of two times small integers)


def write_shard(path, tensors):
    """tensors: [(name, dtype, shape, bytes-like or callable(fileobj))]"""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape, nbytes, _ in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
        off += nbytes
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, _, write in tensors:
            write(f)


def main(out, gib):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    block = rng.integers(0, 252, 1 << 24, dtype=np.uint8)
    block += (block >= 126).astype(np.uint8) * 2  # 0..125 and 128..253: no NaN (0x7f, 0xff)
    per_layer = sum(r * c for _, r, c in PROJ)
    layers = max(1, int(round(gib * (1 << 30) / per_layer)))
    weight_map, shard, shard_bytes, shards = {}, [], 0, []

    def codes(n):
        def write(f):
            for start in range(0, n, block.size):
                f.write(block[: min(block.size, n - start)].tobytes())

        return write

    def flush():
        nonlocal shard, shard_bytes
        if shard:
            shards.append(shard)
            shard, shard_bytes = [], 0

    for layer in range(layers):
        for proj, rows, cols in PROJ:
            name = f"model.layers.{layer}.{proj}"
            n = rows * cols
            if shard_bytes + n > SHARD:
                flush()
            shard.append((name + ".weight", "F8_E4M3", [rows, cols], n, codes(n)))
            for s, v in (("weight_scale", 2.0**-9), ("input_scale", 2.0**-6)):
                b = bf16(v)
                shard.append((f"{name}.{s}", "BF16", [1], 2, lambda f, b=b: f.write(b)))
            shard_bytes += n + 4
    flush()
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    for fname, tensors in zip(names, shards):
        write_shard(os.path.join(out, fname), tensors)
        for t in tensors:
            weight_map[t[0]] = fname
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(t[3] for s in shards for t in s)}, "weight_map": weight_map}, f)
    cfg = json.load(open(SRC))
    cfg.update(
        hidden_size=HIDDEN,
        intermediate_size=INTER,
        num_hidden_layers=layers,
        num_attention_heads=32,
        num_key_value_heads=32,
        head_dim=128,
    )
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    print(f"{out}: {layers} layers, {layers * per_layer / 1e9:.2f} GB of FP8 weights in {len(shards)} shards")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 2.0)
