"""fp8kit.watch and fp8kit.Watcher (docs/early-warning.md): the CLI's report from Python, and the
monitor hook fed step by step."""
import os

import numpy as np
import pytest

import fp8kit

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "example")


def test_watch_real_trace_matches_cli_fields():
    r = fp8kit.watch(os.path.join(DATA, "amax_trace.csv"), recipe=None)
    assert {"warnings", "tensors", "shapes", "swiglu"} <= set(r)
    assert len(r["tensors"]) == 60
    assert all(w["signal"] in ("growth", "spike") for w in r["warnings"])  # no recipe: no overflow signals
    sev = [w["severity"] for w in r["warnings"]]
    assert sev == sorted(sev, reverse=True)


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


def test_bad_settings_raise_value_error():
    with pytest.raises(ValueError, match="window"):
        fp8kit.watch(os.path.join(DATA, "amax_trace.csv"), window=7)
    with pytest.raises(ValueError, match="colour"):
        fp8kit.Watcher(colour="red")


def test_plot_writes_pngs(tmp_path):
    pytest.importorskip("matplotlib", reason="fp8kit.plot needs matplotlib, which requirements.txt does not list")
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
