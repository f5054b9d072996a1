#!/usr/bin/env python3
"""Writes the TransformerEngine DumpTensors fixtures of data/te/ with real torch.save.

TransformerEngine is not needed: a stand-in module is registered under TE's exact names, so the
pickle references TE's reconstructor and enum exactly as a TE run's dump does:
  transformer_engine.pytorch.tensor.float8_tensor._make_float8_tensor_in_reduce_ex(
      data, fp8_dtype, fp8_scale_inv, dtype, shape, data_transpose)
  (Float8Tensor.__reduce_ex__, transformer_engine/pytorch/tensor/float8_tensor.py)
  transformer_engine_torch.DType reduced as (DType, (int,))
  (transformer_engine/common/util/pybind_helper.h; values from NVTEDType in
   transformer_engine/common/include/transformer_engine/transformer_engine.h: E4M3 7, E5M2 8)
The path layouts are those of TensorLogger.save_tensor (transformer_engine/debug/features/
dump_tensors.py): {layer}_{tensor}_iter_{iter:06d}.pt, and iter_{iter:06d}/{layer}_{tensor}.pt
in older versions. The quantised codes are computed by torch's own casts (torch.float8_e4m3fn /
float8_e5m2, round to nearest even) of x * scale with a power-of-two scale, the current-scaling
rule of TE with force_pow_2_scales, so scale_inv = 1/scale exactly.

Hostile files (never loaded by this script; fp8kit must refuse them):
  hostile_os_system.pt      a pickle whose REDUCE calls os.system
  hostile_eval.pt           builtins.eval
  hostile_short_storage.pt  a tensor claiming 1000 elements of a 4-element storage
  hostile_escape.pt         a zip entry 'hostile_escape/../x' (written with zipfile)

Usage: python scripts/make_te_fixtures.py data/te   (needs torch; run once, commit the output)
"""
import collections
import io
import math
import os
import sys
import types
import zipfile

import torch

OUT = sys.argv[1]


def te_standins():
    """Modules and functions under TE's qualified names (bodies never run on load here)."""
    names = ["transformer_engine", "transformer_engine.pytorch", "transformer_engine.pytorch.tensor",
             "transformer_engine.pytorch.tensor.float8_tensor"]
    for n in names:
        sys.modules.setdefault(n, types.ModuleType(n))
    f8 = sys.modules["transformer_engine.pytorch.tensor.float8_tensor"]

    def _make_float8_tensor_in_reduce_ex(data, fp8_dtype, fp8_scale_inv, dtype, shape, data_transpose=None):
        raise RuntimeError("stand-in: not for loading")

    _make_float8_tensor_in_reduce_ex.__module__ = f8.__name__
    _make_float8_tensor_in_reduce_ex.__qualname__ = "_make_float8_tensor_in_reduce_ex"
    f8._make_float8_tensor_in_reduce_ex = _make_float8_tensor_in_reduce_ex

    tex = types.ModuleType("transformer_engine_torch")
    sys.modules["transformer_engine_torch"] = tex

    class DType:
        def __init__(self, v):
            self.v = v

        def __reduce_ex__(self, protocol):
            return (DType, (self.v,))

    DType.__module__ = "transformer_engine_torch"
    DType.__qualname__ = "DType"
    tex.DType = DType

    class Float8Tensor:
        def __init__(self, data, fp8_dtype, scale_inv, dtype, shape):
            self.args = (data, fp8_dtype, scale_inv, dtype, shape, None)

        def __reduce_ex__(self, protocol):
            return (_make_float8_tensor_in_reduce_ex, self.args)

    return DType, Float8Tensor


DType, Float8Tensor = te_standins()
TE_E4M3, TE_E5M2 = 7, 8


def quantize(x, fp8, flip=None):
    """TE current scaling with a power-of-two scale: codes = fp8(x * scale), scale_inv = 1/scale."""
    torch_dtype, fmax, te = {"e4m3": (torch.float8_e4m3fn, 448.0, TE_E4M3),
                             "e5m2": (torch.float8_e5m2, 57344.0, TE_E5M2)}[fp8]
    amax = x.float().abs().max().item()
    scale = 2.0 ** math.floor(math.log2(fmax / amax))
    codes = (x.float() * scale).to(torch_dtype).view(torch.uint8).contiguous()
    if flip is not None:  # one code changed on purpose: fp8kit must count exactly one mismatch
        codes.view(-1)[flip] ^= 1
    scale_inv = torch.tensor([1.0 / scale], dtype=torch.float32)
    return Float8Tensor(codes, DType(te), scale_inv, x.dtype, x.shape)


