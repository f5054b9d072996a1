"""fp8kit.watch and fp8kit.Watcher (docs/early-warning.md): the CLI's report from Python, and the
monitor hook fed step by step."""

import json
import os

import fp8kit
import numpy as np
import pytest

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "example")


def test_watch_real_trace_matches_cli_fields():
    r = fp8kit.watch(os.path.join(DATA, "amax_trace.csv"), recipe=None)
    assert {"warnings", "tensors", "shapes", "swiglu"} <= set(r)
    assert len(r["tensors"]) == 60
    assert all(w["signal"] in ("growth", "spike") for w in r["warnings"])  # no recipe: no overflow signals
    key = [(w["level"] != "warning", -w["severity"]) for w in r["warnings"]]  # top-level first, then by severity
    assert key == sorted(key)


def test_watcher_spike_polled_once():
    w = fp8kit.Watcher(recipe=None)
    rng = np.random.default_rng(0)
    seen = []
    for step in range(200):
        a = float(np.exp2(rng.normal(0, 0.2)))
        if step == 150:
            a *= 1000
        w.observe(step, {"layers.0.fc1.input": a, "layers.0.fc2.input": 1.0})
        if step % 25 == 24:
            seen += w.poll()
    assert [(x["signal"], x["tensor"], x["step"]) for x in seen] == [("spike", "layers.0.fc1.input", 150)]
    assert w.poll() == []
    assert len(w.warnings()) == 1


def test_watcher_grad_norm_verdict():
    """Watcher.observe(..., grad_norm=): a norm that falls raises nothing; one that triples within
    80 steps raises the run-level 'grad-norm-growth' warning once, at the step the median of the
    last 16 norms first reaches 3x its lowest of the last 80 steps (computed here with numpy)."""
    gn = [2.0 * 0.98**s + 0.3 for s in range(120)] + [0.3 * 1.03**s for s in range(1, 81)]
    g = [float(np.median(gn[s - 15 : s + 1])) for s in range(15, len(gn))]
    want = next(s for s in range(20, len(gn)) if g[s - 15] / min(g[max(0, s - 80 - 15) : s - 14]) >= 3)
    w = fp8kit.Watcher(recipe=None)
    got = []
    for s, x in enumerate(gn):
        w.observe(s, {"t": 1.0}, grad_norm=x)
        got += [p for p in w.poll() if p["signal"] == "grad-norm-growth"]
        if s < 119:
            assert not got
    assert len(got) == 1 and got[0]["step"] == want and got[0]["level"] == "warning"
    assert got[0]["numbers"]["growth"] >= 3


def test_bad_settings_raise_value_error():
    with pytest.raises(ValueError, match="window"):
        fp8kit.watch(os.path.join(DATA, "amax_trace.csv"), window=7)
    with pytest.raises(ValueError, match="colour"):
        fp8kit.Watcher(colour="red")


def test_plot_writes_pngs(tmp_path):
    pytest.importorskip(
        "matplotlib", reason="fp8kit.plot needs matplotlib, which the fp8kit package does not depend on"
    )
    from fp8kit import plot

    r = fp8kit.watch([os.path.join(DATA, "amax_trace.csv"), os.path.join(DATA, "llama_tiny_dump.h5")])
    paths = plot.plot_report(r, str(tmp_path / "plots"), top=2)
    assert any(os.path.basename(p).startswith("amax_") for p in paths)
    assert any(os.path.basename(p).startswith("swiglu_") for p in paths)
    for p in paths:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert plot.main([str(bad), "--out", str(tmp_path / "x")]) == 2


