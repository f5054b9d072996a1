"""Device arrays (torch CUDA tensors, CuPy, JAX, anything with __cuda_array_interface__) for the
array functions: their pointers go to the CUDA kernels (fp8kit._fp8kit.cuda_*, the bindings of
cuda/include/fp8kit/cuda/kernels.hpp) without a copy, on the caller's stream, and results come
back as arrays of the same framework. Host arrays of any framework (numpy, torch CPU, DLPack) are
viewed as numpy without a copy and run the CPU code. No numerics here: shapes, dtypes, pointers."""

import math

import numpy as np

from . import _fp8kit

# Element types the kernels read, by __cuda_array_interface__ typestr and by torch dtype name.
_TYPESTR_WIDE = {"<f4": "f32", "<f2": "f16", "<V2": "bf16"}
_TORCH_WIDE = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16"}
TORCH_DTYPE_WIDE = _TORCH_WIDE
_WIDE_TORCH = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_WIDE_NP = {"f32": "<f4", "f16": "<f2"}


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def is_device(x):
    """True when x lives in GPU memory (a CUDA torch tensor, a CuPy or JAX GPU array...)."""
    if _is_torch(x):
        return x.is_cuda
    if hasattr(x, "__cuda_array_interface__"):
        return True
    dev = getattr(x, "__dlpack_device__", None)
    return dev is not None and int(dev()[0]) in (2, 13)  # kDLCUDA, kDLCUDAManaged


_cuda_ok = False


def require_cuda():
    global _cuda_ok
    if _cuda_ok:  # asked once per process: a device that was there stays there
        return
    ok, why = _fp8kit.cuda_available()
    if not ok:
        raise RuntimeError(f"fp8kit: a GPU array was passed but {why}")
    _cuda_ok = True


class DeviceArray:
    """A device array's pointer, shape, element type (wide name or 'u1'), stream and framework,
    with `empty` making an output of the same framework on the same device."""

    def __init__(self, x, stream=None):
        require_cuda()
        self.x = x
        if _is_torch(x):
            import torch

            if not x.is_contiguous():
                raise ValueError("x: device tensor must be contiguous")
            self.kind, self.ptr, self.shape = "torch", x.data_ptr(), tuple(x.shape)
            self.wide = _TORCH_WIDE.get(str(x.dtype), "u1" if x.dtype == torch.uint8 else str(x.dtype))
            if stream is None:  # torch's accessor of the raw handle where it has one (no Stream object per call)
                get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
                stream = get(x.device.index) if get is not None else torch.cuda.current_stream(x.device).cuda_stream
            self.stream = stream
            return
        cai = getattr(x, "__cuda_array_interface__", None)
        mod = type(x).__module__
        if cai is None and hasattr(x, "__dlpack__"):
            # DLPack only (JAX, others): CuPy takes the capsule without a copy and gives the interface.
            import cupy

            if mod.startswith("jax"):
                x.block_until_ready()
            self.keep = cupy.from_dlpack(x)
            cai = self.keep.__cuda_array_interface__
        if cai is None:
            raise ValueError(f"x: {type(x).__name__} is on a GPU but has neither __cuda_array_interface__ nor DLPack")
        if cai.get("strides") is not None and cai["strides"] != _c_strides(cai):
            raise ValueError("x: device array must be C-contiguous")
        self.kind = "cupy" if mod.startswith("cupy") else "jax" if mod.startswith("jax") else "cai"
        self.ptr, self.shape = cai["data"][0], tuple(cai["shape"])
        self.wide = _TYPESTR_WIDE.get(cai["typestr"], "u1" if cai["typestr"] == "|u1" else cai["typestr"])
        if self.kind == "jax":
            x.block_until_ready()  # JAX's own streams: the buffer is complete, then the default stream
        s = cai.get("stream")
        self.stream = stream if stream is not None else (0 if s in (None, 1) else s)

    @property
    def size(self):
        return math.prod(self.shape)

    def empty(self, shape, wide):
        """An output of `shape` with element type `wide` ('u1', 'f32', 'f16', 'bf16')."""
        if self.kind == "torch":
            import torch

            dt = torch.uint8 if wide == "u1" else getattr(torch, _WIDE_TORCH[wide])
            return torch.empty(shape, dtype=dt, device=self.x.device)
        import cupy

        if wide == "bf16":
            if self.kind != "jax":
                raise ValueError("dtype: CuPy has no bfloat16: bfloat16 outputs are made for torch and JAX only")
            return cupy.empty(shape, dtype=np.uint16)  # bits; wrap() gives JAX's bfloat16 view
        return cupy.empty(shape, dtype=np.uint8 if wide == "u1" else _WIDE_NP[wide])

    def wrap(self, out, wide=None):
        """out (made by empty) as this array's framework; JAX gets it through DLPack after the
        stream finished, since JAX does not order its work after our stream."""
        if self.kind == "jax":
            import cupy
            import jax

            cupy.cuda.Stream.null.synchronize() if self.stream == 0 else cupy.cuda.runtime.streamSynchronize(
                self.stream
            )
            y = jax.dlpack.from_dlpack(out)
            if wide == "bf16":
                y = jax.lax.bitcast_convert_type(y, jax.numpy.bfloat16)
            return y
        return out


