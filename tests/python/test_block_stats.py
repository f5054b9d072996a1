"""fp8kit.stats(x, recipe=<block preset>) from Python: scale_inv has one value per block, in the
block grid's shape, for every row/block preset and role, on shapes that are not multiples of the
tile. Each block's amax and scale are computed here with numpy from the formulas of
docs/recipes.md (float32 arithmetic as the frameworks do it) and compared bit for bit."""

import fp8kit
import ml_dtypes
import numpy as np
import pytest

F32 = np.float32
ROLES = ("input", "weight", "grad")
SHAPE = (130, 300)  # 128x128 -> 2x3 blocks, 1x128 -> 130x3, 1x32 -> 130x10, rows -> 130x1


ML = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e2m1": ml_dtypes.float4_e2m1fn,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn,
}


def fmax(fmt):
    return F32(ml_dtypes.finfo(ML[fmt]).max)


def e4m3_satfinite(v):
    """float32 -> E4M3 value as cuda_fp8.h __NV_SATFINITE gives it (clamp to +-448, then RNE)."""
    return F32(np.clip(F32(v), -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(F32))


def nvfp4_scale_inv(rule, amax, gamax):
    """NVFP4 dequantisation factor of one block (docs/recipes.md): TE: byte = e4m3(fminf(amax *
    fl32(S_enc * fl32(1/6)), FLT_MAX)), S_enc = min(2688 / gamax, FLT_MAX) (1 for gamax 0 or S_enc
    0), scale_inv = fl32(byte * gamax) * fl32(1/2688); torchao: pts = gamax / 2688, byte =
    e4m3(clamp(fl32(amax / 6) / pts, 2^-6, 448)), scale_inv = byte * pts."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if rule == "nvfp4-te":
            s_enc = F32(np.minimum(F32(2688) / gamax, np.finfo(F32).max))
            if gamax == 0 or s_enc == 0:
                s_enc = F32(1)
            b = e4m3_satfinite(np.minimum(F32(amax * F32(s_enc * F32(F32(1) / F32(6)))), np.finfo(F32).max))
            return F32(F32(b * gamax) * F32(F32(1) / F32(2688)))
        if rule == "nvfp4-torchao-single":  # nvfp4_quantize(per_tensor_scale=None)
            return e4m3_satfinite(np.clip(F32(amax / F32(6)), F32(2.0**-6), F32(448)))
        pts = F32(gamax / F32(2688))
        b = e4m3_satfinite(np.clip(F32(F32(amax / F32(6)) / pts), F32(2.0**-6), F32(448)))
        return F32(b * pts)


def bits(v):
    return int(np.array(v, F32).view(np.uint32))


def from_bits(u):
    return np.array(u, np.uint32).view(F32)[()]


def floor_log2(v):
    """floor(log2 v) of a positive finite float32, from its bits (subnormals included)."""
    u = bits(v)
    e = (u >> 23) & 0xFF
    return e - 127 if e else -149 + (u & 0x7FFFFF).bit_length() - 1


def te_scale(amax, fm, eps, pow2, value_for_inf):
    # docs/recipes.md te_current_scale: amax < eps -> eps; Inf/0/NaN -> 1; fmax/amax in float32;
    # Inf -> value_for_inf; pow2 keeps sign and exponent bits.
    if amax < eps:
        amax = F32(eps)
    if not np.isfinite(amax) or amax == 0:
        return F32(1)
    with np.errstate(over="ignore"):
        s = F32(fm / amax)
    if np.isinf(s):
        s = F32(value_for_inf)
    return from_bits(bits(s) & 0xFF800000) if pow2 else s


def torchao_scale(amax, fm, eps, pow2):
    # fl32(fmax / max(fl64(amax), eps)) in binary64; pow2: 2^floor(log2 scale); Inf amax -> 0.
    a = float(amax)
    s = F32(float(fm) / (a if np.isnan(a) or a >= eps else eps))
    if pow2 and np.isfinite(s) and s != 0:
        s = F32(np.ldexp(1.0, floor_log2(s)))
    return s


def scale_inv_of(r, role, amax, gamax=None):
    """The dequantisation scale of one block with this amax (docs/recipes.md); NVFP4 rules also
    read the tensor's amax gamax."""
    fmt = r["roles"][role]["format"]
    fm = fmax(fmt)
    rule = r["rule"]
    if rule.startswith("nvfp4"):
        return nvfp4_scale_inv(rule, amax, gamax)
    with np.errstate(divide="ignore", over="ignore"):
        if rule == "te":
            return F32(1) / te_scale(amax, fm, r["epsilon"], r["pow2"], r["value_for_inf"])
        if rule == "torchao":
            return F32(1) / torchao_scale(amax, fm, r["epsilon"], r["pow2"])
        if rule == "deepseek":
            # sf = max(amax, fl32(floor)) / fmax (float32); UE8M0: the next power of two up.
            a = amax if np.isnan(amax) or amax >= F32(r["epsilon"]) else F32(r["epsilon"])
            sf = F32(a / fm)
            if r["pow2"] and np.isfinite(sf) and sf > 0:
                e = floor_log2(sf)
                sf = sf if F32(np.ldexp(1.0, e)) == sf else F32(np.ldexp(1.0, e + 1))
            return sf
    if rule == "mx-roundup":
        # val = amax * fl32(1/fmax); code = biased exponent, +1 when the mantissa is nonzero
        # (not at 0xFE, not for subnormal val <= 2^-127); NaN -> 0xFF, Inf -> 0xFE, 0 -> 0.
        with np.errstate(over="ignore"):
            val = F32(amax * F32(1.0 / float(fm)))
        if np.isnan(val):
            code = 0xFF
        elif np.isinf(val):
            code = 0xFE
        elif val == 0:
            code = 0
        else:
            u = bits(val)
            code, man = (u >> 23) & 0xFF, u & 0x7FFFFF
            if man and code != 0xFE and not (code == 0 and man <= 0x400000):
                code += 1
    elif rule in ("mx-torchao-floor", "mx-torchao-ceil", "mx-torchao-even"):
        # torchao 0.18 to_mx: from the float32 bits of amax; EVEN first adds 2^(22 - mbits) and
        # keeps sign and exponent; CEIL adds one for a nonzero mantissa; clamp(e - emax, -127,
        # 128) + 127; NaN -> 0xFF (an Inf amax is not special).
        emax = {"e4m3": 8, "e5m2": 15, "e2m1": 2, "e2m3": 2, "e3m2": 4}[fmt]
        mbits = {"e4m3": 3, "e5m2": 2, "e2m1": 1, "e2m3": 3, "e3m2": 2}[fmt]
        u = bits(amax)
        if rule == "mx-torchao-even":
            u = (u + (1 << (22 - mbits))) & 0xFF800000
        e = ((u >> 23) & 0xFF) - 127
        if rule == "mx-torchao-ceil" and u & 0x7FFFFF:
            e += 1
        code = 0xFF if np.isnan(amax) else min(max(e - emax, -127), 128) + 127
    elif rule == "mx-torchao-rceil":
        # torchao 0.18 _to_mx_rceil: descale = fl32(amax / fmax); NaN -> 0xFF, Inf -> 0xFE, else
        # clamp(ceil(float32 log2(descale)), -127, 127) + 127.
        with np.errstate(over="ignore", divide="ignore"):
            d = F32(amax / fm)
            l2 = np.log2(d)
        code = 0xFF if np.isnan(d) else 0xFE if np.isinf(d) else int(min(max(np.ceil(l2), -127), 127)) + 127
    elif rule == "mx-ocp-floor":
        # X = 2^(floor(log2 amax) - emax_elem), code clamped to [0, 254]; 0 -> 0; NaN/Inf -> 0xFF.
        emax = {"e4m3": 8, "e5m2": 15, "e2m1": 2, "e2m3": 2, "e3m2": 4}[fmt]
        if not np.isfinite(amax):
            code = 0xFF
        elif amax == 0:
            code = 0
        else:
            code = min(max(floor_log2(amax) - emax + 127, 0), 254)
    else:
        raise AssertionError(f"block preset {r['name']}: rule {rule} has no reference in this test")
    return F32(np.nan) if code == 0xFF else F32(np.ldexp(1.0, code - 127))


def block_presets():
    out = []
    for p in fp8kit.presets():
        r = fp8kit.recipe(p)
        if any(r["roles"][ro]["granularity"] != "tensor" for ro in ROLES):
            out.append(p)
    return out


def test_every_block_preset_is_covered():
    assert {
        "te-block",
        "mxfp8",
        "mx-ocp",
        "torchao-rowwise",
        "deepseek-v3",
        "nvfp4",
        "nvfp4-torchao",
        "mxfp4",
        "mxfp4-ocp",
        "mxfp6-e2m3",
        "mxfp6-e3m2",
    } <= set(block_presets())


def data(shape, seed):
    """Magnitudes spread over many binades, changing from block to block, with special blocks: all
    zero, subnormal-only (MX code 0, TE's Inf scale), one Inf, values at FLT_MAX's binade."""
    rng = np.random.default_rng(seed)
    rows, cols = shape
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, size=(rows, 1)) + rng.uniform(-4, 4, shape))
    x = x.astype(F32)
    x[0, :40] = 0  # the first 1x32 blocks and part of 1x128: zero
    x[1, :] = F32(1e-41) * rng.integers(1, 50, cols)  # subnormal row
    x[2, 5] = np.inf
    x[3, 7] = F32(3e38)
    x[4, :] = -F32(448.0)  # amax exactly fmax
    return x


