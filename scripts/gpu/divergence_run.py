#!/usr/bin/env python3
"""Provoke a low-precision divergence and see whether `fp8kit watch` warns first (issue 27).

A small Llama-style decoder (transformers.LlamaForCausalLM, random init) is trained as a byte-level
language model on the Python standard library's sources (as scripts/fixtures/make_example_dump.py does),
twice at identical settings (same initial weights, same batches, same optimizer):
  bf16   every op under bfloat16 autocast;
  quant  the same, with every nn.Linear (lm_head included) replaced by fp8kit.torch.Fp8Linear:
         the fprop, dgrad and wgrad GEMMs take both operands quantised under --recipe
         (default mxfp4-ocp: MXFP4, E2M1 in 1x32 blocks with E8M0 scales from the OCP floor rule,
         activations, weights and gradients, nearest-even everywhere: no stochastic rounding, no
         Hadamard transform; nvfp4-rowwise is NVFP4 likewise) and --gemm ('torch': the
         dequantised operands multiplied by torch in float32, rounded to bfloat16).
Both runs are watched by fp8kit.torch.Monitor (every step: amax of each Linear's input, weight,
output gradient and weight gradient, written as amax_trace.csv), fed live into fp8kit.Watcher
(polled every step); after the run `fp8kit.watch` reads the whole trace (watch.json).

Divergence (defined here): the first step s >= --min-step whose loss is not finite or exceeds
--k times the running minimum of the losses before s. A run stops --tail steps after diverging.

Written to OUT/ (OUT/lr_<LR>/ for a ladder): bf16/ and quant/ (loss.csv: step,loss,grad_norm,lr;
amax_trace.csv; warnings_live.json: each warning with the step it was polled at; watch.json with the
live watcher's options, trend signals only by default; watch_defaults.json with the CLI's defaults;
stats.csv / stats.json with --keep-stats), summary.json.
The defaults are the settings of the run recorded in docs/early-warning.md ("A provoked
divergence"), where the exact commands are. MX FP4 and NVFP4 operands are quantised on the host
(fp8kit has no CUDA kernel for them): about 0.4 s per step on the GPU machine's 16 cores.
Usage: divergence_run.py OUT [--steps N] [--lr LR[,LR...]] [--runs bf16,quant] [--device cuda] ...
"""

import argparse
import csv
import glob
import json
import math
import os
import sys
import time

import fp8kit
import fp8kit.torch as ft
import numpy as np
import torch
import transformers


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument(
        "--lr",
        default="4e-2",
        help="learning rate, or a comma-separated ladder: each LR trains both runs into OUT/lr_<LR>/",
    )
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--recipe", default="mxfp4-ocp")
    p.add_argument("--gemm", default="torch", help="Fp8Linear model for all three GEMMs")
    p.add_argument("--clip", type=float, default=0.0, help="gradient-norm clip (0: none)")
    p.add_argument("--k", type=float, default=1.5, help="divergence: loss > k x running minimum")
    p.add_argument("--min-step", type=int, default=100, help="divergence is looked for from this step on")
    p.add_argument("--tail", type=int, default=100, help="steps run after a divergence")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", default="bf16,quant")
    p.add_argument(
        "--watch-recipe", default="none", help="Watcher's recipe for the overflow signals ('none': trend signals only)"
    )
    p.add_argument("--keep-stats", action="store_true", help="keep the monitor's stats.csv / stats.json")
    p.add_argument("--time-limit", type=float, default=0, help="seconds per run (0: none); the summary says so")
    return p.parse_args()


def corpus(dev):
    files = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))
    data = np.frombuffer(b"".join(open(f, "rb").read() for f in files), dtype=np.uint8)
    return torch.from_numpy(data.astype(np.int64)).to(dev)


def make_model(a):
    torch.manual_seed(a.seed)
    cfg = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=a.hidden,
        intermediate_size=3 * a.hidden,
        num_hidden_layers=a.layers,
        num_attention_heads=a.heads,
        num_key_value_heads=a.heads,
        max_position_embeddings=a.seq,
        tie_word_embeddings=False,
    )
    cfg._attn_implementation = "sdpa"
    return transformers.LlamaForCausalLM(cfg).to(a.device)


def diverged(losses, a):
    s, x = len(losses) - 1, losses[-1]
    if s < a.min_step:
        return False
    return not math.isfinite(x) or x > a.k * min(losses[:-1])