def _te_mxfp8_columnwise(x):
    """Independent transcription (from TE's MXFP8 cast, not fp8kit) of the wgrad GEMM operand:
    blocks of 32 tokens per feature, scale_inv = 2^ceil(log2(fl32(amax * fl32(1/448)))) (TE
    float_to_e8m0 rounds up; an exact power of two stays), E4M3 round-to-nearest-even (ml_dtypes).
    x: tokens x features float32; returns the dequantised features x tokens, float64."""
    import ml_dtypes

    xt = np.ascontiguousarray(x.T).astype(np.float32)
    f, t = xt.shape
    b = xt.reshape(f, t // 32, 32)
    amax = np.abs(b).max(axis=-1, keepdims=True)
    d = (amax * (np.float32(1) / np.float32(448))).astype(np.float32).astype(np.float64)
    m, e = np.frexp(d)
    e = np.where(m == 0.5, e - 1, e)
    s = np.exp2(e)
    q = (b / s).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * s
    return q.reshape(f, t)


def _bf16(d):
    x = d[...]
    return (x.astype(np.uint32) << 16).view(np.float32) if d.attrs.get("dtype") == "bfloat16" else x.astype(np.float32)


def test_wgrad_noise_matches_an_independent_mxfp8_reference():
    h5py = pytest.importorskip("h5py")
    r = fp8kit.watch(os.path.join(DATA, "llama_tiny_dump.h5"), grad_recipes=["mxfp8"], recipe=None)
    by = {(g["step"], g["layer"]): g for g in r["gradients"]}
    assert len(by) == 45  # 15 linear layers x 3 dumped steps
    with h5py.File(os.path.join(DATA, "llama_tiny_dump.h5")) as f:
        layer = "step_000100/model.layers.0.mlp.up_proj"
        x = _bf16(f[layer + "/input"]).reshape(128, -1)
        dy = f[layer + "/grad_output"][...].astype(np.float32).reshape(128, -1)
    g = dy.astype(np.float64).T @ x.astype(np.float64)
    gq = _te_mxfp8_columnwise(dy) @ _te_mxfp8_columnwise(x).T
    got = by[(100, layer)]["recipes"][0]
    assert got["recipe"] == "mxfp8"
    # binary64 sums in another order: 1e-9 relative
    assert got["grad_norm"] == pytest.approx(np.linalg.norm(g), rel=1e-9)
    assert got["noise_rtn"] == pytest.approx(np.linalg.norm(gq - g), rel=1e-9)
    assert got["ratio_sr"] > np.sqrt(3) and got["ratio_rtn"] > np.sqrt(3)
    # The BF16 choice: 15% of the 14 linear layers (lm_head left out), the last in model order.
    c = [b for b in r["bf16_layers"] if b["step"] == 100][0]
    assert c["linear_layers"] == 14 and c["keep"] == 3
    assert c["last"] == [
        "step_000100/model.layers.1.mlp.gate_proj",
        "step_000100/model.layers.1.mlp.up_proj",
        "step_000100/model.layers.1.mlp.down_proj",
    ]
    assert not [w for w in r["warnings"] if w["signal"] == "grad-noise"]


def test_norm_weight_bias_against_reference(tmp_path):
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(3)
    w = (1.03 * (1 + 0.002 * rng.standard_normal(64))).astype(np.float32)
    ones = np.ones(64, dtype=np.float32)
    p = tmp_path / "norms.h5"
    with h5py.File(p, "w") as f:
        for name, v in (("model.layers.0.input_layernorm.weight", w), ("model.norm.weight", ones)):
            f[name] = v
            f[name].attrs["step"] = 7
            f[name].attrs["role"] = "weight"
    r = fp8kit.watch(str(p), recipe=None)
    got = {n["tensor"]: n for n in r["norm_weights"]}
    # Reference: TE MXFP8 (as above) on the 1 x 64 weight.
    q = _te_mxfp8_columnwise(w.reshape(64, 1)).reshape(-1)
    bias = (q - w).sum() / np.abs(w.astype(np.float64)).sum()
    assert abs(bias) > 0.005
    assert got["model.layers.0.input_layernorm.weight"]["bias"] == pytest.approx(bias, rel=1e-12)
    assert got["model.norm.weight"]["bias"] == 0
    warned = [x["tensor"] for x in r["warnings"] if x["signal"] == "norm-weight-bias"]
    assert warned == ["model.layers.0.input_layernorm.weight"]
    with pytest.raises(ValueError, match="grad_recipes"):
        fp8kit.watch(str(p), grad_recipes=["te-delayed"])


def test_plot_channels_and_block_scales(tmp_path):
    pytest.importorskip(
        "matplotlib", reason="fp8kit.plot needs matplotlib, which the fp8kit package does not depend on"
    )
    from fp8kit import plot

    r = fp8kit.watch(os.path.join(DATA, "llama_tiny_dump.h5"), recipe=None)
    s = r["shapes"][0]
    assert len(s["channel_amax"]) == s["channels"] and max(s["channel_amax"]) == s["max_channel_amax"]
    assert sum(c for _, c in s["blocks"]["scale_log2_hist"]) <= s["blocks"]["count"]
    paths = [os.path.basename(p) for p in plot.plot_report(r, str(tmp_path), top=2)]
    assert {"channels_0.png", "blocks_0.png", "gradnoise.png"} <= set(paths)


def planted_overflows(watcher):
    """300 steps of amax 1 in three tensors; under te-delayed (margin 0, E4M3 past 464) one jumps
    x1.5 at step 150 (672: margin +1 removes it), one x3 at step 180 (1344: +2), one stays flat."""
    jumps = {"layers.0.fc1.input": {150: 1.5}, "layers.0.fc2.input": {180: 3.0}, "layers.1.fc1.input": {}}
    level = dict.fromkeys(jumps, 1.0)
    for step in range(300):
        for name, j in jumps.items():
            level[name] = j.get(step, level[name])
        watcher.observe(step, dict(level))


def test_watcher_groups_overflows_of_one_recipe():
    """Overflows of several tensors under one recipe and margin: one top-level overflow-group
    listing each tensor's steps and the margin that removes them; each tensor's own warning kept as info."""
    w = fp8kit.Watcher()
    planted_overflows(w)
    ws = w.warnings()
    top = [x for x in ws if x["level"] == "warning"]
    assert [x["signal"] for x in top] == ["overflow-group"]
    n = top[0]["numbers"]
    assert {m["tensor"]: m["steps"] for m in n["members"]} == {
        "layers.0.fc1.input": [[150, 150]],
        "layers.0.fc2.input": [[180, 180]],
    }
    assert n["extra_margin_after_warmup"] == 2 and n["margin_after_warmup"] == 2 and n["count"] == 2
    own = [x for x in ws if x["signal"] == "overflow"]
    assert len(own) == 2 and all(x["level"] == "info" and "overflow-group" in x["note"] for x in own)


def test_overflow_group_in_the_report_schema():
    """The bundled run's report, with its overflow group, validates against docs/schemas/watch.schema.json;
    a member whose steps are not [first, last] pairs does not."""
    jsonschema = pytest.importorskip("jsonschema")
    schema_path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "schemas", "watch.schema.json")
    with open(schema_path) as f:
        schema = json.load(f)
    # The warnings' part (the CLI's report adds the file list, which fp8kit.watch's dict leaves out).
    warnings_schema = {"$defs": schema["$defs"], **schema["properties"]["warnings"]}
    r = fp8kit.watch([os.path.join(DATA, "amax_trace.csv"), os.path.join(DATA, "llama_tiny_dump.h5")])
    jsonschema.validate(r["warnings"], warnings_schema, cls=jsonschema.Draft202012Validator)
    group = next(x for x in r["warnings"] if x["signal"] == "overflow-group")
    assert group["level"] == "warning" and len(group["numbers"]["members"]) >= 2
    group["numbers"]["members"][0]["steps"] = "1-9"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(r["warnings"], warnings_schema, cls=jsonschema.Draft202012Validator)
