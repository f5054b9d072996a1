"""Fake-quantised linear layers whose three GEMMs run under a chosen accumulation model
(issue 26 item 6): fp8kit.torch.Fp8Linear and fp8kit.torch.swap_linears.

Each GEMM of a linear layer, y = x W^T (fprop), dx = dy W (dgrad) and dW = dy^T x (wgrad), takes
its two operands quantised under the recipe (input and weight roles for fprop; grad and weight
for dgrad; grad and input for wgrad, as TransformerEngine assigns formats: E5M2 gradients under
the HYBRID recipes) and is evaluated as fp8kit's reference GEMM D = (A . B^T) * (scale_a (x)
scale_b) (docs/gemm.md) under the accumulation model named for that GEMM. Operands are quantised
and GEMMs computed on the host (a CUDA tensor is copied to the host and the result copied back).
This file only moves tensors: codes and scales come from fp8kit.quantize / quantize_blocks and
recipe_scale, the GEMM from fp8kit.gemm.
"""

import copy

import numpy as np
import torch

import fp8kit

GEMMS = ("fprop", "dgrad", "wgrad")
# Roles of (A, B) in D = A . B^T for each GEMM.
ROLES = {"fprop": ("input", "weight"), "dgrad": ("grad", "weight"), "wgrad": ("grad", "input")}


_TABLES = {}


def _decode_table(fmt):
    """float32 values of the 256 codes of fmt, as fp8kit.dequantize decodes them (exactly)."""
    if fmt not in _TABLES:
        for width in (8, 6, 4):  # FP6 / FP4 codes are one per byte, below 2^6 / 2^4 (the table repeats)
            try:
                v = fp8kit.dequantize(
                    np.arange(256, dtype=np.uint8) & np.uint8((1 << width) - 1), fmt, dtype=np.float32
                )
                break
            except ValueError:
                continue
        _TABLES[fmt] = torch.from_numpy(np.asarray(v).copy())
    return _TABLES[fmt]


class Operand:
    """One GEMM operand (rows x K) quantised under a recipe role: codes (uint8 numpy), format,
    scale_inv (a float32 number for tensorwise scales, else the grid of block scale_inv) and the
    block shape one scale covers."""

    def __init__(self, t, r, role, seed):
        spec = r["roles"][role]
        self.format, self.shape = spec["format"], tuple(t.shape)
        h = t.detach().cpu().contiguous()
        if spec["granularity"] == "tensor":
            pol = r["policy"]
            scale, scale_inv = fp8kit.recipe_scale(r, role, fp8kit.amax(h))
            self.codes = fp8kit.quantize(
                h,
                self.format,
                rounding=pol["rounding"],
                overflow=pol["overflow"],
                nan=pol["nan"],
                scale=scale,
                seed=seed,
            ).numpy()
            self.scale_inv, self.block = np.float32(scale_inv), self.shape
        else:
            # The row-wise copy of this operand: the GEMM's K runs along its rows. TE's random
            # Hadamard transform (nvfp4's column-wise copies) is not modelled here.
            r = copy.deepcopy(r)
            r["roles"][role]["columnwise_rht"] = False
            d = fp8kit.quantize_blocks(h, r, role, seed=seed)
            self.codes, self.scale_inv = np.asarray(d["codes"]), np.asarray(d["scale_inv"], dtype=np.float32)
            self.block = tuple(d["block_shape"])

    def values(self, device="cpu"):
        """The dequantised operand in float32 on `device`: each code's exact value (fp8kit's
        decode of all 256 codes, looked up) times its block's float32 scale_inv (one float32
        multiply, exact unless it leaves float32's range). Only codes and scales are copied."""
        lut = _decode_table(self.format).to(device)
        v = lut[torch.from_numpy(self.codes).to(device).long()]
        s = torch.from_numpy(np.atleast_2d(self.scale_inv)).to(device)
        br, bc = self.block
        full = s.repeat_interleave(br, 0)[: self.shape[0]].repeat_interleave(bc, 1)[:, : self.shape[1]]
        return v * full


def gemm_scales(a, b, recipe_name, gemm):
    """scale_a, scale_b in fp8kit.gemm's layouts, or a ValueError naming what it cannot take."""
    (m, k), n = a.shape, b.shape[0]
    if a.block == a.shape and b.block == b.shape:
        return a.scale_inv, b.scale_inv
    if a.block == (1, k) and b.block == (1, k):
        return a.scale_inv.reshape(m), b.scale_inv.reshape(n)
    if a.block == (1, 128) and b.block == (128, 128):
        return a.scale_inv, b.scale_inv
    raise ValueError(
        f"recipe {recipe_name}: the {gemm} GEMM's operands have blocks {a.block} and {b.block}; "
        "fp8kit.gemm takes tensorwise, rowwise, or 1x128 (A) x 128x128 (B) scales "
        f"(use {gemm}='torch' to multiply the dequantised operands, or None to leave it unquantised)"
    )


