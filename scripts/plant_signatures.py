#!/usr/bin/env python3
"""Planted early-warning signatures (issue 27; docs/early-warning.md), and their scoring.

  plant_signatures.py plant OUTDIR [--seed N]
      Writes >= 200 cases into OUTDIR from the bundled real run (data/example/): per-tensor amax
      series (steps 100..299 of a real series of amax_trace.csv, one CSV per case) with a planted
      growth (amax x 2^(R (t - t0) / 1000) from step t0), a planted spike (amax x F at step t0)
      or nothing (null), and dump cases (one HDF5 per case: a real SwiGLU gate/up weight pair of
      llama_tiny_dump.h5) with 1..4 channels made aligned (up row = a x gate row + noise, |cos|
      >= 0.95) or nothing. OUTDIR/manifest.json lists every case and what was planted where.
  plant_signatures.py score OUTDIR REPORT.json
      Scores `fp8kit watch --json` over the cases: per signal, a true positive is a warning of
      that signal on the planted case's tensor at the planted step (spike: the step is listed;
      growth: first seen within [t0, t0 + 96]; swiglu-alignment: the warned channels are exactly
      the planted ones); any other warning of the signal is a false positive. Prints precision
      and recall per signal and exits 1 when one is below 0.9.
"""
import argparse
import csv
import json
import os
import sys

import h5py
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "data", "example")
GROWTH_LAG = 96  # steps after t0 within which a growth warning counts (window 64 + evaluation stride)


def real_series():
    d = {}
    with open(os.path.join(DATA, "amax_trace.csv")) as f:
        for r in csv.DictReader(f):
            d.setdefault(r["tensor"], []).append((int(r["step"]), np.float32(r["amax"])))
    out = {}
    for k, v in d.items():
        v.sort()
        steps = np.array([s for s, _ in v if s >= 100])
        amax = np.array([a for s, a in v if s >= 100], dtype=np.float32)
        if len(steps) == 200 and np.all(amax > 0):
            out[k] = (steps, amax)
    return out


def write_csv(path, tensor, steps, amax):
    with open(path, "w") as f:
        f.write("step,tensor,amax\n")
        for s, a in zip(steps, amax):
            f.write(f"{s},{tensor},{float(a)!r}\n")  # the float32 value exactly, read back as itself


def plant(out, seed):
    rng = np.random.default_rng(seed)
    series = real_series()
    names = sorted(series)
    cases = []
    kinds = ["growth"] * 60 + ["spike"] * 60 + ["null-trace"] * 40
    for i, kind in enumerate(kinds):
        name = names[rng.integers(len(names))]
        steps, amax = series[name]
        amax = amax.astype(np.float64)
        case = {"case": f"t{i:03d}", "kind": kind, "source": name, "tensor": f"case{i:03d}.{name}"}
        if kind == "growth":
            t0 = int(rng.integers(150, 221))
            rate = float(rng.uniform(80, 160))  # log2 per 1000 steps
            amax = amax * np.exp2(np.maximum(steps - t0, 0) * rate / 1000)
            case.update(signal="growth", step=t0, rate=rate)
        elif kind == "spike":
            t0 = int(rng.integers(140, 300))
            factor = float(np.exp2(rng.uniform(7, 10)))
            amax[steps == t0] *= factor
            case.update(signal="spike", step=t0, factor=factor)
        else:
            case.update(signal=None)
        case["file"] = os.path.join(out, case["case"] + ".csv")
        write_csv(case["file"], case["tensor"], steps, amax.astype(np.float32))
        cases.append(case)
    # SwiGLU pairs of the real dump.
    src = h5py.File(os.path.join(DATA, "llama_tiny_dump.h5"), "r")
    pairs = []
    for step in sorted(src):
        for layer in (0, 1):
            g = f"{step}/model.layers.{layer}.mlp.gate_proj/weight"
            pairs.append((g, g.replace("gate_proj", "up_proj")))
    for i in range(60):
        gname, uname = pairs[rng.integers(len(pairs))]
        gate = src[gname][...].astype(np.float32)
        up = src[uname][...].astype(np.float32)
        case = {"case": f"d{i:03d}", "tensor": gname}
        if i < 40:
            chans = sorted(int(c) for c in rng.choice(gate.shape[0], size=int(rng.integers(1, 5)), replace=False))
            for c in chans:
                g = gate[c]
                noise = rng.standard_normal(g.shape).astype(np.float32) * np.float32(0.1 * np.linalg.norm(g) / np.sqrt(g.size))
                sign = np.float32(1 if rng.random() < 0.5 else -1)
                up[c] = sign * (g + noise) * np.float32(np.linalg.norm(up[c]) / np.linalg.norm(g))
            case.update(kind="swiglu", signal="swiglu-alignment", step=int(src[gname].attrs["step"]), channels=chans)
        else:
            case.update(kind="null-dump", signal=None)
        case["file"] = os.path.join(out, case["case"] + ".h5")
        with h5py.File(case["file"], "w") as f:
            for n, x in ((gname, gate), (uname, up)):
                d = f.create_dataset(n, data=x)
                for k, v in src[n].attrs.items():
                    d.attrs[k] = v
        cases.append(case)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(cases, f, indent=1)
    nulls = sum(c["signal"] is None for c in cases)
    print(f"{len(cases)} cases, {nulls} null ({100 * nulls / len(cases):.0f}%) in {out}")


def score(out, report):
    cases = json.load(open(os.path.join(out, "manifest.json")))
    warnings = json.load(open(report))["warnings"]
    by_file = {}
    for w in warnings:
        by_file.setdefault(w["file"], []).append(w)
    ok = True
    for signal in ("growth", "spike", "swiglu-alignment"):
        tp = fp = planted = 0
        for c in cases:
            ws = [w for w in by_file.get(c["file"], []) if w["signal"] == signal]
            is_planted = c["signal"] == signal
            planted += is_planted
            hit = False
            for w in ws:
                if not is_planted:
                    fp += 1
                    continue
                if signal == "spike":
                    good = w["tensor"] == c["tensor"] and c["step"] in [s["step"] for s in w["numbers"]["spikes"]]
                    good = good and w["numbers"]["count"] == 1
                elif signal == "growth":
                    good = w["tensor"] == c["tensor"] and c["step"] <= w["step"] <= c["step"] + GROWTH_LAG
                else:
                    good = w["tensor"] == c["tensor"] and sorted(w["numbers"]["channels"]) == c["channels"]
                if good and not hit:
                    tp += 1
                    hit = True
                else:
                    fp += 1
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / planted if planted else 1.0
        print(f"{signal}: planted {planted}, true {tp}, false {fp}: precision {precision:.3f}, recall {recall:.3f}")
        ok &= precision >= 0.9 and recall >= 0.9
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("plant")
    a.add_argument("out")
    a.add_argument("--seed", type=int, default=27)
    b = sub.add_parser("score")
    b.add_argument("out")
    b.add_argument("report")
    args = p.parse_args()
    if args.cmd == "plant":
        os.makedirs(args.out, exist_ok=True)
        plant(args.out, args.seed)
        return 0
    return score(args.out, args.report)


if __name__ == "__main__":
    sys.exit(main())
