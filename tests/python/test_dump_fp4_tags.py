"""HDF5 dumps of FP4 / FP6 / e3m4 / e4m3b11fnuz / e4m3ieee codes (one per byte, as ml_dtypes
stores them) tagged with a 'dtype' attribute: fp8kit.read_dump decodes every code as ml_dtypes
0.6.0 does, and refuses a byte that is not a code of the format (e.g. FP4 packed two per byte)."""

import fp8kit
import h5py
import ml_dtypes
import numpy as np
import pytest

TYPES = [
    ("float4_e2m1fn", "e2m1", ml_dtypes.float4_e2m1fn, 4),
    ("float6_e2m3fn", "e2m3", ml_dtypes.float6_e2m3fn, 6),
    ("float6_e3m2fn", "e3m2", ml_dtypes.float6_e3m2fn, 6),
    ("float8_e3m4", "e3m4", ml_dtypes.float8_e3m4, 8),
    ("float8_e4m3b11fnuz", "e4m3b11fnuz", ml_dtypes.float8_e4m3b11fnuz, 8),
    ("float8_e4m3", "e4m3ieee", ml_dtypes.float8_e4m3, 8),
]


@pytest.mark.parametrize("tag,name,mlt,bits", TYPES)
def test_tagged_codes_decode_as_ml_dtypes(tmp_path, tag, name, mlt, bits):
    codes = np.arange(1 << bits, dtype=np.uint8).reshape(-1, 4)
    path = str(tmp_path / "d.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("step_0/x", data=codes).attrs["dtype"] = tag
    [(info, a)] = list(fp8kit.read_dump(path))
    assert info["dtype"] == name
    want = codes.view(mlt).astype(np.float32)
    assert a.shape == want.shape and a.dtype == np.float32
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(a), nan)
    assert np.array_equal(a[~nan].view(np.uint32), want[~nan].view(np.uint32))  # -0 kept


def test_packed_fp4_bytes_are_refused(tmp_path):
    path = str(tmp_path / "d.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.array([[0x21, 0x03]], dtype=np.uint8)).attrs["dtype"] = "float4_e2m1fn"
    with pytest.raises(fp8kit.DumpError, match="packed two per byte"):
        list(fp8kit.read_dump(path))