def dequantised(t, r, role, seed):
    """t quantised under recipe r's role and dequantised to float32 on t's device (the values
    Operand.values gives). CUDA tensors run fp8kit's kernels (fake_quantize's path: tensorwise
    casts, TE 1x128 / 128x128 and FP8 MX blocks through their dedicated kernels, every other block
    recipe, NVFP4 and MX FP4 / FP6 included, through cuda::quantize_blocks); a module without the
    kernels, and CPU tensors, take the host reference on a host copy."""
    if t.is_cuda:
        from .torch import _fake_quantize_values

        try:  # ValueError / RuntimeError: a module without the kernels, or a format without one
            return _fake_quantize_values(t.float(), copy.deepcopy(r), None, role, None, None, None, None, 1.0, seed)
        except (ValueError, RuntimeError):
            pass
    return Operand(t, r, role, seed).values(t.device)


_SPECS = {}


def _block_spec(r, role, cols):
    """The CUDA block spec of recipe dict r's role (row-wise: no RHT) for rows of `cols`, made at
    its first use per (recipe dict, role, cols); the dict is held so that its id stays its own."""
    key = (id(r), role, cols)
    hit = _SPECS.get(key)
    if hit is None or hit[0] is not r:
        rr = copy.deepcopy(r)
        rr["roles"][role]["columnwise_rht"] = False
        spec = fp8kit._device.fake_quant_spec(fp8kit._recipes._recipe_arg(rr), role, cols)
        hit = _SPECS[key] = (r, spec)
    return hit[1]


def blockscaled(t, r, role, seed):
    """t (2-D, CUDA) as a block-scaled GEMM takes it: (operand, factor), the operand each code
    times its block's scale in bfloat16 (exact under the NVFP4 and MX recipes) and factor the
    tensor's float32 factor as a 1-element device tensor (NVFP4's per-tensor scale; 1 for MX),
    from fp8kit's kernel in one call (cuda/fake_quantize.hpp fake_quantize_blocks,
    numerics/block_factor.hpp). A transposed view (t.t() contiguous) is read where it lies, under
    1 x 16 / 1 x 32 blocks by fake_quantize_blocks_transposed and under 16 x 16 blocks without
    stochastic rounding as t.t()'s operand transposed; the operand is then a transposed view with
    the contiguous copy's bits. A ValueError names what it cannot take."""
    spec = r["roles"][role]
    shape = (spec["block_rows"], spec["block_cols"])
    if not t.is_cuda or r["rule"] not in _BLOCKSCALED_RULES or shape not in fp8kit._device.FUSED_BLOCK_SHAPES:
        raise ValueError(
            f"recipe {r['name']}: the 'torch-blockscaled' GEMM takes the NVFP4 and MX recipes of the GPU kernels "
            "(rules nvfp4-te, nvfp4-torchao, mx-roundup, mx-ocp-floor) on CUDA tensors; use 'torch'"
        )
    x = t.detach()
    if not x.is_contiguous() and x.t().is_contiguous() and _transpose_symmetric(r, role, shape):
        # 16 x 16 blocks under a rounding that reads no element index (TE's NVFP4 weights for
        # dgrad's weight.t()): the blocks of X^T are X's blocks transposed (both grids start at
        # element (0, 0); the partial blocks lie at the far edges of each), the block amax, the
        # scale and the global amax are those of the same elements, and each element is encoded
        # from its value and its block's scale alone. So quantising X where it lies and
        # transposing the result gives X^T's operand bit for bit, with no copy.
        y, f = fp8kit._device.fake_quantize_blocks(
            x.t(), _block_spec(r, role, x.shape[0]), seed, "bf16", tensor_factor=True
        )
        return y.t(), f
    if not x.is_contiguous() and x.t().is_contiguous() and shape[0] == 1 and x.dtype != torch.float16:
        # A transposed view (wgrad's dy.t() and x.t(), dgrad's weight.t()): the kernel reads x.t()
        # where it lies and returns the transpose of what x.contiguous() gives, bit for bit
        # (fake_quantize_blocks_transposed); the GEMM takes the transposed view without a copy.
        try:
            y, f = fp8kit._device.fake_quantize_blocks_transposed(
                x.t(), _block_spec(r, role, x.shape[1]), seed, tensor_factor=True
            )
            return y.t(), f
        except ValueError:  # a format or rounding without that kernel: the copy, as below
            pass
    x = x.contiguous()
    return fp8kit._device.fake_quantize_blocks(x, _block_spec(r, role, x.shape[1]), seed, "bf16", tensor_factor=True)


