#!/usr/bin/env python3
"""Writes tests/golden/calibration_scales.json: activation scales computed by the calibration
libraries themselves, for `fp8kit calibrate` (issue 28, item 3) to reproduce bit for bit.

Activations: every `<step>/<module>/input` tensor of data/example/llama_tiny_dump.h5 (bfloat16,
[1, 128, hidden], a real 2-layer Llama training run), and three float32 tensors (F32_KEYS) for
the float32 arithmetic. Steps 0 and 100 are fed to each calibrator
in step order, one call per step (one forward batch each), as a calibration loop would; step 299
is the held-out step (fp8kit's default: the last step) and is not seen here.

Methods, each run through the library's own code, per tensor, FP8 E4M3:
  - ModelOpt (nvidia-modelopt 0.47.0):
      modelopt_max: TensorQuantizer(num_bits=(4, 3)) with its MaxCalibrator
        (modelopt/torch/quantization/calib/max.py), load_calib_amax, then the export's
        input_scale = get_scaling_factor(quantizer) (modelopt/torch/export/quant_utils.py).
      modelopt_mse: MseCalibrator (calib/mse.py) built as model_calib.py
        _make_weight_mse_calibrator builds it (initial amax = the max-calibrated _amax, defaults
        step 0.1, 0.25 .. 4.0, quant_func = model_calib._mse_quant_func on the same quantizer),
        fed the same batches through the quantizer, loaded with load_calib_amax, exported as
        above. (ModelOpt's own mse_calibrate applies it to weights only; see docs/inference.md.)
      modelopt_percentile: HistogramCalibrator (calib/histogram.py; 2048 bins, torch.histc),
        compute_amax("percentile", percentile=99.99), exported as above.
  - llm-compressor 0.14.0.1 observers (llmcompressor/observers/min_max.py, mse.py) with
    compressed-tensors 0.19.0 (its pinned version) QuantizationArgs(num_bits=8, type=float,
    strategy=tensor, symmetric=True), base_name "input": memoryless_minmax, static_minmax,
    minmax (averaging 0.01), mse (MovingAverageMSEObserver, defaults); the scale is
    get_qparams()["scale"], in the activation's dtype (bfloat16) as llm-compressor stores
    input_scale.

llm-compressor's package __init__ (and that of observers/ and utils/) imports its whole training
stack (datasets, transformers, modifiers, ...); only the observer modules are needed, so those
packages are entered without running their __init__.

Environment (never the project's .venv):
    python3 -m venv .gl
    .gl/bin/pip install torch nvidia-modelopt==0.47.0 h5py datasets loguru
    .gl/bin/pip install --no-deps llmcompressor==0.14.0.1 compressed-tensors==0.19.0
    .gl/bin/python scripts/make_calibration_golden.py data/example/llama_tiny_dump.h5 \
        tests/golden/calibration_scales.json
Written by: torch 2.15.0 (CPU), nvidia-modelopt 0.47.0, llmcompressor 0.14.0.1,
compressed-tensors 0.19.0 (llmcompressor pins torch <= 2.14; its observers use only basic ops).
"""
import importlib.util
import json
import struct
import sys
import types
from functools import partial

import h5py
import numpy as np
import torch

CALIB_STEPS = (0, 100)
HOLDOUT_STEP = 299


def load_observers():
    root = list(importlib.util.find_spec("llmcompressor").submodule_search_locations)[0]
    for sub in ("", ".observers", ".utils"):  # packages entered without their __init__
        pkg = types.ModuleType("llmcompressor" + sub)
        pkg.__path__ = [root + sub.replace(".", "/")]
        sys.modules["llmcompressor" + sub] = pkg
    import llmcompressor.observers.min_max  # noqa: F401  (registers the min/max observers)
    import llmcompressor.observers.mse  # noqa: F401  (registers mse)
    from llmcompressor.observers.base import Observer

    return Observer


def bf16_tensor(ds):
    u16 = np.asarray(ds[...], dtype=np.uint16)
    return torch.from_numpy(u16.astype(np.int16)).view(torch.bfloat16)


def f32_tensor(ds):
    return torch.from_numpy(np.asarray(ds[...], dtype=np.float32))


# float32 tensors of the same dump (weights, stored float32), calibrated as if they were
# activations: the float32 arithmetic of every method (ModelOpt's amax buffer is then float32,
# llm-compressor computes and stores its scale in float32, eps 2^-23).
F32_KEYS = ("lm_head/weight", "model.layers.0.self_attn.q_proj/weight", "model.layers.1.mlp.down_proj/weight")


