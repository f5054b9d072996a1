"""validate(): a kernel's FP8 output against the reference, bit for bit, with mismatch classes."""

import json
import os

import numpy as np

from . import _device, _fp8kit
from ._dtypes import as_bits, codes_view, wide_name


def validate(
    input,
    output,
    format,
    profile=None,
    rounding=None,
    overflow=None,
    nan=None,
    scale=None,
    scale_inv=None,
    block_scales=None,
    layout=None,
    examples=5,
    detect_policies=True,
    comm=None,
    stream=None,
    packed=False,
    scales_dtype=None,
    scales_layout="row-major",
    global_scale=None,
):
    """Compare `output` (uint8 codes or an ml_dtypes float8 array, same size as `input`) with the
    reference codes of `input` under the named policy. Scaling: scale=S (the kernel computes
    fp8(x * S)) or scale_inv=S (it multiplies by fl32(1 / S)); a number for one scale, or an array
    of per-block scales with layout= 'rowwise', '1x128', '128x128', 'mx32' or '1x16' (blocks over
    the input seen as rows x last dimension).

    NVFP4 and MX kernel output (docs/validate.md, "NVFP4 and MX outputs"):
    packed=True: `output` holds E2M1 codes two per byte along each row, element 2i in the low
    nibble (torch float4_e2m1fn_x2 / uint8 of shape rows x cols/2; format 'e2m1').
    scales_dtype: 'f32', 'e8m0' or 'e4m3' (NVFP4 block scales) for uint8 scales;
    global_scale: with 'e4m3', the float32 second-level dequantisation scale G (TE's 1/S_enc,
    torchao's per_tensor_scale): scale_inv=scales gives the elements fl32(1/fl32(e4m3*G))
    (TransformerEngine's order), scale=scales gives fl32(fl32(1/G)/e4m3) (torchao's).
    scales_layout: 'row-major' (default), 'padded' (TE's scale_inv tensors, padded to 128-row x
    4-column multiples) or 'swizzled' (cuBLASLt's 128x4 tiles, as TE's swizzle and torchao's
    to_blocked write them); padded and swizzled for the mx32 and 1x16 layouts.

    Returns the report as a dict: total, matches, mismatches, classes {name: {count, examples}},
    consistent policies and profiles, plus 'summary' (text) and 'consistency' (one line).

    GPU arrays (torch CUDA tensors, CuPy, JAX; input float32/float16/bfloat16, output uint8 codes
    or a torch float8 tensor): both input and output on the GPU; the comparison runs there
    (cuda::validate_scan, on the input framework's current stream or `stream`, a cudaStream_t as
    int) and the mismatching elements come back to be classified on the host by the same code:
    the report equals the one the same arrays give as numpy. Block scales may be a device or a
    host array. One of input/output on the GPU and the other not is a ValueError, as is comm=.

    comm: an mpi4py communicator (or any object with mpi4py's Get_rank(), Get_size() and
    gather(obj, root=0)): every rank of it calls validate with the same arguments and holds the
    whole input and output arrays (e.g. each rank loads the same files, as `mpirun fp8kit
    validate` does); each rank compares its contiguous share of the 65536-element blocks, rank 0
    returns the report one process returns and the other ranks return None (docs/mpi.md)."""
    if scale is not None and scale_inv is not None:
        raise ValueError("scale and scale_inv: give one of them, not both")
    mode = "none" if scale is None and scale_inv is None else ("scale" if scale is not None else "scale_inv")
    s = scale if scale is not None else scale_inv
    s = _stored_scales(input, s, mode, layout, scales_dtype, scales_layout, global_scale)
    if packed:
        output = _unpack(input, output, format)
    if _device.is_device(input) or _device.is_device(output):
        return _validate_device(
            input,
            output,
            format,
            profile,
            rounding,
            overflow,
            nan,
            mode,
            s,
            layout,
            examples,
            detect_policies,
            comm,
            stream,
        )
    x = np.asarray(input)
    wide = wide_name(x.dtype, "input")
    codes = codes_view(output, "output")
    blocks, value = None, 1.0
    if s is not None and np.ndim(s) > 0:
        if layout is None or layout == "tensor":
            raise ValueError("layout: an array of block scales needs layout= rowwise, 1x128, 128x128, mx32 or 1x16")
        if _device.is_device(s):
            raise ValueError("scale: block scales on the GPU need input and output on the GPU too")
        blocks = np.ascontiguousarray(s, dtype=np.float32)
    else:
        if layout not in (None, "tensor"):
            raise ValueError(f"block_scales: layout {layout} needs an array of scales")
        value = 1.0 if s is None else float(s)
    out = _fp8kit.validate(
        as_bits(x, wide),
        wide,
        codes,
        format,
        profile,
        rounding,
        overflow,
        nan,
        mode,
        value,
        layout or "tensor",
        blocks,
        int(examples),
        bool(detect_policies),
        comm,
    )
    if out is None:  # a rank other than 0 of comm
        return None
    return _report(out)


def _shape2(input):
    shape = np.shape(input) if not _device.is_device(input) else tuple(_device.DeviceArray(input).shape)
    cols = shape[-1] if len(shape) > 0 else 1
    rows = 0 if cols == 0 else int(np.prod(shape)) // cols
    return rows, cols


