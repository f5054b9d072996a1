"""The reference FP8 GEMM D = (A . B^T) * (scale_a (x) scale_b) under an accumulation model
(docs/gemm.md), and validate_gemm, which says which model a GEMM output equals bit for bit."""

import json

import numpy as np

from . import _fp8kit
from ._dtypes import codes_view

MODELS = ("exact", "fp32", "sm90", "sm90-fast", "deepseek-128", "h100tc")


def _scales(s):
    return np.ascontiguousarray(np.asarray(s, dtype=np.float32))


def _operands(a, b):
    return np.ascontiguousarray(codes_view(a)), np.ascontiguousarray(codes_view(b))


def gemm(
    a, b, a_format="e4m3", b_format="e4m3", scale_a=1.0, scale_b=1.0, accum="exact", out_dtype="f32", device="cpu"
):
    """D (M x N) of A (M x K codes) and B (N x K codes, the TN layout of torch._scaled_mm).

    a, b: uint8 codes or ml_dtypes float8 arrays. scale_a / scale_b: a number (tensorwise), M / N
    values (rowwise), or M x ceil(K/128) / ceil(N/128) x ceil(K/128) (1x128 and 128x128 blocks).
    accum: 'exact', 'fp32', 'sm90', 'sm90-fast', 'sm90-splitk:N', 'sm90-fast-splitk:N' (cuBLASLt's
    split-K kernels, N products per split), 'deepseek-128', 'h100tc' or 'aligned:key=value,...'.
    out_dtype 'f32' gives float32; 'bf16' gives the bfloat16 bit patterns as uint16.
    device 'cuda' computes it with the CUDA model (fp8kit::cuda::gemm_model through lib's GEMM
    device, as the CLI's --device cuda: the same bits, every model but 'exact'; host arrays in and
    out); ValueError where the module or machine has no GPU."""
    a, b = _operands(a, b)
    bits = _fp8kit.gemm_bits(a, b, a_format, b_format, _scales(scale_a), _scales(scale_b), accum, out_dtype, device)
    return bits.view(np.float32) if out_dtype == "f32" else bits.astype(np.uint16)


def validate_gemm(d, a, b, a_format="e4m3", b_format="e4m3", scale_a=1.0, scale_b=1.0, out_dtype="f32", device="cpu"):
    """Compare a GEMM output d (float32, or uint16 bfloat16 bits) with every model: a dict with
    'matched' (the first model it equals bit for bit, or None), 'closest', mismatches per model,
    differences by class, and the error against 'exact' with the closest model's bound.

    device 'cuda' computes the models on the GPU (the same bits; the CLI's validate --gemm --device
    cuda). Above 2^33 multiply-adds it leaves out the CPU-only 'exact' model ('not_run' says so)
    and measures the error against the binary64 sum rounded once ('exact_from': 'binary64')."""
    a, b = _operands(a, b)
    d = np.asarray(d)
    if out_dtype == "f32":
        bits = np.ascontiguousarray(d, dtype=np.float32).view(np.uint32)
    else:
        bits = np.ascontiguousarray(d.view(np.uint16) if d.dtype.itemsize == 2 else d, dtype=np.uint16).astype(
            np.uint32
        )
    report, summary = _fp8kit.validate_gemm_bits(
        bits, a, b, a_format, b_format, _scales(scale_a), _scales(scale_b), out_dtype, device
    )
    r = json.loads(report)
    r["summary"] = summary
    return r


def predicted_split_k(m, n, k, scales="tensor"):
    """The products per split cuBLASLt 13.1 on sm90 (H100, H200) uses for an M x N x K FP8 GEMM, 0
    for no split, or None where it is not predicted (larger outputs, where cuBLASLt may cap its
    splits): the rule fitted to measured split boundaries (docs/gemm.md, "Split-K: the
    prediction"). The model of such an output is f"sm90-splitk:{n}" (split accumulator) or
    f"sm90-fast-splitk:{n}" (fast accumulation). scales: 'tensor', 'row' or 'block'."""
    n_split = _fp8kit.predicted_split_k(m, n, k, scales)
    return None if n_split < 0 else n_split
