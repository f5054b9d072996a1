"""Overhead of fp8kit.torch.Monitor on a real model (issue 23's setting): GPT-2 small from
transformers (random initial weights), batch 8, sequence 1024, bf16, AdamW, 3 tensorwise recipes,
every nn.Linear/Conv1D tensor (input, weight, grad_output, wgrad). Targets: every step <= 10 %,
every 100th step <= 1 % (averaged over 100 steps). The monitors stream their rows to a folder as
they are made (keep_rows=False), so building and writing the rows is inside the timed steps.

Settings: no monitor; the monitor every step; every step with no recipe (the amax trace alone);
every step with sample=k for each k of --samples (statistics of every k-th block of 16 elements;
amax and scales of the whole tensors); every 100th step (--every100-steps, a multiple of 100, so
that the timed steps hold one monitored step per 100; 0 leaves it out).
They run interleaved: --rounds rounds, each running every setting once, in an order rotated by
one setting per round, after a warm-up round that is not reported. Every run of a setting starts
from the same state (the earlier monitor closed and collected, torch's cached device and pinned
host memory released, a new output folder; hooks_before counts hooks an earlier monitor left on
the model: 0 since Monitor.remove() drops the weights' hook dicts), then --warmup steps, then its
timed steps. Per setting: the median over the rounds of the mean step time, and of the
overhead against the same round's no-monitor run, with every round's figure; the same for the
median step of each run (on the GPU's timeline: see steps(); a rare slow step moves the mean, not
it; every 100th step's cost is in the mean only); host_queue_ms, the
time the host took to queue the steps (before the final wait); wait_ms, the part of it the host
spent blocked in the monitor's one wait per step (the event of the step before: the GPU was more
than a step behind); gc_ms, the part spent in Python's garbage collector; monitor_ms, the host time
inside the monitor's own calls (watch() and step(), wait included). wait_ms well above 0
means the GPU sets the pace. A host_queue_ms equal to the step time with wait_ms near 0 means
either the host sets it or a full queue of pending launches blocked the host (CUDA's queue has a
fixed depth): torch_monitor_profile.py's GPU busy time per step tells the two apart.
--memory-steps N also runs N monitored steps of a small MLP and prints the process's resident
memory at step 1000 and at step N (flat: the rows are not kept).
GPU-bound setting: --batch 16 (the GPU work doubles, the host's stays). The largest watched tensor
is lm_head's output gradient (batch x seq x 50257 elements), at most 2^31 - 1 per statistics call:
batch x seq <= 42730.

    python bench/torch_monitor_overhead.py [--rounds 3] [--steps 100] [--every1-steps 30]
        [--every100-steps 100] [--warmup 3] [--batch 8] [--seq 1024] [--samples 16,64]
        [--json OUT] [--memory-steps N]
"""

import argparse
import gc
import json
import os
import statistics
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


VOCAB = 50257  # GPT-2's: lm_head's output gradient, batch x seq x VOCAB, is the largest watched tensor
MAX_ELEMENTS = 2**31 - 1  # of one statistics call (cuda/src/statistics.cu, check_async_args)

HOST = {}  # seconds per step the host took to queue the last steps() call's work (before the wait)
# Seconds within the last steps() call: the monitor's waits for the GPU and Python's collections.
COUNTERS = {"wait": 0.0, "gc": 0.0, "monitor": 0.0}


def steps(model, opt, ids, n, mon=None):
    """n training steps; returns the mean wall time per step. HOST['last']: the host's time to queue
    them, per step; HOST['median']: the median step on the GPU's timeline (an event recorded on the
    stream as each step starts; where the host sets the pace the GPU reaches it when the host
    does), which a rare slow step (the host's scheduler, another tenant) does not move."""
    torch.cuda.synchronize()
    COUNTERS.update(wait=0.0, gc=0.0, monitor=0.0)
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    host = [0.0] * (n + 1)
    t0 = time.perf_counter()
    for k in range(n):
        host[k] = time.perf_counter()
        marks[k].record()
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if mon is not None:
            mon.step()
    marks[n].record()
    host[n] = time.perf_counter()
    HOST["last"] = (host[n] - t0) / n
    torch.cuda.synchronize()
    t = (time.perf_counter() - t0) / n
    gpu = [marks[k].elapsed_time(marks[k + 1]) for k in range(n)]
    HOST["median"] = statistics.median(gpu) / 1e3
    # Every step's time (ms) on the GPU's timeline and the host's, so that a run's mean can be told
    # apart into its steps (a few slow steps, or every step slower).
    HOST["gpu_steps_ms"] = [round(v, 3) for v in gpu]
    HOST["host_steps_ms"] = [round(1e3 * (host[k + 1] - host[k]), 3) for k in range(n)]
    return t