HP = {}


def save(obj, *parts):
    path = os.path.join(OUT, *parts)
    if isinstance(obj, dict) and isinstance(obj.get("high_precision"), torch.Tensor):
        HP[os.path.join(*parts)] = obj["high_precision"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(obj, path)


g = torch.Generator().manual_seed(23)
a = torch.randn(4, 32, generator=g) * 3
w = (torch.randn(16, 8, generator=g) * 0.05).to(torch.bfloat16)
gr = (torch.randn(8, 16, generator=g) * 1e-3).to(torch.bfloat16)
base = torch.randn(6, 5, generator=g)
root = ("dumps", "tensor_dumps")
# Newer layout, float32 high precision, E4M3 codes that match.
save({"high_precision": a, "quantized": quantize(a, "e4m3")},
     *root, "rank_0", "layers_0_fc1_activation_iter_000010.pt")
# Newer layout, bf16 weight, one code flipped.
save({"high_precision": w, "quantized": quantize(w, "e4m3", flip=5)},
     *root, "rank_0", "layers_0_fc1_weight_iter_000010.pt")
# Older layout, rank 1, bf16 gradient in E5M2.
save({"high_precision": gr, "quantized": quantize(gr, "e5m2")},
     *root, "rank_1", "iter_000020", "layers_0_fc2_gradient.pt")
# Only high precision, a strided view with a storage offset (the whole storage is saved).
save({"high_precision": base[1:].t()}, *root, "rank_1", "iter_000020", "layers_1_self_attention_output.pt")
# Only quantized.
save({"quantized": quantize(a, "e4m3")}, *root, "rank_0", "layers_1_proj_dgrad_iter_000030.pt")


class Evil:
    def __init__(self, fn, arg):
        self.fn, self.arg = fn, arg

    def __reduce__(self):
        return (self.fn, (self.arg,))


save({"high_precision": a[:1], "x": Evil(os.system, "echo fp8kit-must-not-run-this")}, "hostile", "hostile_os_system.pt")
import builtins  # noqa: E402
save({"high_precision": Evil(builtins.eval, "print('fp8kit-must-not-run-this')")}, "hostile", "hostile_eval.pt")


class Short:
    def __reduce__(self):
        s = torch.zeros(4).untyped_storage()
        return (torch._utils._rebuild_tensor_v2,
                (torch.storage.TypedStorage(wrap_storage=s, dtype=torch.float32, _internal=True),
                 0, (1000,), (1,), False, collections.OrderedDict()))


save({"high_precision": Short()}, "hostile", "hostile_short_storage.pt")

# A zip entry escaping the archive folder, beside a valid torch.save archive's entries.
buf = io.BytesIO()
torch.save({"high_precision": a}, buf)
src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
with zipfile.ZipFile(os.path.join(OUT, "hostile", "hostile_escape.pt"), "w", zipfile.ZIP_STORED) as z:
    for info in src.infolist():
        name = info.filename.split("/", 1)[1]
        z.writestr("hostile_escape/" + ("../x" if name.startswith("data/") else name), src.read(info))

# The truth the tests compare with: torch's own view of each high_precision tensor (shape, and
# every element as float32 bits, row-major), and how torch laid out the zip.
with open(os.path.join(OUT, "EXPECTED.txt"), "w") as f:
    f.write(f"# torch {torch.__version__}; written by scripts/make_te_fixtures.py\n")
    for dirpath, _, files in sorted(os.walk(os.path.join(OUT, "dumps"))):
        for fn in sorted(files):
            p = os.path.join(dirpath, fn)
            rel = os.path.relpath(p, OUT)
            with zipfile.ZipFile(p) as z:
                f.write(f"zip {rel} {sorted({i.compress_type for i in z.infolist()})} "
                        f"{' '.join(i.filename for i in z.infolist())}\n")
            hp = HP.get(rel)
            if hp is not None:
                bits = hp.float().contiguous().view(torch.int32).view(-1).tolist()
                f.write(f"hp {rel} {list(hp.shape)} " + " ".join(f"{b & 0xffffffff:08x}" for b in bits) + "\n")
print("wrote", OUT)
