#!/usr/bin/env python3
"""Writes tests/golden/torchao_mx_modes.{json,bin}: what torchao itself outputs for every MX scale
rule and for NVFP4 with and without a per-tensor scale, on CPU tensors, for fp8kit's presets
mxfp8/mxfp4/mxfp6-e2m3/mxfp6-e3m2-torchao-{floor,ceil,even,rceil}, nvfp4-torchao-single and
nvfp4-torchao to reproduce bit for bit (tests/lib/test_torchao_golden.cpp).

What runs is torchao's own code, unchanged:
  - torchao.prototype.mx_formats.mx_tensor.to_mx(x, elem_dtype, 32, ScaleCalculationMode.X)
    -> (E8M0 scale bytes, element data: float8 bytes, FP6 one code per byte, FP4 packed two per
    byte by pack_uint4, element 2i in the low nibble);
  - mx_tensor.get_fp_scale(scale) -> the float32 factor torchao dequantises with;
  - nvfp4_tensor.nvfp4_quantize(x, 16, per_tensor_scale=None) and, two-level, with
    per_tensor_scale = nvfp4_tensor.per_tensor_amax_to_scale(torch.max(torch.abs(x)))
    -> (E4M3 block scale bytes, packed FP4);
  - utils.to_blocked(scales): the scales in cuBLAS's block-scaling-factor layout (128 x 4 tiles),
    for validate's swizzled layouts.

Inputs (float32, and the same rounded to bfloat16 by torch): one row per 32-element MX block
(two NVFP4 blocks), each row scaled to a chosen block amax: zero, float32 subnormals, the range
[2^-126, 2^-118) that gives E8M0 code 0 with normal elements, exact powers of two and their float32
neighbours, the element maxima (448, 57344, 6, 7.5, 28) times powers of two and times
2^k (1 + j 2^-23) (where a float32 log2 of amax / max may round to k), the EVEN rounding boundaries,
FLT_MAX, +-Inf, signed zeros, random magnitudes. Set "nan" (NaN elements) is used for the E4M3 cases only: torchao's FP4/FP6 casts
(custom_fp_utils._f32_to_floatx_unpacked) have no NaN rule (a NaN's code is computed from its bits
as if it were a number), so FP4/FP6/NVFP4 cases take set "finite" (Inf, no NaN); two-level NVFP4
takes "noinf" (the same, Inf and |x| > 1e38 zeroed). bfloat16 NaNs are written as 0x7FC0.

Environment: torch 2.11.0 (CPU), torchao 0.18.0, numpy (python -m pip install torch==2.11.0
torchao==0.18.0 into a virtual environment).
    python scripts/golden/torchao_mx_modes.py tests/golden
"""
import argparse
import json
import os
import struct

import numpy as np
import torch
import torchao
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
from torchao.prototype.mx_formats.mx_tensor import get_fp_scale, to_mx
from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale
from torchao.prototype.mx_formats.utils import to_blocked

F32 = np.float32
ROWS, COLS = 160, 32


def f32(bits):
    return np.array([bits], np.uint32).view(F32)[0]


def amax_list():
    a = [0.0, f32(1), f32(0x00400000), f32(0x007FFFFF)]           # zero, subnormals
    a += [2.0 ** -126, 2.0 ** -122 * 1.5, 2.0 ** -119 * 1.9, 2.0 ** -118 * 0.999]  # MX code 0
    for k in (-120, -7, 0, 4, 5, 100, 126):
        a += [2.0 ** k, float(F32(2.0 ** k) * F32(1 + 2.0 ** -23)), float(np.nextafter(F32(2.0 ** k), F32(0)))]
    for m in (448.0, 57344.0, 6.0, 7.5, 28.0):
        for k in (-130, -120, -10, 0, 1, 60):
            a.append(m * 2.0 ** k)
        # amax / m just above a power of two, where a float32 log2 may round to the integer
        for k in (-100, 0, 20):
            for j in (1, 5, 23, 40):
                a.append(float(F32(m * 2.0 ** k) * F32(1 + j * 2.0 ** -23)))
    for mb in (1, 2, 3):                                          # EVEN: 2 - 2^-(mbits+1)
        b = 2.0 - 2.0 ** -(mb + 1)
        for k in (-5, 0, 7):
            v = F32(b * 2.0 ** k)
            a += [float(v), float(np.nextafter(v, F32(0))), float(np.nextafter(v, F32(np.inf)))]
    a += [float(np.finfo(F32).max), float(np.nextafter(np.finfo(F32).max, F32(0)))]
    return a


