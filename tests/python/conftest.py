"""Shared inputs for the fp8kit module tests: random arrays and adversarial ones built from each
format's value grid as ml_dtypes decodes it (not from fp8kit)."""

import os
import pathlib

import ml_dtypes
import numpy as np
import pytest

FP8 = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
}
WIDE = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
BITS = {
    np.dtype(np.float32): np.uint32,
    np.dtype(np.float16): np.uint16,
    np.dtype(ml_dtypes.bfloat16): np.uint16,
    np.dtype(np.float64): np.uint64,
}


def grid(fmt):
    """Finite values of a format, sorted, as ml_dtypes decodes its 256 codes."""
    v = np.arange(256, dtype=np.uint8).view(FP8[fmt]).astype(np.float64)
    return np.unique(v[np.isfinite(v)])


def random_array(dtype, n=200_000, seed=1):
    """Random bit patterns of `dtype`: every class (NaN, Inf, subnormal, normal) shows up."""
    rng = np.random.default_rng(seed)
    bits = BITS[np.dtype(dtype)]
    return rng.integers(0, np.iinfo(bits).max, size=n, dtype=bits, endpoint=True).view(dtype)


def lognormal_array(dtype, fmt, n=200_000, seed=2):
    """Signed values spread over the format's whole range and a few binades past both ends."""
    rng = np.random.default_rng(seed)
    g = grid(fmt)
    lo, hi = np.log2(g[g > 0].min()) - 3, np.log2(g.max()) + 2
    x = np.exp2(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def adversarial_array(dtype, fmt):
    """Every grid value, every midpoint (ties) and the input-type neighbours of both, the
    overflow boundary, +-0, +-Inf, NaNs of both signs, and the input type's own extremes."""
    dtype = np.dtype(dtype)
    g = grid(fmt)
    pos = g[g > 0]
    step = np.diff(pos)
    mids = pos[:-1] + step / 2
    top = pos[-1] + step[-1] / 2  # first value past max that a no-saturate RNE cast overflows at
    base = np.concatenate([pos, mids, [top, 2 * top, pos[0] / 2, pos[0] / 4, 0.0]])
    with np.errstate(over="ignore"):  # values past the input type's range become Inf on purpose
        vals = base.astype(dtype)
    vals = vals[np.isfinite(vals)]
    up = np.nextafter(vals, np.array(np.inf, dtype))
    down = np.nextafter(vals, np.array(0, dtype))
    fi = ml_dtypes.finfo(dtype)
    extremes = np.array([fi.max, fi.tiny, fi.smallest_subnormal, np.inf], dtype=dtype)
    allv = np.concatenate([vals, up, down, extremes])
    allv = np.concatenate([allv, -allv])
    nan = np.array([np.nan], dtype=dtype)
    return np.concatenate([allv, nan, -nan])


@pytest.fixture(params=sorted(FP8))
def fmt(request):
    return request.param


@pytest.fixture(params=sorted(WIDE))
def wide(request):
    return request.param


@pytest.fixture
def mpi_env(tmp_path):
    """The environment for `mpirun` in these tests: os.environ plus the Open MPI settings that
    tests/mpi/mpi_env.bash exports for the shell MPI tests (one place for both, with the reasons),
    with TMPDIR (Open MPI's session folder, PMIx's stores) in the test's tmp_path, as that file
    puts it in the test's $T."""
    env = dict(os.environ)
    settings = pathlib.Path(__file__).resolve().parents[1] / "mpi" / "mpi_env.bash"
    for line in settings.read_text().splitlines():
        if line.startswith("export "):
            env.update(p.split("=", 1) for p in line[len("export ") :].split() if "=" in p)
    env["TMPDIR"] = str(tmp_path)
    return env