def time_gc():
    """Adds the time of each of Python's collections to COUNTERS['gc']."""
    start = [0.0]

    def on_gc(phase, info):
        if phase == "start":
            start[0] = time.perf_counter()
        else:
            COUNTERS["gc"] += time.perf_counter() - start[0]

    gc.callbacks.append(on_gc)


def time_monitor_waits():
    """Adds the time the host is blocked in the monitor's one wait per step (_GpuStep.read waits for
    the event of the step it reads) to COUNTERS['wait']. Where the module has no _GpuStep.read, the
    waits stay untimed (0)."""
    cls = getattr(ft, "_GpuStep", None)
    read = getattr(cls, "read", None)
    if read is None:
        return

    def timed_read(self, trace):
        t0 = time.perf_counter()
        self.event.synchronize()
        COUNTERS["wait"] += time.perf_counter() - t0
        return read(self, trace)

    cls.read = timed_read


def time_monitor_calls():
    """Adds the host time spent inside the monitor's own calls (Monitor.watch, which every hook
    calls, and Monitor.step) to COUNTERS['monitor']: the host's share of the overhead, whichever of
    host and GPU sets the pace. The wrappers cost about a microsecond per call (197 a step)."""
    for name in ("watch", "step"):
        f = getattr(ft.Monitor, name)

        def timed(*args, _f=f, **kw):
            t0 = time.perf_counter()
            try:
                return _f(*args, **kw)
            finally:
                COUNTERS["monitor"] += time.perf_counter() - t0

        setattr(ft.Monitor, name, timed)


def fresh_state():
    """The state every run of a setting starts from: the GPU idle, the earlier monitor collected (its
    device buffers freed on the stream), torch's cached device blocks and pinned host blocks released
    (the run's warm-up allocates what it needs, whatever ran before), the collector's generations
    empty."""
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    host_empty = getattr(torch._C, "_host_emptyCache", None)
    if host_empty is not None:
        host_empty()


def hooks_on(model):
    """Hooks on the model's modules and parameters (0 when every monitor was closed)."""
    n = sum(p._backward_hooks is not None for p in model.parameters())
    return n + sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def settings(a):
    """(key, ft.monitor's keywords or None for no monitor, timed steps) of each setting of a round."""
    every1 = dict(recipes=RECIPES, every=1)
    out = [("no_monitor", None, a.steps), ("every1", every1, a.every1_steps)]
    out.append(("every1_amax_only", dict(recipes=[], every=1), a.every1_steps))
    out += [(f"every1_sample{k}", dict(every1, sample=k), a.every1_steps) for k in a.samples]
    if a.every100_steps:
        out.append(("every100", dict(recipes=RECIPES, every=100), a.every100_steps))
    return out


def run_setting(model, opt, ids, kw, n, warmup):
    """One run of a setting from fresh_state(): the monitor (if any) in a new folder, warm-up steps,
    n timed steps, close(). With every=100 the monitored steps are 0 (in the warm-up), 100, ...: n
    timed steps from step `warmup` < 100 hold n / 100 of them."""
    fresh_state()
    out = {"hooks_before": hooks_on(model)}
    with tempfile.TemporaryDirectory() as d:
        mon = None if kw is None else ft.monitor(model, out_dir=d, keep_rows=False, **kw)
        steps(model, opt, ids, warmup, mon)
        t = steps(model, opt, ids, n, mon)
        out.update(
            step_ms=t * 1e3,
            median_step_ms=HOST["median"] * 1e3,
            host_queue_ms=HOST["last"] * 1e3,
            wait_ms=COUNTERS["wait"] / n * 1e3,
            gc_ms=COUNTERS["gc"] / n * 1e3,
            monitor_ms=COUNTERS["monitor"] / n * 1e3,
            gpu_steps_ms=HOST["gpu_steps_ms"],
            host_steps_ms=HOST["host_steps_ms"],
        )
        if mon is not None:
            mon.close()
            with open(os.path.join(d, "stats.csv")) as f:
                out["rows"] = sum(1 for _ in f) - 1
        del mon
    return out


