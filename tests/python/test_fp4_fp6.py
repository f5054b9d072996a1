"""FP4, FP6 and the other ml_dtypes types in the Python module, against ml_dtypes itself.

ml_dtypes is the reference for profile ml_dtypes. For cuda-satfinite (cuda_fp4.h / cuda_fp6.h),
which differs from ml_dtypes only in NaN (+max instead of a zero of the opposite sign), the test
applies that documented difference to ml_dtypes' result."""

import fp8kit
import ml_dtypes
import numpy as np
import pytest
from conftest import WIDE, random_array

NEW = {
    "e2m1": ml_dtypes.float4_e2m1fn,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e3m4": ml_dtypes.float8_e3m4,
    "e4m3b11fnuz": ml_dtypes.float8_e4m3b11fnuz,
    "e4m3ieee": ml_dtypes.float8_e4m3,
}
MX = ("e2m1", "e2m3", "e3m2")


def ml(x, fmt):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x).astype(NEW[fmt]).view(np.uint8)


@pytest.mark.parametrize("fmt", NEW)
@pytest.mark.parametrize("wide", WIDE)
def test_quantize_equals_ml_dtypes(fmt, wide):
    x = random_array(WIDE[wide], n=100_000, seed=7)
    np.testing.assert_array_equal(fp8kit.quantize(x, fmt, profile="ml_dtypes"), ml(x, fmt))


@pytest.mark.parametrize("fmt", MX)
def test_cuda_profile_differs_from_ml_dtypes_only_in_nan(fmt):
    x = random_array(np.float32, n=100_000, seed=3)
    want = np.where(np.isnan(x), {d["name"]: d for d in fp8kit.formats()}[fmt]["max_finite_code"], ml(x, fmt)).astype(
        np.uint8
    )
    np.testing.assert_array_equal(fp8kit.quantize(x, fmt, profile="cuda-satfinite"), want)


@pytest.mark.parametrize("fmt", NEW)
def test_every_code_decodes_as_ml_dtypes(fmt):
    info = {d["name"]: d for d in fp8kit.formats()}[fmt]
    codes = np.arange(info["code_count"], dtype=np.uint8)
    ours = fp8kit.dequantize(codes, fmt, np.float32)
    theirs = codes.view(NEW[fmt]).astype(np.float32)
    if fmt.endswith("fnuz"):
        # FNUZ formats have one NaN code (0x80) with no sign: ml_dtypes decodes it to -NaN, fp8kit
        # to +NaN (as for e4m3fnuz/e5m2fnuz, tests/python/test_dequantize.py); every other bit compared.
        nan = np.isnan(theirs)
        assert np.array_equal(np.isnan(ours), nan)
        ours, theirs = ours[~nan], theirs[~nan]
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))
    assert info["ml_dtypes"] == np.dtype(NEW[fmt]).name


def test_codes_past_the_width_are_refused():
    with pytest.raises(ValueError, match="e2m1"):
        fp8kit.decode(16, "e2m1")
    with pytest.raises(ValueError, match="not a e2m1 code"):
        fp8kit.dequantize(np.array([0x00, 0x1F], dtype=np.uint8), "e2m1")
