"""TransformerEngine NVFP4's random Hadamard transform (fp8kit.te_rht16, lib convert/hadamard)
against an independent numpy reference written from TE's code facts
(transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py: _build_hadamard_matrix builds
H16 by Sylvester's construction and multiplies it on the left by diag(get_wgrad_sign_vector());
_apply_rht reshapes x.T to (-1, 16) and multiplies by H * (1/sqrt(16)); _quantize applies it to
the column-wise input x.T only). Bit for bit: both sides form the exact sum and round once."""

import fp8kit
import ml_dtypes
import numpy as np
import nvfp4_reference as ref
import pytest
from nvfp4_reference import TE_SIGNS, sylvester

F32 = np.float32
reference = ref.te_rht_columnwise


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32 if a.dtype.itemsize == 4 else np.uint16)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("random_signs", [True, False])
def test_rht_equals_numpy_reference(dtype, random_signs):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((64, 48)) * np.exp2(rng.integers(-6, 6, (64, 48)))).astype(dtype)
    got = fp8kit.te_rht16(x, random_signs=random_signs)
    want = reference(x, random_signs)
    assert got.shape == (48, 64) and got.dtype == x.dtype
    assert np.array_equal(bits(got), bits(want))


def test_rht_is_te_matrix_on_unit_vectors():
    # Row i of the transform is what e_i maps to: s[i] * H16[i, :] / 4 (not H16 @ diag(s)).
    x = np.zeros((16, 16), dtype=np.float32)
    x[np.arange(16), np.arange(16)] = 1.0  # column c of x is e_c
    got = fp8kit.te_rht16(x).astype(np.float64)
    want = (np.diag(TE_SIGNS) @ sylvester(16)) / 4.0
    assert np.array_equal(got, want)
    # Orthogonal: applying the transpose recovers the input exactly for these values.
    assert np.array_equal(got @ got.T, np.eye(16))


def test_rht_rejects_rows_not_multiple_of_16():
    with pytest.raises(ValueError, match="multiple of the Hadamard dimension 16"):
        fp8kit.te_rht16(np.ones((24, 16), dtype=np.float32))
    with pytest.raises(ValueError, match="f64"):
        fp8kit.te_rht16(np.ones((16, 16), dtype=np.float64))


# ---- The nvfp4 preset applies the RHT where TE's recipe does ---------------------------------
# TE NVFP4BlockScaling (transformer_engine/common/recipe/__init__.py): fp4_quant_fwd_inp and
# fp4_quant_bwd_grad have random_hadamard_transform=True ("RHT is currently only applied to
# column-wise usage so that it can be used for wgrad GEMM"), fp4_quant_fwd_weight has none and
# 16x16 blocks. nvfp4_reference.te_nvfp4_columnwise transcribes the columnwise branch of
# NVFP4QuantizerRef._quantize (custom_recipes/quantization_nvfp4.py).


