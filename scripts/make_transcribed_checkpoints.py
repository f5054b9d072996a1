#!/usr/bin/env python3
"""Checkpoint fixtures for rules whose producer needs a GPU or a torch build (issue 51), written
from data/checkpoints/original with numpy and ml_dtypes by transcribing each producer's quantiser
line for line (every operation float32 as torch performs it on the CPU; bfloat16 and FP8/FP4
casts by ml_dtypes, round to nearest even, as torch's casts). Not the producers' own code: the
transcribed source is named at each function.

  tf_fp8_block          transformers FineGrainedFP8 (integrations/finegrained_fp8.py
                        Fp8Quantize.convert), weight_block_size [64, 64] (transformers refuses
                        blocks that do not divide the weight: 128 does not divide 192)
  tf_fp8_block_ue8m0    the same blocks with power-of-two scales 2^ceil(log2(max(amax, 1e-4)/448))
                        (DeepSeek-V3.1 inference/kernel.py act_quant, scale_fmt "ue8m0"), stored
                        as F8_E8M0 (the E8M0 exponent byte)
  tf_fp8_block_ue8m0_f32  the same scales stored as float32
  llmc_nvfp4_fused      compressed-tensors NVFP4 (utils/helpers.py generate_gparam,
                        calculate_qparams; forward.py quantize) with llm-compressor's fused
                        global scale (modifiers/utils/helpers.py
                        update_fused_layer_weight_global_scales: the minimum of the members'
                        global scales over q/k/v and gate/up, i.e. the global of the group's
                        largest amax); input_global_scale copied from data/checkpoints/ct_nvfp4

Usage: make_transcribed_checkpoints.py DATA_DIR   (DATA_DIR = data/checkpoints)
"""
import json
import os
import shutil
import struct
import sys

import ml_dtypes
import numpy as np

LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
DT = {"BF16": ml_dtypes.bfloat16, "F32": np.float32, "F8_E4M3": ml_dtypes.float8_e4m3fn,
      "U8": np.uint8, "F8_E8M0": np.uint8}


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        out[k] = (v["dtype"], np.frombuffer(data[b:e], dtype=DT[v["dtype"]]).reshape(v["shape"]))
    return out


def write(path, tensors):
    head, blobs, off = {}, [], 0
    for k in sorted(tensors):
        dt, a = tensors[k]
        b = np.ascontiguousarray(a).tobytes()
        head[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def f32(x):
    return np.asarray(x, dtype=np.float32)


def bf16(x):
    return f32(np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16))


