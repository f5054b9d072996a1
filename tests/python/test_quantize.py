"""fp8kit.quantize against ml_dtypes (numpy astype), bit for bit, for every profile.

ml_dtypes is the reference for the ml_dtypes profile. The other profiles differ from it only in
overflow and NaN handling, which each test applies to ml_dtypes' result with numpy, following the
profile's documented behaviour (cuda_fp8.h: satfinite clips to +-max and Inf to max, NaN -> 0x7F;
nosat keeps ml_dtypes' overflow, NaN -> 0x7F; torch: NaN -> sign | 0x7F)."""

import fp8kit
import numpy as np
import pytest
from conftest import FP8, WIDE, adversarial_array, grid, lognormal_array, random_array


def ml(x, fmt):
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(FP8[fmt]).view(np.uint8)


def expected(x, fmt, profile):
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf inputs are part of the test
        return _expected(np.asarray(x), fmt, profile)


def _expected(x, fmt, profile):
    sign = np.signbit(x.astype(np.float32)).astype(np.uint8) << 7
    nan = np.isnan(x.astype(np.float32))
    fnuz = fmt.endswith("fnuz")
    if profile == "ml_dtypes":
        return ml(x, fmt)
    if profile == "torch":
        q = ml(x, fmt)
        if not fnuz:
            q = np.where(nan, sign | 0x7F, q).astype(np.uint8)
        return q
    if profile == "cuda-satfinite":
        m = grid(fmt).max()
        clipped = np.clip(x.astype(np.float64), -m, m)  # clipping to a grid value is exact
        q = ml(clipped.astype(np.float32), fmt)
        return np.where(nan, 0x7F, q).astype(np.uint8)
    if profile == "cuda-nosat":
        return np.where(nan, 0x7F, ml(x, fmt)).astype(np.uint8)
    raise AssertionError(profile)


def profiles_for(fmt):
    return ["ml_dtypes", "torch"] + (["cuda-satfinite", "cuda-nosat"] if fmt in ("e4m3", "e5m2") else [])


def check(x, fmt, profile):
    got = fp8kit.quantize(x, fmt, profile=profile)
    want = expected(x, fmt, profile)
    assert got.dtype == np.uint8 and got.shape == np.shape(x)
    bad = np.flatnonzero(got.ravel() != want.ravel())
    assert bad.size == 0, (
        f"{fmt} {profile}: {bad.size} mismatches, first x={np.asarray(x).ravel()[bad[0]]!r} "
        f"got 0x{got.ravel()[bad[0]]:02x} want 0x{want.ravel()[bad[0]]:02x}"
    )


@pytest.mark.parametrize("profile", ["ml_dtypes", "torch", "cuda-satfinite", "cuda-nosat"])
def test_random_bits(fmt, wide, profile):
    if profile not in profiles_for(fmt):
        with pytest.raises(ValueError, match=f"profile {profile} has no conversion to {fmt}"):
            fp8kit.quantize(np.zeros(3, np.float32), fmt, profile=profile)
        return
    check(random_array(WIDE[wide]), fmt, profile)
    check(lognormal_array(WIDE[wide], fmt), fmt, profile)


@pytest.mark.parametrize("profile", ["ml_dtypes", "torch", "cuda-satfinite", "cuda-nosat"])
def test_adversarial(fmt, wide, profile):
    if profile in profiles_for(fmt):
        check(adversarial_array(WIDE[wide], fmt), fmt, profile)


def test_float64_inputs_exact_in_float32(fmt):
    # ml_dtypes narrows float64 to float32 first; on values already float32 there is one rounding.
    x = adversarial_array(np.float32, fmt).astype(np.float64)
    assert np.array_equal(fp8kit.quantize(x, fmt, profile="ml_dtypes"), ml(x, fmt))


def test_shapes_and_views(fmt):
    x = lognormal_array(np.float32, fmt, n=4 * 6 * 5).reshape(4, 6, 5)
    q = fp8kit.quantize(x, fmt, profile="ml_dtypes")
    assert q.shape == (4, 6, 5)
    assert np.array_equal(q, ml(x, fmt))
    # Non-contiguous input: a strided view gives the codes of its elements.
    assert np.array_equal(fp8kit.quantize(x[:, ::2, 1:], fmt, profile="ml_dtypes"), ml(x[:, ::2, 1:], fmt))
    v = fp8kit.as_ml_dtypes(q, fmt)
    assert v.dtype == FP8[fmt] and np.shares_memory(v, q)


