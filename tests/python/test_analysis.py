"""Statistics, recipes, validate, dump reading and replay through the module, each against a
reference computed here with numpy / ml_dtypes / h5py, never with fp8kit itself."""

from pathlib import Path

import fp8kit
import h5py
import ml_dtypes
import numpy as np
import pytest
from conftest import FP8

REPO = Path(__file__).resolve().parents[2]
DUMP = REPO / "data" / "example" / "llama_tiny_dump.h5"
TRACE = REPO / "data" / "example" / "amax_trace.csv"


def satfinite(s, fmt):
    """Codes of float32 s under saturate-all RNE (clip to +-max, then ml_dtypes)."""
    m = float(ml_dtypes.finfo(FP8[fmt]).max)
    return np.clip(s, -m, m).astype(FP8[fmt])


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_stats_counts_against_ml_dtypes(fmt):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(100_000) * np.exp2(rng.uniform(-20, 8, 100_000))).astype(np.float32)
    x[::997] = 0
    scale = np.float32(3.75)
    s = (x * scale).astype(np.float32)
    q = satfinite(s, fmt)
    qa = np.abs(q.astype(np.float64))
    nz = x != 0
    fi = ml_dtypes.finfo(FP8[fmt])
    d = fp8kit.stats(x, fmt, profile="cuda-satfinite", scale=float(scale))
    assert d["numel"] == x.size and d["zeros"] == int((~nz).sum())
    assert d["underflow"] == int((nz & (qa == 0)).sum())
    assert d["subnormal"] == int((nz & (qa > 0) & (qa < float(fi.smallest_normal))).sum())
    # overflow: s rounds past max under nearest-even without saturation (ml_dtypes gives NaN/Inf)
    with np.errstate(invalid="ignore"):
        past = ~np.isfinite(s.astype(FP8[fmt]).astype(np.float32))
    assert d["overflow"] == int(past.sum())
    assert d["amax"] == float(np.abs(x).max())
    assert d["min_nonzero"] == float(np.abs(x[nz]).min())
    # x^ = decode(q) * scale_inv in binary64 (exact), scale_inv = fl32(1 / scale)
    xhat = q.astype(np.float64) * np.float64(np.float32(1) / scale)
    err = x.astype(np.float64) - xhat
    # Sums: fp8kit adds in fixed blocks, numpy pairwise; the order differs, so a relative tolerance.
    assert d["sum_err2"] == pytest.approx(float(np.sum(err * err)), rel=1e-12)
    assert d["sum_x2"] == pytest.approx(float(np.sum(x.astype(np.float64) ** 2)), rel=1e-12)


def test_stats_overflow_exact():
    # 464 rounds to 448 (ties-to-even between 448 and 480 goes down), 465 rounds past max.
    x = np.float32([447, 448, 464, 465, 480, 1e6, -465])
    d = fp8kit.stats(x, "e4m3", profile="cuda-satfinite")
    assert d["overflow"] == 4


def test_amax_and_recipe_scale():
    x = np.float32([1, -7.5, np.nan, 3, -2])
    assert fp8kit.amax(x) == 7.5
    assert fp8kit.amax(np.float32([1, -np.inf])) == np.inf
    for a in [7.5, 1e-30, 3.0e5, 0.1234567]:
        scale, scale_inv = fp8kit.recipe_scale("te-current", "input", a)
        want = np.float32(448) / np.float32(a)
        assert np.float32(scale) == want
        assert np.float32(scale_inv) == np.float32(1) / want
        g, _ = fp8kit.recipe_scale("te-current", "grad", a)
        assert np.float32(g) == np.float32(57344) / np.float32(a)
    assert "te-delayed" in fp8kit.presets()
    with pytest.raises(ValueError, match="role: unknown role 'bias'"):
        fp8kit.recipe_scale("te-current", "bias", 1.0)