def block_amax(w, bm, bn):
    r, c = w.shape
    return np.abs(w.reshape(r // bm, bm, c // bn, bn)).max(axis=(1, 3)).astype(np.float32)


def expand(s, bm, bn):
    return np.repeat(np.repeat(s, bm, axis=0), bn, axis=1)


def transformers_fp8(w, bm, bn):
    """transformers Fp8Quantize.convert: value_fp32; max_abs per tile; scales = 448 / max_abs
    (1 where max_abs == 0); quantized = clamp(x * scales, -448, 448).to(float8_e4m3fn);
    weight_scale_inv = 1.0 / scales."""
    max_abs = block_amax(w, bm, bn)
    safe = np.where(max_abs > 0, max_abs, f32(1))
    scales = np.where(max_abs > 0, f32(448) / safe, f32(1)).astype(np.float32)
    q = np.clip(w * expand(scales, bm, bn), f32(-448), f32(448)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    return q, (f32(1) / scales).astype(np.float32)


def ue8m0_fp8(w, bm, bn):
    """DeepSeek-V3.1 act_quant with scale_fmt "ue8m0": amax = max(amax, 1e-4); s = amax / 448;
    s = 2^ceil(log2(s)); y = x / s, cast to E4M3."""
    amax = np.maximum(block_amax(w, bm, bn), f32(1e-4))
    s = np.exp2(np.ceil(np.log2(amax / f32(448)))).astype(np.float32)
    q = (w / expand(s, bm, bn)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    return q, s


def ct_nvfp4(w, amax):
    """compressed-tensors NVFP4, the weight in bfloat16: generate_gparam 448*6 / amax as
    reciprocal() * 2688 in bfloat16, returned float32; calculate_qparams: block scale
    e4m3(clamp(global * bf16(block_amax / 6))), 0 -> E4M3 eps 0.125; quantize: x / (scale /
    global) in float32, clamp [-6, 6], cast to E2M1; packed two per byte, low nibble first."""
    g = bf16(f32(2688) * bf16(f32(1) / f32(max(amax, np.finfo(np.float32).tiny))))
    r, c = w.shape
    bamax = np.abs(w.reshape(r, c // 16, 16)).max(axis=2).astype(np.float32)
    s = np.clip(g * bf16(bamax / f32(6)), f32(-448), f32(448)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    s = np.where(f32(s) == 0, np.float32(0.125), f32(s)).astype(ml_dtypes.float8_e4m3fn)
    d = (f32(s) / g).astype(np.float32)
    v = np.clip(w / np.repeat(d, 16, axis=1), f32(-6), f32(6)).astype(np.float32)
    codes = v.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed, s, g


def save(out, tensors, config):
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "model.safetensors"), tensors)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def main():
    data = sys.argv[1]
    orig = read(os.path.join(data, "original", "model.safetensors"))
    with open(os.path.join(data, "original", "config.json")) as f:
        base = json.load(f)
    pre = "model.layers.0."
    for name, rule, sdt in [("tf_fp8_block", transformers_fp8, "F32"), ("tf_fp8_block_ue8m0", ue8m0_fp8, "F8_E8M0"),
                            ("tf_fp8_block_ue8m0_f32", ue8m0_fp8, "F32")]:
        t = {k: v for k, v in orig.items() if not any(k == pre + m + ".weight" for m in LINEARS)}
        for m in LINEARS:
            w = f32(orig[pre + m + ".weight"][1])
            q, s = rule(w, 64, 64)
            t[pre + m + ".weight"] = ("F8_E4M3", q)
            if sdt == "F8_E8M0":  # the exponent byte of a power of two
                t[pre + m + ".weight_scale_inv"] = ("F8_E8M0", ((s.view(np.uint32) >> 23) & 0xFF).astype(np.uint8))
            else:
                t[pre + m + ".weight_scale_inv"] = ("F32", s)
        qc = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [64, 64],
              "modules_to_not_convert": ["lm_head"]}
        if rule is ue8m0_fp8:
            qc["scale_fmt"] = "ue8m0"
        save(os.path.join(data, name), t, dict(base, quantization_config=qc))
    # llm-compressor NVFP4 with fused global scales.
    ct = read(os.path.join(data, "ct_nvfp4", "model.safetensors"))
    with open(os.path.join(data, "ct_nvfp4", "config.json")) as f:
        ct_config = json.load(f)
    groups = [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], ["self_attn.o_proj"],
              ["mlp.gate_proj", "mlp.up_proj"], ["mlp.down_proj"]]
    t = {k: v for k, v in ct.items() if not any(k.startswith(pre + m + ".weight") for m in LINEARS)}
    for g in groups:
        amax = max(float(np.abs(f32(orig[pre + m + ".weight"][1])).max()) for m in g)
        for m in g:
            packed, s, gs = ct_nvfp4(f32(orig[pre + m + ".weight"][1]), amax)
            t[pre + m + ".weight_packed"] = ("U8", packed)
            t[pre + m + ".weight_scale"] = ("F8_E4M3", s)
            t[pre + m + ".weight_global_scale"] = ("F32", np.array([gs], dtype=np.float32))
    # The transcription against compressed-tensors' own output: where a layer's amax is its
    # group's largest (q_proj, up_proj, and the groups of one), the tensors are ct_nvfp4's, byte
    # for byte.
    for g in groups:
        amax = max(float(np.abs(f32(orig[pre + m + ".weight"][1])).max()) for m in g)
        for m in g:
            if float(np.abs(f32(orig[pre + m + ".weight"][1])).max()) != amax:
                continue
            for s in ("weight_packed", "weight_scale", "weight_global_scale"):
                k = pre + m + "." + s
                if not np.array_equal(t[k][1].view(np.uint8), ct[k][1].view(np.uint8)):
                    raise SystemExit(f"{k}: the transcription differs from data/checkpoints/ct_nvfp4")
    save(os.path.join(data, "llmc_nvfp4_fused"), t, ct_config)
    print("ml_dtypes", ml_dtypes.__version__, "numpy", np.__version__)


if __name__ == "__main__":
    main()
