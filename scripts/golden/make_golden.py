#!/usr/bin/env python3
"""Golden conversion data, produced by the libraries themselves (never by fp8kit).

Run on a machine with an sm_89+ GPU, torch, ml_dtypes and nvcc (scripts/golden/run_on_gpu.sh):

  * every float16 and bfloat16 bit pattern -> every FP8 format, as raw 65,536-byte tables:
      ml_dtypes  numpy astype to ml_dtypes.float8_*            (e4m3, e5m2, e4m3fnuz, e5m2fnuz)
      torch      Tensor.to(torch.float8_*) on the GPU; the CPU is checked to agree
      cuda-satfinite-gpu   the GPU's own cvt.rn.satfinite instruction (cvt_tables.cu)
  * every float32 bit pattern: a CRC-32 (zlib) of each 2^24-input slice of the 2^32-byte table,
    for the same libraries, in tests/golden/f32_crc32.json.

The ml_dtypes part alone runs on any CPU:

  python scripts/golden/make_golden.py --ml-dtypes [OUT] [FORMAT...]

writes the 16-bit tables of the named formats (default: the FP4/FP6 and remaining 8-bit types,
ML_NEW) and merges their float32 slice CRCs into OUT/f32_crc32.json, leaving other entries as they
are (2^32 inputs x 6 formats: about three minutes on two cores).

tests/emu/test_golden.cpp recomputes the same tables with fp8kit and compares them byte for byte
(16-bit inputs) or slice CRC for slice CRC (float32).
"""
import json
import os
import subprocess
import sys
import zlib
from concurrent.futures import ProcessPoolExecutor

import ml_dtypes
import numpy as np

ML_ONLY = len(sys.argv) > 1 and sys.argv[1] == "--ml-dtypes"
ARGS = sys.argv[2:] if ML_ONLY else sys.argv[1:]
OUT = ARGS[0] if len(ARGS) > 0 else "tests/golden"
CVT_BIN = ARGS[1] if len(ARGS) > 1 and not ML_ONLY else None
SLICE = 1 << 24
NSLICES = 1 << 8

ML_TYPES = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
}
# The OCP MX element formats (one code per byte, in the low bits) and the remaining 8-bit types.
ML_NEW = {
    "e2m1": ml_dtypes.float4_e2m1fn,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e3m4": ml_dtypes.float8_e3m4,
    "e4m3b11fnuz": ml_dtypes.float8_e4m3b11fnuz,
    "e4m3ieee": ml_dtypes.float8_e4m3,
}
ML_TYPES.update(ML_NEW)


def torch_types():
    import torch
    return {
        "e4m3": torch.float8_e4m3fn,
        "e5m2": torch.float8_e5m2,
        "e4m3fnuz": torch.float8_e4m3fnuz,
        "e5m2fnuz": torch.float8_e5m2fnuz,
    }


def all16(kind):
    bits = np.arange(1 << 16, dtype=np.uint16)
    return bits.view(np.float16) if kind == "f16" else bits.view(ml_dtypes.bfloat16)


def f32_slice(i):
    return (np.arange(SLICE, dtype=np.uint64) + np.uint64(i * SLICE)).astype(np.uint32).view(np.float32)


def ml_slice_crc(job):
    fmt, i = job
    return zlib.crc32(f32_slice(i).astype(ML_TYPES[fmt]).view(np.uint8).tobytes())


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes(data))


