#!/usr/bin/env python3
"""Planted early-warning signatures (issue 27; docs/early-warning.md), and their scoring.

  plant_signatures.py plant OUTDIR [--seed N]
      Writes >= 200 cases into OUTDIR from the bundled real run (data/example/): per-tensor amax
      series (steps 100..299 of a real series of amax_trace.csv, one CSV per case) with a planted
      growth (amax x 2^(R (t - t0) / 1000) from step t0), a planted spike (amax x F at step t0)
      or nothing (null), and dump cases (one HDF5 per case: a real SwiGLU gate/up weight pair of
      llama_tiny_dump.h5) with 1..4 channels made aligned (up row = a x gate row + noise, |cos|
      >= 0.95) or nothing; sub-noise gradient cases (one HDF5 per case: a real layer's input X and
      output gradient dY of llama_tiny_dump.h5, float32) where dY is projected off the column space
      of X and eps in [0.005, 0.03] of it added back, so that the weight gradient dY^T X shrinks by
      eps while the operands, and the quantisation noise of the wgrad GEMM, keep their size, or left
      as dumped (null); and norm-weight cases (a real gate weight beside a 64-element
      input_layernorm weight): weights clustered round a value c (c (1 + 0.002 z)) whose MXFP8 cast
      (TE's round-up E8M0 scale, E4M3 round-to-nearest: transcribed here with ml_dtypes, not from
      fp8kit) is biased by more than 1%, or nulls: all ones (initialisation) or spread widely
      (uniform 0.5 .. 1.5) with a reference bias under 0.25%.
      OUTDIR/manifest.json lists every case and what was planted where; OUTDIR/clean/ holds each
      amax case's series as it was before planting (the same file name).
  plant_signatures.py score OUTDIR REPORT.json CLEAN_REPORT.json
      Scores `fp8kit watch --json` over the cases (REPORT) against the same over OUTDIR/clean/
      (CLEAN_REPORT): per signal, a true positive is a warning of that signal on the planted
      case's tensor at the planted step (spike: the step is listed and not in the clean series'
      list; growth: an episode the clean series does not have, first seen within [t0, t0 + 40];
      swiglu-alignment: the warned channels are exactly the planted ones; grad-noise: the planted
      layer and step; norm-weight-bias: the planted norm weight); any other warning of the signal
      that the clean series does not raise (a spike step or growth episode of its own) is a false
      positive. Prints precision and recall per signal and exits 1 when one is below 0.9.
"""
import argparse
import csv
import json
import os
import sys

import h5py
import ml_dtypes
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "data", "example")
GROWTH_LAG = 40  # steps after t0 within which a growth episode counts (issue 50: within 40 steps of its onset)


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
        os.makedirs(os.path.join(out, "clean"), exist_ok=True)
        case["clean"] = os.path.join(out, "clean", case["case"] + ".csv")
        write_csv(case["clean"], case["tensor"], steps, series[name][1])
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
    cases += plant_gradients(out, rng, src)
    cases += plant_norms(out, rng, src)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(cases, f, indent=1)
    nulls = sum(c["signal"] is None for c in cases)
    print(f"{len(cases)} cases, {nulls} null ({100 * nulls / len(cases):.0f}%) in {out}")


def write_h5(path, tensors):
    with h5py.File(path, "w") as f:
        for name, x, attrs in tensors:
            d = f.create_dataset(name, data=x)
            for k, v in attrs.items():
                d.attrs[k] = v


def as_f32(d):
    """A dumped dataset as float32 (bfloat16 stored as uint16 with a dtype attribute)."""
    x = d[...]
    if d.attrs.get("dtype") == "bfloat16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32)


def plant_gradients(out, rng, src):
    # Layers whose input has fewer features than tokens: only there can per-token gradients cancel
    # (X's columns do not span every token direction).
    layers = []
    for step in sorted(src):
        for name in sorted(src[step]):
            g = src[step][name]
            if "input" in g and "grad_output" in g and g["input"].shape[-1] < np.prod(g["input"].shape[:-1]):
                layers.append((step, name))
    cases = []
    for i in range(45):
        step, name = layers[rng.integers(len(layers))]
        x = as_f32(src[step][name]["input"])
        dy = as_f32(src[step][name]["grad_output"])
        t = int(np.prod(x.shape[:-1]))
        x2, dy2 = x.reshape(t, -1).astype(np.float64), dy.reshape(t, -1).astype(np.float64)
        case = {"case": f"g{i:03d}", "tensor": f"{step}/{name}", "step": int(src[step][name]["input"].attrs["step"])}
        if i < 30:
            eps = float(rng.uniform(0.005, 0.03))
            q, _ = np.linalg.qr(x2)
            dy2 = dy2 - (1 - eps) * q @ (q.T @ dy2)
            case.update(kind="sub-noise-gradient", signal="grad-noise", eps=eps)
        else:
            case.update(kind="null-gradient", signal=None)
        case["file"] = os.path.join(out, case["case"] + ".h5")
        attrs = lambda role: {"role": role, "step": case["step"]}
        write_h5(case["file"], [(f"{step}/{name}/input", x2.astype(np.float32).reshape(x.shape), attrs("activation")),
                                (f"{step}/{name}/grad_output", dy2.astype(np.float32).reshape(dy.shape), attrs("gradient"))])
        cases.append(case)
    return cases