def _c_strides(cai):
    item = int(cai["typestr"][2:])
    strides, acc = [], item
    for d in reversed(cai["shape"]):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def out_ptr(a):
    return a.data_ptr() if hasattr(a, "data_ptr") else a.__cuda_array_interface__["data"][0]


def host_view(x):
    """x as a numpy array without a copy where possible: torch CPU tensors (bfloat16 too, as
    ml_dtypes.bfloat16), DLPack producers, anything np.asarray takes."""
    if _is_torch(x):
        import torch

        t = x.detach()
        if t.dtype == torch.bfloat16:
            import ml_dtypes

            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()
    return np.asarray(x)


def host_like(x, a):
    """A numpy result `a` as the type of the host input x (torch CPU tensor for a torch input)."""
    if _is_torch(x):
        import torch

        if a.dtype.name == "bfloat16":
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(a))
    return a


# ---- the array functions on device arrays (the public functions call these for GPU inputs) ----


def _input(x, stream):
    d = DeviceArray(x, stream)
    if d.wide not in ("f32", "f16", "bf16"):
        raise ValueError(f"x: device arrays of float32, float16 or bfloat16 expected, got {d.wide}")
    return d


def quantize(x, format, profile, rounding, overflow, nan, scale, seed, index_offset, stream=None):
    d = _input(x, stream)
    out = d.empty(d.shape, "u1")
    _fp8kit.cuda_quantize(
        d.ptr,
        d.wide,
        out_ptr(out),
        d.size,
        format,
        profile,
        rounding,
        overflow,
        nan,
        float(scale),
        int(seed),
        int(index_offset),
        d.stream,
    )
    return d.wrap(out)


def dequantize(codes, format, wide, scale_inv, stream=None):
    d = DeviceArray(codes, stream)
    if d.wide != "u1":
        raise ValueError("codes: device array of uint8 codes expected")
    out = d.empty(d.shape, wide)
    _fp8kit.cuda_dequantize(d.ptr, format, out_ptr(out), wide, d.size, float(scale_inv), d.stream)
    return d.wrap(out, wide)


def amax_device(x, stream=None):
    """amax as a one-element float32 device array (no synchronisation)."""
    d = _input(x, stream)
    out = d.empty((1,), "f32")
    _fp8kit.cuda_amax(d.ptr, d.wide, d.size, out_ptr(out), d.stream)
    return d, out


def amax(x, stream=None):
    d, out = amax_device(x, stream)
    if d.kind == "torch":
        return float(out.item())
    import cupy

    return float(cupy.asnumpy(out)[0])


def stats(x, format, profile, rounding, overflow, nan, scale, scale_inv, seed, stream=None):
    d = _input(x, stream)
    return _fp8kit.cuda_stats(
        d.ptr,
        d.wide,
        d.size,
        format,
        profile,
        rounding,
        overflow,
        nan,
        float(scale),
        float(scale_inv),
        int(seed),
        d.stream,
    )


def block_stats(x, r, role, stream=None):
    """fp8kit.stats(device array, recipe=<block recipe dict r>): the dict the host gives, from the
    GPU (cuda::block_statistics_async; NVFP4's global amax and TE's column-wise RHT copy on the
    device too); 'scale_inv' is a device array of the grid's shape. A ValueError naming the recipe
    where the GPU has no block statistics (a format without kernels)."""
    import json

    d = _input(x, stream)
    if len(d.shape) != 2:
        raise ValueError(f"x: a 2-D array is needed for block statistics, got {len(d.shape)} dimensions")
    rows, cols = d.shape
    plan = _fp8kit.cuda_block_stats_plan(json.dumps(r), True, role, d.wide, cols)
    if plan is None:
        raise ValueError(f"recipe: {r['name']} ({r['rule']}) has no GPU block statistics; pass a host array")
    scale_inv = d.empty(_fp8kit.cuda_block_grid(plan, rows, cols), "f32")
    # Seed 0, as compute_block_stats draws stochastic bits on the host.
    out = _fp8kit.cuda_block_stats(plan, d.ptr, rows, cols, out_ptr(scale_inv), 0, d.stream)
    out["scale_inv"] = d.wrap(scale_inv)
    return out


