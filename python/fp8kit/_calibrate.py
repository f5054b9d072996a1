"""Activation calibration as ModelOpt and llm-compressor define it: `fp8kit calibrate`.
docs/inference.md, "Calibration"."""
import json
import os

import numpy as np

from . import _fp8kit

CalibrateError = _fp8kit.CalibrateError
METHODS = ("modelopt_max", "modelopt_mse", "modelopt_percentile", "llmc_memoryless_minmax", "llmc_static_minmax", "llmc_minmax", "llmc_mse")


def calibrate(dumps, methods=("all",), tensors=(), holdout_steps=None, holdout_tokens=None, granularity="tensor"):
    """Replays the activation tensors of `dumps` (paths; each step of a tensor is one batch) through
    each method. Returns the report as a dict: rows (tensor, checkpoint_name, method, tool, scale,
    scale_dtype, amax, calibration_steps, holdout_steps, holdout statistics) and notes.
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
    return json.loads(_fp8kit.calibrate_json([os.fspath(d) for d in dumps], list(methods), list(tensors), holdout_steps,
                                                holdout_tokens, granularity))


def calibrate_scale(method, batches):
    """The scale `method` computes from `batches` (arrays fed in order, one calibrator call each).
    bfloat16 arrays (ml_dtypes) are computed in bfloat16 as llm-compressor does; anything else as
    float32. Returns (scale, dtype, amax, candidate)."""
    bf16 = all(getattr(b, "dtype", None) is not None and str(b.dtype) == "bfloat16" for b in batches)
    arrays = [np.asarray(b, dtype=np.float32).ravel() for b in batches]
    return _fp8kit.calibrate_scale(method, arrays, bool(bf16 and batches))
