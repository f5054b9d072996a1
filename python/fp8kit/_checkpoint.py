"""Quantised inference checkpoints (ModelOpt, compressed-tensors, DeepSeek-V3, gpt-oss): the checks
of `fp8kit checkpoint check`. docs/inference.md."""

import json
import os

from . import _fp8kit

CheckpointError = _fp8kit.CheckpointError


def checkpoint_check(dir, reference=None, engine=""):
    """Checks checkpoint folder `dir` (and, with `reference`, re-quantises the original weights
    under the producer's own rule). Returns the report as a dict: producer, layers (scheme:
    fp8-per-tensor, fp8-per-channel, fp8-block, nvfp4, mxfp4, mxfp8, w4a8-int4, w4a16-int4,
    int8-per-channel or unquantized;
    scale convention; excluded; global_scale, input_scale, pre_quant_scale where present),
    findings, kv_scales, comparisons (verdict, code/scale mismatches, sqnr_db, max_rel_error, and
    variant: the producer rule the verdict is under, "<producer> (CPU arithmetic)" or, for a
    checkpoint written on a GPU, "<producer> (CUDA arithmetic)") and failed.

    kv_scales: one entry per KV / attention scale or affine KV bias found, and per k/v scale an
    attention layer lacks (present False): name, dtype, shape, and engines = {"vllm", "sglang",
    "tensorrt_llm"} -> {"fate", "detail"}, fate one of loaded, renamed, replaced, dropped,
    rejected, undetermined (docs/inference.md, check 4, cites each engine's loader).

    engine: "" (none), "vllm", "sglang", "trtllm", or "all": what that engine (every engine, for
    "all") drops, renames wrongly or rejects is a failed finding; other engines' concerns are notes."""
    ref = None if reference is None else os.fspath(reference)
    return json.loads(_fp8kit.checkpoint_check_json(os.fspath(dir), ref, engine))


def checkpoint_kv_names(dir):
    """The per-engine KV name report of `checkpoint_check(dir)` as flat rows, one per (name,
    engine): dicts with name, present, engine ("vllm", "sglang", "tensorrt_llm"), fate, detail."""
    rows = []
    for k in checkpoint_check(dir)["kv_scales"]:
        for engine, o in k["engines"].items():
            rows.append(
                {"name": k["name"], "present": k["present"], "engine": engine, "fate": o["fate"], "detail": o["detail"]}
            )
    return rows
