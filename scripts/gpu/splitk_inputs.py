"""The operands of the split-K cases (splitk_acceptance.py, splitk_combination_data.py), made from a
case's seed by numpy and ml_dtypes only, so that check_splitk_acceptance.py and fit_splitk.py make
them again on any machine, and the GPU scripts need no fp8kit."""

import ml_dtypes
import numpy as np

E4M3_MAX = 448.0


def operand(rng, kind, rows, k):
    """E4M3 codes (uint8) from numpy and ml_dtypes only. kind: normal; wide (signed 1, 1.25, 1.5,
    1.75 times powers of two over E4M3's range); adversarial (small values with one in ten large,
    2^4 to 2^6, so that partial sums cancel and the order of the additions shows)."""
    if kind == "normal":
        x = rng.normal(0.0, 1.0, (rows, k)) * 2.0 ** rng.integers(-4, 5)
    elif kind == "adversarial":
        x = rng.normal(0.0, 1.0, (rows, k)) * 2.0 ** rng.integers(-9, 0, (rows, k))
        big = rng.random((rows, k)) < 0.1
        x[big] = rng.choice([-1.0, 1.0], int(big.sum())) * 2.0 ** rng.integers(4, 7, int(big.sum()))
    else:
        x = rng.choice([1.0, 1.25, 1.5, 1.75], (rows, k)) * 2.0 ** rng.integers(-9, 9, (rows, k))
        x *= rng.choice([-1.0, 1.0], (rows, k))
    x = np.clip(x, -E4M3_MAX, E4M3_MAX).astype(np.float32)
    return x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def case_inputs(seed, m, n, k, kind):
    rng = np.random.default_rng(seed)
    a, b = operand(rng, kind, m, k), operand(rng, kind, n, k)
    sa, sb = np.float32(rng.uniform(0.01, 4)), np.float32(rng.uniform(0.01, 4))
    return a, b, sa, sb
