"""TransformerEngine NVFP4's random Hadamard transform (fp8kit.te_rht16, lib convert/hadamard)
against an independent numpy reference written from TE's code facts
(transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py: _build_hadamard_matrix builds
H16 by Sylvester's construction and multiplies it on the left by diag(get_wgrad_sign_vector());
_apply_rht reshapes x.T to (-1, 16) and multiplies by H * (1/sqrt(16)); _quantize applies it to
the column-wise input x.T only). Bit for bit: both sides form the exact sum and round once."""
import ml_dtypes
import numpy as np
import pytest

import fp8kit

# TE get_wgrad_sign_vector()
TE_SIGNS = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], dtype=np.float64)


def sylvester(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def reference(x, random_signs=True):
    """x.T in groups of 16 along each row, times diag(s) @ H16 / 4, exact in float64, rounded once."""
    h = sylvester(16)
    if random_signs:
        h = np.diag(TE_SIGNS) @ h
    t = h * (1.0 / np.sqrt(16.0))
    xt = np.ascontiguousarray(x.T).astype(np.float64)
    out = (xt.reshape(-1, 16) @ t).reshape(xt.shape)
    return out.astype(x.dtype)


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32 if a.dtype.itemsize == 4 else np.uint16)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("random_signs", [True, False])
def test_rht_equals_numpy_reference(dtype, random_signs):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((64, 48)) * np.exp2(rng.integers(-6, 6, (64, 48)))).astype(dtype)
    got = fp8kit.te_rht16(x, random_signs=random_signs)
    want = reference(x, random_signs)
    assert got.shape == (48, 64) and got.dtype == x.dtype
    assert np.array_equal(bits(got), bits(want))


def test_rht_is_te_matrix_on_unit_vectors():
    # Row i of the transform is what e_i maps to: s[i] * H16[i, :] / 4 (not H16 @ diag(s)).
    x = np.zeros((16, 16), dtype=np.float32)
    x[np.arange(16), np.arange(16)] = 1.0  # column c of x is e_c
    got = fp8kit.te_rht16(x).astype(np.float64)
    want = (np.diag(TE_SIGNS) @ sylvester(16)) / 4.0
    assert np.array_equal(got, want)
    # Orthogonal: applying the transpose recovers the input exactly for these values.
    assert np.array_equal(got @ got.T, np.eye(16))


def test_rht_rejects_rows_not_multiple_of_16():
    with pytest.raises(ValueError, match="multiple of the Hadamard dimension 16"):
        fp8kit.te_rht16(np.ones((24, 16), dtype=np.float32))
    with pytest.raises(ValueError, match="f64"):
        fp8kit.te_rht16(np.ones((16, 16), dtype=np.float64))
