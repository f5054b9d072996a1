"""torchao 0.18's own MX and NVFP4 outputs (tests/golden/torchao_mx_modes.{json,bin}, written by
scripts/fixtures/golden/torchao_mx_modes.py) through Python: fp8kit.quantize_blocks under the torchao
presets gives torchao's scale bytes and (packed) codes bit for bit, and fp8kit.validate reads
torchao's packed E2M1 codes, E4M3 and E8M0 scales, row-major and in cuBLAS's swizzled layout
(torchao's to_blocked)."""

import json
import os

import fp8kit
import ml_dtypes
import numpy as np
import pytest

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")


@pytest.fixture(scope="module")
def golden():
    with open(os.path.join(GOLDEN, "torchao_mx_modes.json")) as f:
        man = json.load(f)
    with open(os.path.join(GOLDEN, "torchao_mx_modes.bin"), "rb") as f:
        blob = f.read()
    return man, blob


def arr(blob, ref, dtype):
    off, n = ref
    return np.frombuffer(blob[off : off + n], dtype=dtype).copy()


def load_input(man, blob, name, dtype, shape):
    if dtype == "bf16":
        return (
            arr(blob, man["inputs"][name] if isinstance(name, str) else name, np.uint16)
            .view(ml_dtypes.bfloat16)
            .reshape(shape)
        )
    return arr(blob, man["inputs"][name], np.float32).reshape(shape)


def test_every_torchao_case_bit_for_bit(golden):
    man, blob = golden
    assert man["torchao"].startswith("0.18")
    n = 0
    for c in man["cases"]:
        shape = (c["rows"], c["cols"])
        x = load_input(man, blob, c["input"], c["dtype"], shape)
        q = fp8kit.quantize_blocks(x, c["preset"], role="weight", packed=c["packed"])
        want_codes = arr(blob, c["codes"], np.uint8)
        assert np.array_equal(q["codes"].reshape(-1), want_codes), f"{c['preset']} {c['dtype']}: codes differ"
        assert np.array_equal(q["scale_codes"].reshape(-1), arr(blob, c["scales"], np.uint8)), (
            f"{c['preset']} {c['dtype']}: scale bytes differ"
        )
        if "scale_inv" in c:
            assert np.array_equal(q["scale_inv"].reshape(-1).view(np.uint32), arr(blob, c["scale_inv"], np.uint32))
        n += 1
    assert n == 36


def test_presets_are_named_and_round_trip():
    names = fp8kit.presets()
    for stem in ("mxfp8", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2"):
        for mode in ("floor", "ceil", "even", "rceil"):
            r = fp8kit.recipe(f"{stem}-torchao-{mode}")
            assert f"{stem}-torchao-{mode}" in names
            assert r["rule"] == f"mx-torchao-{mode}"
    assert fp8kit.recipe("nvfp4-torchao-single")["rule"] == "nvfp4-torchao-single"


def swizzle_case(golden, which):
    man, blob = golden
    s = man["swizzle"]
    x = arr(blob, s["input"], np.uint16).view(ml_dtypes.bfloat16).reshape(s["rows"], s["cols"])
    w = s[which]
    return x, arr(blob, w["codes"], np.uint8), arr(blob, w["scales"], np.uint8), arr(blob, w["swizzled"], np.uint8)


def test_validate_reads_torchao_mx_scales_row_major_and_swizzled(golden):
    x, codes, scales, swz = swizzle_case(golden, "mx")
    codes = codes.reshape(x.shape)
    for layout_name, s in (("row-major", scales), ("swizzled", swz)):
        r = fp8kit.validate(
            x,
            codes,
            "e4m3",
            rounding="nearest-even",
            overflow="saturate-all",
            nan="signed-all-ones",
            scale_inv=s,
            layout="mx32",
            scales_dtype="e8m0",
            scales_layout=layout_name,
        )
        assert r["mismatches"] == 0, r["summary"]
    # The swizzle is read, not ignored: its bytes taken as row-major fail (wrong count or values).
    with pytest.raises(ValueError):
        fp8kit.validate(x, codes, "e4m3", profile="cuda-satfinite", scale_inv=swz, layout="mx32", scales_dtype="e8m0")


def test_validate_reads_torchao_nvfp4_packed_codes_and_e4m3_scales(golden):
    x, packed, scales, swz = swizzle_case(golden, "nvfp4")
    packed = packed.reshape(x.shape[0], x.shape[1] // 2)
    pol = dict(rounding="nearest-even", overflow="saturate-all", nan="positive-max")
    for layout_name, s in (("row-major", scales), ("swizzled", swz)):
        for mode in ("scale_inv", "scale"):  # global scale 1: both orders give fl32(1 / e4m3)
            r = fp8kit.validate(
                x,
                packed,
                "e2m1",
                packed=True,
                layout="1x16",
                scales_dtype="e4m3",
                scales_layout=layout_name,
                **{mode: s},
                **pol,
            )
            assert r["mismatches"] == 0, r["summary"]
    # One scale byte changed: the elements of that block mismatch (and only those can).
    bad = scales.copy()
    bad[5] ^= 0x08
    r = fp8kit.validate(x, packed, "e2m1", packed=True, layout="1x16", scales_dtype="e4m3", scale_inv=bad, **pol)
    assert 0 < r["mismatches"] <= 16


def test_validate_packed_and_scale_arguments_are_checked(golden):
    x, packed, scales, swz = swizzle_case(golden, "nvfp4")
    with pytest.raises(ValueError, match="packed"):
        fp8kit.validate(x, packed, "e4m3", packed=True, profile="cuda-satfinite")
    with pytest.raises(ValueError, match="global_scale"):
        fp8kit.validate(
            x,
            packed,
            "e2m1",
            packed=True,
            layout="1x16",
            scales_dtype="e8m0",
            scale_inv=scales,
            global_scale=2.0,
            profile="cuda-satfinite",
        )
    with pytest.raises(ValueError, match="swizzled"):
        fp8kit.validate(
            x,
            packed,
            "e2m1",
            packed=True,
            layout="1x16",
            scales_dtype="e4m3",
            scale_inv=scales,
            scales_layout="swizzled",
            profile="cuda-satfinite",
        )