def bits(t):
    v = float(t.reshape(-1)[0].to(torch.float32))
    return "0x%08x" % struct.unpack("<I", struct.pack("<f", v))[0], v


def modelopt_scales(batches):
    from modelopt.torch.export.quant_utils import get_scaling_factor
    from modelopt.torch.quantization.calib.mse import MseCalibrator
    from modelopt.torch.quantization.config import QuantizerAttributeConfig
    from modelopt.torch.quantization.model_calib import _mse_quant_func
    from modelopt.torch.quantization.nn import TensorQuantizer

    q = TensorQuantizer(QuantizerAttributeConfig(num_bits=(4, 3), axis=None))
    q.disable_quant()
    q.enable_calib()
    for x in batches:
        q(x)
    q.load_calib_amax()
    q.enable_quant()
    q.disable_calib()
    out = {"modelopt_max": (get_scaling_factor(q), q.amax)}

    cal = MseCalibrator(amax=q._amax.clone().detach(), axis=q._calibrator._axis,
                        quant_func=partial(_mse_quant_func, quantizer=q))
    q._calibrator = cal
    q.disable_quant()
    q.enable_calib()
    for x in batches:
        q(x)
    q.load_calib_amax()
    q.enable_quant()
    q.disable_calib()
    out["modelopt_mse"] = (get_scaling_factor(q), q.amax)

    from modelopt.torch.quantization.calib.histogram import HistogramCalibrator

    q = TensorQuantizer(QuantizerAttributeConfig(num_bits=(4, 3), axis=None))
    q._calibrator = HistogramCalibrator(num_bits=(4, 3), axis=None)  # 2048 bins, torch.histc
    q.disable_quant()
    q.enable_calib()
    for x in batches:
        q(x)
    q.load_calib_amax("percentile", percentile=99.99)
    out["modelopt_percentile"] = (get_scaling_factor(q), q.amax)
    return out


def llmc_scales(Observer, batches):
    from compressed_tensors.quantization import QuantizationArgs

    out = {}
    for name, method in (("memoryless_minmax", "llmc_memoryless_minmax"),
                         ("static_minmax", "llmc_static_minmax"), ("minmax", "llmc_minmax"),
                         ("mse", "llmc_mse")):
        args = QuantizationArgs(num_bits=8, type="float", strategy="tensor", symmetric=True,
                                dynamic=False, observer=name)
        obs = Observer.load_from_registry(name, base_name="input", args=args)
        for x in batches:
            obs(x)
        qp = obs.get_qparams()
        out[method] = (qp["scale"], None)
    return out


def main(dump, out_path):
    Observer = load_observers()
    f = h5py.File(dump, "r")
    names = sorted(k for k in f["step_%06d" % CALIB_STEPS[0]].keys())
    result = {"dump": "data/example/llama_tiny_dump.h5", "calibration_steps": list(CALIB_STEPS),
              "holdout_step": HOLDOUT_STEP, "format": "e4m3",
              "versions": {"torch": torch.__version__}, "tensors": {}}
    import modelopt
    import compressed_tensors

    result["versions"]["nvidia-modelopt"] = modelopt.__version__
    result["versions"]["compressed-tensors"] = compressed_tensors.__version__
    result["versions"]["llmcompressor"] = "0.14.0.1"
    keys = ["%s/input" % m for m in names if "%s/input" % m in f["step_%06d" % CALIB_STEPS[0]]]
    for key in keys + list(F32_KEYS):
        load = f32_tensor if key in F32_KEYS else bf16_tensor
        batches = [load(f["step_%06d/%s" % (s, key)]) for s in CALIB_STEPS]
        entry = {}
        found = modelopt_scales(batches)
        found.update(llmc_scales(Observer, batches))
        for method, (scale, amax) in found.items():
            hexbits, value = bits(scale)
            e = {"scale_bits_f32": hexbits, "scale": value, "dtype": str(scale.dtype).replace("torch.", "")}
            if amax is not None:
                e["amax_bits_f32"], e["amax"] = bits(amax)
                e["amax_dtype"] = str(amax.dtype).replace("torch.", "")
            entry[method] = e
        result["tensors"][key] = entry
        print(key, {m: v["scale"] for m, v in entry.items()}, file=sys.stderr)
    with open(out_path, "w") as fo:
        json.dump(result, fo, indent=1, sort_keys=True)
        fo.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
