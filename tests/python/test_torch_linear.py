"""fp8kit.torch.Fp8Linear: the three GEMMs of a linear layer on quantised operands under fp8kit's
accumulation models (issue 26 item 6). Needs torch (not in requirements.txt: CI skips with the
reason). The operands' codes are made here with torch's own float8 casts and TransformerEngine's
current-scaling rule typed from its source, not with fp8kit's quantiser."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (not part of CI's requirements.txt)")
import fp8kit  # noqa: E402
import fp8kit.torch as ft  # noqa: E402

F8 = {"e4m3": (torch.float8_e4m3fn, 448.0), "e5m2": (torch.float8_e5m2, 57344.0)}


def te_current_codes(t, fmt):
    """TE current scaling (transformer_engine/common/recipe/recipe_common.cuh,
    compute_scale_from_amax with epsilon 0): scale = fl32(fp8_max / amax), scale_inv = fl32(1 /
    scale); codes = cast(fl32(x * scale)) with torch's nearest-even cast. amax * scale <= fp8_max
    up to one rounding, so no element can overflow here."""
    dt, fmax = F8[fmt]
    t = t.detach().float().contiguous()
    amax = t.abs().max()
    scale = (torch.tensor(fmax, dtype=torch.float32) / amax).float()
    scale_inv = (torch.tensor(1.0, dtype=torch.float32) / scale).float()
    codes = (t * scale).to(dt)
    return codes.view(torch.uint8).numpy(), np.float32(scale_inv.item()), codes.double() * float(scale_inv)


def f32_bits(t):
    return t.detach().contiguous().view(torch.int32).numpy()


def layer(k=256, n=48, **kw):
    torch.manual_seed(0)
    return ft.Fp8Linear(k, n, bias=False, recipe="te-current", **kw)


def test_forward_equals_reference_gemm_bit_for_bit():
    lin = layer(fprop="sm90-fast")
    x = torch.randn(3, 40, 256) * torch.logspace(-2, 2, 256)
    y = lin(x)
    assert y.shape == (3, 40, 48)
    xc, xs, _ = te_current_codes(x.reshape(-1, 256), "e4m3")
    wc, ws, _ = te_current_codes(lin.weight, "e4m3")
    for model in ("sm90-fast", "sm90", "fp32", "exact"):
        lin.models["fprop"] = model
        d = fp8kit.gemm(xc, wc, "e4m3", "e4m3", scale_a=xs, scale_b=ws, accum=model)
        np.testing.assert_array_equal(f32_bits(lin(x).reshape(-1, 48)), d.view(np.int32), err_msg=model)


@pytest.mark.parametrize("model", ["exact", "fp32"])
def test_exact_and_fp32_are_close_to_a_float64_matmul(model):
    lin = layer(fprop=model)
    x = torch.randn(64, 256)
    _, _, xv = te_current_codes(x, "e4m3")
    _, _, wv = te_current_codes(lin.weight, "e4m3")
    ref = xv @ wv.t()
    # fp32: K + 4 float32 roundings of sums bounded by T = |A| |B|^T (docs/gemm.md, the bounds);
    # exact: one rounding.
    t = xv.abs() @ wv.abs().t()
    k = 256 + 4 if model == "fp32" else 1
    err = (lin(x).double() - ref).abs()
    assert (err <= k * 2.0**-24 * t + 1e-30).all()
    assert err.max() > 0 or model == "exact"


def test_gradients_are_the_reference_gemms_of_dy():
    lin = layer(fprop="sm90-fast", dgrad="sm90", wgrad="fp32")
    x = (torch.randn(32, 256) * 3).requires_grad_()
    dy = torch.randn(32, 48) * 1e-3
    lin(x).backward(dy)
    gc, gs, _ = te_current_codes(dy, "e5m2")  # HYBRID: gradients in E5M2
    wtc, wts, _ = te_current_codes(lin.weight.t(), "e4m3")
    dx = fp8kit.gemm(gc, wtc, "e5m2", "e4m3", scale_a=gs, scale_b=wts, accum="sm90")
    np.testing.assert_array_equal(f32_bits(x.grad), dx.view(np.int32))
    gtc, gts, _ = te_current_codes(dy.t(), "e5m2")
    xtc, xts, _ = te_current_codes(x.t(), "e4m3")
    dw = fp8kit.gemm(gtc, xtc, "e5m2", "e4m3", scale_a=gts, scale_b=xts, accum="fp32")
    np.testing.assert_array_equal(f32_bits(lin.weight.grad), dw.view(np.int32))
    # and both are close to the float64 products of the unquantised tensors
    assert torch.allclose(x.grad.double(), dy.double() @ lin.weight.double(), rtol=0.15, atol=2e-4)


def test_fast_accumulation_loses_bits_that_fp32_keeps():
    # docs/gemm.md, crafted input 4: ones times 1.125 at K = 4096. Under the fast accumulator the
    # 14-bit aligned sum truncates every product once it passes 2^13 products' worth; the split
    # accumulator (promotion every 128) and fp32 keep the exact 4608 x scales.
    k = 4096
    lin = ft.Fp8Linear(k, 8, bias=False, recipe="te-current", fprop="sm90-fast")
    with torch.no_grad():
        lin.weight.fill_(1.125)
    x = torch.ones(4, k)
    fast = lin(x)
    lin.models["fprop"] = "fp32"
    exact = 1.125 * k
    assert torch.all(lin(x) == exact)
    lin.models["fprop"] = "sm90"
    assert torch.all(lin(x) == exact)
    rel = (exact - fast) / exact
    assert torch.all(rel > 0.01), rel


def test_torch_mode_multiplies_the_dequantised_operands():
    lin = layer(fprop="torch")
    x = torch.randn(16, 256)
    _, _, xv = te_current_codes(x, "e4m3")
    _, _, wv = te_current_codes(lin.weight, "e4m3")
    np.testing.assert_allclose(lin(x).double().detach().numpy(), (xv @ wv.t()).numpy(), rtol=1e-5, atol=1e-5)


def test_autocast_gives_the_autocast_dtype_as_transformer_engine_does():
    # TE's activation_dtype (module/base.py set_activation_dtype): the fprop output is in
    # torch.autocast's dtype, from operands quantised from their own dtypes; 'torch' multiplies the
    # dequantised operands in float32, so the result is the float32 layer's output rounded once.
    lin = layer(fprop="torch", dgrad="torch", wgrad="torch")
    x = torch.randn(16, 256, requires_grad=True)
    y32 = lin(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = lin(x)
    assert y32.dtype == torch.float32 and y.dtype == torch.bfloat16
    assert torch.equal(y.view(torch.int16), y32.to(torch.bfloat16).view(torch.int16))
    y.float().sum().backward()
    assert x.grad.dtype == torch.float32 and lin.weight.grad.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        assert lin(x).dtype == torch.float32


def test_unquantised_gemm_is_plain_linear():
    lin = layer(fprop=None)
    x = torch.randn(16, 256)
    np.testing.assert_array_equal(f32_bits(lin(x)), f32_bits(x @ lin.weight.t()))


def test_rowwise_and_block_recipes():
    torch.manual_seed(1)
    x = torch.randn(40, 256)
    lin = ft.Fp8Linear(256, 24, bias=False, recipe="torchao-rowwise", fprop="sm90")
    w = lin.weight.detach()

    # torchao rowwise (config.py ROWWISE, float8_utils.amax_to_scale): per row, scale = 448 /
    # max(amax, 1e-12) rounded down to a power of two (pow2 on)
    def rows(t):
        amax = t.abs().amax(1, keepdim=True).double().clamp(min=1e-12)
        scale = torch.exp2(torch.floor(torch.log2(448.0 / amax))).float()
        return (t * scale).to(torch.float8_e4m3fn).view(torch.uint8).numpy(), (1 / scale).reshape(-1).numpy()

    (xc, xs), (wc, ws) = rows(x), rows(w)
    d = fp8kit.gemm(xc, wc, scale_a=xs, scale_b=ws, accum="sm90")
    np.testing.assert_array_equal(f32_bits(lin(x)), d.view(np.int32))
    mx = ft.Fp8Linear(256, 24, bias=False, recipe="mxfp8", fprop="sm90")
    with pytest.raises(ValueError, match="mxfp8: the fprop GEMM"):
        mx(x)
    mx.models["fprop"] = "torch"
    ref = (
        ft.fake_quantize(x, recipe="mxfp8").double()
        @ ft.fake_quantize(mx.weight, recipe="mxfp8", role="weight").double().t()
    )
    np.testing.assert_allclose(mx(x).double().detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_swap_linears_shares_parameters():
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    w0 = model[0].weight
    names = ft.swap_linears(model, recipe="te-current", fprop="fp32", skip=["2"])
    assert names == ["0"] and isinstance(model[0], ft.Fp8Linear) and type(model[2]) is torch.nn.Linear
    assert model[0].weight is w0
    model(torch.randn(4, 64)).sum().backward()
    assert w0.grad is not None and torch.isfinite(w0.grad).all()


@pytest.mark.parametrize("recipe", ["mxfp4-ocp", "nvfp4-rowwise", "mx-ocp", "te-current"])
def test_torch_mode_operands_are_fake_quantize_values(recipe):
    # 'torch' mode's dequantised operand (codes looked up in a decode table, times the block's
    # scale_inv) has the bits of fake_quantize, whose values come from fp8kit.dequantize
    torch.manual_seed(3)
    x = torch.randn(48, 256) * torch.logspace(-3, 3, 256)
    lin = ft.Fp8Linear(256, 32, bias=False, recipe=recipe, fprop="torch")
    from fp8kit._linear import dequantised

    np.testing.assert_array_equal(
        f32_bits(dequantised(x, lin.recipe, "input", 0)), f32_bits(ft.fake_quantize(x, recipe=recipe))
    )


_ok, _why = fp8kit._fp8kit.cuda_available()
gpu = pytest.mark.skipif(
    not (_ok and torch.cuda.is_available()), reason=f"GPU test: {_why or 'torch sees no CUDA device'}"
)


@gpu
@pytest.mark.parametrize("recipe", ["nvfp4-rowwise", "nvfp4-torchao", "mxfp4", "mx-ocp", "mxfp6-e3m2"])
def test_blockscaled_operand_is_codes_times_block_scale(recipe):
    # The 'torch-blockscaled' operand against the host reference's codes and scale bytes: each
    # code's value times its block's E4M3 scale value (NVFP4) or scale_inv (MX, a power of two),
    # exact in bfloat16; the factor is the NVFP4 tensor scale in the producers' order (TE
    # dequantize_nvfp4.cuh: fl32(amax * fl32(1/2688)); torchao per_tensor_amax_to_scale:
    # fl32(amax / 2688)).
    from fp8kit._linear import blockscaled

    torch.manual_seed(5)
    x = torch.randn(40, 96) * torch.logspace(-4, 3, 96)
    r = fp8kit.recipe(recipe)
    q, f = blockscaled(x.cuda(), r, "weight", 0)
    h = fp8kit.quantize_blocks(x, recipe, "weight")
    fmt = r["roles"]["weight"]["format"]
    vals = np.asarray(fp8kit.dequantize(np.asarray(h["codes"]), fmt, dtype=np.float32))
    nvfp4 = r["rule"].startswith("nvfp4")
    block = (
        np.asarray(fp8kit.dequantize(np.asarray(h["scale_codes"]), "e4m3", dtype=np.float32))
        if nvfp4
        else np.asarray(h["scale_inv"], dtype=np.float32)
    )
    br, bc = h["block_shape"]
    full = np.repeat(np.repeat(block, br, 0), bc, 1)[: x.shape[0], : x.shape[1]]
    want = (vals * full).astype(np.float32)
    got = q.float().cpu().numpy()
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))  # exact in bfloat16
    amax = np.float32(np.asarray(h["global_amax"]).reshape(-1)[0])
    if r["rule"] == "nvfp4-te":
        want_f = np.float32(amax * np.float32(np.float32(1) / np.float32(2688)))
    elif r["rule"] == "nvfp4-torchao":
        want_f = np.float32(amax / np.float32(2688))
    else:
        want_f = np.float32(1)
    assert f.cpu().numpy().view(np.int32)[0] == np.asarray(want_f).view(np.int32)


@gpu
def test_blockscaled_gemm_is_operand_product_times_factors():
    # y = (qa @ qb^T) * fa * fb: the float32 result of torch's bfloat16 GEMM against the float64
    # product of the same operands; only the summation order differs (tolerance 1e-5 relative to
    # the row's magnitude: K = 256 products of float32 accumulation).
    from fp8kit._linear import blockscaled

    torch.manual_seed(6)
    lin = ft.Fp8Linear(256, 48, bias=False, recipe="nvfp4-rowwise", fprop="torch-blockscaled").cuda()
    x = torch.randn(64, 256, device="cuda")
    y = lin(x)
    seed = lin.seed  # the first call's seed (next_seed: seed + 8 x calls)
    qa, fa = blockscaled(x, lin.recipe, "input", seed)
    qb, fb = blockscaled(lin.weight, lin.recipe, "weight", seed + 1)
    ref = (qa.double() @ qb.double().t()) * fa.double() * fb.double()
    scale = (qa.double().abs() @ qb.double().abs().t()) * fa.double() * fb.double()
    assert torch.all((y.double() - ref).abs() <= 1e-5 * scale + 1e-30)
    with pytest.raises(ValueError, match="torch-blockscaled"):
        ft.Fp8Linear(256, 8, recipe="te-current", fprop="torch-blockscaled").cuda()(x)


@gpu
@pytest.mark.parametrize("recipe", ["nvfp4", "nvfp4-torchao"])
def test_blockscaled_bf16_output_is_the_float32_product_rounded_once_more(recipe):
    # Under bf16 autocast the output is fl32(fl32(qa @ qb^T) * fl32(fa * fb)) rounded to bfloat16:
    # the bits of the two-pass (c * f).to(bfloat16), whatever the one-pass epilogue; NaN and Inf
    # products included (a huge factor overflows some products).
    from fp8kit._linear import _mm_f32, blockscaled

    torch.manual_seed(9)
    lin = ft.Fp8Linear(256, 48, bias=False, recipe=recipe, fprop="torch-blockscaled").cuda()
    x = torch.randn(64, 256, device="cuda") * torch.logspace(-3, 4, 256, device="cuda")
    x[0, 0] = float("nan")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = lin(x)
    assert y.dtype == torch.bfloat16
    seed = lin.seed
    qa, fa = blockscaled(x, lin.recipe, "input", seed)
    qb, fb = blockscaled(lin.weight, lin.recipe, "weight", seed + 1)
    want = (_mm_f32(qa, qb.t()) * (fa * fb)).to(torch.bfloat16)
    assert torch.equal(y.view(torch.int16), want.view(torch.int16))
    # The epilogue alone on products that overflow, Inf and NaN results, subnormal and tie
    # products, lengths that are not multiples of the kernel's 4 elements a step.
    from fp8kit._linear import _times_factors

    one, big, tiny = (torch.full((1,), v, device="cuda") for v in (1.0, 3e38, 2.0**-130))
    c = torch.randn(8, 33, device="cuda") * 10
    c[0, 0], c[1, 1], c[2, 2], c[3, 3] = float("inf"), float("nan"), 0.0, -0.0
    c[4, :] = torch.tensor([1.0 + k * 2.0**-8 for k in range(33)])  # bfloat16 ties and near-ties
    for a, b in ((one, big), (big, big), (tiny, one), (fa, fb), (one, torch.zeros(1, device="cuda"))):
        for dt in (torch.bfloat16, torch.float16, torch.float32):
            for t in (c, c.reshape(-1)[:-1], c.reshape(-1)[1:]):  # odd length; not 16-byte aligned
                got = _times_factors(t.clone(), a, b, dt)
                want = (t * (a * b)).to(dt)
                assert torch.equal(
                    got.view(torch.int16 if dt != torch.float32 else torch.int32),
                    want.view(torch.int16 if dt != torch.float32 else torch.int32),
                )


@gpu
@pytest.mark.parametrize(
    "recipe,role",
    [
        ("nvfp4-rowwise", "input"),
        ("nvfp4", "grad"),
        ("nvfp4-torchao", "weight"),
        ("mxfp4", "grad"),
        ("mxfp8", "input"),
        ("mx-ocp", "weight"),
        ("mxfp6-e3m2", "input"),
        ("nvfp4", "weight"),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_blockscaled_operand_of_a_transposed_view_is_its_copys(recipe, role, dtype):
    # wgrad's dy.t() and x.t() and dgrad's weight.t() are transposed views: blockscaled reads them
    # where they lie (cuda fake_quantize_blocks_transposed, a transposed view back) where that
    # kernel takes the recipe (1 x 16 / 1 x 32 blocks of e2m1 and e4m3, f32 / bf16 inputs: the
    # nvfp4 preset's gradients round stochastically, with X^T's element indices), quantises x
    # itself and transposes the result under the nvfp4 preset's 16 x 16 weight blocks (no
    # stochastic rounding), else it quantises the contiguous copy. Either way the operand and its tensor factor are the copy's,
    # bit for bit; shapes with partial blocks along the transposed rows.
    from fp8kit._linear import blockscaled

    torch.manual_seed(8)
    r = fp8kit.recipe(recipe)
    spec = r["roles"][role]
    in_place = (dtype != "float16" and spec["block_rows"] == 1 and spec["format"] in ("e2m1", "e4m3")) or (
        spec["block_rows"] == spec["block_cols"] and spec.get("rounding", r["policy"]["rounding"]) != "stochastic"
    )
    for rows, cols in ((37, 70), (64, 128), (16, 16), (70, 33)):
        x = (torch.randn(rows, cols) * torch.logspace(-4, 3, cols)).to(getattr(torch, dtype)).cuda()
        t = x.t()  # cols x rows, not contiguous; t.t() is
        q, f = blockscaled(t, r, role, 3)
        qc, fc = blockscaled(t.contiguous(), r, role, 3)
        assert q.shape == qc.shape == t.shape
        assert q.is_contiguous() != in_place  # the kernel's result is a transposed view of x's layout
        assert torch.equal(q.contiguous().view(torch.int16), qc.view(torch.int16))
        assert torch.equal(f.view(torch.int32), fc.view(torch.int32))
