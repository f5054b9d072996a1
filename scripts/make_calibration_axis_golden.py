#!/usr/bin/env python3
"""Writes tests/golden/calibration_axis_scales.json: per-channel and per-head scales computed by the
calibration libraries themselves, for `fp8kit calibrate --granularity channel|head` to reproduce
bit for bit. Companion of scripts/make_calibration_golden.py (per tensor; same environment, same
way of loading llm-compressor's observers without its training stack).

- per channel (the last dimension of an activation [batch, tokens, hidden]): ModelOpt 0.47.0
  TensorQuantizer(num_bits=(4, 3), axis=-1) with its MaxCalibrator (`modelopt_max`) and the
  MseCalibrator built as for a weight (`modelopt_mse`), exported by get_scaling_factor, on three
  bfloat16 inputs of data/example/llama_tiny_dump.h5, steps 0 and 100. (llm-compressor refuses a
  channel strategy for activations: observers/helpers.py _flatten_activation raises.)
- per head (dimension 1 of Q/K/V [batch, heads, positions, head_dim], as the KV cache holds them):
  llm-compressor 0.14.0.1 observers (memoryless_minmax, static_minmax, minmax, mse) with
  compressed-tensors 0.19.0 QuantizationArgs(strategy="attn_head"), base names "q" / "k" / "v"
  (observers/helpers.py _flatten_attention), and ModelOpt's MaxCalibrator and MseCalibrator with
  axis=1, on the Q/K/V of data/example/llama_tiny_kv.h5, steps 0 to 3 in order.
- refused: the exceptions ModelOpt 0.47.0 raises for a HistogramCalibrator with an axis and for
  its histogram "entropy" and "mse" amax under FP8's num_bits=(4, 3) (fp8kit refuses the same).

Environment: as make_calibration_golden.py (torch, nvidia-modelopt 0.47.0, llmcompressor
0.14.0.1 and compressed-tensors 0.19.0 without their dependencies), e.g.
    pip install --target SITE --no-deps nvidia-modelopt==0.47.0 llmcompressor==0.14.0.1 compressed-tensors==0.19.0
    PYTHONPATH=SITE python scripts/make_calibration_axis_golden.py tests/golden/calibration_axis_scales.json
"""
import json
import os
import struct
import sys
from functools import partial

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_calibration_golden import bf16_tensor, load_observers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DUMP = os.path.join(ROOT, "data", "example", "llama_tiny_dump.h5")
KV = os.path.join(ROOT, "data", "example", "llama_tiny_kv.h5")
CHANNEL_KEYS = ("model.layers.0.self_attn.q_proj/input", "model.layers.1.mlp.down_proj/input", "lm_head/input")
CHANNEL_STEPS = (0, 100)
HEAD_LAYERS = ("model.layers.0.self_attn", "model.layers.1.self_attn")


def bits_list(t):
    v = t.reshape(-1).to(torch.float32).numpy()
    return ["0x%08x" % struct.unpack("<I", struct.pack("<f", float(x)))[0] for x in v]


def modelopt(batches, axis, mse):
    from modelopt.torch.export.quant_utils import get_scaling_factor
    from modelopt.torch.quantization.calib.mse import MseCalibrator
    from modelopt.torch.quantization.config import QuantizerAttributeConfig
    from modelopt.torch.quantization.model_calib import _mse_quant_func
    from modelopt.torch.quantization.nn import TensorQuantizer

    q = TensorQuantizer(QuantizerAttributeConfig(num_bits=(4, 3), axis=axis))
    for calibrator in ("max", "mse") if mse else ("max",):
        if calibrator == "mse":
            q._calibrator = MseCalibrator(amax=q._amax.clone().detach(), axis=q._calibrator._axis,
                                          quant_func=partial(_mse_quant_func, quantizer=q))
        q.disable_quant()
        q.enable_calib()
        for x in batches:
            q(x)
        q.load_calib_amax()
        q.enable_quant()
        q.disable_calib()
    return get_scaling_factor(q)


def llmc(Observer, batches, name, base):
    from compressed_tensors.quantization import QuantizationArgs

    args = QuantizationArgs(num_bits=8, type="float", strategy="attn_head", symmetric=True, dynamic=False,
                            observer=name)
    obs = Observer.load_from_registry(name, base_name=base, args=args)
    for x in batches:
        obs(x)
    return obs.get_qparams()["scale"]


def refusals():
    """What ModelOpt 0.47.0 itself raises for the methods fp8kit refuses (docs/inference.md): the
    HistogramCalibrator with an axis, and its entropy and mse amax for FP8's num_bits=(4, 3)."""
    from modelopt.torch.quantization.calib.histogram import HistogramCalibrator

    out = {}
    try:
        HistogramCalibrator(num_bits=(4, 3), axis=-1)
    except Exception as e:  # noqa: BLE001  (the exception is the datum)
        out["modelopt_percentile_axis"] = "%s: %s" % (type(e).__name__, e)
    with h5py.File(DUMP, "r") as f:
        x = bf16_tensor(f["step_000000/lm_head/input"])
    for method in ("entropy", "mse"):
        c = HistogramCalibrator(num_bits=(4, 3))
        c.collect(x)
        try:
            c.compute_amax(method)
        except Exception as e:  # noqa: BLE001
            out["modelopt_histogram_" + method] = "%s: %s" % (type(e).__name__, e)
    return out


def main(out_path):
    Observer = load_observers()
    out = {"versions": {"torch": torch.__version__, "nvidia-modelopt": "0.47.0", "llmcompressor": "0.14.0.1",
                        "compressed-tensors": "0.19.0"},
           "channel": {"dump": "data/example/llama_tiny_dump.h5", "steps": list(CHANNEL_STEPS), "tensors": {}},
           "head": {"dump": "data/example/llama_tiny_kv.h5", "steps": [0, 1, 2, 3], "tensors": {}}}
    with h5py.File(DUMP, "r") as f:
        for key in CHANNEL_KEYS:
            batches = [bf16_tensor(f["step_%06d/%s" % (s, key)]) for s in CHANNEL_STEPS]
            out["channel"]["tensors"][key] = {
                "modelopt_max": bits_list(modelopt(batches, -1, False)),
                "modelopt_mse": bits_list(modelopt(batches, -1, True)),
            }
    with h5py.File(KV, "r") as f:
        for layer in HEAD_LAYERS:
            for kind in "qkv":
                key = "%s.%s" % (layer, kind)
                batches = [bf16_tensor(f["step_%06d/%s" % (s, key)]) for s in range(4)]
                e = {"modelopt_max": bits_list(modelopt(batches, 1, False)),
                     "modelopt_mse": bits_list(modelopt(batches, 1, True))}
                for name in ("memoryless_minmax", "static_minmax", "minmax", "mse"):
                    e["llmc_" + name] = bits_list(llmc(Observer, batches, name, kind))
                out["head"]["tensors"][key] = e
                print(key, {m: len(v) for m, v in e.items()}, file=sys.stderr)
    out["refused"] = refusals()
    with open(out_path, "w") as fo:
        json.dump(out, fo, indent=1, sort_keys=True)
        fo.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
