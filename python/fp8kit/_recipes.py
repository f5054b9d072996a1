"""Statistics of a cast, scaling recipes (presets, recipe files, dicts) and the stateful recipes."""

import json
import os

import numpy as np

from . import _device, _fp8kit
from ._dtypes import as_bits, wide_name


def _recipe_arg(r):
    """(text, is_json) for the C++ side: a preset name or file path, or a dict as JSON text."""
    if isinstance(r, dict):
        return json.dumps(r), True
    if isinstance(r, (str, os.PathLike)):
        return os.fspath(r), False
    raise ValueError(f"recipe: expected a preset name, a JSON file path or a dict, got {type(r).__name__}")


def presets():
    """Names of the scaling recipe presets, in documentation order."""
    return list(_fp8kit.presets())


def recipe(name_or_path):
    """A recipe (preset name, JSON file path, or dict) as a dict with every field."""
    return json.loads(_fp8kit.recipe_json(*_recipe_arg(name_or_path)))


def recipe_scale(r, role, amax):
    """(scale, scale_inv) as float32 values for one amax under a non-stateful recipe's rule."""
    return _fp8kit.recipe_scale(*_recipe_arg(r), role, float(amax))


def recipe_policy(r, role="input"):
    """The policy (dict: 'rounding', 'overflow', 'nan') a tensor of `role` is cast with under
    recipe r: the recipe-wide 'policy' with the role's own 'rounding' where the recipe gives one
    (the 'nvfp4' preset rounds gradients stochastically, as TransformerEngine's NVFP4BlockScaling)."""
    return dict(_fp8kit.recipe_policy(*_recipe_arg(r), role))


def amax(x, stream=None):
    """max |x| as TransformerEngine reduces it (NaN ignored, Inf -> Inf), as a float32 value.
    A GPU array runs the CUDA kernel (and waits for it)."""
    if _device.is_device(x):
        return _device.amax(x, stream)
    a = _device.host_view(x)
    wide = wide_name(a.dtype, "x")
    return _fp8kit.amax(as_bits(a, wide), wide)


def quantize_blocks(x, recipe, role="input", packed=False, seed=0, stream=None):
    """Codes and block scales of x (2-D) under a block recipe (e.g. 'nvfp4', 'mxfp4', 'mxfp8').

    Returns a dict: 'codes' (uint8, one code per byte, x's shape; with packed=True, e2m1 only,
    two codes per byte along each row, element 2i in the low nibble as torch.float4_e2m1fn_x2
    and TransformerEngine store them: shape (rows, cols/2)), 'scale_codes' (uint8 per block: E8M0
    for MX recipes, E4M3 for NVFP4), 'scale' (float32 factor the block's elements are multiplied
    by), 'scale_inv' (float32 dequantisation factor), 'global_amax', 'block_shape', 'grid'.
    Stochastic rounding (the role's rounding, recipe_policy(recipe, role), is 'stochastic', as for
    the 'nvfp4' preset's 'grad'): element i in C order (of the codes returned) draws
    stochastic_bits(seed, i).
    A role whose recipe entry has columnwise_rht (the 'nvfp4' preset's 'input' and 'grad': TE
    quantises them for the wgrad GEMM after its random Hadamard transform) gives TE's column-wise
    copy: codes of shape (cols, rows) of te_rht16(x), scales along its rows, 'global_amax' after
    the transform, 'columnwise_rht': True; x's row count must be a multiple of 16. The row-wise
    copies are the 'nvfp4-rowwise' preset.
    A GPU array runs the CUDA kernels, asynchronously on the array's stream: TE's 1x128 / 128x128
    blocks and FP8 MX blocks of 32, unpacked, return {'codes', 'scale_inv'} (TE blocks) or
    {'codes', 'scale_codes'} (MX, E8M0) from their dedicated kernels; every other block recipe
    (NVFP4, MXFP4, MXFP6, packed codes, ...) returns the host result's dict with device arrays
    ('global_amax' a 1-element array), from cuda::quantize_blocks. Equal, entry by entry, to the
    host result.
    """
    if _device.is_device(x):
        r = globals()["recipe"](recipe)
        role = _fp8kit.recipe_slot(role)
        try:
            _device.block_kind(r, role)
            dedicated = not packed
        except ValueError:
            dedicated = False
        if not dedicated:
            return _device.quantize_recipe_blocks(x, _recipe_arg(recipe), role, packed, seed, stream)
        pol = recipe_policy(r, role)
        codes, scales = _device.quantize_blocks(x, r, role, pol["rounding"], pol["overflow"], pol["nan"], seed, stream)
        return {"codes": codes, ("scale_codes" if r["rule"].startswith("mx") else "scale_inv"): scales}
    a = _device.host_view(x)
    wide = wide_name(a.dtype, "x")
    return _fp8kit.quantize_blocks(
        as_bits(a, wide), wide, *_recipe_arg(recipe), _fp8kit.recipe_slot(role), bool(packed), int(seed)
    )


def te_rht16(x, random_signs=True):
    """TransformerEngine NVFP4's random Hadamard transform of x's column-wise operand.

    x: 2-D (rows, cols), float32 / float16 / bfloat16, rows a multiple of 16. Returns x.T
    (cols, rows) in x's dtype with every 16 consecutive elements of a row multiplied by
    diag(s) @ H16 / 4 (H16 Sylvester, s TE's fixed sign vector; all +1 with random_signs=False),
    each output the exact sum rounded once (TransformerEngine custom_recipes/quantization_nvfp4.py
    NVFP4QuantizerRef._apply_rht; lib convert/hadamard.hpp says where torch's float32
    accumulation can differ).
    """
    a = np.asarray(x)
    wide = wide_name(a.dtype, "x")
    return _fp8kit.te_rht16_bits(as_bits(a, wide), wide, bool(random_signs)).view(a.dtype)


