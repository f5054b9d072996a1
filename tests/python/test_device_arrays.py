"""GPU arrays (torch CUDA tensors, CuPy, JAX) through the array functions: the CUDA kernels give
the same bits as the same values passed as numpy arrays (the C++ reference), for every format
the kernels cover, every profile, stochastic rounding, scaled casts, amax, statistics and the
block quantisers. Skipped, with the reason, without a GPU or without the framework."""

import fp8kit
import numpy as np
import pytest
from conftest import WIDE, random_array

ok, why = fp8kit._fp8kit.cuda_available()
gpu = pytest.mark.skipif(not ok, reason=f"GPU tests: {why}")

FORMATS = ["e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"]
CAST_ONLY = ["e2m1", "e2m3", "e3m2"]
POLICIES = [dict(profile=p) for p in ("cuda-satfinite", "cuda-nosat", "ml_dtypes", "torch")] + [
    dict(rounding="stochastic", overflow="saturate-all", nan="canonical")
]


def to_dev(fw, a):
    if fw == "torch":
        torch = pytest.importorskip("torch")
        if a.dtype == WIDE["bf16"]:
            return torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
        return torch.from_numpy(a).cuda()
    if fw == "cupy":
        cupy = pytest.importorskip("cupy")
        if a.dtype == WIDE["bf16"]:
            pytest.skip("CuPy has no bfloat16 dtype")
        return cupy.asarray(a)
    jnp = pytest.importorskip("jax.numpy")
    import jax

    return jax.device_put(jnp.asarray(a), jax.devices("gpu")[0])


def to_host(fw, d):
    if fw == "torch":
        import torch

        t = d.cpu()
        return t.view(torch.int16).numpy().view(WIDE["bf16"]) if t.dtype == torch.bfloat16 else t.numpy()
    if fw == "cupy":
        import cupy

        return cupy.asnumpy(d)
    return np.asarray(d)


def same_bits_or_nan(a, b):
    """float32 arrays equal bit for bit, NaN only as NaN: a rule's NaN scale (NVFP4 at a global
    amax of Inf) is 0xFFC00000 on x86 and 0x7FFFFFFF on the GPU (cuda/include/fp8kit/cuda/blocks.hpp)."""
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    nan = np.isnan(a) & np.isnan(b)
    same_bits(np.where(nan, np.float32(0), a), np.where(nan, np.float32(0), b))


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype.itemsize == b.dtype.itemsize
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize]
    np.testing.assert_array_equal(a.view(u), b.view(u))


FWS = ["torch", "cupy", "jax"]


@gpu
@pytest.mark.parametrize("fw", FWS)
@pytest.mark.parametrize("wide", ["f32", "f16", "bf16"])
def test_quantize_dequantize_same_bits(fw, wide):
    x = random_array(WIDE[wide], n=65_537, seed=3)
    xd = to_dev(fw, x)
    for fmt in FORMATS + CAST_ONLY:
        for pol in POLICIES:
            try:
                want = fp8kit.quantize(x, fmt, seed=7, index_offset=0, **pol)
            except ValueError:
                continue  # a policy the format does not have: nothing to compare
            got = fp8kit.quantize(xd, fmt, seed=7, **pol)
            assert type(got).__module__.split(".")[0] == type(xd).__module__.split(".")[0]
            same_bits(to_host(fw, got), want)
            for out in ("f32", "f16") + (("bf16",) if fw != "cupy" else ()):
                d_want = fp8kit.dequantize(want, fmt, dtype=WIDE[out], scale_inv=0.375)
                d_got = fp8kit.dequantize(to_dev(fw, want), fmt, dtype=out, scale_inv=0.375)
                same_bits(to_host(fw, d_got), d_want)
        scaled = fp8kit.quantize(xd, "e4m3", profile="cuda-satfinite", scale=3.7)
        same_bits(to_host(fw, scaled), fp8kit.quantize(x, "e4m3", profile="cuda-satfinite", scale=3.7))


