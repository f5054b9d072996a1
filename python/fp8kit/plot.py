"""Plots of an early-warning report (docs/early-warning.md):

    python -m fp8kit.plot REPORT.json --out DIR [--top N]

REPORT.json is `fp8kit watch --json` output (or fp8kit.watch's dict saved as JSON). Draws, as PNG:
  amax_<k>.png    amax over steps of the k-th warned tensor of a trace file (read again from the
                  file the report names), spikes marked, the growth window's fitted slope (and
                  extrapolated one window further), the first overflow and the step the
                  overflow forecast first passed its threshold;
  swiglu_<k>.png  |cos(gate row, up row)| per channel of each SwiGLU pair, with the threshold;
  channels_<k>.png per-channel amax of the dumped tensors with the largest max/median channel
                  ratio (warned ones first), with the median and the outlier threshold;
  blocks_<k>.png  histogram of the block scales (log2 scale_inv) of the dumped tensors with the
                  widest spread (warned ones first), under the report's block recipe;
  gradnoise.png   ||G|| / wgrad quantisation noise per layer and recipe against sqrt(3).
Needs matplotlib (not a dependency of the package; requirements.txt installs it); the C++ CLI has no plotting.
"""

import argparse
import json
import os
import sys


def _savefig(fig, path):
    """A figure as PNG through fp8kit's output sink (io/sink.hpp): never a half-written file."""
    import io

    from . import _fp8kit

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    _fp8kit.write_file(path, buf.getvalue())


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("fp8kit.plot needs matplotlib (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_report(report, out, top=10):
    """Writes the PNGs for `report` (a dict) into `out`; returns their paths."""
    import numpy as np

    from ._replay import read_trace

    plt = _pyplot()
    os.makedirs(out, exist_ok=True)
    written = []
    by_tensor = {}
    for w in report["warnings"]:
        if w["signal"] in ("spike", "growth", "overflow", "overflow-forecast", "fixed-scale"):
            by_tensor.setdefault((w["file"], w["tensor"]), []).append(w)
    traces = {}
    for k, ((f, t), ws) in enumerate(list(by_tensor.items())[:top]):
        if f not in traces:
            try:
                traces[f] = {s["tensor"]: s for s in read_trace(f)}
            except Exception:  # a dump: its amax series are not re-read here
                traces[f] = {}
        s = traces[f].get(t)
        if s is None:
            continue
        steps, amax = np.asarray(s["steps"]), np.asarray(s["amax"], dtype=np.float64)
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.semilogy(steps, amax, lw=1, label="amax")
        for w in ws:
            n = w["numbers"]
            if w["signal"] == "spike":
                sp = n["spikes"]
                ax.plot([x["step"] for x in sp], [x["amax"] for x in sp], "rv", label="spike")
            elif w["signal"] == "growth":
                # The fitted slope over its window (solid), and extrapolated one window further
                # (dotted): the forecast if the growth went on, not a prediction that it will.
                f0, f1 = n["from_step"], n["to_step"]
                line = lambda x: (
                    n["from_amax"] * np.exp2((np.asarray(x, dtype=np.float64) - f0) * n["slope_log2_per_1000"] / 1000)
                )
                ax.plot(
                    [f0, f1],
                    line([f0, f1]),
                    "k-",
                    lw=1.5,
                    label=f"growth {n['slope_log2_per_1000']:.3g} log2/1000 steps",
                )
                ax.plot([f1, 2 * f1 - f0], line([f1, 2 * f1 - f0]), "k:", label="extrapolated")
            elif w["signal"] == "overflow":
                ax.axvline(n["first_step"], color="orange", lw=1, label="first overflow")
            elif w["signal"] == "overflow-forecast":
                # The first step at which P(overflow within the horizon) passed the threshold.
                ax.axvline(
                    n["first_step"],
                    color="purple",
                    lw=1,
                    ls="--",
                    label=f"overflow forecast: P = {n['probability']:.2f} within {n['horizon']:g} steps",
                )
        ax.set_xlabel("step")
        ax.set_ylabel("amax")
        ax.set_title(t, fontsize=9)
        ax.legend(fontsize=8)
        p = os.path.join(out, f"amax_{k}.png")
        _savefig(fig, p)
        plt.close(fig)
        written.append(p)
    for k, g in enumerate(report.get("swiglu", [])[:top]):
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.bar(range(len(g["cos"])), np.abs(g["cos"]), width=1.0)
        thr = next((w["numbers"]["threshold"] for w in report["warnings"] if w["signal"] == "swiglu-alignment"), 0.9)
        ax.axhline(thr, color="r", lw=1)
        ax.set_xlabel("channel")
        ax.set_ylabel("|cos(gate, up)|")
        ax.set_title(f"{g['gate']} (step {g['step']})", fontsize=9)
        p = os.path.join(out, f"swiglu_{k}.png")
        _savefig(fig, p)
        plt.close(fig)
        written.append(p)
    written += plot_shapes(report, out, top, plt)
    return written


def _ranked_shapes(report, signal, key):
    """Dumped tensors, the warned ones (of `signal`) first, then by `key` descending."""
    warned = {(w["file"], w["tensor"], w["step"]) for w in report["warnings"] if w["signal"] == signal}
    shapes = [s for s in report.get("shapes", []) if key(s) is not None]
    return sorted(shapes, key=lambda s: ((s["file"], s["tensor"], s["step"]) not in warned, -key(s)))


def plot_shapes(report, out, top, plt, outlier_k=64):
    """Per-channel amax, block-scale histograms and gradient-noise ratios from the report's JSON."""
    import numpy as np

    written = []

    def save(fig, name):
        p = os.path.join(out, name)
        _savefig(fig, p)
        plt.close(fig)
        written.append(p)

    ratio = lambda s: (
        (s["max_channel_amax"] / s["median_channel_amax"])
        if s.get("channel_amax") and s["median_channel_amax"] > 0
        else None
    )
    for k, s in enumerate(_ranked_shapes(report, "outlier-channels", ratio)[:top]):
        ch = np.asarray(s["channel_amax"], dtype=np.float64)
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.semilogy(np.arange(len(ch)), np.maximum(ch, 1e-45), ".", ms=3, label="channel amax")
        ax.axhline(s["median_channel_amax"], color="k", lw=1, label="median")
        k_out = outlier_k  # the default of `fp8kit watch --outlier-k`
        ax.axhline(k_out * s["median_channel_amax"], color="r", lw=1, ls="--", label=f"{k_out:g} x median")
        for c in s["outlier_channels"][:16]:
            ax.annotate(str(c), (c, ch[c]), fontsize=7, color="r")
        ax.set_xlabel("channel (last dimension)")
        ax.set_ylabel("amax")
        ax.set_title(f"{s['tensor']} (step {s['step']}), max/median {ratio(s):.3g}", fontsize=9)
        ax.legend(fontsize=8)
        save(fig, f"channels_{k}.png")
    spread = lambda s: s["blocks"]["scale_log2_range"] if "blocks" in s and s["blocks"].get("scale_log2_hist") else None
    for k, s in enumerate(_ranked_shapes(report, "block-scales", spread)[:top]):
        h = np.asarray(s["blocks"]["scale_log2_hist"])
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.bar(h[:, 0], h[:, 1], width=0.9)
        ax.set_xlabel("log2 scale_inv of a block (blocks of zeros left out)")
        ax.set_ylabel("blocks")
        b = s["blocks"]
        ax.set_title(
            f"{s['tensor']} (step {s['step']}): {b['count']} blocks, range {b['scale_log2_range']:g}, "
            f"std {b['scale_log2_std']:.3g} binades",
            fontsize=9,
        )
        save(fig, f"blocks_{k}.png")
    grads = report.get("gradients", [])
    if grads:
        fig, ax = plt.subplots(figsize=(9, 3.5))
        recipes = sorted({r["recipe"] for g in grads for r in g["recipes"] if "ratio_sr" in r})
        for j, name in enumerate(recipes):
            ys = [next((r.get("ratio_sr") for r in g["recipes"] if r["recipe"] == name), None) for g in grads]
            ax.semilogy(
                range(len(grads)), [y if y is not None else np.nan for y in ys], "o", ms=4, label=f"{name} (SR)"
            )
        ax.axhline(np.sqrt(3), color="r", lw=1, label="sqrt(3)")
        ax.set_xticks(range(len(grads)))
        ax.set_xticklabels([f"{g['step']}:{g['layer'].split('/')[-1][-24:]}" for g in grads], rotation=90, fontsize=6)
        ax.set_ylabel("||G|| / ||G_q - G||")
        ax.legend(fontsize=8)
        save(fig, "gradnoise.png")
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m fp8kit.plot", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("report")
    ap.add_argument("--out", required=True)
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args(argv)
    try:
        with open(a.report) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"fp8kit.plot: {a.report}: {e}", file=sys.stderr)
        return 2
    if not isinstance(report, dict) or "warnings" not in report:
        print(f"fp8kit.plot: {a.report}: not an fp8kit watch --json report", file=sys.stderr)
        return 2
    for p in plot_report(report, a.out, a.top):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
