#!/usr/bin/env python3
"""Fits and scores the run-level verdict on the divergence benchmark (docs/early-warning.md,
"The divergence benchmark").

The verdict is lib's (warn/grad_norm.hpp, fp8kit._fp8kit._GradNormVerdict; fp8kit.Watcher raises
it as the 'grad-norm-growth' warning): at each step the median of the last 16 gradient norms
against its lowest value over a trailing span; the run is flagged at the first step >= 20 where
that growth reaches a rule's threshold (or the norm is not finite). Each run is replayed step by
step from its own loss.csv only (step, loss, grad_norm, lr): the verdict at step s reads steps <= s
of that run, never a control's.

The rules are fitted on the fitting seeds only (default 0,1): over a grid of one short rule
(span, growth) and one long rule, the pair that flags the most diverging runs of those seeds at
least --min-lead steps ahead while flagging at most 10% of their runs that did not diverge (ties:
fewer false flags, then the longer leads). They are then scored on every other seed.
Also reported per run, not used by the verdict: spike warnings of fp8kit.Watcher (amax > 8 x the
running median) over the run's amax trace, counted from step 100 (--spikes).
Writes OUT/verdicts.csv (a row per run: arm, recipe, seed, diverged_at, flagged_at, lead, fit or
report) and OUT/verdict_fit.json (the rules, the rates on the report seeds), and prints them.
Usage: divergence_verdict.py BENCH_DIR OUT [--fit-seeds 0,1] [--spikes]
       divergence_verdict.py RAW_BENCH_DIR --pack DEST   (the committed form of a benchmark run)
"""

import argparse
import csv
import glob
import gzip
import json
import os
from collections import defaultdict

import fp8kit
import numpy as np
from fp8kit import _fp8kit


def read_trace(d):
    """{step: {tensor: amax}} from amax.csv.gz (the committed form: a row per step, a column per
    tensor) or from the monitor's amax_trace.csv[.gz] (step,tensor,amax)."""
    wide = os.path.join(d, "amax.csv.gz")
    if os.path.exists(wide):
        with gzip.open(wide, "rt") as f:
            r = csv.reader(f)
            names = next(r)[1:]
            return {int(row[0]): {n: float(v) for n, v in zip(names, row[1:]) if v} for row in r}
    path = os.path.join(d, "amax_trace.csv.gz")
    f = gzip.open(path, "rt") if os.path.exists(path) else open(os.path.join(d, "amax_trace.csv"))
    steps = defaultdict(dict)
    with f:
        for row in csv.DictReader(f):
            steps[int(row["step"])][row["tensor"]] = float(row["amax"])
    return steps


def read_loss(d):
    with open(os.path.join(d, "loss.csv")) as f:
        rows = list(csv.DictReader(f))
    return np.array([float(r["loss"]) for r in rows]), np.array([float(r["grad_norm"]) for r in rows])


def spikes_from(d, after=100):
    """Spike warnings fp8kit.Watcher polls over the run's amax trace from step `after` on."""
    trace, n = read_trace(d), 0
    w = fp8kit.Watcher(name="run", recipe=None)
    for s in sorted(trace):
        w.observe(s, trace[s])
        n += sum(1 for x in w.poll() if x["signal"] == "spike" and s >= after)
    return n


def flagged_at(gn, rules):
    """lib's verdict over the gradient norms gn (one per step from 0): the step it flags, or None."""
    v = _fp8kit._GradNormVerdict(16, 20, rules)
    for s, g in enumerate(gn):
        v.observe(s, float(g))
        if v.flagged_at() is not None:
            return v.flagged_at()
    return None