def make_input(rng, with_nan):
    amaxes = amax_list()
    x = np.zeros((ROWS, COLS), F32)
    for r in range(ROWS):
        a = F32(amaxes[r]) if r < len(amaxes) else F32(np.exp2(rng.uniform(-40, 40)))
        u = rng.uniform(-1, 1, COLS).astype(F32)
        row = (u * a).astype(F32)
        for half in (0, 16):                                     # both NVFP4 blocks reach a
            row[half + rng.integers(0, 16)] = a if rng.integers(0, 2) else -a
        x[r] = row
    # Special rows after the list (rows stay below ROWS).
    n = len(amaxes)
    x[n, 3] = np.inf                                              # Inf block
    x[n + 1, 7] = -np.inf
    x[n + 1, 20] = np.inf
    x[n + 2, :] = 0.0
    x[n + 2, 5] = -0.0                                            # signed zeros
    x[n + 2, 9] = 1.0
    x[n + 3, ::4] = -0.0
    if with_nan:
        x[n + 4, 11] = np.nan                                     # NaN block
        x[n + 5, :] = np.nan
        x[n + 6, 2] = np.nan
        x[n + 6, 3] = np.inf                                      # NaN and Inf in one block
    return x


ELEMS = {"e4m3": torch.float8_e4m3fn, "e2m1": torch.float4_e2m1fn_x2, "e2m3": DTYPE_FP6_E2M3,
         "e3m2": DTYPE_FP6_E3M2}
STEMS = {"e4m3": "mxfp8", "e2m1": "mxfp4", "e2m3": "mxfp6-e2m3", "e3m2": "mxfp6-e3m2"}
MODES = {"floor": ScaleCalculationMode.FLOOR, "ceil": ScaleCalculationMode.CEIL,
         "even": ScaleCalculationMode.EVEN, "rceil": ScaleCalculationMode.RCEIL}


class Blob:
    def __init__(self):
        self.parts, self.size = [], 0

    def add(self, a):
        b = np.ascontiguousarray(a).tobytes()
        off = self.size
        self.parts.append(b)
        self.size += len(b)
        return [off, len(b)]


