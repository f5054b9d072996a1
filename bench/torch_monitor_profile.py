"""Where the GPU time of a monitored GPT-2 step goes (issue 23's setting, the model and steps of
torch_monitor_overhead.py): torch.profiler's kernel times over 3 steps, without the monitor, with
it every step (3 recipes, all elements) and every step with sample=256; per setting the GPU busy
time per step, the 8 kernels with the most time (ms per step, launches per step, median launch)
and how many statistics launches per step took under 6 us (the ones that copy another recipe's
record, fp8kit::cuda::statistics_async_multi). Results: docs/performance.md at 09ae615.

    python bench/torch_monitor_profile.py
"""
import collections
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_monitor_overhead import RECIPES, make, steps  # noqa: E402
import fp8kit.torch as ft  # noqa: E402


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
            print(f"  statistics_kernel: {len(short) // n} calls/step under 6 us, {sum(short) / n / 1e3:.3f} ms/step in them")


def main():
    model, opt, ids = make(8, 1024)
    steps(model, opt, ids, 3)
    prof(model, opt, ids, None, "no monitor")
    for label, kw in (("every step, 3 recipes", {}), ("every step sample=256", dict(sample=256))):
        mon = ft.monitor(model, recipes=RECIPES, every=1, **kw)
        prof(model, opt, ids, mon, label)
        mon.close()


if __name__ == "__main__":
    main()
