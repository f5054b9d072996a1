"""Independent NVFP4 references in numpy, transcribed line by line from the frameworks' Python code
(not from fp8kit), for tests/python/test_nvfp4.py.

TransformerEngine: transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py,
NVFP4QuantizerRef._quantize_blockwise_reference (non-pow2 branch) and cast_to_fp4x2, at commit
1a4d3b0da24039197519537286a3edc6d316c954.
torchao: torchao/prototype/mx_formats/nvfp4_tensor.py, per_tensor_amax_to_scale and nvfp4_quantize
(two-level branch), at commit 36027d82d1ad9949597ea16002ff4940374b1b94.

TransformerEngine's column-wise (wgrad) copy with the random Hadamard transform: the same file,
get_wgrad_sign_vector, NVFP4QuantizerRef._build_hadamard_matrix, _apply_rht and the columnwise
branch of _quantize (te_rht_columnwise, te_nvfp4_columnwise).

torch is not a dependency, so the torch float32 operations are numpy float32 operations (both IEEE
binary32, round to nearest even), torch.min/torch.clamp propagate NaN as np.minimum/np.clip do,
and .to(torch.float8_e4m3fn) of values already clamped to +-448 is ml_dtypes' float8_e4m3fn cast
(round to nearest even; both give 0x7F for NaN).
"""

import ml_dtypes
import numpy as np

F32 = np.float32
FLT_MAX = np.finfo(np.float32).max


