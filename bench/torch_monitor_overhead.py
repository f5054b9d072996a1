"""Overhead of fp8kit.torch.Monitor on a real model (issue 23's setting): GPT-2 small from
transformers (random initial weights), batch 8, sequence 1024, bf16, AdamW, 3 tensorwise recipes,
every nn.Linear/Conv1D tensor (input, weight, grad_output, wgrad). Prints the mean step time
without the monitor, with it every step, and with it every 100th step, and the overheads.
Targets: every step <= 10 %, every 100th step <= 1 % (averaged over 100 steps). The monitors
stream their rows to out_dir as they are made (keep_rows=False), so building and writing the rows
is inside the timed steps. --memory-steps N also runs N monitored steps of a small MLP and prints
the process's resident memory at step 1000 and at step N (flat: the rows are not kept).
Also every step with sample=k for each k of --samples (statistics of every k-th block of 16
elements; amax and scales of the whole tensors), every step with no recipe (the amax trace
alone), the extra time of one monitored step (from the every-100th run), and per setting the time
the host took to queue a step (host_queue_ms: close to the step time means the host, not the GPU,
sets the pace).

    python bench/torch_monitor_overhead.py [--steps 100] [--batch 8] [--seq 1024] [--samples 16,64]
                                           [--json OUT]
"""

import argparse
import json
import os
import tempfile
import time

import fp8kit
import fp8kit.torch as ft
import torch

RECIPES = ["te-current", "torchao-tensorwise", "msamp"]


def make(batch, seq):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_positions=max(1024, seq))).to("cuda", torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (batch, seq), device="cuda")
    return model, opt, ids


HOST = {}  # seconds per step the host took to queue the last steps() call's work (before the wait)


def steps(model, opt, ids, n, mon=None):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if mon is not None:
            mon.step()
    HOST["last"] = (time.perf_counter() - t0) / n
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n


