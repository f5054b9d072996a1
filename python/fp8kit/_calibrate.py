"""Activation calibration as ModelOpt and llm-compressor define it: `fp8kit calibrate`.
docs/inference.md, "Calibration"."""

import json
import os

import numpy as np

from . import _fp8kit
from ._dump import warn_skipped

CalibrateError = _fp8kit.CalibrateError
METHODS = (
    "modelopt_max",
    "modelopt_mse",
    "modelopt_percentile",
    "llmc_memoryless_minmax",
    "llmc_static_minmax",
    "llmc_minmax",
    "llmc_mse",
)
# A weight method (one step of a weight; not in "all"): ModelOpt's NVFP4 FP8-scale sweep.
WEIGHT_METHODS = ("modelopt_nvfp4_sweep",)


def calibrate(dumps, methods=("all",), tensors=(), holdout_steps=None, holdout_tokens=None, granularity="tensor"):
    """Replays the activation tensors of `dumps` (paths; each step of a tensor is one batch) through
    each method. Returns the report as a dict: rows (tensor, checkpoint_name, method, tool, scale,
    scale_dtype, amax, calibration_steps, holdout_steps, holdout statistics), notes and skipped
    (datasets skipped on purpose, also named in a UserWarning).
    `holdout_steps`: "299", "200-", "none"; None holds out each tensor's last step.
    `holdout_tokens`: a fraction of every step's tokens (the last ones) held out instead.
    `granularity`: "tensor", "channel" (the last dimension; ModelOpt axis=-1) or "head" (dimension 1
    of a [batch, heads, positions, head_dim] Q/K/V tensor; llm-compressor attn_head): one row per
    channel or head, its number in "index". Per channel: modelopt_max, modelopt_mse (ModelOpt's
    MseCalibrator with an axis); per head: those and the llmc observers. ModelOpt's histogram
    "entropy" and "mse" raise CalibrateError: ModelOpt 0.47.0 raises TypeError for FP8 in both."""
    if isinstance(dumps, (str, os.PathLike)):
        dumps = [dumps]
    if isinstance(methods, str):
        methods = [methods]
    r = json.loads(
        _fp8kit.calibrate_json(
            [os.fspath(d) for d in dumps], list(methods), list(tensors), holdout_steps, holdout_tokens, granularity
        )
    )
    warn_skipped(r["skipped"])
    return r


def calibrate_scale(method, batches):
    """The scale `method` computes from `batches` (arrays fed in order, one calibrator call each).
    bfloat16 arrays (ml_dtypes) are computed in bfloat16 as llm-compressor does; anything else as
    float32. Returns (scale, dtype, amax, candidate)."""
    bf16 = all(getattr(b, "dtype", None) is not None and str(b.dtype) == "bfloat16" for b in batches)
    arrays = [np.asarray(b, dtype=np.float32).ravel() for b in batches]
    return _fp8kit.calibrate_scale(method, arrays, bool(bf16 and batches))


def nvfp4_scale_sweep(weight):
    """ModelOpt 0.47.0's FP8-scale sweep for a static NVFP4 weight (NVFP4MSECalibrator, as
    mtq.quantize with NVFP4_W4A4_WEIGHT_MSE_FP8_SWEEP_CFG runs it, and its export): for each block
    of 16 along the last dimension the E4M3 block scale that minimises the block's squared NVFP4
    error. `weight`: an array whose last dimension is a multiple of 16 (float32, or bfloat16 from
    ml_dtypes: widened exactly). Returns a dict: weight_scale (uint8 E4M3 codes, shape
    [..., cols / 16], ModelOpt's exported `weight_scale`), weight_scale_2 (float32,
    global_amax / 2688, ModelOpt's `weight_scale_2`), global_amax, amax (float32 per block) and
    candidate (int per block, 0..125). docs/inference.md, "NVFP4 weight scale sweep"."""
    w = np.asarray(weight)
    if w.ndim == 0:
        raise CalibrateError("nvfp4_scale_sweep: the weight has no last dimension")
    cols = w.shape[-1]
    codes, s2, gamax, amax, cand = _fp8kit.nvfp4_scale_sweep(w.astype(np.float32).ravel(), cols)
    shape = w.shape[:-1] + (cols // 16,)
    return {
        "weight_scale": np.asarray(codes, dtype=np.uint8).reshape(shape),
        "weight_scale_2": np.float32(s2),
        "global_amax": np.float32(gamax),
        "amax": np.asarray(amax, dtype=np.float32).reshape(shape),
        "candidate": np.asarray(cand, dtype=np.int64).reshape(shape),
    }