def u8(t):
    return t.contiguous().view(torch.uint8).numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    args = ap.parse_args()
    rng = np.random.default_rng(20261129)
    blob = Blob()
    inputs, cases = {}, []
    tensors = {}
    for set_name, with_nan in (("nan", True), ("finite", False), ("noinf", False)):
        if set_name == "noinf":  # the "finite" set with Inf and |x| > 1e38 zeroed
            x32 = np.where(np.abs(x32) > F32(1e38), F32(0), x32).astype(F32)
        else:
            x32 = make_input(rng, with_nan)
        t32 = torch.from_numpy(x32.copy())
        tb = t32.to(torch.bfloat16)
        # torch rounds a float32 NaN to the bfloat16 bits 0xFFFF (sign set); keep the NaNs positive
        # (0x7FC0) as in the float32 input: which of two NaN operands a product returns is the
        # CPU's choice, not a rule (x * NaN scale, RCEIL).
        bits = tb.view(torch.int16).clone()
        bits[torch.isnan(tb)] = 0x7FC0
        tb = bits.view(torch.bfloat16)
        tensors[(set_name, "f32")] = t32
        tensors[(set_name, "bf16")] = tb
        inputs[f"{set_name}/f32"] = blob.add(x32)
        inputs[f"{set_name}/bf16"] = blob.add(tb.view(torch.int16).numpy())
    for elem, dt in ELEMS.items():
        set_name = "nan" if elem == "e4m3" else "finite"
        for mode, m in MODES.items():
            for wide in ("f32", "bf16"):
                x = tensors[(set_name, wide)]
                scale, data = to_mx(x, dt, 32, m)
                sinv = get_fp_scale(scale).to(torch.float32)
                cases.append({"preset": f"{STEMS[elem]}-torchao-{mode}", "format": elem, "input": f"{set_name}/{wide}",
                              "dtype": wide, "rows": ROWS, "cols": COLS, "packed": elem == "e2m1",
                              "scales": blob.add(u8(scale)), "scale_inv": blob.add(sinv.numpy()),
                              "codes": blob.add(u8(data))})
    for wide in ("f32", "bf16"):
        x = tensors[("finite", wide)]
        s, d = nvfp4_quantize(x, 16, per_tensor_scale=None)
        cases.append({"preset": "nvfp4-torchao-single", "format": "e2m1", "input": f"finite/{wide}", "dtype": wide,
                      "rows": ROWS, "cols": COLS, "packed": True, "scales": blob.add(u8(s)), "codes": blob.add(u8(d))})
        # Two-level: on the same data with Inf and |x| > 1e38 zeroed (bfloat16 rounds FLT_MAX to Inf;
        # an Inf tensor amax makes every
        # per-tensor-scaled block degenerate: all codes 0, Inf blocks NaN).
        x = tensors[("noinf", wide)]
        amax = torch.max(torch.abs(x.float()))
        pts = per_tensor_amax_to_scale(amax)
        s, d = nvfp4_quantize(x, 16, per_tensor_scale=pts)
        cases.append({"preset": "nvfp4-torchao", "format": "e2m1", "input": f"noinf/{wide}", "dtype": wide,
                      "rows": ROWS, "cols": COLS, "packed": True, "scales": blob.add(u8(s)), "codes": blob.add(u8(d)),
                      "per_tensor_scale": struct.unpack("<I", struct.pack("<f", float(pts)))[0]})

    # Swizzled scale layouts (cuBLAS 1D block scaling factors layout, torchao to_blocked) on a
    # shape that spans several 128 x 4 tiles with padding: 130 x 128 bf16.
    xs = torch.from_numpy((rng.standard_normal((130, 128)) * np.exp2(rng.integers(-8, 8, (130, 1)))).astype(F32))
    xs = xs.to(torch.bfloat16)
    swz = {"input": blob.add(xs.view(torch.int16).numpy()), "rows": 130, "cols": 128, "dtype": "bf16"}
    scale, data = to_mx(xs, torch.float8_e4m3fn, 32, ScaleCalculationMode.RCEIL)
    swz["mx"] = {"preset": "mxfp8-torchao-rceil", "scales": blob.add(u8(scale)), "codes": blob.add(u8(data)),
                 "swizzled": blob.add(u8(to_blocked(scale.view(torch.uint8))))}
    s, d = nvfp4_quantize(xs, 16, per_tensor_scale=None)
    swz["nvfp4"] = {"preset": "nvfp4-torchao-single", "scales": blob.add(u8(s)), "codes": blob.add(u8(d)),
                    "swizzled": blob.add(u8(to_blocked(s.view(torch.uint8))))}

    man = {"what": "torchao's own outputs (scripts/golden/torchao_mx_modes.py); offsets and byte lengths "
                   "into torchao_mx_modes.bin",
           "torch": torch.__version__, "torchao": torchao.__version__, "numpy": np.__version__,
           "inputs": inputs, "cases": cases, "swizzle": swz}
    with open(os.path.join(args.out_dir, "torchao_mx_modes.bin"), "wb") as f:
        for p in blob.parts:
            f.write(p)
    with open(os.path.join(args.out_dir, "torchao_mx_modes.json"), "w") as f:
        json.dump(man, f, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases, {blob.size} bytes")


if __name__ == "__main__":
    main()
