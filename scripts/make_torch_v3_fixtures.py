#!/usr/bin/env python3
"""Writes data/torch_v3/: torch.save files of every dtype torch pickles through
torch._utils._rebuild_tensor_v3, with real torch.

torch/_tensor.py (_reduce_ex_internal) pickles a tensor whose dtype is in
torch/storage.py _new_dtypes() -- float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz,
float8_e8m0fnu, float4_e2m1fn_x2, bits8, bits16, bits1x8, bits2x4, bits4x2, complex32,
bcomplex32, uint16, uint32, uint64 -- as
  _rebuild_tensor_v3(untyped_storage, storage_offset, size, stride, requires_grad,
                     backward_hooks, dtype[, metadata])
over an UntypedStorage whose persistent id counts bytes (torch/serialization.py). Each file
<dtype>.pt holds {"high_precision": float32 tensor, "t": a tensor of that dtype}; for the float8
types "t" is a strided view with a storage offset (columns 1.. of a transposed matrix), so the
offset and strides are read in elements of the dtype. hostile/short_v3.pt claims 1000 float8
elements of a 4-byte storage (fp8kit must refuse that tensor). A dtype this torch cannot create is listed
in EXPECTED.json under "skipped" with torch's message.

EXPECTED.json, per file: dtype, shape, the row-major bytes of "t" as torch holds them
(t.contiguous().view(torch.uint8), hex), torch's float32 values of "t" where torch can convert it
(float32 bit patterns, hex), and the float32 bits of "high_precision".

Usage: python scripts/make_torch_v3_fixtures.py data/torch_v3   (needs torch >= 2.2; commit the output)
"""
import json
import os
import struct
import sys

import torch

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
g = torch.Generator().manual_seed(49)


def f32_bits(t):
    return [format(struct.unpack("<I", struct.pack("<f", v))[0], "08x") for v in t.float().reshape(-1).tolist()]


def raw_hex(t):
    return t.contiguous().view(torch.uint8).reshape(-1).numpy().tobytes().hex()


def make(name):
    dt = getattr(torch, name)
    if name.startswith("float8") and name != "float8_e8m0fnu":
        base = (torch.randn(5, 6, generator=g) * 4).to(dt)
        return base.t()[1:], True  # a strided view with a storage offset
    if name == "float8_e8m0fnu":
        return torch.tensor([2.0 ** e for e in range(-6, 6)]).reshape(3, 4).to(dt), True
    if name == "float4_e2m1fn_x2":
        return torch.randint(0, 256, (3, 4), dtype=torch.uint8, generator=g).view(dt), False
    if name in ("uint16", "uint32", "uint64"):
        return torch.randint(0, 60000, (2, 5), dtype=torch.int64, generator=g).to(dt), False
    if name in ("bits8", "bits1x8", "bits2x4", "bits4x2"):
        return torch.randint(0, 256, (2, 4), dtype=torch.uint8, generator=g).view(dt), False
    if name == "bits16":
        return torch.randint(0, 30000, (2, 4), dtype=torch.int16, generator=g).view(dt), False
    if name in ("complex32", "bcomplex32"):
        return torch.randn(2, 3, dtype=torch.complex64, generator=g).to(dt), False
    raise ValueError(name)


names = sorted(n for n in (str(d).replace("torch.", "") for d in torch.storage._new_dtypes()))
expected = {"torch": torch.__version__, "files": {}, "skipped": {}}
for name in names:
    try:
        t, floats = make(name)
    except Exception as e:  # noqa: BLE001 -- this torch cannot make the dtype: recorded
        expected["skipped"][name] = f"{type(e).__name__}: {e}"
        continue
    hp = torch.randn(2, 3, generator=g)
    path = os.path.join(OUT, f"{name}.pt")
    torch.save({"high_precision": hp, "t": t}, path)
    # The pickle really uses _rebuild_tensor_v3 for "t".
    import zipfile
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    assert b"_rebuild_tensor_v3" in pkl, name
    back = torch.load(path)["t"]
    assert raw_hex(back) == raw_hex(t), name
    e = {"dtype": name, "shape": list(t.shape), "bytes": raw_hex(t), "hp": f32_bits(hp),
         "offset": t.storage_offset(), "stride": list(t.stride())}
    if floats:
        e["f32"] = f32_bits(t)
    expected["files"][f"{name}.pt"] = e


class ShortV3:
    """A _rebuild_tensor_v3 tensor claiming 1000 float8 elements of a 4-byte untyped storage."""

    def __reduce__(self):
        import collections
        return (torch._utils._rebuild_tensor_v3,
                (torch.zeros(4, dtype=torch.uint8).untyped_storage(), 0, (1000,), (1,), False,
                 collections.OrderedDict(), torch.float8_e4m3fn))


os.makedirs(os.path.join(OUT, "hostile"), exist_ok=True)
torch.save({"high_precision": torch.zeros(2), "t": ShortV3()}, os.path.join(OUT, "hostile", "short_v3.pt"))
with open(os.path.join(OUT, "EXPECTED.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
print(f"torch {torch.__version__}: {len(expected['files'])} files, skipped {sorted(expected['skipped'])}")
