"""Where the time of a monitored GPT-2 step goes (issue 23's setting, the model and steps of
torch_monitor_overhead.py), without the monitor, with it every step (3 recipes, all elements) and
every step with sample=256.

GPU (the default): torch.profiler's kernel times over 3 steps; per setting the GPU busy time per
step, the 8 kernels with the most time (ms per step, launches per step, median launch) and how many
statistics launches per step took under 6 us (the ones that copy another recipe's record,
fp8kit::cuda::statistics_async_multi). Results: docs/performance.md at 09ae615.

--calls: the host's time per watch() call, taken apart: on one bf16 tensor of GPT-2's shape, 196
calls a step (then step()) for 50 steps of each of: the whole watch(); its torch tensor steps alone
(detach, contiguous); the monitor's Python with the module's calls replaced by no-ops; the module's
one call per tensor alone (cuda::WatchBatch::add: checks, a launch); fp8kit's amax launch alone;
a torch launch of the same size (torch.neg into a buffer).

--host: where the host's time goes, for the steps where the host sets the pace (batch 8 on the
H200). Per setting, over --steps steps after 3 warm-up steps: the step time and the host's time
to queue the steps; the time spent inside the monitor's own calls (every watch(), every hook on an
output gradient, step()), timed by wrappers; the GPU busy time per step and the CUDA runtime calls
with the most host time (torch.profiler, CPU and CUDA activities); then cProfile's 15 functions
with the most time of their own.

    python bench/torch_monitor_profile.py [--host | --calls] [--batch 8] [--steps 10]
"""

import argparse
import collections
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8kit.torch as ft  # noqa: E402
from torch_monitor_overhead import HOST, RECIPES, make, steps  # noqa: E402

SETTINGS = (("no monitor", None), ("every step, 3 recipes", {}), ("every step sample=256", dict(sample=256)))


def prof(model, opt, ids, mon, label, n=3):
    steps(model, opt, ids, 1, mon)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        steps(model, opt, ids, n, mon)
    agg, durs = collections.defaultdict(lambda: [0, 0.0]), collections.defaultdict(list)
    for e in p.events():
        if e.device_type.name == "CUDA":
            k = e.name[:60]
            agg[k][0] += 1
            agg[k][1] += e.device_time
            durs[k].append(e.device_time)
    tot = sum(v[1] for v in agg.values())
    print(f"== {label}: GPU busy per step {tot / n / 1e3:.2f} ms")
    for k, v in sorted(agg.items(), key=lambda kv: -kv[1][1])[:8]:
        d = sorted(durs[k])
        print(f"  {v[1] / n / 1e3:8.3f} ms/step  {v[0] // n:5d} calls/step  med {d[len(d) // 2]:.1f} us  {k}")
    for k, d in durs.items():
        if "statistics_kernel" in k:
            short = [t for t in d if t < 6]
            print(
                f"  statistics_kernel: {len(short) // n} calls/step under 6 us, {sum(short) / n / 1e3:.3f} ms/step in them"
            )


class MonitorClock:
    """Host seconds spent inside the monitor's calls: Monitor.watch (the hooks' work, which calls
    it) and Monitor.step, by wrappers on the class while it is installed."""

    def __init__(self):
        self.seconds = collections.Counter()
        self.calls = collections.Counter()
        self._orig = {}

    def install(self):
        for name in ("watch", "step"):
            f = self._orig[name] = getattr(ft.Monitor, name)
            setattr(ft.Monitor, name, self._timed(name, f))

    def remove(self):
        for name, f in self._orig.items():
            setattr(ft.Monitor, name, f)

    def _timed(self, name, f):
        def wrapper(*args, **kw):
            t0 = time.perf_counter()
            try:
                return f(*args, **kw)
            finally:
                self.seconds[name] += time.perf_counter() - t0
                self.calls[name] += 1

        return wrapper


def host_profile(model, opt, ids, kw, label, n):
    mon = None if kw is None else ft.monitor(model, recipes=RECIPES, every=1, **kw)
    steps(model, opt, ids, 3, mon)
    clock = MonitorClock()
    clock.install()
    t = steps(model, opt, ids, n, mon)
    clock.remove()
    print(f"== {label}: step {t * 1e3:.2f} ms, host queues it in {HOST['last'] * 1e3:.2f} ms")
    for name in ("watch", "step"):
        if clock.calls[name]:
            print(
                f"  Monitor.{name}: {clock.seconds[name] / n * 1e3:.2f} ms/step host, "
                f"{clock.calls[name] // n} calls/step, {clock.seconds[name] / clock.calls[name] * 1e6:.1f} us/call"
            )
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        steps(model, opt, ids, n, mon)
    gpu = sum(e.device_time for e in p.events() if e.device_type.name == "CUDA")
    print(f"  GPU busy per step {gpu / n / 1e3:.2f} ms (under the profiler)")
    runtime = [a for a in p.key_averages() if a.key.startswith("cuda") and a.self_cpu_time_total > 0]
    for a in sorted(runtime, key=lambda a: -a.self_cpu_time_total)[:6]:
        print(f"  {a.self_cpu_time_total / n / 1e3:8.3f} ms/step host  {a.count // n:6d} calls/step  {a.key}")
    pr = cProfile.Profile()
    pr.enable()
    steps(model, opt, ids, n, mon)
    pr.disable()
    text = io.StringIO()
    pstats.Stats(pr, stream=text).sort_stats("tottime").print_stats(15)
    print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:6000])
    if mon is not None:
        mon.close()