def test_delayed_scaling_against_model():
    rng = np.random.default_rng(3)
    amax = np.exp2(rng.uniform(-4, 6, 200)).astype(np.float32)
    L = 8
    d = fp8kit.DelayedScaling("e4m3", history_len=L, algo="max", margin=0)
    got = d.run(amax)
    want = np.empty(200, np.float32)
    want[0] = 1
    for i in range(1, 200):
        want[i] = np.float32(448) / amax[max(0, i - L) : i].max()
    assert np.array_equal(got, want)


def test_delayed_scaling_history_is_te_rolled_history():
    # TE's amax_history update (transformer_engine/pytorch/fp8.py, _default_get_amax_and_update_history:
    # torch.roll(amax_history, -1, 0), then slot 0 zeroed) written with numpy, against the binding's
    # history (a copy, built by value from the ring: an array kept from an earlier step must not change).
    rng = np.random.default_rng(5)
    L = 8
    d = fp8kit.DelayedScaling("e4m3", history_len=L, algo="max", margin=0)
    h = np.zeros(L, np.float32)
    kept = []
    for a in np.exp2(rng.uniform(-4, 6, 3 * L)).astype(np.float32):
        h[0] = a
        d.record(float(a))
        h = np.roll(h, -1)
        h[0] = 0
        got = d.history
        assert got.dtype == np.float32 and got.shape == (L,)
        assert np.array_equal(got, h)
        kept.append((got, h.copy()))
    for got, want in kept:
        assert np.array_equal(got, want)


def test_validate_classes_by_construction():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(20_000) * 30).astype(np.float32)
    ref = satfinite(x, "e4m3").view(np.uint8).copy()
    out = ref.copy()
    # 10 elements where truncation differs from nearest-even (not ties): 'direction'
    mag = np.abs(x.astype(np.float64))
    grid = np.unique(np.abs(np.arange(256, dtype=np.uint8).view(FP8["e4m3"]).astype(np.float64)))
    grid = grid[np.isfinite(grid)]
    idx = [
        i
        for i in range(x.size)
        if mag[i] < 448 and np.abs(ref[i : i + 1].view(FP8["e4m3"]).astype(np.float64))[0] > mag[i]
    ][:10]
    for i in idx:
        lo = grid[np.searchsorted(grid, mag[i], side="right") - 1]
        out[i] = np.float64(np.copysign(lo, x[i])).astype(FP8["e4m3"]).view(np.uint8)
    r = fp8kit.validate(x, out, "e4m3", profile="cuda-satfinite")
    assert r["mismatches"] == 10 and r["total"] == x.size
    assert r["classes"]["direction"]["count"] == 10
    assert sorted(e["index"] for e in r["classes"]["direction"]["examples"]) == sorted(idx)[:5]
    exact = fp8kit.validate(x, ref.view(FP8["e4m3"]), "e4m3", profile="cuda-satfinite")
    assert exact["mismatches"] == 0
    with pytest.raises(ValueError, match="output: 3 codes for 20000 input elements"):
        fp8kit.validate(x, ref[:3], "e4m3", profile="cuda-satfinite")


def test_read_dump_equals_h5py():
    f = h5py.File(DUMP, "r")
    seen = 0
    for info, arr in fp8kit.read_dump(DUMP):
        ds = f[info["name"]]
        raw = ds[()]
        tag = ds.attrs.get("dtype")
        if tag == "bfloat16":
            want = np.asarray(raw).view(np.uint16).view(ml_dtypes.bfloat16)
        elif tag is not None and tag.startswith("float8"):
            want = raw.view(getattr(ml_dtypes, tag)).astype(np.float32)
        else:
            want = raw
        assert arr.dtype == want.dtype and arr.shape == want.shape, info["name"]
        assert np.array_equal(arr.view(np.uint8), np.ascontiguousarray(want).view(np.uint8)), info["name"]
        assert info["step"] == int(ds.attrs["step"])
        seen += 1
    assert seen == 273


