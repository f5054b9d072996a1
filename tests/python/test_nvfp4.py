"""NVFP4 and MXFP4/MXFP6 block quantisation (fp8kit.quantize_blocks with the nvfp4, nvfp4-torchao,
mxfp4*, mxfp6-* presets) against independent numpy transcriptions of TransformerEngine's and
torchao's Python code (nvfp4_reference.py, mx_reference.py): codes and scale bytes bit for bit, on
the bundled real tensors and on random and adversarial blocks."""

import os

import fp8kit
import ml_dtypes
import mx_reference
import numpy as np
import nvfp4_reference as ref
import pytest

F32 = np.float32
DUMP = os.path.join(os.path.dirname(__file__), "..", "..", "data", "example", "llama_tiny_dump.h5")


def real_tensors():
    """The bundled run's 2-D float tensors whose row length is a multiple of 32 (all of them)."""
    out = []
    for info, a in fp8kit.read_dump(DUMP, include="step_000000/*"):
        a = np.asarray(a, dtype=F32).reshape(-1, a.shape[-1])
        if a.shape[1] % 32 == 0 and a.shape[0] % 16 == 0:
            out.append((info["name"], a))
    assert len(out) >= 20, "the bundled dump should give at least 20 tensors"
    return out


REAL = real_tensors()


def random_blocks(seed, rows=64, cols=256):
    """Gaussian values with the scale changing from row to row over +-40 binades."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)) * np.exp2(rng.uniform(-40, 40, (rows, 1)))
    return x.astype(F32)


def adversarial(seed=7):
    """Blocks of zeros, a block that is all -0.0, a tiny block whose E4M3 scale rounds to 0, a
    block at the scale underflow edge, subnormal float32 inputs, ties of E2M1, amax at FLT_MAX."""
    x = random_blocks(seed, 32, 128)
    x[0, :16] = 0
    x[1, :16] = F32(-0.0)
    x[2, :16] = F32(1e-12) * np.arange(1, 17)  # block scale < 2^-10: byte 0
    x[3, :16] = F32(2.0**-10) * 6 / F32(2688) * F32(np.abs(x).max()) * np.linspace(0.5, 1, 16)
    x[4, :16] = F32(1e-41) * np.arange(1, 17)  # float32 subnormals
    x[5, :16] = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0] * 2, F32) * F32(np.abs(x).max() / 6)
    x[6, 16:32] = F32(3.0e38) * np.linspace(-1, 1, 16, dtype=F32)
    return x


def with_role_rounding(preset, role, rounding):
    """The preset as a dict with the role's own rounding (the recipe-file field)."""
    r = fp8kit.recipe(preset)
    r["roles"][role]["rounding"] = rounding
    return r


def check_te(x, role):
    tile = (16, 16) if role == "weight" else (1, 16)
    # nvfp4's inputs and gradients are the column-wise copy after TE's RHT (test_rht.py); the
    # row-wise copies, checked here, are the nvfp4-rowwise preset.
    preset = "nvfp4" if role == "weight" else "nvfp4-rowwise"
    codes, scales, scaled = ref.te_nvfp4(x, tile)
    if role == "grad":
        # TE rounds gradients stochastically (its random bits are not reproducible): the preset's
        # scale bytes are TE's and every code brackets TE's scaled value; with the role's rounding
        # set to nearest-even in the recipe, the codes are TE's round-to-nearest codes below.
        sr = fp8kit.quantize_blocks(x, preset, role, seed=11)
        assert np.array_equal(sr["scale_codes"], scales)
        assert np.all(ref.e2m1_sr_bracketed(sr["codes"], scaled))
        assert fp8kit.recipe_policy(preset, role)["rounding"] == "stochastic"
        preset = with_role_rounding(preset, role, "nearest-even")
    q = fp8kit.quantize_blocks(x, preset, role)
    if tile == (16, 16):
        scales = scales[::16]  # the reference repeats a 16x16 block's scale on its 16 rows
    assert np.array_equal(q["scale_codes"], scales), (
        f"{np.count_nonzero(q['scale_codes'] != scales)} scale bytes differ"
    )
    # One documented difference: TE's reference maps a scaled element that is exactly -0.0 to code
    # 0 (its table tests x >= 0.0), TE's kernel (cvt.rn.satfinite.e2m1x2.f32) to -0 (code 8).
    negzero = (scaled == 0) & np.signbit(scaled)
    assert np.all(q["codes"][negzero] == 8) and np.all(codes[negzero] == 0)
    same = ~negzero
    assert np.array_equal(q["codes"][same], codes[same]), (
        f"{np.count_nonzero(q['codes'][same] != codes[same])} codes differ"
    )
    return q


