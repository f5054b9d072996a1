#!/usr/bin/env python3
"""Writes the seed corpora of the file-format harnesses (run once; the outputs are committed).

Each seed is a small valid input of the kind the harness parses, so the fuzzer starts from files
that reach deep into the reader instead of bouncing off the first magic-number check.
"""
import json
import struct
from pathlib import Path

import h5py
import numpy as np

root = Path(__file__).resolve().parent
corpus = root / "corpus"
data = root.parent / "data" / "example"


def out(name, file, payload):
    d = corpus / name
    d.mkdir(parents=True, exist_ok=True)
    (d / file).write_bytes(payload)


def safetensors(tensors, metadata=None):
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


f32 = np.array([0.5, -1.25, 3.0, np.inf, np.nan, 0.0], dtype="<f4")
out("safetensors", "f32_bf16", safetensors({
    "layer.0.weight": ("F32", [2, 3], f32.tobytes()),
    "layer.0.grad": ("BF16", [4], np.array([0x3f80, 0xbf00, 0x7f80, 0x0001], dtype="<u2").tobytes()),
}, {"step": "12"}))
out("safetensors", "fp8_scalar", safetensors({
    "step_3/act": ("F8_E4M3", [5], bytes([0x00, 0x38, 0x7e, 0x7f, 0xff])),
    "scale": ("F64", [], struct.pack("<d", 0.25)),
    "empty": ("F16", [0, 4], b""),
    "ids": ("I32", [2], b"\x01\x00\x00\x00\x02\x00\x00\x00"),
}))


def h5(name, build, harness="hdf5"):
    path = corpus / harness / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w", libver="earliest") as f:
        build(f)


def plain(f):
    d = f.create_dataset("step_5/layer.0/weight", data=f32.reshape(2, 3))
    d.attrs["role"] = "weight"
    f.create_dataset("step_5/layer.0/grad", data=np.array([1, -2, 65504], dtype="<f2"))
    f.create_dataset("scalar", data=np.float64(2.5))


def chunked_fp8(f):
    d = f.create_dataset("act", data=np.arange(64, dtype=np.uint8), chunks=(16,), compression="gzip")
    d.attrs["dtype"] = "e4m3"
    d.attrs["step"] = np.int64(7)
    b = f.create_dataset("bf16", data=np.array([0x3f80, 0x4000], dtype="<u2"))
    b.attrs["dtype"] = "bf16"
    f.create_dataset("empty", shape=(0,), dtype="<f4")


# Datasets pointing outside the file (the reader must skip them without opening the target).
def outside(f):
    f.create_dataset("good", data=f32)
    f.create_dataset("ext", shape=(4,), dtype="<f4", external=[("/etc/passwd", 0, 16)])
    f.create_dataset("zero", shape=(1024,), dtype="<f4", external=[("/dev/zero", 0, 4096)])
    layout = h5py.VirtualLayout(shape=(4,), dtype="<f4")
    layout[:] = h5py.VirtualSource("other.h5", "data", shape=(4,))
    f.create_virtual_dataset("vds", layout)
    me = h5py.VirtualLayout(shape=(4,), dtype="<f4")
    me[:] = h5py.VirtualSource(".", "self", shape=(4,))
    f.create_virtual_dataset("self", me)
    f["elink"] = h5py.ExternalLink("other.h5", "data")


h5("plain", plain)
h5("chunked_fp8", chunked_fp8)
h5("outside", outside)
# fuzz_hdf5_outside (nothing opened but the input): the datasets pointing outside, and a plain file.
h5("outside", outside, "hdf5_outside")
h5("plain", plain, "hdf5_outside")

npy = corpus / "npy"
npy.mkdir(parents=True, exist_ok=True)
np.save(npy / "f32_2x3.npy", f32.reshape(2, 3))
np.save(npy / "u8_scalar.npy", np.uint8(7))
np.save(npy / "f16_empty.npy", np.zeros((0, 3), dtype="<f2"))
with open(npy / "bf16_like_u2.npy", "wb") as fh:
    np.lib.format.write_array(fh, np.array([1, 2, 3], dtype="<u2"), version=(2, 0))

# Traces: the first lines of the example files (headers included) and a CSV without a tensor column.
def head_lines(path, n):
    with open(path, "rb") as fh:
        return b"".join(fh.readline() for _ in range(n))


out("trace", "csv_head", head_lines(data / "amax_trace.csv", 12))
out("trace", "dlfw_head", head_lines(data / "dlfw_inspect.log", 10))
out("trace", "csv_no_tensor", b"amax,step,other\n1.5,0,x\ninf,1,y\nnan,2,z\n")

rec = corpus / "recipe"
rec.mkdir(parents=True, exist_ok=True)
role = lambda fmt, gran, br=1, bc=1, window=1: {"format": fmt, "granularity": gran, "block_rows": br,
                                                "block_cols": bc, "window": window, "columnwise_rht": False}
recipes = {
    "delayed.json": {"name": "my-delayed", "source": "hand-written", "kind": "delayed", "rule": "te",
                     "roles": {"input": role("e4m3", "tensor"), "weight": role("e4m3", "tensor"),
                               "grad": role("e5m2", "tensor")},
                     "history_len": 16, "algo": "max", "margin": 0, "epsilon": 0.0, "pow2": False,
                     "value_for_inf": 1.0,
                     "policy": {"rounding": "rne", "overflow": "saturate", "nan": "propagate"}},
    "block.json": {"name": "my-block", "source": "hand-written", "kind": "current", "rule": "deepseek",
                   "roles": {"input": role("e4m3", "block", 1, 128), "weight": role("e4m3", "block", 128, 128),
                             "grad": role("e4m3", "block", 1, 128)},
                   "history_len": 1, "algo": "most_recent", "margin": 0, "epsilon": 1e-12, "pow2": True,
                   "value_for_inf": 1.0,
                   "policy": {"rounding": "rne", "overflow": "saturate", "nan": "propagate"}},
}
for n, r in recipes.items():
    (rec / n).write_text(json.dumps(r, indent=1) + "\n")


# Issue 25 classes (safetensors tiling, nesting, names; trace -nan and control characters).
def raw_safetensors(header, data):
    h = header.encode()
    return struct.pack("<Q", len(h)) + h + data


one = struct.pack("<f", 1.0)
out("safetensors", "duplicate_name", raw_safetensors(
    '{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
    one + one))
out("safetensors", "uncovered_bytes", raw_safetensors(
    '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}',
    one * 3))
out("safetensors", "deep_shape", raw_safetensors(
    '{"x":{"dtype":"F32","shape":[1,' + "[" * 2000 + "1" + "]" * 2000 + '],"data_offsets":[0,4]}}', one))
out("safetensors", "nul_escape_names", raw_safetensors(
    '{"__metadata__":{"role:a\\u0000b":"weight"},"a\\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
    '"x\\u001b[2J\\n":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', one + one))
out("trace", "csv_minus_nan", b"step,tensor,amax\n0,a,-nan\n1,a,nan(0x1)\n2,x\x1b[2J,1\n")
