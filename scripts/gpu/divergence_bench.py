#!/usr/bin/env python3
"""The divergence benchmark (docs/early-warning.md, "The divergence benchmark"): several recipes
known to diverge, each against controls that do not, over several seeds, on one GPU.

Every run is one `divergence_run.py` process (the same model, corpus, optimizer, monitor and
divergence rule: the first step >= 100 whose loss is not finite or above 1.5 x the running
minimum), so runs are independent and several share the GPU at once (--jobs). Arms per recipe
and seed:
  quant_hi  the recipe at the high learning rate, safeguards off (the arm expected to diverge);
  quant_lo  the same recipe at the low learning rate (a control: the same numerics, trains);
  safe_hi   where the recipe has one, its safeguarded sibling at the high learning rate (control);
  bf16_hi   BF16 at the high learning rate (control; one per seed and learning rate).
Written to OUT/<arm>/<recipe>/s<seed>/ (divergence_run.py's files) and OUT/runs.csv, a row per
run: arm, recipe, lr, seed, steps run, divergence step, seconds.
Usage: divergence_bench.py OUT [--plan all@0,1,2,3,4] [--bf16-seeds 0,1,2,3,4] [--jobs 12] [--steps 400]
                            [--budget SECONDS] [--tag TAG]
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))

# recipe: (high lr, low lr, safeguarded sibling or None). Every operand of every Linear quantised,
# no layer kept in BF16, nearest-even everywhere unless a sibling says otherwise:
#  mxfp4-ocp       MXFP4 with the OCP floor scale rule (docs/early-warning.md, "A provoked divergence")
#  mxfp4           MXFP4 with the round-up scale rule
#  nvfp4-torchao   NVFP4 (torchao's rule), no random Hadamard transform, no stochastic rounding;
#                  its sibling nvfp4 is TE's recipe (RHT on the wgrad operands, stochastic gradients)
#  mxfp6-e3m2-ocp  MXFP6 E3M2 (two mantissa bits) with the floor rule
#  mx-ocp          MXFP8 (E4M3) with the floor rule (arXiv 2506.08027); its sibling mxfp8 rounds up
# Also tried, and left out: mxfp8-torchao-floor and nvfp4-torchao-single (their NaN-keeping and
# no-tensor-scale rules run on the host: about 1.6 s per step), the latter also trained no further
# than its first steps (loss 5.5) at either learning rate.
RECIPES = {
    "mxfp4-ocp": (4e-2, 1e-2, None),
    "mxfp4": (4e-2, 1e-2, None),
    "nvfp4-torchao": (4e-2, 1e-2, "nvfp4"),
    "mxfp6-e3m2-ocp": (4e-2, 1e-2, None),
    "mx-ocp": (4e-2, 1e-2, "mxfp8"),
}


def jobs(a):
    """The runs of --plan ("RECIPES@SEEDS;..."; RECIPES 'all' or comma-separated, SEEDS
    comma-separated) and BF16 at each high learning rate for --bf16-seeds, each run once."""
    out = []
    for group in a.plan.split(";"):
        names, seeds = group.split("@")
        recipes = list(RECIPES) if names == "all" else names.split(",")
        for seed in [int(s) for s in seeds.split(",")]:
            for r in recipes:
                hi, lo, safe = RECIPES[r]
                out.append(("quant_hi", r, r, hi, seed))
                out.append(("quant_lo", r, r, lo, seed))
                if safe:
                    out.append(("safe_hi", r, safe, hi, seed))
    for seed in [int(s) for s in a.bf16_seeds.split(",") if s]:
        for lr in sorted({v[0] for v in RECIPES.values()}):
            out.append(("bf16_hi", "bf16", "mxfp4-ocp", lr, seed))
    return sorted(dict.fromkeys(out), key=lambda j: j[4])  # by seed: a cut budget leaves whole seeds


def run_one(a, job, t_start):
    arm, label, recipe, lr, seed = job
    d = os.path.join(a.out, arm, label, f"s{seed}")
    if time.time() - t_start > a.budget:
        return job, None, "not started: budget"
    cmd = [
        sys.executable,
        os.path.join(HERE, "divergence_run.py"),
        d,
        "--runs",
        "bf16" if arm == "bf16_hi" else "quant",
    ]
    cmd += ["--recipe", recipe, "--lr", f"{lr:g}", "--seed", str(seed), "--steps", str(a.steps)]
    cmd += ["--tail", str(a.tail), "--device", "cuda", "--time-limit", str(a.time_limit)]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return job, None, f"exit {p.returncode}: {p.stderr[-400:]}"
    with open(os.path.join(d, "summary.json")) as f:
        s = json.load(f)
    res = s[f"lr_{lr:g}"]["bf16" if arm == "bf16_hi" else "quant"]
    return job, dict(res, wall=round(time.time() - t0, 1)), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--plan", default="all@0,1,2,3,4", help="RECIPES@SEEDS;... (RECIPES: all or a comma list)")
    ap.add_argument("--bf16-seeds", default="0,1,2,3,4")
    ap.add_argument("--tag", default="", help="the table is OUT/runs<_TAG>.csv")
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--tail", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=240, help="seconds per run (divergence_run.py)")
    ap.add_argument("--budget", type=float, default=1e9, help="no run starts after this many seconds")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    planned, t0 = jobs(a), time.time()
    rows = []
    with ThreadPoolExecutor(a.jobs) as ex:
        for job, res, err in ex.map(lambda j: run_one(a, j, t0), planned):
            arm, label, recipe, lr, seed = job
            row = dict(arm=arm, recipe=label, run_recipe=recipe, lr=lr, seed=seed)
            if res is None:
                row.update(error=err)
            else:
                row.update(
                    steps_run=res["steps_run"],
                    diverged_at=res["divergence_step"],
                    min_loss=round(res["min_loss"], 4),
                    seconds=res["seconds"],
                    stopped_by_time_limit=res["stopped_by_time_limit"],
                )
            rows.append(row)
            print(json.dumps(row), flush=True)
    keys = ["arm", "recipe", "run_recipe", "lr", "seed", "steps_run", "diverged_at", "min_loss", "seconds"]
    keys += ["stopped_by_time_limit", "error"]
    with open(os.path.join(a.out, f"runs{'_' + a.tag if a.tag else ''}.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} runs in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
