"""Quantised inference checkpoints (ModelOpt, compressed-tensors, DeepSeek-V3, gpt-oss): the checks
of `fp8kit checkpoint check`. docs/inference.md."""
import json
import os

from . import _fp8kit

CheckpointError = _fp8kit.CheckpointError


def checkpoint_check(dir, reference=None):
    """Checks checkpoint folder `dir` (and, with `reference`, re-quantises the original weights
    under the producer's own rule). Returns the report as a dict: producer, layers (scheme:
    fp8-per-tensor, fp8-per-channel, fp8-block, nvfp4, mxfp4, mxfp8, w4a8-int4 or unquantized;
    scale convention; excluded; global_scale, input_scale, pre_quant_scale where present), findings, kv_scales (what vLLM does with each name), comparisons
    (verdict, code/scale mismatches, sqnr_db, max_rel_error) and failed."""
    ref = None if reference is None else os.fspath(reference)
    return json.loads(_fp8kit.checkpoint_check_json(os.fspath(dir), ref))