@pytest.mark.parametrize("role", ["input", "weight"])
def test_te_nvfp4_real_tensors(role):
    for name, a in REAL:
        check_te(a, role)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("role", ["input", "weight", "grad"])
def test_te_nvfp4_random_and_adversarial(seed, role):
    check_te(random_blocks(seed), role)
    check_te(adversarial(seed), role)


def test_te_nvfp4_scale_rounds_to_zero():
    # A block whose decode scale rounds to E4M3 0: TE keeps byte 0 and multiplies its elements by
    # fminf(1 / 0, FLT_MAX), so nonzero elements saturate to +-6 (codes 7 / 15) yet decode to 0.
    x = adversarial()
    q = check_te(x, "input")
    assert q["scale_codes"][2, 0] == 0 and q["scale"][2, 0] == np.finfo(F32).max
    assert np.all(q["codes"][2, :16] == 7)
    assert q["scale_inv"][2, 0] == 0


def test_te_nvfp4_zero_tensor_and_inf():
    z = np.zeros((16, 32), F32)
    q = check_te(z, "input")
    assert np.all(q["codes"] == 0) and np.all(q["scale_codes"] == 0) and q["global_amax"] == 0
    x = random_blocks(3, 16, 32)
    x[0, 3] = np.inf
    x[1, 4] = -np.inf
    q = check_te(x, "input")  # global amax Inf: S_enc = 1 in both
    assert q["codes"][0, 3] == 7 and q["codes"][1, 4] == 15 and q["scale_codes"][0, 0] == 0x7E  # 448


def test_te_nvfp4_nan_follows_the_kernel():
    # NaN is where TE's kernel and its Python reference part: the kernel's amax (fmaxf) skips NaN
    # and cvt.rn.satfinite.e2m1 (cuda_fp4.h) makes it +6 (code 7); the reference's torch.amax
    # propagates it. fp8kit follows the kernel: the block's scale is that of its other elements.
    x = random_blocks(5, 16, 32)
    y = x.copy()
    y[0, 2] = np.nan
    qx, qy = fp8kit.quantize_blocks(x, "nvfp4-rowwise"), fp8kit.quantize_blocks(y, "nvfp4-rowwise")
    assert qy["codes"][0, 2] == 7
    assert (
        qy["scale_codes"][0, 0]
        == fp8kit.quantize_blocks(np.where(np.isnan(y), 0, y).astype(F32), "nvfp4-rowwise")["scale_codes"][0, 0]
    )
    assert qx["global_amax"] >= qy["global_amax"]


def test_te_nvfp4_packed():
    x = random_blocks(11, 32, 64)
    q = fp8kit.quantize_blocks(x, "nvfp4-rowwise", packed=True)
    codes, _, _ = ref.te_nvfp4(x)
    assert q["codes"].shape == (32, 32) and q["packed"]
    assert np.array_equal(q["codes"], ref.te_pack_fp4x2(codes))  # cast_to_fp4x2: element 2i low nibble
    with pytest.raises(ValueError, match="even"):
        fp8kit.quantize_blocks(np.zeros((2, 15), F32), "nvfp4-rowwise", packed=True)
    with pytest.raises(ValueError, match="e2m1"):
        fp8kit.quantize_blocks(x, "mxfp6-e2m3", packed=True)


def test_te_nvfp4_bf16_and_f16_inputs():
    x = random_blocks(13, 32, 64)
    for dt in (ml_dtypes.bfloat16, np.float16):
        y = np.clip(x, -6e4, 6e4).astype(dt)
        check_te(y.astype(F32), "input")
        assert np.array_equal(
            fp8kit.quantize_blocks(y, "nvfp4-rowwise")["codes"],
            fp8kit.quantize_blocks(y.astype(F32), "nvfp4-rowwise")["codes"],
        )