@gpu
@pytest.mark.parametrize("fw", FWS)
def test_amax_stats_same(fw):
    x = np.random.default_rng(5).standard_normal(300_001).astype(np.float32) * 20
    x[17] = np.nan
    xd = to_dev(fw, x)
    assert fp8kit.amax(xd) == fp8kit.amax(x)
    for recipe in ("te-current", "torchao-tensorwise"):
        for role in ("input", "grad"):
            g, c = fp8kit.stats(xd, recipe=recipe, role=role), fp8kit.stats(x, recipe=recipe, role=role)
            for k in (
                "numel",
                "finite",
                "zeros",
                "nan",
                "inf",
                "underflow",
                "subnormal",
                "overflow",
                "te_underflow",
                "te_overflow",
                "amax",
                "min_nonzero",
            ):
                assert g[k] == c[k], k
            np.testing.assert_array_equal(g["exp_hist"]["count"], c["exp_hist"]["count"])
            # binary64 sums: only the order of the additions differs (kernels.hpp)
            assert g["sum_err2"] == pytest.approx(c["sum_err2"], rel=1e-9)


@gpu
@pytest.mark.parametrize("fw", FWS)
@pytest.mark.parametrize("recipe", ["te-block", "mxfp8", "mx-ocp"])
def test_block_quantize_same_bits(fw, recipe):
    x = (np.random.default_rng(9).standard_normal((300, 700)) * np.logspace(-3, 3, 700)).astype(np.float32)
    for role in ("input", "weight"):
        got = fp8kit.quantize_blocks(to_dev(fw, x), recipe, role=role)
        want = fp8kit.quantize_blocks(x, recipe, role=role)
        same_bits(to_host(fw, got["codes"]), want["codes"])
        key = "scale_codes" if "scale_codes" in got else "scale_inv"
        same_bits(to_host(fw, got[key]), want[key])


@gpu
@pytest.mark.parametrize("fw", FWS)
@pytest.mark.parametrize(
    "recipe", ["nvfp4-rowwise", "nvfp4", "nvfp4-torchao", "mxfp4", "mxfp4-ocp", "mxfp6-e2m3", "mxfp6-e3m2-ocp"]
)
def test_block_quantize_fp4_fp6_recipes_same_bits(fw, recipe):
    """quantize_blocks of a device array under the NVFP4 / MXFP4 / MXFP6 recipes (cuda::quantize_blocks)
    equals the host's dict entry by entry: codes (packed too for E2M1), scale codes, scales,
    scale_inv, the global amax, the grid; every role (the 'nvfp4' input and grad roles: TE's
    column-wise RHT copy, so 128 rows), with NaN / Inf elements, the gradient's stochastic rounding."""
    x = (np.random.default_rng(21).standard_normal((128, 320)) * np.logspace(-3, 3, 320)).astype(np.float32)
    x[5, 7], x[90, 33] = np.nan, np.inf
    for wide in ("f32", "bf16"):
        xw = x if wide == "f32" else x.astype(WIDE["bf16"])
        for role in ("input", "weight", "grad"):
            for packed in (False, True) if recipe.startswith(("nvfp4", "mxfp4")) else (False,):
                got = fp8kit.quantize_blocks(to_dev(fw, xw), recipe, role=role, packed=packed, seed=7)
                want = fp8kit.quantize_blocks(xw, recipe, role=role, packed=packed, seed=7)
                same_bits(to_host(fw, got["codes"]), want["codes"])
                same_bits(to_host(fw, got["scale_codes"]), want["scale_codes"])
                for k in ("scale", "scale_inv"):
                    same_bits_or_nan(to_host(fw, got[k]), want[k])
                same_bits(to_host(fw, got["global_amax"]), np.array([want["global_amax"]], np.float32))
                assert got["grid"] == tuple(want["grid"]) and got["block_shape"] == tuple(want["block_shape"])


@gpu
@pytest.mark.parametrize("recipe", ["nvfp4-rowwise", "nvfp4-torchao", "mxfp4", "mxfp6-e2m3", "mxfp8"])
def test_fake_quantize_cuda_block_recipes_equal_cpu(recipe):
    """fp8kit.torch.fake_quantize of a CUDA tensor under the FP4 / FP6 / MX block recipes runs on
    the device (cuda::quantize_blocks, the decode kernel) and equals the CPU tensor's result."""
    torch = pytest.importorskip("torch")
    from fp8kit.torch import fake_quantize

    x = torch.from_numpy((np.random.default_rng(4).standard_normal((64, 256)) * 3).astype(np.float32))
    for dt in (torch.float32, torch.bfloat16):
        for role in ("input", "grad"):
            got = fake_quantize(x.to(dt).cuda(), recipe=recipe, role=role, seed=3)
            want = fake_quantize(x.to(dt), recipe=recipe, role=role, seed=3)
            assert got.is_cuda and got.dtype == dt
            same_bits(to_host("torch", got), to_host("torch", want))


