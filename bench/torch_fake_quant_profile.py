"""Where a fake-quantised GPT-2 step's time goes (issue 48): for BF16 and each recipe named on the
command line (every Linear swapped to Fp8Linear with the 'torch-blockscaled' GEMMs), the median over
8 steps, each synchronised before and after, of the step's wall time and of the host's time to
queue it; then one step under torch.profiler: the GPU's kernel time, the CUDA API calls by host
time and the 30 largest kernels; then (unless NOPROF=1) three steps under cProfile, by own time.
The model and batch are bench/torch_fake_quant_step.py's (GPT-2 small, batch 8, sequence 1024).

    PYTHONPATH=BUNDLE/pkg LD_LIBRARY_PATH=BUNDLE/lib NOPROF=1 python3 bench/torch_fake_quant_profile.py nvfp4 nvfp4-torchao
"""

import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import fp8kit.torch as ft
import torch


def step(model, ids, opt):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def measure(model, ids, n=8):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        step(model, ids, opt)
    torch.cuda.synchronize()
    hosts, walls, gpus = [], [], []
    for _ in range(n):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        a.record()
        step(model, ids, opt)
        b.record()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        hosts.append(t1 - t0)
        walls.append(t2 - t0)
        gpus.append(a.elapsed_time(b) / 1e3)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step(model, ids, opt)
        torch.cuda.synchronize()
    ev = prof.key_averages()
    gpu_busy = sum(e.self_device_time_total for e in ev if e.device_type.name == "CUDA") / 1e3
    api = sorted([e for e in ev if e.key.startswith("cuda")], key=lambda e: -e.self_cpu_time_total)[:8]
    print(
        f"  wall {1e3 * statistics.median(walls):.2f} ms, host queue {1e3 * statistics.median(hosts):.2f} ms, gpu busy(prof) {gpu_busy:.2f} ms"
    )
    for e in api:
        print(f"    {e.key:28} {e.count:6d} calls {e.self_cpu_time_total / 1e3:8.2f} ms")
    ks = sorted([e for e in ev if e.device_type.name == "CUDA"], key=lambda e: -e.self_device_time_total)[:30]
    for e in ks:
        print(f"    K {e.self_device_time_total / 1e3:8.2f} ms {e.count:5d}x  {e.key[:150]}")
    if os.environ.get("NOPROF"):
        return
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(3):
        step(model, ids, opt)
    torch.cuda.synchronize()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
    print(s.getvalue()[:6000])


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_fake_quant_step import make  # the benchmark's model and batch

    model, ids = make(8, 1024)
    print("== bf16")
    measure(model, ids)
    for r in sys.argv[1:]:
        model, ids = make(8, 1024)
        ft.swap_linears(
            model, recipe=r, fprop="torch-blockscaled", dgrad="torch-blockscaled", wgrad="torch-blockscaled"
        )
        print("==", r)
        measure(model, ids)


if __name__ == "__main__":
    main()