def _e4m3_bytes(v):
    """.to(torch.float8_e4m3fn) on float32 values within +-448 (or NaN), as bytes."""
    return np.asarray(v, dtype=F32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def _e4m3_values(b):
    return b.view(ml_dtypes.float8_e4m3fn).astype(F32)


def te_cast_to_fp4(x):
    """cast_to_fp4x2's threshold table, one code per byte (before its packing)."""
    r = np.zeros(x.shape, dtype=np.uint8)
    r[(x >= 0.0) & (x <= 0.25)] = 0
    r[(x > 0.25) & (x < 0.75)] = 1
    r[(x >= 0.75) & (x <= 1.25)] = 2
    r[(x > 1.25) & (x < 1.75)] = 3
    r[(x >= 1.75) & (x <= 2.5)] = 4
    r[(x > 2.5) & (x < 3.5)] = 5
    r[(x >= 3.5) & (x <= 5.0)] = 6
    r[x > 5.0] = 7
    r[(x >= -0.25) & (x < -0.0)] = 8
    r[(x < -0.25) & (x > -0.75)] = 9
    r[(x <= -0.75) & (x >= -1.25)] = 10
    r[(x < -1.25) & (x > -1.75)] = 11
    r[(x <= -1.75) & (x >= -2.5)] = 12
    r[(x < -2.5) & (x > -3.5)] = 13
    r[(x <= -3.5) & (x >= -5.0)] = 14
    r[x < -5.0] = 15
    return r


def te_pack_fp4x2(codes):
    """cast_to_fp4x2's packing: result[:, ::2] + result[:, 1::2] * 16."""
    return (codes[:, ::2] + codes[:, 1::2] * 16).astype(np.uint8)


def te_nvfp4(x, tile=(1, 16)):
    """(codes one per byte, E4M3 scale bytes of shape (rows, cols/16), scaled x) of a 2-D float32
    array, NVFP4QuantizerRef._quantize_blockwise_reference with pow_2_scales=False. tile (16, 16)
    is the 2-D weight quantisation: one amax per 16x16 block, repeated on its 16 rows."""
    x = np.asarray(x, dtype=F32)
    m, n = x.shape
    global_amax = F32(np.max(np.abs(x)))  # torch.max(torch.abs(row_input)).to(float32)
    if tile == (16, 16):
        blocks = np.abs(x).reshape(m // 16, 16, n // 16, 16)
        block_amax = blocks.max(axis=(1, 3))  # (m/16, n/16)
        vec_max = np.repeat(block_amax, 16, axis=0)[:, :, None]  # repeat_interleave on rows
    else:
        vec_max = np.abs(x).reshape(m, n // 16, 16).max(axis=-1, keepdims=True)
    xb = x.reshape(m, n // 16, 16)
    FP4_MAX, FP8_MAX = F32(6.0), F32(448.0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        ges = F32(FP8_MAX * FP4_MAX) / global_amax  # torch.div(448 * 6, amax)
        ges = np.minimum(ges, FLT_MAX)  # torch.min(., FLT_MAX)
        if ges == F32(0.0):
            ges = F32(1.0)
        gds = F32(1.0) / ges  # torch.div(1.0, ges)
        mult = ges * (F32(1.0) / FP4_MAX)  # ges * torch.reciprocal(6)
        dec = vec_max * mult
        dec = np.minimum(dec, FLT_MAX)
        dec = np.clip(dec, -FP8_MAX, FP8_MAX)
        dec_bytes = _e4m3_bytes(dec)
        enc = np.minimum(F32(1.0) / (_e4m3_values(dec_bytes) * gds), FLT_MAX)
        scaled = xb * enc
    clipped = np.clip(scaled, -FP4_MAX, FP4_MAX).reshape(m, n)
    return te_cast_to_fp4(clipped), dec_bytes.squeeze(-1), clipped


def torchao_nvfp4(x):
    """(codes one per byte, E4M3 scale bytes) of torchao nvfp4_quantize(x, 16,
    per_tensor_amax_to_scale(amax(x))): f32_to_f4_unpacked rounds to nearest even after the clamp,
    which is ml_dtypes' float4_e2m1fn cast of values within +-6."""
    x = np.asarray(x, dtype=F32)
    m, n = x.shape
    amax = F32(np.max(np.abs(x)))
    F4_MAX, F8_MAX = F32(6.0), F32(448.0)
    E4M3_EPS = F32(2.0**-6)  # torch.finfo(float8_e4m3fn).tiny
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        pts = amax / F32(448.0 * 6.0)  # per_tensor_amax_to_scale
        xb = x.reshape(m, n // 16, 16)
        block_scale = np.abs(xb).max(axis=-1) / F4_MAX  # max_abs / F4_E2M1_MAX
        sbs = block_scale / pts
        sbs_bytes = _e4m3_bytes(np.clip(sbs, E4M3_EPS, F8_MAX))
        recip = (F32(1.0) / pts) / _e4m3_values(sbs_bytes)
        scaled = xb * recip[:, :, None]
    scaled = np.clip(scaled, -F4_MAX, F4_MAX).reshape(m, n)
    codes = scaled.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    return codes, sbs_bytes


# TE get_wgrad_sign_vector()
TE_SIGNS = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], dtype=np.float64)


def sylvester(n):
    """_build_hadamard_matrix's Sylvester construction: h = [[h, h], [h, -h]] from [[1]]."""
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def te_rht_columnwise(x, random_signs=True):
    """_apply_rht(tensor.t().contiguous()): x.T in groups of 16 along each row, times
    (diag(s) @ H16) * (1 / sqrt(16)), exact in float64 and rounded once to x's dtype (torch sums
    in float32 in its own order; the two agree where that sum is exact, lib convert/hadamard.hpp)."""
    h = sylvester(16)
    if random_signs:
        h = np.diag(TE_SIGNS) @ h  # sign_mat @ h
    t = h * (1.0 / np.sqrt(16.0))
    xt = np.ascontiguousarray(x.T).astype(np.float64)
    out = (xt.reshape(-1, 16) @ t).reshape(xt.shape)
    return out.astype(x.dtype)


def te_nvfp4_columnwise(x):
    """The columnwise branch of NVFP4QuantizerRef._quantize with with_rht=True and 1x16 tiles:
    col_input = _apply_rht(x.T), global_amax_col = max |col_input| (after the transform), then
    _quantize_blockwise_reference(col_input, global_amax_col, 16, 1). Returns (codes one per
    byte of shape x.T's, E4M3 scale bytes (cols, rows/16), global_amax_col, col_input)."""
    col = te_rht_columnwise(x)
    col32 = np.asarray(col, dtype=F32)  # .to(torch.float32): exact for f32/bf16/f16
    codes, scales, _ = te_nvfp4(col32)  # its global amax is max |col_input|
    return codes, scales, F32(np.max(np.abs(col32))), col32


# ---- stochastic rounding of gradients ---------------------------------------------------------
# TransformerEngine NVFP4BlockScaling rounds gradients stochastically (recipe/__init__.py:
# fp4_quant_bwd_grad = QParams(stochastic_rounding=not disable_stochastic_rounding)), in the kernel
# with cvt.rs.satfinite.e2m1x4.f32 and random bits from curanddx, which no host reproduces. What
# is fixed is the PTX ISA's definition of .rs: the result is one of the two representable values
# that bracket the (saturated) input. The scale bytes do not depend on the rounding.

E2M1_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=F32)


def e2m1_sr_bracketed(codes, scaled):
    """True where an E2M1 code (one per byte) is one of the two E2M1 values around scaled
    (already clipped to +-6), with scaled's sign (a zero result may carry either sign); True for
    NaN scaled values (the kernel makes NaN +6, checked elsewhere)."""
    s = np.asarray(scaled, dtype=F32)
    mag = np.abs(s)
    lo = E2M1_MAGNITUDES[np.clip(np.searchsorted(E2M1_MAGNITUDES, mag, side="right") - 1, 0, 7)]
    hi = E2M1_MAGNITUDES[np.clip(np.searchsorted(E2M1_MAGNITUDES, mag, side="left"), 0, 7)]
    c = np.asarray(codes, dtype=np.uint8)
    v = E2M1_MAGNITUDES[c & 7]
    sign_ok = (v == 0) | (((c & 8) != 0) == np.signbit(s))
    return (((v == lo) | (v == hi)) & sign_ok) | np.isnan(s)