def stats(
    x,
    format=None,
    profile=None,
    rounding=None,
    overflow=None,
    nan=None,
    scale=1.0,
    scale_inv=None,
    recipe=None,
    role="input",
    seed=0,
):
    """Statistics (docs/statistics.md) of x cast to `format` with `scale`, as a dict.

    With recipe= (preset name, file or dict) the format, policy and scale come from the recipe for
    `role` ('input', 'weight', 'grad'): tensorwise recipes scale with recipe_scale(amax(x));
    row/block recipes (x must be 2-D) scale each block, and the dict also holds the block scales:
    'block_shape' (rows, cols one scale covers), 'grid' (blocks down and across, edge blocks
    partial) and 'scale_inv', float32 of the grid's shape (one value per block); 'columnwise_rht'
    True: the statistics are of TE's column-wise copy after its RHT (quantize_blocks), for the
    'nvfp4' preset's inputs and gradients.
    format= or profile=/rounding=/overflow=/nan= given with a recipe override its choices.
    A GPU array runs the CUDA statistics kernels (block recipes: lib's block statistics per tile on
    the GPU, NVFP4's global amax and TE's column-wise RHT copy included; 'scale_inv' a device array).
    """
    if _device.is_device(x):
        return _stats_device(x, format, profile, rounding, overflow, nan, scale, scale_inv, recipe, role, seed)
    a = _device.host_view(x)
    wide = wide_name(a.dtype, "x")
    bits = as_bits(a, wide)
    if recipe is not None:
        role = _fp8kit.recipe_slot(role)
        r = globals()["recipe"](recipe)
        spec = r["roles"][role]
        if format is not None:
            spec["format"] = format
        if profile is None and rounding is None and overflow is None and nan is None:
            pol = recipe_policy(r, role)
            rounding, overflow, nan = pol["rounding"], pol["overflow"], pol["nan"]
        if spec["granularity"] != "tensor":
            d = _fp8kit.block_stats(bits, wide, json.dumps(r), True, role)
            d["recipe"] = r["name"]
            return d
        format = spec["format"]
        scale, scale_inv = recipe_scale(r, role, amax(a))
        d = _fp8kit.stats(
            bits, wide, format, profile, rounding, overflow, nan, float(scale), float(scale_inv), int(seed)
        )
        d["recipe"] = r["name"]
        return d
    if format is None:
        raise ValueError("format: name the format to cast to (or a recipe=)")
    return _fp8kit.stats(
        bits,
        wide,
        format,
        profile,
        rounding,
        overflow,
        nan,
        float(scale),
        0.0 if scale_inv is None else float(scale_inv),
        int(seed),
    )


def _stats_device(x, format, profile, rounding, overflow, nan, scale, scale_inv, recipe_, role, seed):
    name = None
    if recipe_ is not None:
        role = _fp8kit.recipe_slot(role)
        r = recipe(recipe_)
        spec, name = r["roles"][role], r["name"]
        if spec["granularity"] != "tensor":  # block statistics on the GPU, as the host's (below)
            if format is not None:
                spec["format"] = format
            d = _device.block_stats(x, r, role)
            d["recipe"] = name
            return d
        format = spec["format"] if format is None else format
        if profile is None and rounding is None and overflow is None and nan is None:
            pol = recipe_policy(r, role)
            rounding, overflow, nan = pol["rounding"], pol["overflow"], pol["nan"]
        scale, scale_inv = recipe_scale(r, role, _device.amax(x))
    if format is None:
        raise ValueError("format: name the format to cast to (or a recipe=)")
    d = _device.stats(x, format, profile, rounding, overflow, nan, scale, 0.0 if scale_inv is None else scale_inv, seed)
    if name is not None:
        d["recipe"] = name
    return d


class DelayedScaling:
    """TransformerEngine DelayedScaling (bulk update): `scale` is the scale this step casts with;
    record(amax) stores the step's amax and computes the next step's scale. run(amaxes) gives the
    scale of every step of a trace."""

    def __init__(self, format="e4m3", history_len=1024, algo="max", margin=0, fmax=None):
        fmax = _fp8kit.fp8_max(format) if fmax is None else fmax
        self._d = _fp8kit.DelayedScaling(float(fmax), int(history_len), algo, int(margin))

    @property
    def scale(self):
        return self._d.scale

    @property
    def history(self):
        return self._d.history

    @property
    def steps(self):
        return self._d.steps

    def record(self, amax):
        self._d.record(float(amax))

    def run(self, amaxes):
        return self._d.run(np.asarray(amaxes, dtype=np.float32))


class MsampScaling:
    """MS-AMP windowed scaling: scale_for_step(amax) is what the step casts with (in-time scaling
    until the window is full), record(amax) moves to the next step."""

    def __init__(self, format="e4m3", window=16, margin=0, fmax=None):
        fmax = _fp8kit.fp8_max(format) if fmax is None else fmax
        self._m = _fp8kit.MsampScaling(float(fmax), int(window), int(margin))

    in_time = property(lambda self: self._m.in_time)
    scale = property(lambda self: self._m.scale)
    counter = property(lambda self: self._m.counter)
    window = property(lambda self: self._m.window)

    def scale_for_step(self, amax):
        return self._m.scale_for_step(float(amax))

    def record(self, amax):
        self._m.record(float(amax))
