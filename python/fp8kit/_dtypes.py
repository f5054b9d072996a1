"""numpy dtypes <-> fp8kit's names for the wide types (f64 f32 f16 bf16) and the 8-bit formats."""

import ml_dtypes
import numpy as np

WIDE_DTYPES = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
}
_BITS = {"f64": np.uint64, "f32": np.uint32, "f16": np.uint16, "bf16": np.uint16}
_WIDE_NAMES = {
    "float64": "f64",
    "double": "f64",
    "float32": "f32",
    "float": "f32",
    "float16": "f16",
    "half": "f16",
    "bfloat16": "bf16",
}

# ml_dtypes types of the 8-bit formats (the formats fp8kit parses: e4m3 == float8_e4m3fn, ...).
FORMAT_DTYPES = {
    "e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
}
# ml_dtypes 0.5+: the OCP MX FP4/FP6 element types (one code per byte, low bits) and the other
# 8-bit types; fp8kit's names are e2m1, e2m3, e3m2, e3m4, e4m3b11fnuz and e4m3ieee.
for _name, _ml in (
    ("e8m0", "float8_e8m0fnu"),
    ("e2m1", "float4_e2m1fn"),
    ("e2m3", "float6_e2m3fn"),
    ("e3m2", "float6_e3m2fn"),
    ("e3m4", "float8_e3m4"),
    ("e4m3b11fnuz", "float8_e4m3b11fnuz"),
    ("e4m3ieee", "float8_e4m3"),
):
    if hasattr(ml_dtypes, _ml):
        FORMAT_DTYPES[_name] = np.dtype(getattr(ml_dtypes, _ml))


def wide_name(dtype, arg="dtype"):
    """fp8kit's name (f64 f32 f16 bf16) of a numpy dtype, a dtype name, or an fp8kit name."""
    if isinstance(dtype, str):
        key = dtype.lower()
        if key in WIDE_DTYPES:
            return key
        if key in _WIDE_NAMES:
            return _WIDE_NAMES[key]
        raise ValueError(f"{arg}: unknown type '{dtype}' (choose from f64, f32, f16, bf16)")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"{arg}: {dtype!r} is not a dtype (choose from float64, float32, float16, bfloat16)") from None
    for name, d in WIDE_DTYPES.items():
        if dt == d:
            return name
    raise ValueError(f"{arg}: dtype {dt} is not one of float64, float32, float16, bfloat16")


def as_bits(x, wide):
    """The C-contiguous array of x viewed as unsigned integers of its width (no copy when x is
    already C-contiguous)."""
    return np.ascontiguousarray(x).view(_BITS[wide])


def codes_view(codes, arg="codes"):
    """uint8 codes of a uint8 array or an ml_dtypes float8/float6/float4 array (one code per byte, no copy)."""
    a = np.asarray(codes)
    if a.dtype == np.uint8:
        return np.ascontiguousarray(a)
    if a.dtype in FORMAT_DTYPES.values():
        return np.ascontiguousarray(a).view(np.uint8)
    raise ValueError(f"{arg}: expected uint8 codes or an ml_dtypes float8 array, got dtype {a.dtype}")