@pytest.mark.parametrize("preset", block_presets())
@pytest.mark.parametrize("role", ROLES)
def test_block_scale_inv_per_block(preset, role):
    r = fp8kit.recipe(preset)
    spec = r["roles"][role]
    x = data(SHAPE, seed=len(preset) * 3 + ROLES.index(role))
    rows, cols = x.shape
    if spec["columnwise_rht"]:
        # nvfp4 inputs/gradients: the column-wise copy after TE's RHT, which needs rows in groups
        # of 16 (130 are not); its blocks are checked against TE's code in test_rht.py.
        with pytest.raises(ValueError, match="multiple of 16, got 130"):
            fp8kit.stats(x, recipe=preset, role=role)
        return
    if spec["granularity"] == "tensor":
        th, tw = rows, cols
    elif spec["granularity"] == "row":
        th, tw = 1, cols
    else:
        th, tw = spec["block_rows"], spec["block_cols"]
    gr, gc = -(-rows // th), -(-cols // tw)
    d = fp8kit.stats(x, recipe=preset, role=role)
    assert d["blocks"] == gr * gc
    assert d["grid"] == (gr, gc) and d["block_shape"] == (th, tw)
    si = d["scale_inv"]
    assert si.shape == (gr, gc) and si.dtype == F32
    want = np.empty((gr, gc), F32)
    for i in range(gr):
        for j in range(gc):
            blk = np.abs(x[i * th : (i + 1) * th, j * tw : (j + 1) * tw])
            want[i, j] = scale_inv_of(r, role, F32(blk.max()), F32(np.abs(x).max()))
    if r["rule"].startswith("nvfp4"):
        # A NaN block scale (an Inf block under torchao's Inf per-tensor scale) is NaN times a
        # float: which NaN bits a product carries is the CPU's, not the rule's. Every other bit counts.
        si, want = _nan_as_one(si), _nan_as_one(want)
    assert np.array_equal(si.view(np.uint32), want.view(np.uint32)), (
        f"{preset}/{role}: {np.count_nonzero(si.view(np.uint32) != want.view(np.uint32))} blocks differ"
    )


def _nan_as_one(a):
    a = a.copy()
    a[np.isnan(a)] = np.float32(np.nan)
    return a


def test_issue_case_te_block_4x256():
    # The reported case: 4 x 256 float32 with te-block (1x128 for activations) has 8 blocks.
    x = np.random.default_rng(3).standard_normal((4, 256)).astype(F32)
    d = fp8kit.stats(x, recipe="te-block")
    assert d["scale_inv"].shape == (4, 2) and d["blocks"] == 8
    want = [
        [
            F32(1)
            / te_scale(F32(np.abs(x[i, j * 128 : (j + 1) * 128]).max()), F32(448), 0.0, True, 3.4028234663852886e38)
            for j in range(2)
        ]
        for i in range(4)
    ]
    assert np.array_equal(d["scale_inv"], np.array(want, F32))


@pytest.mark.parametrize("shape", [(1, 1), (1, 31), (127, 129), (3, 1000)])
def test_block_grid_small_and_odd_shapes(shape):
    x = (
        data((max(shape[0], 5), shape[1]), seed=9)[: shape[0]]
        if shape[0] >= 5
        else np.random.default_rng(5).standard_normal(shape).astype(F32)
    )
    for preset in block_presets():
        r = fp8kit.recipe(preset)
        d = fp8kit.stats(x, recipe=preset, role="weight")
        gr, gc = d["grid"]
        th, tw = d["block_shape"]
        assert d["scale_inv"].shape == (gr, gc) == (-(-shape[0] // th), -(-shape[1] // tw))
        want = np.array(
            [
                [
                    scale_inv_of(
                        r,
                        "weight",
                        F32(np.abs(x[i * th : (i + 1) * th, j * tw : (j + 1) * tw]).max()),
                        F32(np.abs(x).max()),
                    )
                    for j in range(gc)
                ]
                for i in range(gr)
            ],
            F32,
        )
        got = d["scale_inv"]
        if r["rule"].startswith("nvfp4"):  # NaN bits of a product: see test_block_scale_inv_per_block
            got, want = _nan_as_one(got), _nan_as_one(want)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), preset


@pytest.mark.parametrize("recipe", ["te-block", "mxfp8", "nvfp4-rowwise"])
def test_tile_summary_is_block_stats_per_block_fields(recipe):
    """_fp8kit.tile_summary (the monitor's per-block fields of GPU tensors: lib's summarize_tiles
    on each tile's scale_inv and extremes) from the tiles' extremes computed here with numpy
    (max and min nonzero |x| over finite x, 0 when none) and stats' scale_inv gives the fields
    fp8kit.stats(x, recipe=...) gives, exactly; mismatched lengths are a ValueError naming them."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(SHAPE) * np.logspace(-5, 5, SHAPE[1])).astype(F32)
    x[0, :40] = 0.0
    x[1, 2], x[3, 4] = np.nan, np.inf
    want = fp8kit.stats(x, recipe=recipe, role="weight")
    tr, tc = want["block_shape"]
    gr, gc = want["grid"]
    amax, mins = np.zeros((gr, gc), F32), np.zeros((gr, gc), F32)
    for i in range(gr):
        for j in range(gc):
            a = np.abs(x[i * tr : (i + 1) * tr, j * tc : (j + 1) * tc])
            a = a[np.isfinite(a)]
            amax[i, j] = a.max() if a.size else 0
            nz = a[a != 0]
            mins[i, j] = nz.min() if nz.size else 0
    got = fp8kit._fp8kit.tile_summary(want["scale_inv"].ravel(), amax.ravel(), mins.ravel())
    for k in (
        "blocks",
        "scale_inv_min",
        "scale_inv_max",
        "blocks_with_range",
        "block_dynamic_range_max",
        "block_dynamic_range_mean",
    ):
        assert got[k] == want[k], k
    with pytest.raises(ValueError, match="one value per tile"):
        fp8kit._fp8kit.tile_summary(want["scale_inv"].ravel(), amax.ravel()[1:], mins.ravel())
