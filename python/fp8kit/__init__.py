"""fp8kit: bit-exact FP8 conversions (the C++ reference), statistics, scaling recipes, dump
readers and kernel validation, on numpy arrays.

Every conversion names its policy: profile= ('cuda-satfinite', 'cuda-nosat', 'ml_dtypes',
'torch'), or all of rounding=, overflow= and nan=. Codes are uint8 arrays; `as_ml_dtypes`
views them as the ml_dtypes type of their format without a copy.
"""

import numpy as np

from . import _fp8kit
from . import _device
from ._dtypes import FORMAT_DTYPES, WIDE_DTYPES, as_bits, codes_view, wide_name

__all__ = [
    "quantize",
    "dequantize",
    "as_ml_dtypes",
    "encode",
    "decode",
    "code_info",
    "formats",
    "policy",
    "stochastic_bits",
]


def quantize(
    x, format, profile=None, rounding=None, overflow=None, nan=None, scale=1.0, seed=0, index_offset=0, stream=None
):
    """Codes (uint8, shape of x) of x cast to `format`: q = fp8(x * scale).

    x: float64, float32, float16 or ml_dtypes.bfloat16 array (no copy when C-contiguous).
    scale != 1: float64 inputs multiply in binary64; the others widen exactly to float32 and
    multiply by float32(scale) in float32 before the cast, as framework cast kernels do.
    Stochastic rounding: element i (in C order) draws stochastic_bits(seed, index_offset + i),
    so the codes do not depend on threads or on how an array is split into calls.
    A GPU array (torch CUDA tensor, CuPy, JAX; float32/float16/bfloat16) runs the CUDA kernel on
    its framework's current stream (or `stream`, a cudaStream_t as int) and returns a uint8
    array of the same framework, with the same bits; a torch CPU tensor gives a torch tensor.
    """
    if _device.is_device(x):
        return _device.quantize(x, format, profile, rounding, overflow, nan, scale, seed, index_offset, stream)
    a = _device.host_view(x)
    wide = wide_name(a.dtype, "x")
    return _device.host_like(
        x,
        _fp8kit.quantize_bits(
            as_bits(a, wide), wide, format, profile, rounding, overflow, nan, float(scale), int(seed), int(index_offset)
        ),
    )


def dequantize(codes, format, dtype=np.float32, scale_inv=1.0, stream=None):
    """Values of `codes` (uint8 or an ml_dtypes float8 array) times scale_inv, as `dtype`
    (float64, float32, float16 or bfloat16). scale_inv == 1 is an exact decode; otherwise one
    multiply in binary64 (float64) or float32 (the others), then one nearest-even rounding to
    float16/bfloat16. GPU codes (see quantize) run the CUDA kernel and return the same
    framework's array (dtype float32, float16 or bfloat16, also given as a torch dtype)."""
    wide = _device.TORCH_DTYPE_WIDE.get(str(dtype)) or wide_name(dtype)
    if _device.is_device(codes):
        return _device.dequantize(codes, format, wide, scale_inv, stream)
    bits = _fp8kit.dequantize_bits(codes_view(_device.host_view(codes)), format, wide, float(scale_inv))
    return _device.host_like(codes, bits.view(WIDE_DTYPES[wide]))


def as_ml_dtypes(codes, format):
    """View uint8 codes as the ml_dtypes type of `format` (no copy)."""
    key = _canonical_format(format)
    if key not in FORMAT_DTYPES:
        raise ValueError(f"format: ml_dtypes has no type for {key}")
    return codes_view(codes).view(FORMAT_DTYPES[key])


def encode(value, format, profile=None, rounding=None, overflow=None, nan=None, dtype="f64", random=0):
    """The code of one number: read as binary64, rounded to `dtype` like a C cast, then encoded.
    `random` is the 32-bit draw of stochastic rounding."""
    return _fp8kit.encode(float(value), format, wide_name(dtype), profile, rounding, overflow, nan, int(random))


def decode(code, format):
    """The exact value of one code as a Python float (nan/inf where the code is one)."""
    return _fp8kit.decode(int(code), format)


def code_info(code, format):
    """{'code', 'format', 'fields', 'class', 'value'} of one code."""
    return _fp8kit.code_info(int(code), format)


def formats():
    """Facts of every format of at most 8 bits (limits, codes, bias, code_count), as a list of dicts."""
    return _fp8kit.formats()


def policy(format, profile=None, rounding=None, overflow=None, nan=None, dtype="f32"):
    """The rounding/overflow/NaN policy the arguments name, as a dict."""
    return _fp8kit.policy(format, wide_name(dtype), profile, rounding, overflow, nan)


def stochastic_bits(seed, index):
    """The 32 random bits stochastic rounding uses for element `index`: word index % 4 of
    Philox4x32-10(key=seed, counter=index // 4), i.e. the index-th output of cuRAND's Philox4_32_10
    stream after curand_init(seed, 0, 0). CPU and GPU share this rule (emu/random.hpp)."""
    return _fp8kit.stochastic_bits(int(seed), int(index))


def _canonical_format(format):
    return _fp8kit.code_info(0, format)["format"]


# ---- statistics and recipes -----------------------------------------------------------------

from ._recipes import (
    DelayedScaling,
    MsampScaling,
    amax,
    presets,
    quantize_blocks,
    recipe,
    recipe_policy,
    te_rht16,  # noqa: E402
    recipe_scale,
    stats,
)
from ._validate import validate, validate_te_dump  # noqa: E402
from ._dump import DumpError, inspect, read_dump  # noqa: E402
from ._replay import SharedError, TraceError, overflows, read_trace, replay, sweep, te_stats  # noqa: E402
from . import _simulate as msamp  # noqa: E402
from ._gemm import gemm, predicted_split_k, validate_gemm  # noqa: E402
from ._watch import Watcher, watch  # noqa: E402
from ._checkpoint import CheckpointError, checkpoint_check, checkpoint_kv_names  # noqa: E402
from ._calibrate import CalibrateError, calibrate, calibrate_scale, nvfp4_scale_sweep  # noqa: E402
from ._kv import KvError, kv  # noqa: E402

__all__ += [
    "stats",
    "quantize_blocks",
    "te_rht16",
    "amax",
    "presets",
    "recipe",
    "recipe_policy",
    "recipe_scale",
    "DelayedScaling",
    "MsampScaling",
    "watch",
    "Watcher",
    "validate",
    "validate_te_dump",
    "read_dump",
    "inspect",
    "DumpError",
    "read_trace",
    "te_stats",
    "replay",
    "sweep",
    "overflows",
    "TraceError",
    "SharedError",
    "gemm",
    "validate_gemm",
    "predicted_split_k",
]
