"""fp8kit.dequantize, decode and formats() against ml_dtypes' decoding of all 256 codes."""

import fp8kit
import ml_dtypes
import numpy as np
import pytest
from conftest import BITS, FP8

OUT = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16]
ALL = np.arange(256, dtype=np.uint8)


def same_bits(a, b, nan_sign=True):
    """Bit-equal, except that NaN payloads are compared as 'is NaN with the same sign'. FNUZ
    formats have one NaN code (0x80) with no sign: ml_dtypes decodes it to -NaN, fp8kit to +NaN,
    so their NaN signs are not compared (nan_sign=False)."""
    a, b = np.asarray(a), np.asarray(b)
    na, nb = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
    sa, sb = np.signbit(a.astype(np.float64)), np.signbit(b.astype(np.float64))
    ba, bb = a.view(BITS[a.dtype]), b.view(BITS[b.dtype])
    return (
        a.dtype == b.dtype
        and np.array_equal(na, nb)
        and (not nan_sign or np.array_equal(sa[na], sb[nb]))
        and np.array_equal(ba[~na], bb[~nb])
    )


@pytest.mark.parametrize("dtype", OUT)
def test_all_codes(fmt, dtype):
    want = ALL.view(FP8[fmt]).astype(dtype)
    assert same_bits(fp8kit.dequantize(ALL, fmt, dtype=dtype), want, not fmt.endswith("fnuz"))
    # ml_dtypes arrays are accepted as codes, without a copy of their bits
    assert same_bits(fp8kit.dequantize(ALL.view(FP8[fmt]), fmt, dtype=dtype), want, not fmt.endswith("fnuz"))


@pytest.mark.parametrize("dtype", OUT)
def test_scale_inv(fmt, dtype):
    for s in [2.0**-7, 0.3, 1000.5]:
        if dtype is np.float64:
            want = ALL.view(FP8[fmt]).astype(np.float64) * s
        else:
            want = (ALL.view(FP8[fmt]).astype(np.float32) * np.float32(s)).astype(dtype)
        assert same_bits(fp8kit.dequantize(ALL, fmt, dtype=dtype, scale_inv=s), want, not fmt.endswith("fnuz"))


def test_decode_and_formats(fmt):
    vals = ALL.view(FP8[fmt]).astype(np.float64)
    for c in range(256):
        d = fp8kit.decode(c, fmt)
        assert (np.isnan(d) and np.isnan(vals[c])) or d == vals[c]
    info = {f["name"]: f for f in fp8kit.formats()}[fmt]
    fi = ml_dtypes.finfo(FP8[fmt])
    assert info["max_finite"] == float(fi.max)
    assert info["min_normal"] == float(fi.smallest_normal)
    assert info["min_subnormal"] == float(fi.smallest_subnormal)
    assert info["ml_dtypes"] == FP8[fmt].__name__
    assert fp8kit.code_info(info["max_finite_code"], fmt)["value"] == float(fi.max)


def test_bad_codes():
    with pytest.raises(ValueError, match="codes: expected uint8 codes"):
        fp8kit.dequantize(np.zeros(3, np.int32), "e4m3")
    with pytest.raises(ValueError, match="code: 256 is not in 0..255"):
        fp8kit.decode(256, "e4m3")
    with pytest.raises(ValueError, match="dtype: dtype int8 is not one of"):
        fp8kit.dequantize(ALL, "e4m3", dtype=np.int8)