def test_dump_selection_and_errors(tmp_path):
    sel = list(fp8kit.read_dump(DUMP, include="*layers.1*/input", steps="100"))
    assert sel and all(i["step"] == 100 and "layers.1" in i["name"] for i, _ in sel)
    bad = tmp_path / "not_a_dump.h5"
    bad.write_bytes(b"this is not HDF5 or safetensors")
    with pytest.raises(fp8kit.DumpError, match="not_a_dump.h5"):
        list(fp8kit.read_dump(bad))
    with pytest.raises(OSError, match="missing.h5"):
        list(fp8kit.read_dump(tmp_path / "missing.h5"))


def test_inspect_against_numpy():
    df = fp8kit.inspect(DUMP, include="step_000100/model.layers.0.*")
    assert len(df) > 0
    f = h5py.File(DUMP, "r")
    for _, row in df.iterrows():
        ds = f[row["name"]]
        raw = ds[()]
        tag = ds.attrs.get("dtype")
        x = (
            (
                np.asarray(raw).view(np.uint16).view(ml_dtypes.bfloat16)
                if tag == "bfloat16"
                else raw.view(getattr(ml_dtypes, tag))
                if tag
                else raw
            )
            .astype(np.float32)
            .ravel()
        )
        fmt = "e5m2" if row["role"] == "gradient" else "e4m3"
        assert row["format"] == fmt
        amax = np.float32(np.abs(x).max())
        scale = np.float32(ml_dtypes.finfo(FP8[fmt]).max) / amax
        q = np.abs(satfinite((x * scale).astype(np.float32), fmt).astype(np.float64))
        nz = x != 0
        assert row["scale"] == float(scale)
        assert row["underflow"] == int((nz & (q == 0)).sum()), row["name"]
        assert row["subnormal"] == int((nz & (q > 0) & (q < float(ml_dtypes.finfo(FP8[fmt]).smallest_normal))).sum())


def test_replay_te_delayed_against_model():
    rows = np.genfromtxt(TRACE, delimiter=",", names=True, dtype=None, encoding="utf-8")
    name = "model.layers.1.mlp.down_proj.grad_output"
    sel = rows[rows["tensor"] == name]
    amax = sel["amax"].astype(np.float32)
    r = fp8kit.replay(TRACE, "te-delayed", include=name)
    assert len(r) == 1 and r[0]["format"] == "e5m2"
    d = fp8kit.DelayedScaling("e5m2", history_len=1024, algo="max", margin=0)
    want = d.run(amax)
    assert np.array_equal(r[0]["scale"], want)
    # overflow: amax * scale (float32) rounds past 57344 under RNE without saturation -> Inf in ml_dtypes
    s = (amax * want).astype(np.float32)
    over = np.isinf(s.astype(ml_dtypes.float8_e5m2).astype(np.float32))
    assert np.array_equal(r[0]["overflow"], over)
    with pytest.raises(ValueError, match="missing_trace.csv"):
        fp8kit.replay("missing_trace.csv")


def test_sweep_grid_point_equals_replay():
    sw = fp8kit.sweep(TRACE)
    t = sw["table"]
    assert set(sw["recommendation"]) == {"activation", "weight", "gradient"}
    for cls in ("activation", "weight", "gradient"):
        row = t[(t["grid"]) & (t["history"] == 16) & (t["algo"] == "max") & (t["margin"] == 1) & (t["class"] == cls)]
        # the grid point with the recipe's own per-class format
        row = row[row["format"] == ("e5m2" if cls == "gradient" else "e4m3")]
        assert len(row) == 1
        r = fp8kit.recipe("te-delayed") | {"history_len": 16, "algo": "max", "margin": 1}
        want = sum(x["overflow_steps"] for x in fp8kit.replay(TRACE, r) if x["role"] == cls)
        assert int(row["overflow_steps"].iloc[0]) == want