def _stored_scales(input, s, mode, layout, scales_dtype, scales_layout, global_scale):
    """Block scales as stored (E8M0/E4M3 bytes, padded or swizzled) to row-major float32 values."""
    plain = scales_dtype in (None, "f32") and scales_layout == "row-major" and global_scale is None
    if s is None or np.ndim(s) == 0:
        if not plain:
            raise ValueError("scales_dtype, scales_layout, global_scale: need an array of block scales")
        return s
    if plain:
        return s
    if _device.is_device(s):
        import torch  # device scales: their bytes on the host (small: one per block)

        s = s.cpu() if isinstance(s, torch.Tensor) else s
    host = np.asarray(_device.host_view(s))
    if layout is None or layout == "tensor":
        raise ValueError("layout: an array of block scales needs layout= rowwise, 1x128, 128x128, mx32 or 1x16")
    dtype = scales_dtype or ("f32" if host.dtype != np.uint8 else "e8m0")  # swizzled uint8: E8M0
    if global_scale is not None and dtype != "e4m3":
        raise ValueError(f"global_scale: only E4M3 block scales have one, scales_dtype is {dtype}")
    want = np.float32 if dtype == "f32" else np.uint8
    if host.dtype.itemsize != np.dtype(want).itemsize:
        raise ValueError(f"block_scales: {dtype} scales expected, got dtype {host.dtype}")
    rows, cols = _shape2(input)
    return _fp8kit.stored_scale_values(
        np.ascontiguousarray(host).view(want).reshape(-1),
        dtype,
        scales_layout,
        1.0 if global_scale is None else float(global_scale),
        layout,
        rows,
        cols,
        mode,
    )


def _unpack(input, output, format):
    if format != "e2m1":
        raise ValueError(f"packed: only E2M1 codes are packed two per byte, format is {format}")
    if _device.is_device(output):
        raise ValueError("packed: packed codes on the GPU are not unpacked; pass host arrays")
    rows, cols = _shape2(input)
    packed = np.ascontiguousarray(codes_view(output, "output")).reshape(-1)
    codes = _fp8kit.unpack_fp4_codes(packed, rows, cols)
    return codes.reshape(np.shape(input))


def _report(out):
    text, summary, consistency = out
    report = json.loads(text)
    report["summary"] = summary
    report["consistency"] = consistency
    return report


def _validate_device(
    input, output, format, profile, rounding, overflow, nan, mode, s, layout, examples, detect_policies, comm, stream
):
    """validate() of GPU arrays: pointers, shapes and the stream to _fp8kit.cuda_validate."""
    if comm is not None:
        raise ValueError(
            "comm: not supported with GPU arrays (one GPU compares the whole array); pass host "
            "arrays to split the comparison over ranks"
        )
    if not (_device.is_device(input) and _device.is_device(output)):
        which = "input" if _device.is_device(input) else "output"
        raise ValueError(f"input, output: only the {which} is a GPU array; pass both on the GPU or both on the host")
    d = _device.DeviceArray(input, stream)
    if d.wide not in ("f32", "f16", "bf16"):
        raise ValueError(f"input: device arrays of float32, float16 or bfloat16 expected, got {d.wide}")
    c = _device.DeviceArray(output, d.stream)
    if not (c.wide == "u1" or (c.kind == "torch" and "float8" in c.wide)):
        raise ValueError(f"output: uint8 codes (or a torch float8 tensor) expected on the GPU, got {c.wide}")
    if c.size != d.size:
        raise ValueError(f"output: {c.size} codes for {d.size} input elements")
    cols = d.shape[-1] if len(d.shape) > 0 else 1
    rows = 0 if cols == 0 else d.size // cols
    host_blocks, dev_ptr, dev_count, value = None, 0, 0, 1.0
    if s is not None and np.ndim(s) > 0:
        if layout is None or layout == "tensor":
            raise ValueError("layout: an array of block scales needs layout= rowwise, 1x128, 128x128, mx32 or 1x16")
        if _device.is_device(s):
            b = _device.DeviceArray(s, d.stream)
            if b.wide != "f32":
                raise ValueError(f"scale: block scales on the GPU must be float32, got {b.wide}")
            dev_ptr, dev_count = b.ptr, b.size
        else:
            host_blocks = np.ascontiguousarray(_device.host_view(s), dtype=np.float32)
    else:
        if layout not in (None, "tensor"):
            raise ValueError(f"block_scales: layout {layout} needs an array of scales")
        value = 1.0 if s is None else float(s)
    return _report(
        _fp8kit.cuda_validate(
            d.ptr,
            d.wide,
            c.ptr,
            d.size,
            rows,
            cols,
            format,
            profile,
            rounding,
            overflow,
            nan,
            mode,
            value,
            layout or "tensor",
            host_blocks,
            dev_ptr,
            dev_count,
            int(examples),
            bool(detect_policies),
            d.stream,
        )
    )


def validate_te_dump(path):
    """TransformerEngine's own FP8/FP4 codes in a DumpTensors .pt file against fp8kit's reference.

    For a file holding both `high_precision` and a `quantized` entry (Float8Tensor, MXFP8Tensor,
    NVFP4Tensor or Float8BlockwiseQTensor, TE 2.15 to 2.18), TE's codes are
    compared with the reference for the high_precision tensor under TE's scale_inv (profile
    cuda-satfinite), as `fp8kit inspect` does; the report is validate()'s, plus `name`, `format`,
    `scale_inv`, `kind` (Float8Tensor, MXFP8Tensor, NVFP4Tensor, Float8BlockwiseQTensor), `layout`,
    `swizzled`, and `scale_blocks` / `scale_mismatches`: the block scales TE stored compared with
    the reference's for the same input (NVFP4 also `amax_matches`). None when the file lacks either entry. The file's pickle is interpreted, never
    executed (docs/dumps.md); a refused file raises DumpError naming it.
    """
    r = _fp8kit.check_te_quantized(os.fspath(path))
    if r is None:
        return None
    name, fmt, scale_inv, text, summary, extra = r
    report = json.loads(text)
    report.update(name=name, format=fmt, scale_inv=scale_inv, summary=summary, **extra)
    return report
