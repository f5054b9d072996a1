"""Issue 47: a module built without the CUDA kernels says why as CMake configured it
(stats::built_without_cuda, the CLI's words too): FP8KIT_CUDA=OFF, or no nvcc found. It never
claims "no nvcc" for a build that had nvcc and turned CUDA off."""

import fp8kit
import numpy as np
import pytest

REASONS = (
    "this fp8kit was built without CUDA (FP8KIT_CUDA=OFF)",
    "this fp8kit was built without CUDA (no nvcc was found when it was built)",
)


def test_no_cuda_build_says_why():
    ok, why = fp8kit._fp8kit.cuda_available()
    if ok or why.startswith("no CUDA device"):
        pytest.skip(f"built with the CUDA kernels ({why or 'a GPU is usable'})")
    assert why in REASONS
    a = np.full((2, 16), 0x38, dtype=np.uint8)
    with pytest.raises(ValueError) as e:
        fp8kit.gemm(a, a, accum="sm90", device="cuda")
    assert str(e.value) in tuple(f"device='cuda': {r}" for r in REASONS)