def rotated(plan, r):
    """Round r's order: the settings rotated left by r."""
    r %= len(plan)
    return plan[r:] + plan[:r]


def run_rounds(model, opt, ids, a):
    """Every setting once per round (rotated order), after a warm-up round that is not kept (the
    process's one-time costs: each kernel's first launch, lazy module loading, pinned pages).
    Returns the orders and, per setting, its runs in round order."""
    plan = settings(a)
    for _, kw, _ in plan:
        run_setting(model, opt, ids, kw, 2, a.warmup)
    runs, orders = {key: [] for key, _, _ in plan}, []
    for r in range(a.rounds):
        order = rotated(plan, r)
        orders.append([key for key, _, _ in order])
        for key, kw, n in order:
            runs[key].append(run_setting(model, opt, ids, kw, n, a.warmup))
    return orders, runs


def summarize(runs):
    """Per setting: the median over rounds of each figure, with every round's step time and overhead
    (against the same round's no-monitor run)."""
    base = [r["step_ms"] for r in runs["no_monitor"]]
    out = {}
    for key, rs in runs.items():
        ms = [r["step_ms"] for r in rs]
        pct = [100 * (m / b - 1) for m, b in zip(ms, base)]
        med = [r["median_step_ms"] for r in rs]
        med_pct = [100 * (m / b["median_step_ms"] - 1) for m, b in zip(med, runs["no_monitor"])]
        out[key] = dict(
            step_ms=statistics.median(ms),
            overhead_pct=statistics.median(pct),
            step_ms_rounds=ms,
            overhead_pct_rounds=pct,
            median_step_ms=statistics.median(med),
            median_step_overhead_pct=statistics.median(med_pct),
            median_step_overhead_pct_rounds=med_pct,
            **{f: statistics.median(r[f] for r in rs) for f in ("host_queue_ms", "wait_ms", "gc_ms", "monitor_ms")},
            host_queue_ms_rounds=[r["host_queue_ms"] for r in rs],
            gpu_steps_ms_rounds=[r["gpu_steps_ms"] for r in rs],
            host_steps_ms_rounds=[r["host_steps_ms"] for r in rs],
            hooks_before=max(r["hooks_before"] for r in rs),
        )
    return out


LABELS = {
    "no_monitor": "no monitor",
    "every1": "monitor every step",
    "every1_amax_only": "every step, amax trace only",
    "every100": "monitor every 100th step",
}


def table(summary):
    """The per-setting figures as text: medians, then every round's step time (and overhead)."""
    head = f"{'setting':32} {'median ms':>9} {'overhead':>9} {'host ms':>8} {'wait ms':>8} {'gc ms':>6} {'mon ms':>6} {'med step':>8}  rounds: ms (overhead)"
    lines = [head]
    for key, s in summary.items():
        label = LABELS.get(key) or f"every step, sample={key.rsplit('sample', 1)[1]}"
        per = ", ".join(f"{m:.2f} ({p:+.1f}%)" for m, p in zip(s["step_ms_rounds"], s["overhead_pct_rounds"]))
        pct = "" if key == "no_monitor" else f"{s['overhead_pct']:+.1f}%"
        med = "" if key == "no_monitor" else f"{s['median_step_overhead_pct']:+.1f}%"
        lines.append(
            f"{label:32} {s['step_ms']:9.2f} {pct:>9} {s['host_queue_ms']:8.2f} {s['wait_ms']:8.2f}"
            f" {s['gc_ms']:6.2f} {s['monitor_ms']:6.2f} {med:>8}  {per}"
        )
    return "\n".join(lines)


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