def train(a, name, data, lr, root):
    out = os.path.join(root, name)
    os.makedirs(out, exist_ok=True)
    model = make_model(a)
    if name == "quant":
        ft.swap_linears(model, recipe=a.recipe, fprop=a.gemm, dgrad=a.gemm, wgrad=a.gemm, seed=a.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / a.warmup))
    mon = ft.Monitor(model, recipes=["te-current"], every=1, out_dir=out)
    wopt = {} if a.watch_recipe == "none" else {"recipe": a.watch_recipe}
    watcher = fp8kit.Watcher(name=name, **({"recipe": None} if not wopt else wopt))
    gen = torch.Generator().manual_seed(a.seed + 1)  # the same batches in both runs
    rows, live, losses = [], [], []
    div_step, t0, seen = None, time.time(), 0
    for step in range(a.steps):
        idx = torch.randint(0, len(data) - a.seq - 1, (a.batch,), generator=gen)
        x = torch.stack([data[i : i + a.seq] for i in idx.tolist()])
        with torch.autocast(device_type=a.device.split(":")[0], dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip if a.clip > 0 else float("inf"))
        opt.step()
        opt.zero_grad(set_to_none=True)
        lr = sched.get_last_lr()[0]
        sched.step()
        amaxes = {n: v for s, n, v in mon.trace[seen:]}
        seen = len(mon.trace)
        watcher.observe(step, amaxes, grad_norm=float(gn))
        for w in watcher.poll():
            live.append({"polled_at": step, **w})
        mon.step(grad_norm=gn)
        losses.append(float(loss.detach()))
        rows.append((step, losses[-1], float(gn), lr))
        if div_step is None and diverged(losses, a):
            div_step = step
        if div_step is not None and (step >= div_step + a.tail or not math.isfinite(losses[-1])):
            break
        if a.time_limit and time.time() - t0 > a.time_limit:
            break
        if step % 100 == 0:
            print(f"{name} step {step} loss {losses[-1]:.4f} gnorm {float(gn):.3g} {time.time() - t0:.0f}s", flush=True)
    elapsed = time.time() - t0
    mon.close()
    with open(os.path.join(out, "loss.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss", "grad_norm", "lr"])
        w.writerows((s, f"{l:.6g}", f"{g:.6g}", f"{r:.6g}") for s, l, g, r in rows)
    with open(os.path.join(out, "warnings_live.json"), "w") as f:
        json.dump(live, f, indent=1, allow_nan=True)
    # `fp8kit watch` over the whole trace: with the live watcher's options, and with the CLI's defaults
    # (te-delayed, margin 0: its overflow signals concern delayed scaling, not this run's recipe)
    report = fp8kit.watch([os.path.join(out, "amax_trace.csv")], **({"recipe": None} if not wopt else wopt))
    with open(os.path.join(out, "watch.json"), "w") as f:
        json.dump(report, f, indent=1, allow_nan=True)
    defaults = fp8kit.watch([os.path.join(out, "amax_trace.csv")])
    with open(os.path.join(out, "watch_defaults.json"), "w") as f:
        json.dump(defaults, f, indent=1, allow_nan=True)
    if not a.keep_stats:  # the cast statistics per step and tensor: large, not needed by watch
        for f in ("stats.csv", "stats.json"):
            os.remove(os.path.join(out, f))
    first = {}
    for w in live:
        first.setdefault(w["signal"], {"polled_at": w["polled_at"], "step": w.get("step"), "tensor": w["tensor"]})
    return {
        "steps_run": len(rows),
        "seconds": round(elapsed, 1),
        "divergence_step": div_step,
        "final_loss": losses[-1],
        "min_loss": min(losses),
        "min_loss_step": int(np.argmin(losses)),
        "first_warning_step": live[0]["polled_at"] if live else None,
        "first_warning": live[0] if live else None,
        "first_by_signal": first,
        # early training moves every amax (both runs warn then); the warnings from --min-step on
        "first_warning_from_min_step": next((w["polled_at"] for w in live if w["polled_at"] >= a.min_step), None),
        "warnings_from_min_step": [
            (w["polled_at"], w["signal"], w["tensor"]) for w in live if w["polled_at"] >= a.min_step
        ][:20],
        "warnings_live": len(live),
        "warnings_watch": len(report["warnings"]),
        "warnings_watch_defaults": len(defaults["warnings"]),
        "stopped_by_time_limit": bool(a.time_limit and elapsed > a.time_limit and len(rows) < a.steps),
    }


def main():
    a = parse()
    os.makedirs(a.out, exist_ok=True)
    data = corpus(a.device)
    summary = {
        "settings": vars(a),
        "command": " ".join(sys.argv),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device_name": torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu",
        "divergence_rule": f"first step >= {a.min_step} with loss not finite or > {a.k} x running minimum",
    }
    lrs = [float(x) for x in a.lr.split(",")]
    for lr in lrs:
        root = a.out if len(lrs) == 1 else os.path.join(a.out, f"lr_{lr:g}")
        res = summary.setdefault(f"lr_{lr:g}", {})
        for name in a.runs.split(","):
            res[name] = train(a, name, data, lr, root)
            print(
                f"lr {lr:g}", name, json.dumps({k: v for k, v in res[name].items() if k != "first_warning"}), flush=True
            )
            with open(os.path.join(a.out, "summary.json"), "w") as f:  # rewritten as runs finish
                json.dump(summary, f, indent=1, allow_nan=True)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, allow_nan=True)


if __name__ == "__main__":
    main()
