"""data/divergence/ (docs/early-warning.md, "A provoked divergence"): the figures in each run's
summary.json and warnings are recomputed here from the committed loss and amax files with numpy,
independently of fp8kit and of scripts/gpu/divergence_run.py."""

import csv
import gzip
import json
import math
import os
from collections import defaultdict

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "data", "divergence")
SUMMARIES = sorted(os.path.join(d, "summary.json") for d, _, files in os.walk(ROOT) if "summary.json" in files)
RUNS = [
    (s, lr, name) for s in SUMMARIES for lr, runs in json.load(open(s)).items() if lr.startswith("lr_") for name in runs
]


def run_dir(summary, lr, name):
    base = os.path.dirname(summary)
    multi = os.path.isdir(os.path.join(base, lr))
    return os.path.join(base, lr, name) if multi else os.path.join(base, name)


def divergence_step(losses, k, min_step):
    """The rule stated in docs/early-warning.md: the first step >= min_step whose loss is not finite
    or exceeds k times the minimum of all earlier losses."""
    for s in range(min_step, len(losses)):
        if not math.isfinite(losses[s]) or losses[s] > k * min(losses[:s]):
            return s
    return None


def spikes(trace_gz, k=16.0, window=32):
    """{tensor: [spike steps]}: amax > k x the median of the previous `window` nonzero amaxes of
    that tensor (float32 median of the two middle values), zero amaxes skipped (the rule of the
    table in docs/early-warning.md)."""
    series = defaultdict(list)
    with gzip.open(trace_gz, "rt") as f:
        for row in csv.DictReader(f):
            a = np.float32(row["amax"])
            if a != 0:
                series[row["tensor"]].append((int(row["step"]), a))
    out = {}
    for name, pts in series.items():
        found = []
        for i in range(window, len(pts)):
            prev = np.sort(np.array([a for _, a in pts[i - window : i]], dtype=np.float32))
            med = np.float32(0.5) * (prev[window // 2 - 1] + prev[window // 2])
            if float(pts[i][1]) > k * float(med):
                found.append(pts[i][0])
        if found:
            out[name] = found
    return out


@pytest.mark.skipif(not RUNS, reason="data/divergence has no runs")
@pytest.mark.parametrize("summary,lr,name", RUNS)
def test_divergence_step_follows_from_the_losses(summary, lr, name):
    s = json.load(open(summary))
    with open(os.path.join(run_dir(summary, lr, name), "loss.csv")) as f:
        losses = [float(r["loss"]) for r in csv.DictReader(f)]
    st = s["settings"]
    assert len(losses) == s[lr][name]["steps_run"]
    assert divergence_step(losses, st["k"], st["min_step"]) == s[lr][name]["divergence_step"]


@pytest.mark.skipif(not RUNS, reason="data/divergence has no runs")
@pytest.mark.parametrize("summary,lr,name", RUNS)
def test_spike_warnings_follow_from_the_trace(summary, lr, name):
    d = run_dir(summary, lr, name)
    expected = spikes(os.path.join(d, "amax_trace.csv.gz"))
    live = {
        w["tensor"]: w["step"] for w in json.load(open(os.path.join(d, "warnings_live.json"))) if w["signal"] == "spike"
    }
    assert live == {t: steps[0] for t, steps in expected.items()}
    whole = {
        w["tensor"]: (w["step"], w["numbers"]["count"])
        for w in json.load(open(os.path.join(d, "watch.json")))["warnings"]
        if w["signal"] == "spike"
    }
    assert whole == {t: (steps[0], len(steps)) for t, steps in expected.items()}