def parse_args(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100, help="timed steps of the no-monitor runs")
    ap.add_argument("--every1-steps", type=int, default=30, help="timed steps of each every-step setting")
    ap.add_argument("--every100-steps", type=int, default=100, help="a multiple of 100; 0: no every-100th setting")
    ap.add_argument("--warmup", type=int, default=3, help="steps before each run's timed ones")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--samples", default="16,64,256")
    ap.add_argument("--json")
    ap.add_argument("--memory-steps", type=int, default=0)
    a = ap.parse_args(argv)
    try:
        a.samples = [int(v) for v in a.samples.split(",") if v]
    except ValueError:
        ap.error(f"--samples: {a.samples!r} must be integers separated by commas")
    if any(k < 1 for k in a.samples):
        ap.error(f"--samples: {a.samples} must all be >= 1")
    for name in ("rounds", "steps", "every1_steps", "batch", "seq"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')}: {getattr(a, name)} must be >= 1")
    if not 1 <= a.warmup < 100:
        ap.error(f"--warmup: {a.warmup} must be 1 to 99 (the every-100th runs' first monitored step is in it)")
    if a.every100_steps < 0 or a.every100_steps % 100:
        ap.error(f"--every100-steps: {a.every100_steps} must be a multiple of 100 (0: leave the setting out)")
    if a.batch * a.seq * VOCAB > MAX_ELEMENTS:
        ap.error(
            f"--batch {a.batch} --seq {a.seq}: lm_head's output gradient would have {a.batch * a.seq * VOCAB} "
            f"elements, more than the {MAX_ELEMENTS} of one statistics call (batch x seq <= {MAX_ELEMENTS // VOCAB})"
        )
    return a


def main():
    a = parse_args()
    time_gc()
    time_monitor_waits()
    time_monitor_calls()
    model, opt, ids = make(a.batch, a.seq)
    steps(model, opt, ids, 3)  # warm-up (allocator, kernels)
    res = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "recipes": RECIPES,
        "batch": a.batch,
        "seq": a.seq,
        "rounds": a.rounds,
        "warmup_steps": a.warmup,
        "timed_steps": {key: n for key, _, n in settings(a)},
    }
    torch.cuda.reset_peak_memory_stats()
    orders, runs = run_rounds(model, opt, ids, a)
    res["max_memory_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
    summary = summarize(runs)
    base = summary["no_monitor"]["step_ms"]

    def ms(key):
        return summary[key]["step_ms"]

    def pct(key):
        return summary[key]["overhead_pct"]

    res.update(
        step_ms=base,
        every1_step_ms=ms("every1"),
        every1_overhead_pct=pct("every1"),
        stats_rows_per_step=runs["every1"][0]["rows"] // (a.warmup + a.every1_steps),
        baselines_ms=summary["no_monitor"]["step_ms_rounds"],
        every1_amax_only_step_ms=ms("every1_amax_only"),
        every1_amax_only_overhead_pct=pct("every1_amax_only"),
        every1_sampled={
            k: dict(step_ms=ms(f"every1_sample{k}"), overhead_pct=pct(f"every1_sample{k}")) for k in a.samples
        },
        host_queue_ms={key: s["host_queue_ms"] for key, s in summary.items()},
        order=orders,
        settings=summary,
    )
    if "every100" in summary:
        e100 = summary["every100"]["step_ms_rounds"]
        res.update(
            every100_step_ms=ms("every100"),
            every100_overhead_pct=pct("every100"),
            # a monitored step's extra time: 100 x the extra per step, paired with the round's baseline
            monitored_step_extra_ms_every100=statistics.median(
                100 * (m - b) for m, b in zip(e100, summary["no_monitor"]["step_ms_rounds"])
            ),
        )
    res.update(kernel_rates())
    if a.memory_steps:
        res["memory"] = memory_over_steps(a.memory_steps)
    print(json.dumps(res, indent=1))
    print(table(summary))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