def _transpose_symmetric(r, role, shape):
    """Whether role's operand of X^T is that of X transposed: square blocks and a rounding that
    draws no random bits (stochastic rounding reads each element's index, which transposing
    changes)."""
    rounding = r["roles"][role].get("rounding", r["policy"]["rounding"])
    return shape[0] == shape[1] and rounding != "stochastic"


_BLOCKSCALED_RULES = ("nvfp4-te", "nvfp4-torchao", "mx-roundup", "mx-ocp-floor")
# The rules whose tensor factor is 1 (numerics/block_factor.hpp rule_tensor_factor: every rule but
# NVFP4's two-level ones).
_UNIT_TENSOR_FACTOR = ("mx-roundup", "mx-ocp-floor")


def _mm_f32(a, b):
    """a @ b of bfloat16 operands with a float32 result: torch.mm's out_dtype (CUDA, torch >= 2.8),
    else the float32 product of the same (exactly widened) operands."""
    try:
        return torch.mm(a, b, out_dtype=torch.float32)
    except TypeError:  # a torch without the overload
        return a.float() @ b.float()


def _times_factors(c, fa, fb, out_dtype):
    """(c * (fa * fb)).to(out_dtype), bit for bit, c the GEMM's float32 result: bfloat16 on CUDA
    in one pass (fp8kit's kernel: c read once, the factors' product formed on the device), float32
    in place, anything else (or a module without the kernel) as torch computes it."""
    if out_dtype == torch.float32:
        return c.mul_(fa * fb)
    if out_dtype == torch.bfloat16 and c.is_cuda and hasattr(fp8kit._fp8kit, "cuda_times_tensor_factors_bf16"):
        return fp8kit._device.times_tensor_factors_bf16(c, fa, fb)
    return (c * (fa * fb)).to(out_dtype)


def run_gemm(a, b, recipe, model, gemm, seed, out_dtype):
    """a . b^T (a: M x K, b: N x K) under `model`: an fp8kit accumulation model name (reference
    GEMM on the codes), 'torch' (the dequantised operands multiplied by torch in float32 on a's
    device: the quantisation without a modelled accumulator), 'torch-blockscaled' (NVFP4 and MX on
    CUDA: the block-scaled operands in bfloat16 multiplied by torch with a float32 result, times
    the two tensor factors, as cuBLASLt's block-scaled GEMMs apply them) or None (no quantisation:
    torch in out_dtype)."""
    with torch.autocast(device_type=a.device.type, enabled=False):
        if model is None:
            return a.to(out_dtype) @ b.to(out_dtype).t()
        ra, rb = ROLES[gemm]
        if model == "torch":
            return (dequantised(a, recipe, ra, seed) @ dequantised(b, recipe, rb, seed + 1).t()).to(out_dtype)
        if model == "torch-blockscaled":
            (qa, fa), (qb, fb) = blockscaled(a, recipe, ra, seed), blockscaled(b, recipe, rb, seed + 1)
            if recipe["rule"] in _UNIT_TENSOR_FACTOR and out_dtype == torch.bfloat16:
                return qa @ qb.t()  # both factors are 1: the GEMM's float32 sums rounded once to bfloat16
            return _times_factors(_mm_f32(qa, qb.t()), fa, fb, out_dtype)
        qa, qb = Operand(a, recipe, ra, seed), Operand(b, recipe, rb, seed + 1)
        sa, sb = gemm_scales(qa, qb, recipe["name"], gemm)
        bf16 = out_dtype == torch.bfloat16
        d = fp8kit.gemm(
            qa.codes,
            qb.codes,
            qa.format,
            qb.format,
            scale_a=sa,
            scale_b=sb,
            accum=model,
            out_dtype="bf16" if bf16 else "f32",
        )
        t = torch.from_numpy(d.view(np.int16)).view(torch.bfloat16) if bf16 else torch.from_numpy(d)
        return t.to(out_dtype).to(a.device)


def _activation_dtype(x):
    """The dtype of the layer's output (and of dgrad's): TransformerEngine's activation_dtype
    (transformer_engine/pytorch/module/base.py set_activation_dtype: torch.autocast's dtype inside
    an autocast region, else the input's; module/linear.py gives the fprop GEMM out_dtype=
    activation_dtype), which is also what nn.Linear returns under autocast. The operands are
    quantised from their own dtypes, as TE's quantizers read them (input_quantizer(inputmat) on the
    input as given, the weight from its parameter dtype)."""
    dev = x.device.type
    if torch.is_autocast_enabled(dev):
        return torch.get_autocast_dtype(dev)
    return x.dtype


