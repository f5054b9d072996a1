"""Independent MX (E8M0-scaled 1x32 block) references in numpy, transcribed from torchao's Python
(not from fp8kit), for tests/python/test_nvfp4.py: torchao/prototype/mx_formats/mx_tensor.py
to_mx (ScaleCalculationMode.FLOOR), _to_mx_rceil and _f32_to_e8m0_rceil (RCEIL), at commit
36027d82d1ad9949597ea16002ff4940374b1b94. The element casts f32_to_f4_unpacked /
f32_to_f6_*_unpacked round to nearest even and saturate: ml_dtypes' float4_e2m1fn /
float6_e2m3fn / float6_e3m2fn casts of the clamped values here.
"""

import ml_dtypes
import numpy as np

F32 = np.float32
ELEM = {  # format: (ml_dtypes type, max, emax = target_max_pow2)
    "e2m1": (ml_dtypes.float4_e2m1fn, 6.0, 2),
    "e2m3": (ml_dtypes.float6_e2m3fn, 7.5, 2),
    "e3m2": (ml_dtypes.float6_e3m2fn, 28.0, 4),
}


def _reciprocal(code):
    """_e8m0_scale_to_reciprocal_fp32: 2^(127 - code) as float32 (byte 0 -> subnormal 2^-127)."""
    r = (254 - code.astype(np.int32)).astype(np.uint8).astype(np.uint32)
    bits = np.where(r == 0, np.uint32(0x00400000), r << 23)
    return bits.astype(np.uint32).view(F32)


def mx(x, fmt, mode):
    """(codes one per byte, E8M0 bytes (rows, cols/32)) of to_mx(x, fmt, 32, mode) for finite x;
    mode 'floor' or 'rceil'."""
    dtype, max_pos, emax = ELEM[fmt]
    x = np.asarray(x, dtype=F32)
    m, n = x.shape
    xb = x.reshape(m, n // 32, 32)
    max_abs = np.abs(xb).max(axis=-1, keepdims=True).astype(F32)
    bits = max_abs.view(np.uint32)
    if mode == "floor":
        pow2 = ((bits >> 23) & 0xFF).astype(np.int32) - 127
        code = np.clip(pow2 - emax, -127, 128) + 127
    else:
        descale = max_abs * (F32(1.0) / F32(max_pos))  # max_abs * (1.0 / max_pos)
        b = descale.view(np.uint32)
        biased, mant = ((b >> 23) & 0xFF).astype(np.int32), b & 0x7FFFFF
        up = np.where(biased == 0, mant > 0x400000, mant != 0)
        code = np.where(np.isfinite(descale), biased + up, 255)
    code = code.astype(np.uint8)
    code = np.where(np.isfinite(max_abs), code, np.uint8(255)).astype(np.uint8)
    scaled = np.clip(xb * _reciprocal(code), -max_pos, max_pos).reshape(m, n)
    codes = scaled.astype(dtype).view(np.uint8) & (0xF if fmt == "e2m1" else 0x3F)
    return codes, code.squeeze(-1)