@gpu
@pytest.mark.parametrize("fw", FWS)
def test_stats_device_block_recipes_equal_host(fw):
    """stats(device array, recipe=<block recipe>) against the host's compute_block_stats: every
    count, extreme and per-tile field exact (scale_inv bit for bit, as a device array of the
    framework), the binary64 sums to the documented 1e-9. NVFP4 too (its global amax and TE's
    column-wise RHT copy on the device; 'nvfp4' needs a row count that is a multiple of 16 for its
    input and grad roles, as the host does)."""
    x = (np.random.default_rng(12).standard_normal((130, 300)) * np.logspace(-4, 4, 300)).astype(np.float32)
    x[3, 5], x[60, 200] = np.nan, np.inf
    xd = to_dev(fw, x)
    exact = (
        "numel",
        "finite",
        "zeros",
        "nan",
        "inf",
        "underflow",
        "subnormal",
        "overflow",
        "te_underflow",
        "te_overflow",
        "amax",
        "min_nonzero",
        "format",
        "blocks",
        "grid",
        "block_shape",
        "scale_inv_min",
        "scale_inv_max",
        "blocks_with_range",
        "block_dynamic_range_max",
        "block_dynamic_range_mean",
        "recipe",
    )
    x128 = np.ascontiguousarray(x[:128])
    for recipe in ("te-block", "mxfp8", "mx-ocp", "deepseek-v3", "nvfp4", "nvfp4-rowwise", "nvfp4-torchao"):
        for role in ("input", "weight", "grad"):
            h = x128 if recipe == "nvfp4" else x
            g, c = fp8kit.stats(to_dev(fw, h), recipe=recipe, role=role), fp8kit.stats(h, recipe=recipe, role=role)
            assert g["columnwise_rht"] == c["columnwise_rht"]
            for k in exact:
                assert g[k] == c[k] or (g[k] != g[k] and c[k] != c[k]), (recipe, role, k)
            np.testing.assert_array_equal(g["exp_hist"]["count"], c["exp_hist"]["count"])
            np.testing.assert_array_equal(g["scale_inv_exp_hist"]["count"], c["scale_inv_exp_hist"]["count"])
            np.testing.assert_array_equal(g["block_dynamic_range_hist"], c["block_dynamic_range_hist"])
            same_bits_or_nan(to_host(fw, g["scale_inv"]), c["scale_inv"])
            for k in ("sum_x2", "sum_err2"):
                if np.isfinite(c[k]):
                    assert g[k] == pytest.approx(c[k], rel=1e-9), (recipe, role, k)
                else:
                    assert g[k] == c[k], (recipe, role, k)
    with pytest.raises(ValueError, match="multiple of 16"):  # the column-wise RHT, as on the host
        fp8kit.stats(xd, recipe="nvfp4", role="input")


@gpu
def test_torch_stream_and_errors():
    torch = pytest.importorskip("torch")
    x = torch.randn(4096, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        got = fp8kit.quantize(x, "e4m3", profile="torch")
    s.synchronize()
    same_bits(got.cpu().numpy(), fp8kit.quantize(x.cpu(), "e4m3", profile="torch").numpy())
    with pytest.raises(ValueError, match="float64"):
        fp8kit.quantize(x.double(), "e4m3", profile="torch")
    with pytest.raises(ValueError, match="contiguous"):
        fp8kit.quantize(x.view(64, 64).t(), "e4m3", profile="torch")


class _FakeGpuArray:
    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (1 << 40, False), "version": 3}


@pytest.mark.skipif(ok, reason="the module has the kernels and a GPU: the error path is not reachable")
def test_gpu_array_without_kernels_is_a_clear_error():
    with pytest.raises(RuntimeError, match="fp8kit: a GPU array was passed but"):
        fp8kit.quantize(_FakeGpuArray(), "e4m3", profile="torch")


