"""Plots of an early-warning report (docs/early-warning.md):

    python -m fp8kit.plot REPORT.json --out DIR [--top N]

REPORT.json is `fp8kit watch --json` output (or fp8kit.watch's dict saved as JSON). Draws, as PNG:
  amax_<k>.png    amax over steps of the k-th warned tensor of a trace file (read again from the
                  file the report names), spikes marked, the growth window's fitted slope (and
                  extrapolated one window further), and overflow steps marked;
  swiglu_<k>.png  |cos(gate row, up row)| per channel of each SwiGLU pair, with the threshold.
Needs matplotlib (not in requirements.txt: install it yourself); the C++ CLI has no plotting.
"""
import argparse
import json
import os
import sys


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("fp8kit.plot needs matplotlib (pip install matplotlib)")
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
                line = lambda x: n["from_amax"] * np.exp2((np.asarray(x, dtype=np.float64) - f0) * n["slope_log2_per_1000"] / 1000)
                ax.plot([f0, f1], line([f0, f1]), "k-", lw=1.5, label=f"growth {n['slope_log2_per_1000']:.3g} log2/1000 steps")
                ax.plot([f1, 2 * f1 - f0], line([f1, 2 * f1 - f0]), "k:", label="extrapolated")
            elif w["signal"] == "overflow":
                ax.axvline(n["first_step"], color="orange", lw=1, label="first overflow")
        ax.set_xlabel("step")
        ax.set_ylabel("amax")
        ax.set_title(t, fontsize=9)
        ax.legend(fontsize=8)
        p = os.path.join(out, f"amax_{k}.png")
        fig.savefig(p, dpi=100, bbox_inches="tight")
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
        fig.savefig(p, dpi=100, bbox_inches="tight")
        plt.close(fig)
        written.append(p)
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fp8kit.plot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
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
