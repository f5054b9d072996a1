#!/usr/bin/env python3
"""Writes data/te/quantized/: TransformerEngine DumpTensors files holding MXFP8Tensor,
NVFP4Tensor and Float8BlockwiseQTensor entries, with real torch.save.

TransformerEngine (it needs a GPU) is not imported: stand-ins are registered under TE's exact
qualified names, so the pickles reference what a TE run's pickles reference, and each stand-in's
__reduce_ex__ returns the argument tuple of TE's own __reduce_ex__
(transformer_engine/pytorch/tensor/{mxfp8,nvfp4,float8_blockwise}_tensor.py, tags v2.16, v2.17,
v2.18):
  _make_mxfp8_tensor_in_reduce_ex(rowwise_data, rowwise_scale_inv, columnwise_data,
      columnwise_scale_inv, fp8_dtype, dtype, shape, quantizer, with_gemm_swizzled_scales)
  _make_nvfp4_tensor_in_reduce_ex(shape, rowwise_data, rowwise_scale_inv, columnwise_data,
      columnwise_scale_inv, amax_rowwise, amax_columnwise, fp4_dtype, dtype, quantizer,
      with_gemm_swizzled_scales)                                   (2.16)
      ... + row_scaled_nvfp4, nvfp4_use_4over6, nvfp4_e4m3_max     (2.17, 2.18)
  _make_float8_blockwise_tensor_in_reduce_ex(shape, rowwise_data, rowwise_scale_inv,
      columnwise_data, columnwise_scale_inv, fp8_dtype, dtype, quantizer, is_2D_scaled,
      data_format=None)
The quantizer is an object of a stand-in class named as TE's (MXFP8Quantizer, NVFP4Quantizer,
Float8BlockQuantizer) with the fields TE's __init__ sets (Quantizer: rowwise_usage,
columnwise_usage, internal, optimize_for_gemm); it pickles as TE's do, NEWOBJ + BUILD of its
__dict__ (NVFP4Quantizer.__getstate__ sets amax_reduction_group to None). tex.DType pickles as
(DType, (int,)), values of NVTEDType (E4M3 7, E5M2 8, E2M1 10).

Scale layouts (TE's quantizers' get_scale_shape): MXFP8 row-wise E8M0 scale_inv
(round_up(rows, 128), round_up(cols / 32, 4)), optionally in cuBLAS's swizzled layout (TE
tests/pytorch/mxfp8/mxfp8_utils.py _rowwise_swizzle_mxfp8_scale); blockwise 1x128 float32
scale_inv (ceil(cols / 128), round_up(rows, 4)) (transposed), 128x128 (ceil(rows / 128),
round_up(ceil(cols / 128), 4)). NVFP4 row-wise data: two E2M1 codes per byte, low nibble first.

Codes are torch's own casts (torch.float8_e4m3fn / float8_e5m2, round to nearest even) of
x * 2^-e (MXFP8: e = ceil(log2(amax / fp8_max)), the E8M0 scale rounded up as TE's
float_to_e8m0 does) or of x * scale (blockwise: scale = 2^floor(log2(fp8_max / amax)), TE's
force_pow_2_scales), so scale_inv is exact; NVFP4 follows TE's Python reference (see nvfp4()).
Two files have one code flipped on purpose.
tensor_dumps/rank_0/layers_9_fc1_activation_iter_000001.pt is a TE 2.15 pickle (a bound
classmethod through getattr), which fp8kit refuses by design.

Usage: python scripts/make_te_quantized_fixtures.py data/te/quantized   (needs torch; commit the output)
"""
import json
import math
import os
import sys
import types

import torch

OUT = sys.argv[1]
ROOT = os.path.join(OUT, "tensor_dumps", "rank_0")
os.makedirs(ROOT, exist_ok=True)
g = torch.Generator().manual_seed(4916)


def module(name):
    parts = name.split(".")
    for k in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:k]), types.ModuleType(".".join(parts[:k])))
    return sys.modules[name]


def place(mod, obj, name):
    obj.__module__ = mod.__name__
    obj.__qualname__ = name
    obj.__name__ = name
    setattr(mod, name, obj)
    return obj


tex = module("transformer_engine_torch")


class DType:
    def __init__(self, v):
        self.v = v

    def __reduce_ex__(self, protocol):
        return (DType, (self.v,))


place(tex, DType, "DType")
E4M3, E5M2, E2M1 = DType(7), DType(8), DType(10)

MX = module("transformer_engine.pytorch.tensor.mxfp8_tensor")
NV = module("transformer_engine.pytorch.tensor.nvfp4_tensor")
BW = module("transformer_engine.pytorch.tensor.float8_blockwise_tensor")


def reconstructor(mod, name):
    def f(*args):
        raise RuntimeError("stand-in: not for loading")
    return place(mod, f, name)


make_mx = reconstructor(MX, "_make_mxfp8_tensor_in_reduce_ex")
make_nv = reconstructor(NV, "_make_nvfp4_tensor_in_reduce_ex")
make_bw = reconstructor(BW, "_make_float8_blockwise_tensor_in_reduce_ex")