def _validate_cases(shape):
    """(scaling kwargs, block scales as numpy or None) for every mode and layout of validate()."""
    rows, cols = shape
    rng = np.random.default_rng(31)

    def blocks(n):
        return np.ldexp(1 + rng.integers(0, 1000, n) / 1000, rng.integers(-6, 7, n)).astype(np.float32)

    grids = {
        "rowwise": (rows,),
        "1x128": (rows, -(-cols // 128)),
        "128x128": (-(-rows // 128), -(-cols // 128)),
        "mx32": (rows, -(-cols // 32)),
    }
    cases = [({}, None), (dict(scale=3.7), None), (dict(scale_inv=0.021), None)]
    for i, (layout, g) in enumerate(grids.items()):
        b = blocks(int(np.prod(g))).reshape(g)
        cases.append((dict(scale=b, layout=layout) if i % 2 else dict(scale_inv=b, layout=layout), b))
    return cases


@gpu
@pytest.mark.parametrize("fw", FWS)
def test_validate_device_equals_host(fw):
    """validate(device input, device codes) is the dict validate(numpy) gives, for f32/f16/bf16,
    E4M3/E5M2/E2M1, every scaling mode and block layout (scales on the device and on the host),
    with codes of another policy and random codes mixed in (mismatches of every class)."""
    rng = np.random.default_rng(23)
    shape = (130, 200)
    x = (rng.standard_normal(shape) * np.logspace(-4, 4, shape[1])).astype(np.float32)
    x[3, 5], x[7, 9], x[60, 150], x[1, 1] = np.nan, np.inf, -np.inf, 1e-40
    other = dict(rounding="toward-zero", overflow="saturate-finite", nan="signed-all-ones")
    for wide in ("f32", "f16", "bf16"):
        if fw == "cupy" and wide == "bf16":
            continue
        xw = x.astype(WIDE[wide])
        xd = to_dev(fw, xw)
        for fmt, pol in (
            ("e4m3", dict(profile="cuda-satfinite")),
            ("e5m2", dict(profile="torch")),
            ("e2m1", dict(rounding="nearest-even", overflow="saturate-all", nan="canonical")),
        ):
            codes = fp8kit.quantize(xw, fmt, **(other if fmt != "e2m1" else pol))
            flip = rng.random(codes.shape) < 0.01
            codes[flip] = rng.integers(0, 16 if fmt == "e2m1" else 256, int(flip.sum()))
            cd = to_dev(fw, codes)
            for k, (kw, b) in enumerate(_validate_cases(shape)):
                want = fp8kit.validate(xw, codes, fmt, examples=3, **pol, **kw)
                if b is not None and k % 2:
                    kw = dict(kw, **{("scale" if "scale" in kw else "scale_inv"): to_dev(fw, b)})
                got = fp8kit.validate(xd, cd, fmt, examples=3, **pol, **kw)
                assert got == want, (wide, fmt, kw.get("layout"))
            assert want["mismatches"] > 0
    got = fp8kit.validate(xd, cd, "e4m3", profile="cuda-satfinite", detect_policies=False)
    assert got == fp8kit.validate(xw, codes, "e4m3", profile="cuda-satfinite", detect_policies=False)


@gpu
def test_validate_device_torch_float8_and_errors():
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 96, device="cuda") * 100
    q = fp8kit.quantize(x, "e4m3", profile="torch")
    want = fp8kit.validate(x.cpu(), q.cpu().numpy(), "e4m3", profile="cuda-satfinite")
    assert fp8kit.validate(x, q.view(torch.float8_e4m3fn), "e4m3", profile="cuda-satfinite") == want
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        assert fp8kit.validate(x, q, "e4m3", profile="cuda-satfinite") == want
    with pytest.raises(ValueError, match="only the input is a GPU array"):
        fp8kit.validate(x, q.cpu().numpy(), "e4m3", profile="torch")
    with pytest.raises(ValueError, match="only the output is a GPU array"):
        fp8kit.validate(x.cpu(), q, "e4m3", profile="torch")
    with pytest.raises(ValueError, match="comm"):
        fp8kit.validate(x, q, "e4m3", profile="torch", comm=object())
    with pytest.raises(ValueError, match="float64"):
        fp8kit.validate(x.double(), q, "e4m3", profile="torch")
    with pytest.raises(ValueError, match="128 codes for 6144"):
        fp8kit.validate(x, q.reshape(-1)[:128], "e4m3", profile="torch")
    with pytest.raises(ValueError, match="need 64 scales, got 3"):
        fp8kit.validate(x, q, "e4m3", profile="torch", scale=torch.ones(3, device="cuda"), layout="rowwise")
    with pytest.raises(ValueError, match="block scales on the GPU need input and output on the GPU"):
        fp8kit.validate(
            x.cpu(), q.cpu().numpy(), "e4m3", profile="torch", scale=torch.ones(64, device="cuda"), layout="rowwise"
        )


@pytest.mark.skipif(ok, reason="the module has the kernels and a GPU: the error path is not reachable")
def test_validate_gpu_array_without_kernels_is_a_clear_error():
    with pytest.raises(RuntimeError, match="fp8kit: a GPU array was passed but"):
        fp8kit.validate(_FakeGpuArray(), _FakeGpuArray(), "e4m3", profile="torch")