def ml_dtypes_only(formats):
    """16-bit tables and float32 slice CRCs of ml_dtypes alone, merged into OUT/f32_crc32.json."""
    os.makedirs(OUT, exist_ok=True)
    for src in ("f16", "bf16"):
        x = all16(src)
        for fmt in formats:
            write(f"{src}_{fmt}_ml_dtypes.bin", x.astype(ML_TYPES[fmt]).view(np.uint8))
    path = os.path.join(OUT, "f32_crc32.json")
    with open(path) as f:
        doc = json.load(f)
    with ProcessPoolExecutor() as ex:
        for fmt in formats:
            crcs = list(ex.map(ml_slice_crc, [(fmt, i) for i in range(NSLICES)]))
            doc["tables"][f"ml_dtypes/{fmt}"] = [f"{v:08x}" for v in crcs]
            print("ml_dtypes f32", fmt, "done", flush=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=0)
    vpath = os.path.join(OUT, "versions.json")
    with open(vpath) as f:
        v = json.load(f)
    v["ml_dtypes_cpu_only"] = {"formats": list(formats), "numpy": np.__version__,
                               "ml_dtypes": ml_dtypes.__version__}
    with open(vpath, "w") as f:
        json.dump(v, f, indent=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    import torch
    tt = torch_types()
    versions = {"numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__, "torch": torch.__version__,
                "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0)}
    agreement = {}

    # 16-bit inputs.
    for src in ("f16", "bf16"):
        x = all16(src)
        for fmt, t in ML_TYPES.items():
            write(f"{src}_{fmt}_ml_dtypes.bin", x.astype(t).view(np.uint8))
        xt = torch.from_numpy(np.arange(1 << 16, dtype=np.int32).astype(np.int16))
        xt = xt.view(torch.float16 if src == "f16" else torch.bfloat16)
        for fmt, t in tt.items():
            gpu = xt.cuda().to(t).view(torch.uint8).cpu().numpy()
            cpu = xt.to(t).view(torch.uint8).numpy()
            agreement[f"torch cpu == gpu, {src} -> {fmt}"] = bool((gpu == cpu).all())
            write(f"{src}_{fmt}_torch.bin", gpu)
            write(f"{src}_{fmt}_torch-cpu.bin", cpu)

    # The GPU's own cvt instruction: cvt_tables writes f16/bf16 tables and f32 slice files.
    crcs = {}
    if CVT_BIN:
        tmp = "/tmp/cvt_out"
        os.makedirs(tmp, exist_ok=True)
        subprocess.run([CVT_BIN, tmp], check=True)
        for src in ("f16", "bf16"):
            for fmt in ("e4m3", "e5m2"):
                with open(os.path.join(tmp, f"{src}_{fmt}.bin"), "rb") as f:
                    write(f"{src}_{fmt}_cuda-satfinite-gpu.bin", f.read())
        for fmt in ("e4m3", "e5m2"):
            with open(os.path.join(tmp, f"f32_{fmt}.crc"), "r") as f:
                crcs[f"cuda-satfinite-gpu/{fmt}"] = [int(v, 16) for v in f.read().split()]

    # float32: torch on the GPU, slice by slice.
    for fmt, t in tt.items():
        out = []
        for i in range(NSLICES):
            base = torch.arange(SLICE, dtype=torch.int64, device="cuda") + i * SLICE
            x = base.to(torch.int32).view(torch.float32) if i * SLICE < (1 << 31) else \
                (base - (1 << 32)).to(torch.int32).view(torch.float32)
            out.append(zlib.crc32(x.to(t).view(torch.uint8).cpu().numpy().tobytes()))
        crcs[f"torch/{fmt}"] = out
        print("torch f32", fmt, "done", flush=True)

    # float32: ml_dtypes on all CPU cores.
    with ProcessPoolExecutor() as ex:
        for fmt in ML_TYPES:
            crcs[f"ml_dtypes/{fmt}"] = list(ex.map(ml_slice_crc, [(fmt, i) for i in range(NSLICES)]))
            print("ml_dtypes f32", fmt, "done", flush=True)

    with open(os.path.join(OUT, "f32_crc32.json"), "w") as f:
        json.dump({"slice_inputs": SLICE, "crc": "zlib.crc32 of the output bytes of inputs "
                   "[i*slice, (i+1)*slice) in increasing bit-pattern order",
                   "tables": {k: [f"{v:08x}" for v in vs] for k, vs in crcs.items()}}, f, indent=0)
    with open(os.path.join(OUT, "versions.json"), "w") as f:
        json.dump({"versions": versions, "checks": agreement}, f, indent=1)
    print(json.dumps(versions), json.dumps(agreement))


if __name__ == "__main__":
    if ML_ONLY:
        ml_dtypes_only(ARGS[1:] or list(ML_NEW))
    else:
        main()