def gradient_like(rows, cols, seed, dtype=F32):
    """Gradient-like values: small, a few channels and tokens much larger, one outlier."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)) * 1e-3
    x *= np.exp2(rng.integers(-3, 4, (1, cols)))  # per-channel scale
    x *= np.exp2(rng.integers(-2, 3, (rows, 1)))  # per-token scale
    x[5, 3] = 0.4
    x[9, :] = 0.0  # a zero token
    return x.astype(dtype)


def real_grads_and_acts():
    import os

    dump = os.path.join(os.path.dirname(__file__), "..", "..", "data", "example", "llama_tiny_dump.h5")
    out = []
    for info, a in fp8kit.read_dump(dump, include="step_000000/*"):
        if info["role"] in ("gradient", "activation"):
            a = np.asarray(a).reshape(-1, a.shape[-1])  # the dumped dtype (f32, f16, bf16), as TE gets it
            if a.shape[0] % 16 == 0 and a.shape[1] % 16 == 0:
                out.append((info["name"], info["role"], a))
    assert sum(r == "gradient" for _, r, _ in out) >= 5
    return out


def nvfp4_rn_grad():
    """The nvfp4 preset with the gradient role rounding to nearest (the recipe file's per-role
    field): TE's gradients round stochastically with bits no host reproduces, so exact code checks
    against the transcription use this; the preset's own codes are checked to bracket TE's."""
    r = fp8kit.recipe("nvfp4")
    r["roles"]["grad"]["rounding"] = "nearest-even"
    return r


def check_columnwise(x, role):
    codes, scales, gamax, col = ref.te_nvfp4_columnwise(x)
    if role == "grad":
        sr = fp8kit.quantize_blocks(x, "nvfp4", role, seed=7)
        assert sr["columnwise_rht"] and bits(np.array(sr["global_amax"], F32)) == bits(gamax)
        assert np.array_equal(sr["scale_codes"], scales)
        assert np.all(ref.e2m1_sr_bracketed(sr["codes"], ref.te_nvfp4(col)[2]))
    q = fp8kit.quantize_blocks(x, nvfp4_rn_grad() if role == "grad" else "nvfp4", role)
    rows, cols = x.shape
    assert q["columnwise_rht"] and q["codes"].shape == (cols, rows) and q["grid"] == (cols, rows // 16)
    assert bits(np.array(q["global_amax"], F32)) == bits(gamax)  # TE's global_amax_col, after the RHT
    assert np.array_equal(q["scale_codes"], scales), (
        f"{np.count_nonzero(q['scale_codes'] != scales)} scale bytes differ"
    )
    # TE's reference maps a scaled -0.0 to code 0, its kernel to 8 (test_nvfp4.check_te).
    same = ~((col == 0) & np.signbit(col))
    assert np.array_equal(q["codes"][same], codes[same]), (
        f"{np.count_nonzero(q['codes'][same] != codes[same])} codes differ"
    )
    return q, codes, scales, col


@pytest.mark.parametrize("role", ["grad", "input"])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_nvfp4_preset_is_te_columnwise_rht(role, dtype):
    x = gradient_like(64, 48, seed=3, dtype=dtype)
    q, codes, scales, col = check_columnwise(x, role)
    # The test can fail: without the transform (x.T quantised as it is) the bytes differ.
    plain_codes, plain_scales, _ = ref.te_nvfp4(np.ascontiguousarray(x.T).astype(F32))
    assert not np.array_equal(plain_scales, scales) and not np.array_equal(plain_codes, codes)
    # Packed: TE's columnwise data qx_t = cast_to_fp4x2 of the copy.
    p = fp8kit.quantize_blocks(x, nvfp4_rn_grad(), role, packed=True)
    assert np.array_equal(p["codes"], ref.te_pack_fp4x2(q["codes"]))


def test_nvfp4_preset_on_the_bundled_gradients_and_activations():
    for name, role, a in real_grads_and_acts():
        check_columnwise(a, "grad" if role == "gradient" else "input")


def test_nvfp4_weights_and_rowwise_preset_have_no_rht():
    x = gradient_like(64, 48, seed=4)
    w = fp8kit.quantize_blocks(x, "nvfp4", "weight")
    codes, scales, _ = ref.te_nvfp4(x, (16, 16))
    assert not w["columnwise_rht"] and w["codes"].shape == x.shape
    assert np.array_equal(w["scale_codes"], scales[::16]) and np.array_equal(w["codes"], codes)
    for role in ("input", "grad"):
        r = fp8kit.quantize_blocks(x, "nvfp4-rowwise", role)
        codes, scales, scaled = ref.te_nvfp4(x)
        assert not r["columnwise_rht"] and np.array_equal(r["scale_codes"], scales)
        if role == "grad":  # stochastic, as TE's fp4_quant_bwd_grad (test_nvfp4.check_te)
            assert np.all(ref.e2m1_sr_bracketed(r["codes"], scaled)) and not np.array_equal(r["codes"], codes)
        else:
            assert np.array_equal(r["codes"], codes)


def fp4_value(codes):
    return codes.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)


def test_nvfp4_gradient_statistics_are_of_the_rht_copy():
    # stats (inspect, sweep and Python share compute_block_stats) of an nvfp4 gradient: per block
    # scale_inv from TE's bytes (fl32(byte * gamax) * fl32(1/2688), docs/recipes.md) and the
    # underflow, zeros and error energy of TE's codes of the RHT copy.
    x = gradient_like(64, 48, seed=5)
    codes, scales, gamax, col = ref.te_nvfp4_columnwise(x)
    d = fp8kit.stats(x, recipe=nvfp4_rn_grad(), role="grad")
    assert d["columnwise_rht"] and d["grid"] == (48, 4) and d["block_shape"] == (1, 16)
    byte = scales.view(ml_dtypes.float8_e4m3fn).astype(F32)
    want_inv = (byte * gamax).astype(F32) * (F32(1) / F32(2688))
    assert np.array_equal(d["scale_inv"].view(np.uint32), want_inv.astype(F32).view(np.uint32))
    nonzero = col != 0
    assert d["numel"] == x.size
    assert d["zeros"] == np.count_nonzero(~nonzero)
    assert d["underflow"] == np.count_nonzero(nonzero & ((codes & 7) == 0))
    deq = fp4_value(codes) * np.repeat(want_inv.astype(np.float64), 16, axis=1)
    err2 = np.sum((col.astype(np.float64) - deq) ** 2)
    # sums in binary64 in different orders: relative 1e-12 (docs/statistics.md)
    assert d["sum_err2"] == pytest.approx(err2, rel=1e-12)
    assert d["sum_x2"] == pytest.approx(np.sum(col.astype(np.float64) ** 2), rel=1e-12)
    # The preset itself rounds gradients stochastically: the same blocks and scales, other codes.
    p = fp8kit.stats(x, recipe="nvfp4", role="grad")
    assert np.array_equal(p["scale_inv"].view(np.uint32), d["scale_inv"].view(np.uint32))
    assert p["sum_err2"] != d["sum_err2"]
    # ... and not the row-wise copy's.
    assert (
        fp8kit.stats(x, recipe="nvfp4-rowwise", role="grad")["underflow"] != d["underflow"]
        or fp8kit.stats(x, recipe="nvfp4-rowwise", role="grad")["sum_err2"] != d["sum_err2"]
    )


def test_nvfp4_columnwise_needs_rows_in_groups_of_16():
    x = gradient_like(64, 48, seed=6)[:40]
    for f in (lambda: fp8kit.quantize_blocks(x, "nvfp4", "grad"), lambda: fp8kit.stats(x, recipe="nvfp4", role="grad")):
        with pytest.raises(ValueError, match=r"x: recipe 'nvfp4', role grad: .*multiple of 16, got 40.*nvfp4-rowwise"):
            f()
    assert fp8kit.quantize_blocks(x, "nvfp4-rowwise", "grad")["codes"].shape == x.shape


def test_nvfp4_recipe_shows_the_choice():
    r = fp8kit.recipe("nvfp4")
    assert [r["roles"][k]["columnwise_rht"] for k in ("input", "weight", "grad")] == [True, False, True]
    assert not any(fp8kit.recipe("nvfp4-rowwise")["roles"][k]["columnwise_rht"] for k in ("input", "weight", "grad"))


def test_inspect_and_sweep_use_the_rht_copy():
    # inspect (the C++ of `fp8kit inspect`) on the bundled run: gradients and activations are the
    # column-wise copy after TE's RHT, with the statistics fp8kit.stats gives (checked above
    # against TE), weights are not.
    import os

    dump = os.path.join(os.path.dirname(__file__), "..", "..", "data", "example", "llama_tiny_dump.h5")
    df = fp8kit.inspect(dump, include="step_000000/*", recipe="nvfp4")
    rows = df.to_dict("records") if hasattr(df, "to_dict") else df
    by_name = {r["name"]: r for r in rows}
    seen = set()
    for info, a in fp8kit.read_dump(dump, include="step_000000/*"):
        r = by_name[info["name"]]
        assert r["columnwise_rht"] == (info["role"] != "weight"), info["name"]
        if info["role"] in ("gradient", "weight") and info["role"] not in seen:
            seen.add(info["role"])
            # In the dumped dtype: the RHT output is rounded to it, as TE's (H in x.dtype).
            x = np.asarray(a).reshape(-1, a.shape[-1])
            s = fp8kit.stats(x, recipe="nvfp4", role="grad" if info["role"] == "gradient" else "weight")
            assert (r["underflow"], r["zeros"], r["blocks"]) == (s["underflow"], s["zeros"], s["blocks"])
            assert r["sum_err2"] == s["sum_err2"]
    assert seen == {"gradient", "weight"}


def test_inspect_takes_the_role_rounding_of_a_tensorwise_recipe(tmp_path):
    # Per-role rounding reaches inspect's tensorwise path too: a te-current recipe whose grad role
    # rounds stochastically (recipe-file field) gives the gradients the statistics fp8kit.stats
    # gives under the same recipe (seed 0), and not those of te-current; other roles are unchanged.
    import json
    import os

    dump = os.path.join(os.path.dirname(__file__), "..", "..", "data", "example", "llama_tiny_dump.h5")
    r = fp8kit.recipe("te-current")
    r["roles"]["grad"]["rounding"] = "stochastic"
    path = tmp_path / "sr.json"
    path.write_text(json.dumps(r))

    def rows(rec):
        df = fp8kit.inspect(dump, include="step_000000/*", recipe=rec)
        return {x["name"]: x for x in (df.to_dict("records") if hasattr(df, "to_dict") else df)}

    sr, rn = rows(str(path)), rows("te-current")
    differs = 0
    for info, a in fp8kit.read_dump(dump, include="step_000000/*"):
        s, n = sr[info["name"]], rn[info["name"]]
        if info["role"] == "gradient":
            want = fp8kit.stats(np.asarray(a), recipe=r, role="grad")
            assert s["sum_err2"] == want["sum_err2"] and s["underflow"] == want["underflow"], info["name"]
            differs += s["sum_err2"] != n["sum_err2"]
        else:
            assert s["sum_err2"] == n["sum_err2"], info["name"]
    assert differs > 0