def kernel_rates(n=1 << 25):
    """Elements per second of the amax and statistics kernels on one bf16 tensor of n elements
    (what a monitored step spends its time in), each call timed with the host synchronisation it
    includes."""
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    out = {}
    for name, f in (
        ("amax", lambda: fp8kit.amax(x)),
        (
            "stats",
            lambda: fp8kit.stats(
                x, "e4m3", rounding="nearest-even", overflow="saturate-all", nan="canonical", scale=2.0
            ),
        ),
    ):
        f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(10):
            f()
        out[f"{name}_gelem_per_s"] = 10 * n / (time.perf_counter() - t0) / 1e9
    # The queued path the monitor uses: amax to a device slot, then the statistics of te-current's
    # E4M3 cast with the scale from it into a zeroed record; 10 calls, one wait.
    from fp8kit import _fp8kit

    amax = torch.empty(1, dtype=torch.float32, device="cuda")
    recs = torch.zeros(10 * _fp8kit.cuda_stats_record_bytes, dtype=torch.uint8, device="cuda")
    ws = torch.empty(_fp8kit.cuda_stats_workspace_bytes(), dtype=torch.uint8, device="cuda")
    plan = _fp8kit.cuda_stats_plan(
        "te-current", False, "input", "bf16", "e4m3", "nearest-even", "saturate-all", "canonical"
    )
    stream = torch.cuda.current_stream().cuda_stream
    _fp8kit.cuda_amax(x.data_ptr(), "bf16", n, amax.data_ptr(), stream)
    for rounds in (1, 10):  # warm-up, then timed
        recs.zero_()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(rounds):
            _fp8kit.cuda_stats_async(
                [plan],
                x.data_ptr(),
                n,
                amax.data_ptr(),
                [recs.data_ptr() + i * _fp8kit.cuda_stats_record_bytes],
                ws.data_ptr(),
                1,
                0,
                stream,
            )
        torch.cuda.synchronize()
    out["stats_async_gelem_per_s"] = 10 * n / (time.perf_counter() - t0) / 1e9
    # The monitor's whole call for one tensor (cuda_watch: the amax and the statistics of the
    # bench's three recipes; for bf16, one read through the magnitude histogram), 10 calls, one wait.
    plans = []
    for r in RECIPES:
        spec, pol = fp8kit.recipe(r)["roles"]["input"], fp8kit.recipe(r)["policy"]
        plans.append(
            _fp8kit.cuda_stats_plan(
                r, False, "input", "bf16", spec["format"], pol["rounding"], pol["overflow"], pol["nan"]
            )
        )
    group = _fp8kit.cuda_stats_group(plans)
    wws = torch.zeros(_fp8kit.cuda_watch_workspace_bytes(), dtype=torch.uint8, device="cuda")
    recs = torch.zeros(10 * 3 * _fp8kit.cuda_stats_record_bytes, dtype=torch.uint8, device="cuda")
    for rounds in (1, 10):
        recs.zero_()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(rounds):
            _fp8kit.cuda_watch(
                group,
                x.data_ptr(),
                "bf16",
                n,
                amax.data_ptr(),
                recs.data_ptr() + 3 * i * _fp8kit.cuda_stats_record_bytes,
                wws.data_ptr(),
                1,
                0,
                stream,
            )
        torch.cuda.synchronize()
    out["watch3_gelem_per_s"] = 10 * n / (time.perf_counter() - t0) / 1e9
    return out


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory_over_steps(n):
    """Resident memory (MB) at monitored step 1000 and at step n of a small MLP on the GPU, every
    step monitored under RECIPES with keep_rows=False (rows streamed to a temporary folder)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)]).to("cuda")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256, device="cuda")
    out = {}
    with tempfile.TemporaryDirectory() as d:
        mon = ft.monitor(model, recipes=RECIPES, every=1, out_dir=d, keep_rows=False)
        for i in range(1, n + 1):
            loss = model(x).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            mon.step()
            if i in (1000, n):
                torch.cuda.synchronize()
                out[i] = round(rss_mb(), 1)
        mon.close()
        with open(os.path.join(d, "stats.csv")) as f:
            out["rows_written"] = sum(1 for _ in f) - 1
    return {"steps": n, "rss_mb_at_step": out}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--every1-steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--samples", default="16,64,256")
    ap.add_argument("--json")
    ap.add_argument("--memory-steps", type=int, default=0)
    a = ap.parse_args()
    model, opt, ids = make(a.batch, a.seq)
    steps(model, opt, ids, 3)  # warm-up (allocator, kernels)
    res = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "recipes": RECIPES,
        "batch": a.batch,
        "seq": a.seq,
    }
    base = steps(model, opt, ids, a.steps)
    host = {"no_monitor": HOST["last"]}
    with tempfile.TemporaryDirectory() as d:
        mon = ft.monitor(model, recipes=RECIPES, every=1, out_dir=d, keep_rows=False)
        # Warm-up of the monitor path: one-time costs (the first launches of its kernels, pinned
        # host pages, the first read of a queued step at the second step()) stay out of the
        # per-step figure; with one warm-up step and 10 timed ones they added up to about 4 ms per
        # step in a process's first run (2026-11-27, docs/performance.md at 09ae615).
        steps(model, opt, ids, 3, mon)
        every1 = steps(model, opt, ids, a.every1_steps, mon)
        host["every1"] = HOST["last"]
        mon.close()
        with open(os.path.join(d, "stats.csv")) as f:
            rows = sum(1 for _ in f) - 1
        # The amax trace alone (no recipes: no statistics), every step: the floor of a monitor.
        mon = ft.monitor(model, recipes=[], every=1, out_dir=d, keep_rows=False)
        steps(model, opt, ids, 3, mon)
        amax_only = steps(model, opt, ids, a.every1_steps, mon)
        host["every1_amax_only"] = HOST["last"]
        mon.close()
        sampled = {}
        for k in [int(v) for v in a.samples.split(",") if v]:
            mon = ft.monitor(model, recipes=RECIPES, every=1, out_dir=d, sample=k, keep_rows=False)
            steps(model, opt, ids, 3, mon)
            sampled[k] = steps(model, opt, ids, a.every1_steps, mon)
            host[f"every1_sample{k}"] = HOST["last"]
            mon.close()
        base2 = steps(model, opt, ids, a.steps)
        mon = ft.monitor(model, recipes=RECIPES, every=100, out_dir=d, keep_rows=False)
        every100 = steps(model, opt, ids, a.steps, mon)
        mon.close()
    baselines = [base * 1e3, base2 * 1e3]
    base = min(base, base2)  # the faster of two baselines: overheads are not understated
    res.update(
        step_ms=base * 1e3,
        every1_step_ms=every1 * 1e3,
        every100_step_ms=every100 * 1e3,
        every1_overhead_pct=100 * (every1 / base - 1),
        every100_overhead_pct=100 * (every100 / base - 1),
        stats_rows_per_step=rows // (a.every1_steps + 3),
        baselines_ms=baselines,
        every1_amax_only_step_ms=amax_only * 1e3,
        every1_amax_only_overhead_pct=100 * (amax_only / base - 1),
        every1_sampled={k: dict(step_ms=v * 1e3, overhead_pct=100 * (v / base - 1)) for k, v in sampled.items()},
        monitored_step_extra_ms_every100=(every100 - base) * 1e3 * 100,
        host_queue_ms={k: v * 1e3 for k, v in host.items()},
        **kernel_rates(),
    )
    if a.memory_steps:
        res["memory"] = memory_over_steps(a.memory_steps)
    print(json.dumps(res, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
