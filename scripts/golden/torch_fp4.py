#!/usr/bin/env python3
"""What torch (and torchao, if installed) really do with FP4, measured on the machine that has them.

  python scripts/golden/torch_fp4.py OUT_DIR

Writes OUT_DIR/torch_fp4.json: torch's version, which of the FP4/FP6/FP8 dtypes it has, the
result or the exact error of each way to make or read a torch.float4_e2m1fn_x2 tensor (cast from
float32 on CPU and GPU, view of uint8 bytes and cast back, printing), and torchao's packing of two
E2M1 codes into one byte (which element goes in the low nibble). Where torch converts to
float4_e2m1fn_x2, every float16/bfloat16 pair table is written as {f16,bf16}_e2m1x2_torch.bin.
Nothing here comes from fp8kit.
"""
import json
import os
import sys
import traceback

import numpy as np
import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(OUT, exist_ok=True)
facts = {"torch": torch.__version__, "cuda": torch.version.cuda,
         "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def attempt(key, fn):
    """Run fn and record its result, or the exception's type and message."""
    try:
        facts[key] = {"ok": True, "result": fn()}
    except Exception as e:  # the error text is the fact
        facts[key] = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}


# 1. Which dtypes exist.
names = ["float4_e2m1fn_x2", "float8_e8m0fnu", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
         "float8_e5m2fnuz", "float6_e2m3fn", "float6_e3m2fn", "float8_e3m4", "float8_e4m3",
         "float8_e4m3b11fnuz", "float4_e2m1fn"]
facts["has_dtype"] = {n: hasattr(torch, n) for n in names}
fp4 = getattr(torch, "float4_e2m1fn_x2", None)

# 2. Ways into and out of float4_e2m1fn_x2. Values 1.0 (code 0x2) and 6.0 (0x7) in one pair.
if fp4 is not None:
    pair = [1.0, 6.0]
    for dev in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        attempt(f"cast_f32_to_x2_{dev}",
                lambda: torch.tensor(pair, device=dev).to(fp4).view(torch.uint8).cpu().tolist())
        attempt(f"cast_bf16_to_x2_{dev}",
                lambda: torch.tensor(pair, device=dev, dtype=torch.bfloat16).to(fp4).view(torch.uint8).cpu().tolist())
        attempt(f"view_u8_as_x2_then_f32_{dev}",
                lambda: torch.tensor([0x72], dtype=torch.uint8, device=dev).view(fp4).to(torch.float32).cpu().tolist())
        attempt(f"empty_x2_{dev}", lambda: str(torch.empty(2, dtype=fp4, device=dev).shape))
    attempt("x2_element_size", lambda: torch.empty(1, dtype=fp4).element_size())
    attempt("x2_repr", lambda: repr(torch.tensor([0x72], dtype=torch.uint8).view(fp4)))

# 3. torchao's FP4 packing (if installed): two unpacked codes [a, b] -> one byte.
try:
    import torchao
    facts["torchao"] = torchao.__version__
    from torchao.prototype.mx_formats import kernels as k
    for fn in ("pack_uint4", "f32_to_f4_unpacked", "unpack_uint4", "f4_unpacked_to_f32"):
        facts[f"torchao_has_{fn}"] = hasattr(k, fn)
    if hasattr(k, "pack_uint4"):
        attempt("torchao_pack_uint4_[0x2,0x7]",
                lambda: k.pack_uint4(torch.tensor([[0x2, 0x7]], dtype=torch.uint8)).view(torch.uint8).tolist())
    if hasattr(k, "f32_to_f4_unpacked"):
        # Every float32 value a table would need is too many; the 16-bit inputs are not: all
        # float16 and bfloat16 values widened to float32 (exact), one code per byte.
        for src, dt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            x = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(dt).to(torch.float32)
            def run(x=x, src=src):
                codes = k.f32_to_f4_unpacked(x).view(torch.uint8).numpy()
                codes.tofile(os.path.join(OUT, f"{src}_e2m1_torchao.bin"))
                return int(codes.size)
            attempt(f"torchao_f32_to_f4_unpacked_{src}", run)
except Exception:
    facts["torchao"] = "not importable: " + traceback.format_exc().splitlines()[-1]

with open(os.path.join(OUT, "torch_fp4.json"), "w") as f:
    json.dump(facts, f, indent=1)
print(json.dumps(facts, indent=1))