def test_scale_multiplies_in_float32(fmt, wide):
    x = lognormal_array(WIDE[wide], fmt, n=50_000, seed=5)
    for s in [np.float32(3.0517578125e-05), np.float32(0.3), np.float32(1234.5678)]:
        want = ml((x.astype(np.float32) * s).astype(np.float32), fmt)
        assert np.array_equal(fp8kit.quantize(x, fmt, profile="ml_dtypes", scale=s), want)


def test_explicit_policy_equals_profile(fmt):
    x = random_array(np.float32, n=50_000, seed=9)
    nan = "signed-quiet"
    got = fp8kit.quantize(x, fmt, rounding="nearest-even", overflow="no-saturate", nan=nan)
    assert np.array_equal(got, ml(x, fmt))


def e8m0_model(x, rounding, saturate):
    """E8M0 codes from numpy's exact frexp: 2^floor(log2|x|) or its round-up, biased by 127."""
    m, e = np.frexp(np.abs(x.astype(np.float64)))  # |x| = m 2^e, m in [0.5, 1)
    code = e - 1 + 127
    if rounding == "toward-positive":
        code = code + (m != 0.5)
    over = code > 254
    code = np.where(over, 254 if saturate else 255, code)
    code = np.where(np.isinf(x), 254 if saturate else 255, code)
    return np.where(np.isnan(x), 255, code).astype(np.uint8)


@pytest.mark.parametrize("rounding", ["toward-zero", "toward-positive"])
@pytest.mark.parametrize("profile", ["cuda-satfinite", "cuda-nosat"])
def test_e8m0_cuda(rounding, profile):
    rng = np.random.default_rng(3)
    x = (np.exp2(rng.uniform(-126, 128, 100_000)) * rng.choice([-1, 1], 100_000)).astype(np.float32)
    x = np.concatenate(
        [
            x,
            np.float32(
                [
                    2.0**-126,
                    2.0**127,
                    np.finfo(np.float32).max,
                    np.inf,
                    -np.inf,
                    np.nan,
                    1.0,
                    np.nextafter(np.float32(1), np.float32(2)),
                    3.0,
                ]
            ),
        ]
    )
    got = fp8kit.quantize(x, "e8m0", profile=profile, rounding=rounding)
    assert np.array_equal(got, e8m0_model(x, rounding, profile == "cuda-satfinite"))


def test_errors_are_value_errors():
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"name the conversion: profile=P"):
        fp8kit.quantize(x, "e4m3")
    with pytest.raises(ValueError, match=r"format: unknown format 'e9m9' \(choose from e4m3, e5m2"):
        fp8kit.quantize(x, "e9m9", profile="torch")
    # e3m4 is a format (ml_dtypes float8_e3m4) that torch has no conversion to.
    with pytest.raises(ValueError, match=r"profile torch has no conversion to e3m4"):
        fp8kit.quantize(x, "e3m4", profile="torch")
    with pytest.raises(ValueError, match="profile: unknown profile 'tf'"):
        fp8kit.quantize(x, "e4m3", profile="tf")
    with pytest.raises(ValueError, match="profile fixes the overflow and NaN policy"):
        fp8kit.quantize(x, "e4m3", profile="torch", overflow="saturate-all")
    with pytest.raises(ValueError, match="profile cuda-satfinite with e8m0 needs rounding"):
        fp8kit.quantize(x, "e8m0", profile="cuda-satfinite")
    with pytest.raises(ValueError, match="rounding: unknown rounding 'up'"):
        fp8kit.quantize(x, "e4m3", rounding="up", overflow="no-saturate", nan="canonical")
    with pytest.raises(ValueError, match="x: dtype int64 is not one of"):
        fp8kit.quantize(np.arange(3), "e4m3", profile="torch")
    with pytest.raises(ValueError, match="scale: must be finite and > 0"):
        fp8kit.quantize(x, "e4m3", profile="torch", scale=0.0)
    with pytest.raises(ValueError, match="scale: 1e\\+300 is not a positive finite float32"):
        fp8kit.quantize(x, "e4m3", profile="torch", scale=1e300)


def test_scalar_encode_matches_array(fmt):
    x = adversarial_array(np.float32, fmt)
    codes = fp8kit.quantize(x, fmt, profile="ml_dtypes")
    for v, c in zip(x[::7], codes[::7]):
        assert fp8kit.encode(float(v), fmt, profile="ml_dtypes", dtype="f32") == c