def test_torchao_nvfp4():
    for name, a in REAL[:12]:
        q = fp8kit.quantize_blocks(a, "nvfp4-torchao", "input")
        codes, scales = ref.torchao_nvfp4(a)
        assert np.array_equal(q["scale_codes"], scales), name
        assert np.array_equal(q["codes"], codes), name
    for seed in range(3):
        for x in (random_blocks(seed), adversarial(seed)):
            x = x.copy()
            x[1, :16] = 1.0  # torchao's clamp turns a -0.0 into +0.0 before its cast: avoid that one case
            q = fp8kit.quantize_blocks(x, "nvfp4-torchao", "input")
            codes, scales = ref.torchao_nvfp4(x)
            assert np.array_equal(q["scale_codes"], scales)
            assert np.array_equal(q["codes"], codes)


def test_te_and_torchao_differ_in_bits():
    # Why nvfp4-torchao is a preset of its own: on real data the two give different bytes.
    diff = 0
    for name, a in REAL[:8]:
        diff += np.count_nonzero(
            fp8kit.quantize_blocks(a, "nvfp4-rowwise")["scale_codes"]
            != fp8kit.quantize_blocks(a, "nvfp4-torchao")["scale_codes"]
        )
    assert diff > 0


@pytest.mark.parametrize("fmt,stem", [("e2m1", "mxfp4"), ("e2m3", "mxfp6-e2m3"), ("e3m2", "mxfp6-e3m2")])
def test_mx_fp4_fp6_against_torchao(fmt, stem):
    for preset, mode in ((stem, "rceil"), (stem + "-ocp", "floor")):
        xs = [a for _, a in REAL[:10]] + [random_blocks(s) for s in range(3)]
        for x in xs:
            q = fp8kit.quantize_blocks(x, preset, "input")
            codes, scales = mx_reference.mx(x, fmt, mode)
            assert q["format"] == fmt and q["block_shape"] == (1, 32)
            assert np.array_equal(q["scale_codes"], scales), preset
            assert np.array_equal(q["codes"], codes), preset


def test_mx_fp4_packed_layout():
    x = random_blocks(21, 8, 64)
    q = fp8kit.quantize_blocks(x, "mxfp4", packed=True)
    u = fp8kit.quantize_blocks(x, "mxfp4")["codes"]
    assert np.array_equal(q["codes"], (u[:, ::2] | (u[:, 1::2] << 4)).astype(np.uint8))


def test_nvfp4_stochastic_rounding_option():
    # fp8kit's own rule (emu/random.hpp), not TE's bits: a recipe whose policy rounds
    # stochastically draws stochastic_bits(seed, i) for element i; each code is one of the two
    # E2M1 neighbours of the scaled value, and the same seed gives the same codes.
    r = fp8kit.recipe("nvfp4-rowwise")
    r["policy"]["rounding"] = "stochastic"
    x = random_blocks(17, 32, 64)
    a = fp8kit.quantize_blocks(x, r, "input", seed=5)
    b = fp8kit.quantize_blocks(x, r, "input", seed=5)
    c = fp8kit.quantize_blocks(x, r, "input", seed=6)
    rn = fp8kit.quantize_blocks(x, "nvfp4-rowwise", "input")
    assert not np.array_equal(a["codes"], rn["codes"])
    # The preset's own gradient rounding (TE's fp4_quant_bwd_grad) is the same rule.
    assert np.array_equal(fp8kit.quantize_blocks(x, "nvfp4-rowwise", "grad", seed=5)["codes"], a["codes"])
    assert np.array_equal(a["codes"], b["codes"]) and not np.array_equal(a["codes"], c["codes"])
    assert np.array_equal(a["scale_codes"], rn["scale_codes"])
    grid = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(F32)
    with np.errstate(over="ignore"):  # blocks whose scale byte is 0 multiply by FLT_MAX
        y = (x.reshape(32, 4, 16) * a["scale"][:, :, None]).reshape(32, 64)
    lo = grid[a["codes"]]
    # Every code is the value itself or a neighbour on the side of y: |code - y| < one E2M1 step (2).
    assert np.all(np.abs(lo - np.clip(y, -6, 6)) <= 2.0)
    # The first element by hand from the documented rule: stochastic_bits(seed, 0) decides it.
    want = fp8kit.encode(
        float(y[0, 0]),
        "e2m1",
        rounding="stochastic",
        overflow="saturate-all",
        nan="positive-max",
        dtype="f32",
        random=fp8kit.stochastic_bits(5, 0),
    )
    assert a["codes"][0, 0] == want