def pack(bench, dest):
    """The benchmark's folder as committed: runs.csv, and per run loss.csv, summary.json and
    amax.csv.gz, the amax trace as a row per step and a column per tensor, each amax with 6
    significant digits (the spike rule compares ratios of 8 and more: rounding at 1e-6 decides
    nothing), about 40% of the monitor's long form."""
    import shutil

    os.makedirs(dest, exist_ok=True)
    shutil.copy(os.path.join(bench, "runs.csv"), dest)
    for loss in sorted(glob.glob(os.path.join(bench, "*", "*", "s*", "*", "loss.csv"))):
        d = os.path.dirname(loss)
        out = os.path.join(dest, os.path.relpath(d, bench))
        os.makedirs(out, exist_ok=True)
        shutil.copy(loss, out)
        with open(os.path.join(os.path.dirname(d), "summary.json")) as f:
            summary = json.load(f)
        # The run's own folder as OUT/<arm>/<recipe>/s<seed> (the machine's paths are not kept).
        where = summary["settings"]["out"]
        rel = "OUT/" + os.path.relpath(os.path.dirname(d), bench)
        summary["settings"]["out"] = rel
        summary["command"] = "scripts/gpu/divergence_run.py " + summary["command"].split(where, 1)[1].join([rel, ""])
        with open(os.path.join(os.path.dirname(out), "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, allow_nan=True)
        trace = read_trace(d)
        names = list(dict.fromkeys(n for s in sorted(trace) for n in trace[s]))
        with gzip.open(os.path.join(out, "amax.csv.gz"), "wt", compresslevel=9, newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", *names])
            for s in sorted(trace):
                w.writerow([s, *(f"{trace[s][n]:.6g}" if n in trace[s] else "" for n in names)])


def fit_rules(fit, min_lead):
    """The (short, long) rule pair of the grid that the fitting runs favour (the docstring's
    criterion)."""
    best = None
    pos = [r for r in fit if r["div"] is not None]
    neg = [r for r in fit if r["div"] is None]
    for span in (60, 80, 100):
        for growth in (2.5, 3, 3.5, 4):
            for span2, growth2 in [(0, 0)] + [(s2, g2) for s2 in (200, 300) for g2 in (3, 4, 5, 6)]:
                rules = [(span, growth)] + ([(span2, growth2)] if span2 else [])
                leads = [r["div"] - f for r in pos if (f := flagged_at(r["gn"], rules)) is not None]
                tp = sum(1 for x in leads if x >= min_lead)
                fp = sum(1 for r in neg if flagged_at(r["gn"], rules) is not None)
                if neg and fp > 0.1 * len(neg):
                    continue
                key = (tp, -fp, sum(x for x in leads if x >= min_lead))
                if best is None or key > best[0]:
                    best = (key, rules)
    return best[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--fit-seeds", default="0,1")
    ap.add_argument("--min-lead", type=int, default=20)
    ap.add_argument("--spikes", action="store_true", help="also count each run's spike warnings from step 100")
    ap.add_argument("--pack", metavar="DEST", help="write BENCH_DIR in its committed form to DEST, and stop")
    a = ap.parse_args()
    if a.pack:
        pack(a.bench, a.pack)
        return
    if not a.out:
        ap.error("OUT: name the folder the verdicts are written to")
    fit_seeds = {int(x) for x in a.fit_seeds.split(",")}
    runs = []
    with open(os.path.join(a.bench, "runs.csv")) as f:
        for r in csv.DictReader(f):
            if r.get("error"):
                continue
            sub = "bf16" if r["arm"] == "bf16_hi" else "quant"
            d = os.path.join(a.bench, r["arm"], r["recipe"], f"s{r['seed']}", sub)
            div = int(r["diverged_at"]) if r["diverged_at"] not in ("", "None") else None
            gn = read_loss(d)[1]
            spikes = spikes_from(d) if a.spikes else None
            runs.append(dict(arm=r["arm"], recipe=r["recipe"], seed=int(r["seed"]), div=div, gn=gn, spikes=spikes))
    # A run is positive when it diverged (whatever its arm): the verdict must flag it before.
    rules = fit_rules([r for r in runs if r["seed"] in fit_seeds], a.min_lead)
    rows = []
    for r in runs:
        f = flagged_at(r["gn"], rules)
        row = dict(arm=r["arm"], recipe=r["recipe"], seed=r["seed"], diverged_at=r["div"], flagged_at=f)
        row["lead"] = (r["div"] - f) if (f is not None and r["div"] is not None) else None
        row["spikes_from_100"] = r["spikes"]
        row["use"] = "fit" if r["seed"] in fit_seeds else "report"
        rows.append(row)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "verdicts.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    rep = [r for r in rows if r["use"] == "report"]
    pos = [r for r in rep if r["diverged_at"] is not None]
    neg = [r for r in rep if r["diverged_at"] is None]
    controls = [r for r in rep if r["arm"] != "quant_hi"]
    caught = [r for r in pos if r["flagged_at"] is not None and r["lead"] > 0]
    leads = sorted(r["lead"] for r in caught)
    res = dict(
        rules=[dict(span=s, growth=g) for s, g in rules],
        report_diverged=len(pos),
        report_flagged_before=len(caught),
        median_lead=float(np.median(leads)) if leads else None,
        report_not_diverged=len(neg),
        report_not_diverged_quiet=sum(1 for r in neg if r["flagged_at"] is None),
        report_control_runs_not_diverged=sum(1 for r in controls if r["diverged_at"] is None),
        report_control_runs_not_diverged_quiet=sum(
            1 for r in controls if r["diverged_at"] is None and r["flagged_at"] is None
        ),
    )
    with open(os.path.join(a.out, "verdict_fit.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res))
    for r in rows:
        print(",".join(str(r[k]) for k in r))


if __name__ == "__main__":
    main()