def per_call(label, f, calls=196, rounds=50):
    """Microseconds of host time per call of f(i), i = 0 .. calls-1, over `rounds` rounds (the GPU
    synchronised between rounds: no round waits on a full launch queue)."""
    f(0)
    torch.cuda.synchronize()
    total = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(calls):
            f(i)
        total += time.perf_counter() - t0
        torch.cuda.synchronize()
    print(f"  {total / rounds / calls * 1e6:8.2f} us/call  {label}")


class _NoOps:
    """Stands for a WatchBatch whose add and flush do nothing."""

    pending = 0

    def add(self, *args):
        pass

    def flush(self):
        pass


def calls():
    """--calls: see the module's docstring."""
    from fp8kit import _fp8kit

    x = torch.randn(8 * 1024, 768, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    layer = torch.nn.Linear(4, 4).cuda()
    names = [f"h.{i}.mlp.c_fc.grad_output" for i in range(196)]
    print("== host time per call (one bf16 tensor of 8 x 1024 x 768 elements)")
    mon = ft.monitor(layer, recipes=RECIPES, every=1)

    def watch(i):
        mon.watch(names[i], x, "grad")
        if i == 195:
            mon.step()

    per_call("Monitor.watch (step() after every 196th)", watch)
    mon.close()
    with tempfile.TemporaryDirectory() as d:  # step() alone, its rows streamed to out_dir
        mon = ft.monitor(layer, recipes=RECIPES, every=1, out_dir=d, keep_rows=False)
        spent = [0.0]

        def timed_step(i):
            mon.watch(names[i], x, "grad")
            if i == 195:
                t0 = time.perf_counter()
                mon.step()
                spent[0] += time.perf_counter() - t0

        per_call("(Monitor.watch, step() timed apart)", timed_step)
        print(f"  {spent[0] / 50 * 1e3:8.2f} ms/step  Monitor.step, 588 rows streamed to out_dir")
        mon.close()
    per_call("x.detach(), contiguous()", lambda i: x.detach().contiguous())
    stream = torch.cuda.current_stream().cuda_stream
    batch = _fp8kit.cuda_watch_batch(stream)
    group = mon._group("grad", "bf16", 768)[0]
    amax = torch.zeros(196, device="cuda")
    recs = torch.zeros(196 * 3 * _fp8kit.cuda_stats_record_bytes, dtype=torch.uint8, device="cuda")

    def add(i):
        if i == 0:
            recs.zero_()  # the records K2 fills start zeroed
        batch.add(
            group,
            x.data_ptr(),
            "bf16",
            x.numel(),
            amax.data_ptr() + 4 * i,
            recs.data_ptr() + 3 * i * _fp8kit.cuda_stats_record_bytes,
            1,
            0,
        )
        if i == 195:
            batch.flush()

    per_call("WatchBatch.add alone (flush after every 196th)", add)
    per_call(
        "fp8kit amax launch alone",
        lambda i: _fp8kit.cuda_amax(x.data_ptr(), "bf16", x.numel(), amax.data_ptr(), stream),
    )
    per_call("torch.neg(x, out=y)", lambda i: torch.neg(x, out=y))
    mon = ft.monitor(layer, recipes=RECIPES, every=1)
    mon._batches[(x.device, stream)] = (_NoOps(), torch.cuda.current_stream())

    def watch_noop(i):  # no records are written: the step's queue is dropped, not read
        mon.watch(names[i], x, "grad")
        if i == 195:
            mon._queues, mon._row_parts, mon._trace = {}, [], ft._Trace()

    per_call("Monitor.watch with the module's launch a no-op", watch_noop)
    mon._batches.clear()
    mon.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", action="store_true", help="where the host's time goes (see above)")
    ap.add_argument("--calls", action="store_true", help="the host's time per watch() call, taken apart")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10, help="--host: steps per measurement")
    a = ap.parse_args()
    if a.calls:
        calls()
        return
    model, opt, ids = make(a.batch, 1024)
    steps(model, opt, ids, 3)
    for label, kw in SETTINGS:
        if a.host:
            host_profile(model, opt, ids, kw, label, a.steps)
            continue
        mon = None if kw is None else ft.monitor(model, recipes=RECIPES, every=1, **kw)
        prof(model, opt, ids, mon, label)
        if mon is not None:
            mon.close()


if __name__ == "__main__":
    main()