def block_kind(r, role):
    """The block kernel of recipe dict r for `role`: (kind, scale element type), or a ValueError
    naming the recipe when the GPU has no kernel for its rule and block shape."""
    spec = r["roles"][role]
    shape = (spec["block_rows"], spec["block_cols"])
    if r["rule"] == "te" and shape in ((1, 128), (128, 128)):
        return f"{shape[0]}x{shape[1]}", "f32"
    if r["rule"] in ("mx-roundup", "mx-ocp-floor") and shape == (1, 32) and spec["format"] in ("e4m3", "e5m2"):
        return ("mx-roundup" if r["rule"] == "mx-roundup" else "mx-floor"), "u1"
    raise ValueError(
        f"recipe: {r['name']} ({r['rule']}, blocks {shape[0]}x{shape[1]}) has no CUDA kernel; use a host array"
    )


def quantize_recipe_blocks(x, recipe_arg, role, packed, seed, stream=None):
    """Every block recipe (NVFP4, MXFP4 / MXFP6 / MXFP8, ...) on a 2-D device array through
    cuda::quantize_blocks (cuda/blocks.hpp): the host quantize_blocks' dict, with device arrays of
    x's framework for 'codes' (packed: two E2M1 codes per byte), 'scale_codes', 'scale',
    'scale_inv' and 'global_amax' (shape (1,)), and 'block_shape', 'grid', 'columnwise_rht'."""
    d = _input(x, stream)
    if len(d.shape) != 2:
        raise ValueError("x: block recipes need a 2-D array")
    rows, cols = d.shape
    lay = _fp8kit.cuda_block_layout(*recipe_arg, role, rows, cols)
    qr, qc = lay["shape"]
    if packed and (lay["format"] != "e2m1" or qc % 2):
        raise ValueError(f"packed: needs e2m1 codes and an even row length, got {lay['format']} and {qc}")
    codes = d.empty((qr, qc // 2) if packed else (qr, qc), "u1")
    grid = tuple(lay["grid"])
    sc, s, si, ga = d.empty(grid, "u1"), d.empty(grid, "f32"), d.empty(grid, "f32"), d.empty((1,), "f32")
    _fp8kit.cuda_quantize_blocks(
        *recipe_arg,
        role,
        d.ptr,
        d.wide,
        rows,
        cols,
        out_ptr(codes),
        bool(packed),
        out_ptr(sc),
        out_ptr(s),
        out_ptr(si),
        out_ptr(ga),
        int(seed),
        d.stream,
    )
    return {
        "codes": d.wrap(codes),
        "scale_codes": d.wrap(sc),
        "scale": d.wrap(s),
        "scale_inv": d.wrap(si),
        "global_amax": d.wrap(ga),
        "block_shape": tuple(lay["block_shape"]),
        "grid": grid,
        "columnwise_rht": bool(lay["columnwise_rht"]),
    }


def quantize_blocks(x, r, role, rounding, overflow, nan, seed, stream=None):
    """(codes, scales) of a 2-D device array under block recipe dict r: scales are float32
    scale_inv per block (TE blocks) or E8M0 codes (MX), rows x blocks across (or tiles)."""
    d = _input(x, stream)
    if len(d.shape) != 2:
        raise ValueError("x: block recipes need a 2-D array")
    kind, sw = block_kind(r, role)
    rows, cols = d.shape
    if kind == "128x128":
        grid = (-(-rows // 128), -(-cols // 128))
    else:
        grid = (rows, -(-cols // (128 if kind == "1x128" else 32)))
    codes, scales = d.empty(d.shape, "u1"), d.empty(grid, sw)
    _fp8kit.cuda_quantize_block(
        kind,
        d.ptr,
        d.wide,
        out_ptr(codes),
        rows,
        cols,
        r["roles"][role]["format"],
        None,
        rounding,
        overflow,
        nan,
        out_ptr(scales),
        bool(r["pow2"]),
        float(r["epsilon"]),
        int(seed),
        d.stream,
    )
    return d.wrap(codes), d.wrap(scales)


_FAKE_QUANT_SPECS = {}

# The block shapes fake_quantize_blocks runs in quantize_blocks' warp kernel (NVFP4's 1 x 16 and
# 16 x 16, MX's 1 x 32: cuda/src/block_rows.cu); other shapes take the kernel of one thread per block.
FUSED_BLOCK_SHAPES = ((1, 16), (16, 16), (1, 32))


def fake_quant_spec(recipe_arg, role, cols):
    """The resolved block spec (_fp8kit.CudaBlockSpec) of recipe_arg's role for rows of `cols`
    elements, made once per (recipe, role, cols): the recipe is parsed there, not per call."""
    key = (recipe_arg, role, cols)
    spec = _FAKE_QUANT_SPECS.get(key)
    if spec is None:
        if len(_FAKE_QUANT_SPECS) >= 1024:
            _FAKE_QUANT_SPECS.clear()
        spec = _FAKE_QUANT_SPECS[key] = _fp8kit.cuda_fake_quant_spec(*recipe_arg, role, cols)
    return spec


def fake_quantize_blocks(x, spec, seed, out_wide, tensor_factor=False, stream=None):
    """x (a 2-D device array) quantised under a block spec and dequantised to `out_wide` ('f32',
    'f16', 'bf16') in one call (cuda/fake_quantize.hpp fake_quantize_blocks), as an array of x's framework.
    With tensor_factor=True: (operand, factor), the operand the codes times each block's block part
    and factor a 1-element float32 device array (numerics/block_factor.hpp)."""
    d = _input(x, stream)
    if len(d.shape) != 2:
        raise ValueError("x: block recipes need a 2-D array")
    rows, cols = d.shape
    out = d.empty((cols, rows) if spec.columnwise_rht else (rows, cols), out_wide)
    tf = d.empty((1,), "f32") if tensor_factor else None
    _fp8kit.cuda_fake_quantize_blocks(
        spec, d.ptr, d.wide, rows, cols, out_ptr(out), out_wide, 0 if tf is None else out_ptr(tf), int(seed), d.stream
    )
    y = d.wrap(out, out_wide)
    return (y, d.wrap(tf)) if tensor_factor else y


def times_tensor_factors_bf16(c, factor_a, factor_b, stream=None):
    """(c * (factor_a * factor_b)).to(bfloat16) in one pass, bit for bit (cuda/fake_quantize.hpp
    times_tensor_factors_bf16): c a C-contiguous float32 device array, the factors 1-element
    float32 device arrays of its framework."""
    d = DeviceArray(c, stream)
    if d.wide != "f32":
        raise ValueError(f"c: a float32 device array expected, got {d.wide}")
    fa, fb = DeviceArray(factor_a, d.stream), DeviceArray(factor_b, d.stream)
    if (fa.wide, fa.size, fb.wide, fb.size) != ("f32", 1, "f32", 1):
        raise ValueError("factor_a, factor_b: 1-element float32 device arrays expected")
    out = d.empty(d.shape, "bf16")
    _fp8kit.cuda_times_tensor_factors_bf16(d.ptr, d.size, fa.ptr, fb.ptr, out_ptr(out), d.stream)
    return d.wrap(out, "bf16")


def fake_quantize_blocks_transposed(x, spec, seed, tensor_factor=False, stream=None):
    """fake_quantize_blocks(x.T, spec, seed, 'bf16', tensor_factor) transposed back, bit for bit,
    from x (a 2-D C-contiguous device array, rows x cols) read where it lies: a rows x cols
    bfloat16 array (cuda/fake_quantize.hpp fake_quantize_blocks_transposed; x.T is never made).
    spec is the block spec of x.T (fake_quant_spec with rows elements a row). A ValueError names
    what it does not take (blocks other than 1 x 16 / 1 x 32, TE's column-wise copy, formats and
    roundings without its kernel)."""
    d = _input(x, stream)
    if len(d.shape) != 2:
        raise ValueError("x: block recipes need a 2-D array")
    rows, cols = d.shape
    out = d.empty((rows, cols), "bf16")
    tf = d.empty((1,), "f32") if tensor_factor else None
    _fp8kit.cuda_fake_quantize_blocks_transposed(
        spec, d.ptr, d.wide, rows, cols, out_ptr(out), "bf16", 0 if tf is None else out_ptr(tf), int(seed), d.stream
    )
    y = d.wrap(out, "bf16")
    return (y, d.wrap(tf)) if tensor_factor else y