def mxfp8_bias(w):
    """sum(Q(w) - w) / sum|w| of w (float32, length a multiple of 32) under TE's MXFP8 cast:
    scale_inv = 2^ceil(log2(fl32(amax * fl32(1 / 448)))) per 1x32 block (float_to_e8m0 rounds up),
    elements fl32(x / scale_inv) cast to E4M3 round-to-nearest-even (ml_dtypes), times scale_inv."""
    w = np.asarray(w, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(w).max(axis=1, keepdims=True)
    d = (amax * (np.float32(1) / np.float32(448))).astype(np.float32)
    m, e = np.frexp(d.astype(np.float64))
    e = np.where(m == 0.5, e - 1, e)  # an exact power of two keeps its exponent; else round up
    scale_inv = np.exp2(e.astype(np.float64))
    q = (w / scale_inv).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * scale_inv
    return float((q - w).sum() / np.abs(w.astype(np.float64)).sum())


def plant_norms(out, rng, src):
    steps = sorted(src)
    cases = []
    for i in range(45):
        step = steps[rng.integers(len(steps))]
        layer = int(rng.integers(2))
        gname = f"{step}/model.layers.{layer}.mlp.gate_proj/weight"
        nname = f"{step}/model.layers.{layer}.input_layernorm/weight"
        case = {"case": f"n{i:03d}", "tensor": nname, "step": int(src[gname].attrs["step"])}
        while True:
            if i < 30:  # clustered off the E4M3 grid
                w = (rng.uniform(0.6, 1.6) * (1 + 0.002 * rng.standard_normal(64))).astype(np.float32)
                if abs(mxfp8_bias(w)) > 0.01:
                    break
            elif i < 37:
                w = np.ones(64, dtype=np.float32)
                break
            else:
                w = rng.uniform(0.5, 1.5, 64).astype(np.float32)
                if abs(mxfp8_bias(w)) < 0.0025:
                    break
        case.update(kind="norm-bias" if i < 30 else "null-norm", signal="norm-weight-bias" if i < 30 else None,
                    bias=mxfp8_bias(w))
        case["file"] = os.path.join(out, case["case"] + ".h5")
        write_h5(case["file"], [(gname, src[gname][...], dict(src[gname].attrs)),
                                (nname, w, {"role": "weight", "step": case["step"]})])
        cases.append(case)
    return cases


def score(out, report, clean_report):
    cases = json.load(open(os.path.join(out, "manifest.json")))
    by_file = {}
    for w in json.load(open(report))["warnings"]:
        by_file.setdefault(w["file"], []).append(w)
    clean = {}
    for w in json.load(open(clean_report))["warnings"]:
        clean.setdefault(w["file"], []).append(w)

    def events(ws, signal):
        """What a signal says about an amax series: spike steps, growth episodes' first steps."""
        if signal == "spike":
            return {s["step"] for w in ws if w["signal"] == "spike" for s in w["numbers"]["spikes"]}
        return {w["step"] for w in ws if w["signal"] == "growth"}

    ok = True
    for signal in ("growth", "spike", "swiglu-alignment", "grad-noise", "norm-weight-bias"):
        tp = fp = planted = 0
        for c in cases:
            is_planted = c["signal"] == signal
            planted += is_planted
            if signal in ("growth", "spike"):
                if "clean" not in c:
                    continue
                new = events(by_file.get(c["file"], []), signal) - events(clean.get(c["clean"], []), signal)
                t0 = c.get("step", 0)
                lo, hi = (t0, t0) if signal == "spike" else (t0, t0 + GROWTH_LAG)
                hit = is_planted and any(lo <= s <= hi for s in new)
                if c["signal"] is not None:
                    # After the planted onset the series is no longer the clean one: further events
                    # there (a growing series' spikes, a planted growth's later episodes) are
                    # neither true nor false.
                    new = {s for s in new if s < t0}
                tp += hit
                fp += max(0, len(new) - hit)
                continue
            hit = False
            for w in (w for w in by_file.get(c["file"], []) if w["signal"] == signal):
                if not is_planted:
                    fp += 1
                    continue
                if signal == "swiglu-alignment":
                    good = w["tensor"] == c["tensor"] and sorted(w["numbers"]["channels"]) == c["channels"]
                else:
                    good = w["tensor"] == c["tensor"] and w["step"] == c["step"]
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
    b.add_argument("clean_report")
    args = p.parse_args()
    if args.cmd == "plant":
        os.makedirs(args.out, exist_ok=True)
        plant(args.out, args.seed)
        return 0
    return score(args.out, args.report, args.clean_report)


if __name__ == "__main__":
    sys.exit(main())