class _Fp8LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        x2 = x.reshape(-1, x.shape[-1])
        seed = layer.next_seed()
        y = run_gemm(x2, weight, layer.recipe, layer.models["fprop"], "fprop", seed, _activation_dtype(x))
        if bias is not None:
            y = y + bias.to(y.dtype)
        ctx.save_for_backward(x2, weight)
        ctx.layer, ctx.seed, ctx.has_bias, ctx.xshape = layer, seed, bias is not None, x.shape
        return y.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, dy):
        x2, weight = ctx.saved_tensors
        layer, seed = ctx.layer, ctx.seed + 2
        dy2 = dy.reshape(-1, dy.shape[-1])
        dx = dw = db = None
        if ctx.needs_input_grad[0]:  # dx = dy . W: A = dy (M x N), B = W^T (K x N)
            dx = run_gemm(dy2, weight.t(), layer.recipe, layer.models["dgrad"], "dgrad", seed, dy.dtype)
            dx = dx.reshape(ctx.xshape)
        if ctx.needs_input_grad[1]:  # dW = dy^T . x: A = dy^T (N x M), B = x^T (K x M)
            dw = run_gemm(dy2.t(), x2.t(), layer.recipe, layer.models["wgrad"], "wgrad", seed + 2, weight.dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy2.sum(0).to(dy.dtype)
        return dx, dw, db, None


class Fp8Linear(torch.nn.Linear):
    """nn.Linear whose fprop, dgrad and wgrad GEMMs take operands quantised under `recipe` and run
    under fp8kit accumulation models (docs/torch.md, docs/gemm.md).

    fprop / dgrad / wgrad: an `--accum` name ('exact', 'fp32', 'sm90', 'sm90-fast',
    'sm90-splitk:N', 'deepseek-128', 'h100tc', 'aligned:...'), 'torch' (dequantised operands,
    torch's float32 matmul on the tensor's device: block recipes fp8kit.gemm cannot take, such as
    MX and NVFP4), 'torch-blockscaled' (NVFP4 and MX recipes on CUDA tensors: each operand as codes
    times its block scale, exact in bfloat16, multiplied by torch's bfloat16 GEMM with a float32
    result, then times the per-tensor factors: the fast path, as a block-scaled GEMM computes it)
    or None (that GEMM unquantised). Defaults: sm90-fast forward and
    the split accumulator (sm90) for the gradients, TransformerEngine's choice for current scaling.
    Stochastic rounding draws fresh bits per call (seed + 8 x call count)."""

    def __init__(
        self,
        in_features,
        out_features,
        bias=True,
        recipe="te-current",
        fprop="sm90-fast",
        dgrad="sm90",
        wgrad="sm90",
        seed=0,
        device=None,
        dtype=None,
    ):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.recipe = fp8kit.recipe(recipe)
        self.models = {"fprop": fprop, "dgrad": dgrad, "wgrad": wgrad}
        self.seed, self.calls = int(seed), 0

    def next_seed(self):
        s = self.seed + 8 * self.calls
        self.calls += 1
        return s

    def forward(self, x):
        return _Fp8LinearFn.apply(x, self.weight, self.bias, self)

    def extra_repr(self):
        return (
            super().extra_repr()
            + f", recipe={self.recipe['name']}, "
            + ", ".join(f"{g}={self.models[g]}" for g in GEMMS)
        )

    @classmethod
    def from_linear(cls, lin, **kw):
        """An Fp8Linear sharing lin's weight and bias parameters (optimizer state stays valid)."""
        new = cls(lin.in_features, lin.out_features, bias=lin.bias is not None, device="meta", **kw)
        new.weight, new.bias = lin.weight, lin.bias
        return new


def swap_linears(model, recipe="te-current", fprop="sm90-fast", dgrad="sm90", wgrad="sm90", skip=(), seed=0):
    """Replaces every nn.Linear of `model` (in place, sharing the parameters) by an Fp8Linear;
    modules whose qualified name matches an fnmatch pattern of `skip` stay. Returns the names
    replaced. Each layer gets its own seed (seed + 1000 x its index)."""
    import fnmatch

    names = []
    for name, mod in list(model.named_modules()):
        for child_name, child in list(mod.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if type(child) is torch.nn.Linear and not any(fnmatch.fnmatchcase(full, p) for p in skip):
                setattr(
                    mod,
                    child_name,
                    Fp8Linear.from_linear(
                        child, recipe=recipe, fprop=fprop, dgrad=dgrad, wgrad=wgrad, seed=seed + 1000 * len(names)
                    ),
                )
                names.append(full)
    return names