class Quantizer:
    def __init__(self, dtype, **fields):
        self.rowwise_usage = True
        self.columnwise_usage = False
        self.internal = False
        self.optimize_for_gemm = False
        self.dtype = dtype
        self.__dict__.update(fields)


MXFP8Quantizer = place(MX, type("MXFP8Quantizer", (Quantizer,), {}), "MXFP8Quantizer")
NVFP4Quantizer = place(NV, type("NVFP4Quantizer", (Quantizer,), {}), "NVFP4Quantizer")
Float8BlockQuantizer = place(BW, type("Float8BlockQuantizer", (Quantizer,), {}), "Float8BlockQuantizer")


class Reduced:
    """An object whose pickle is (fn, args), as TE's QuantizedTensor.__reduce_ex__ returns."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce_ex__(self, protocol):
        return (self.fn, self.args)


FP8 = {"e4m3": (torch.float8_e4m3fn, 448.0, E4M3), "e5m2": (torch.float8_e5m2, 57344.0, E5M2)}
EXPECTED = {}


def save(obj, name, **expect):
    torch.save(obj, os.path.join(ROOT, name))
    EXPECTED[name] = expect


def swizzle(scale):
    """TE tests/pytorch/mxfp8/mxfp8_utils.py _rowwise_swizzle_mxfp8_scale, on the padded scales."""
    m, k4 = scale.shape
    return scale.view(m // 128, 4, 32, k4 // 4, 4).permute(0, 3, 2, 1, 4).contiguous().view(m, k4)


def mxfp8(x, fmt, swizzled, flip=None):
    tdt, fmax, te = FP8[fmt]
    rows, cols = x.shape
    xf = x.float().view(rows, cols // 32, 32)
    amax = xf.abs().amax(dim=2)
    e = torch.ceil(torch.log2(amax / fmax)).clamp(-127, 127)  # E8M0 rounded up (TE float_to_e8m0)
    codes = (xf * torch.pow(2.0, -e).unsqueeze(2)).view(rows, cols).to(tdt).view(torch.uint8).contiguous()
    if flip is not None:
        codes.view(-1)[flip] ^= 1
    pr, pc = (rows + 127) // 128 * 128, (cols // 32 + 3) // 4 * 4
    scale = torch.full((pr, pc), 127, dtype=torch.uint8)
    scale[:rows, : cols // 32] = (e + 127).to(torch.uint8)
    if swizzled:
        scale = swizzle(scale)
    q = MXFP8Quantizer(te)
    return Reduced(make_mx, (codes, scale, None, None, te, x.dtype, x.shape, q, swizzled))


def blockwise(x, fmt, two_d, flip=None):
    tdt, fmax, te = FP8[fmt]
    rows, cols = x.shape
    kb, rb = (cols + 127) // 128, (rows + 127) // 128
    xf = x.float()
    codes = torch.empty(rows, cols, dtype=torch.uint8)
    if two_d:
        sinv = torch.zeros(rb, (kb + 3) // 4 * 4)
    else:
        sinv = torch.zeros(kb, (rows + 3) // 4 * 4)
    for r0 in range(0, rows, 128 if two_d else 1):
        for c0 in range(0, cols, 128):
            blk = xf[r0 : r0 + (128 if two_d else 1), c0 : c0 + 128]
            scale = 2.0 ** math.floor(math.log2(fmax / blk.abs().max().item()))
            codes[r0 : r0 + blk.shape[0], c0 : c0 + blk.shape[1]] = (blk * scale).to(tdt).view(torch.uint8)
            if two_d:
                sinv[r0 // 128, c0 // 128] = 1.0 / scale
            else:
                sinv[c0 // 128, r0] = 1.0 / scale
    if flip is not None:
        codes.view(-1)[flip] ^= 1
    q = Float8BlockQuantizer(te, block_len=128, force_pow_2_scales=True, amax_epsilon=0.0,
                             block_scaling_dim=2 if two_d else 1)
    return Reduced(make_bw, (x.shape, codes, sinv, None, None, te, x.dtype, q, two_d, None))


def nvfp4(x, version, swizzled=False, flip=None):
    """TE's NVFP4 row-wise quantisation (1 x 16 blocks, E4M3 block scales, float32 global amax) in
    the order of TE's Python reference (transformer_engine/pytorch/custom_recipes/
    quantization_ref_nvfp4.py, _quantize_blockwise_reference, pow_2_scales=False): S_enc =
    fl32(2688 / amax); block scale = e4m3(clamp(block_amax * fl32(S_enc * fl32(1 / 6)), +-448));
    encode = fl32(1 / fl32(float(scale) * fl32(1 / S_enc))); codes = E2M1(clamp(x * encode, +-6)).
    The E4M3 cast is torch's, the E2M1 cast ml_dtypes' (round to nearest even); packed two per
    byte, low nibble first."""
    import ml_dtypes
    import numpy as np
    rows, cols = x.shape
    xf = x.float()
    amax = xf.abs().max().reshape(1)
    s_enc = torch.tensor(2688.0) / amax
    s_dec = torch.tensor(1.0) / s_enc
    mult = s_enc * torch.reciprocal(torch.tensor(6.0))
    blk = xf.view(rows, cols // 16, 16)
    sb = torch.clamp(blk.abs().amax(dim=2, keepdim=True) * mult, -448.0, 448.0).to(torch.float8_e4m3fn)
    enc = torch.tensor(1.0) / (sb.float() * s_dec)
    y = torch.clamp(blk * enc, -6.0, 6.0).reshape(rows, cols).numpy()
    codes = torch.from_numpy(y.astype(ml_dtypes.float4_e2m1fn).view(np.uint8).copy()) & 15
    if flip is not None:
        codes.view(-1)[flip] ^= 1
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous()  # low nibble first
    scale = torch.zeros(((rows + 127) // 128 * 128, (cols // 16 + 3) // 4 * 4), dtype=torch.uint8)
    scale[:rows, : cols // 16] = sb.view(torch.uint8).reshape(rows, cols // 16)
    if swizzled:
        scale = swizzle(scale)
    q = NVFP4Quantizer(E2M1, with_rht=False, with_post_rht_amax=False, with_amax_reduction=False,
                       amax_reduction_group=None, with_2d_quantization=False, stochastic_rounding=False,
                       row_scaled_nvfp4=False, rht_matrix_random_sign_mask_t=0,
                       rht_matrix=torch.eye(16, dtype=torch.bfloat16))
    args = (x.shape, packed, scale, None, None, amax, None, E2M1, x.dtype, q, swizzled)
    if version >= (2, 17):
        args += (False, False, None)
    return Reduced(make_nv, args), codes


x1 = torch.randn(136, 96, generator=g).to(torch.bfloat16) * 3
x2 = torch.randn(4, 64, generator=g) * 0.01
x3 = torch.randn(20, 300, generator=g) * 5
x4 = (torch.randn(200, 260, generator=g) * 2).to(torch.bfloat16)
x5 = torch.randn(8, 32, generator=g)
x6 = (torch.randn(136, 64, generator=g) * 7).to(torch.bfloat16)
save({"high_precision": x1, "quantized": mxfp8(x1, "e4m3", swizzled=True)}, "layers_0_fc1_activation_iter_000001.pt",
     kind="MXFP8Tensor", layout="mx32", swizzled=True, mismatches=0)
save({"high_precision": x2, "quantized": mxfp8(x2, "e5m2", swizzled=False, flip=70)},
     "layers_0_fc1_gradient_iter_000001.pt", kind="MXFP8Tensor", layout="mx32", swizzled=False, mismatches=1,
     first=70)
save({"high_precision": x3, "quantized": blockwise(x3, "e4m3", two_d=False)}, "layers_0_fc2_activation_iter_000001.pt",
     kind="Float8BlockwiseQTensor", layout="1x128", mismatches=0)
save({"high_precision": x4, "quantized": blockwise(x4, "e4m3", two_d=True, flip=1000)},
     "layers_0_fc2_weight_iter_000001.pt", kind="Float8BlockwiseQTensor", layout="128x128", mismatches=1, first=1000)
for ver, x, swz, flip in (((2, 16), x5, False, None), ((2, 17), x6, True, 77)):
    q, codes = nvfp4(x, ver, swizzled=swz, flip=flip)
    name = f"layers_1_qkv_activation_iter_0000{ver[1]}.pt"
    save({"high_precision": x, "quantized": q}, name, kind="NVFP4Tensor", te=f"{ver[0]}.{ver[1]}", swizzled=swz,
         shape=list(x.shape), mismatches=0 if flip is None else 1, **({} if flip is None else {"first": flip}),
         codes="".join(format(c, "x") for c in codes.view(-1).tolist()))


# TE 2.15: __reduce_ex__ returned the bound classmethod MXFP8Tensor._make_in_reduce_ex.
class MXFP8Tensor:
    @classmethod
    def _make_in_reduce_ex(cls, *args):
        raise RuntimeError("stand-in: not for loading")

    def __init__(self, args):
        self.args = args

    def __reduce_ex__(self, protocol):
        return (MXFP8Tensor._make_in_reduce_ex, self.args)


place(MX, MXFP8Tensor, "MXFP8Tensor")
old = mxfp8(x2, "e4m3", swizzled=False)
save({"high_precision": x2, "quantized": MXFP8Tensor(old.args[:7])}, "layers_9_fc1_activation_iter_000001.pt",
     kind="refused", te="2.15")
with open(os.path.join(OUT, "EXPECTED.json"), "w") as f:
    json.dump({"torch": torch.__version__, "files": EXPECTED}, f, indent=1, sort_keys=True)
    f.write("\n")
print(f"{len(EXPECTED)} files under {ROOT}")
