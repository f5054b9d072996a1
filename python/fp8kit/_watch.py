"""Early warnings (docs/early-warning.md): fp8kit.watch over traces and dumps, and Watcher, the
hook a training monitor calls each step (observe) and at its chosen interval (poll)."""

import json
import os

import numpy as np

from . import _fp8kit
from ._dump import warn_skipped


def watch(files, **options):
    """The report `fp8kit watch --json FILES...` prints, as a dict: 'warnings' (ranked, top-level
    first, each with signal, tensor, step, evidence, numbers, resembles, advice, level ('warning'
    or 'info') and note), 'risk' (the risk signals, uncalibrated), 'tensors' (growth rates per
    series), 'shapes' (with 'channel_amax' and 'blocks' 'scale_log2_hist'), 'swiglu', 'gradients'
    (wgrad noise per linear layer and recipe), 'bf16_layers' and 'norm_weights' (dumps), 'skipped'
    (datasets stored outside the file named and the like, also given as one UserWarning). options:
    the CLI's settings with underscores, e.g. window=128, growth=4, growth_z=5, growth_top=25,
    warmup=100, spike_k=8,
    recipe='te-delayed' (None: no forecast), format='auto', fixed_calibration=0,
    block_recipe='mxfp8', outlier_k=64, swiglu_cos=0.9, tensors=[globs],
    grad_recipes=['te-current', 'mxfp8', 'nvfp4'] ([]: off), grad_ratio=sqrt(3),
    bf16_fraction=0.15, norm_recipe='mxfp8' ('none': off), norm_bias_max=0.005,
    grad_norm=PATH (a CSV with columns step and grad_norm: the run-level verdict)."""
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    out = json.loads(_fp8kit.watch_files([os.fspath(f) for f in files], json.dumps(options)))
    warn_skipped(out["skipped"])
    return out


class Watcher:
    """Trend signals of a run while it trains; memory bounded by the tensors, not the steps.

    w = fp8kit.Watcher(recipe="te-delayed")
    for step in ...:
        w.observe(step, {"layers.0.fc1.input": amax, ...})
        if step % 100 == 0:
            for warning in w.poll():   # each (tensor, signal) once
                print(warning["signal"], warning["tensor"], warning["evidence"])
    """

    def __init__(self, name="monitor", **options):
        self._w = _fp8kit._Watcher(json.dumps(options), name)

    def observe(self, step, amaxes, grad_norm=None):
        """amaxes: {tensor name: amax} for this step (steps strictly increasing per tensor).
        grad_norm: the run's gradient norm at this step (e.g. what clip_grad_norm_ returns), for
        the run-level verdict: a 'grad-norm-growth' warning when it grows as it did before the
        divergences of the benchmark (docs/early-warning.md, "The divergence benchmark")."""
        names = list(amaxes)
        self._w.observe_step(int(step), names, np.asarray([float(amaxes[n]) for n in names], dtype=np.float32))
        if grad_norm is not None:
            self._w.observe_grad_norm(int(step), float(grad_norm))

    def observe_grad_norm(self, step, norm):
        """The run's gradient norm at `step` alone (steps strictly increasing)."""
        self._w.observe_grad_norm(int(step), float(norm))

    def warnings(self):
        """All warnings the data so far supports, ranked."""
        return json.loads(self._w.warnings())

    def poll(self):
        """The warnings not returned by an earlier poll."""
        return json.loads(self._w.poll())
