#!/usr/bin/env python3
"""cuBLASLt's time for an FP8 GEMM through torch._scaled_mm, for the same shape as
fp8kit_cuda_gemm_bench in the same run (docs/performance.md): E4M3 x E4M3, tensorwise scales,
float32 out, the split accumulator (use_fast_accum=False, the `sm90` model's kernel) and fast
accumulation (`sm90-fast`). CUDA events, median of `runs` after 3 warm-ups.

usage: bench_gemm_torch.py [M N K] [runs=10]
"""
import statistics
import sys

import torch


def median_ms(fn, runs):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), min(times), max(times)


def main():
    args = [int(x) for x in sys.argv[1:]]
    m, n, k = args[:3] if len(args) >= 3 else (8192, 8192, 8192)
    runs = args[3] if len(args) >= 4 else 10
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    g = torch.Generator(device="cuda").manual_seed(8192)
    a = (torch.rand(m, k, device="cuda", generator=g) * 2 - 1).to(torch.float8_e4m3fn)
    b = (torch.rand(n, k, device="cuda", generator=g) * 2 - 1).to(torch.float8_e4m3fn)
    sa = torch.tensor(0.75, device="cuda")
    sb = torch.tensor(1.25, device="cuda")
    for fast in (False, True):
        fn = lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32, use_fast_accum=fast)
        med, lo, hi = median_ms(fn, runs)
        tflops = 2 * m * n * k / (med * 1e-3) / 1e12
        print(f"cuBLASLt torch._scaled_mm use_fast_accum={fast} {m}x{n}x{k} e4m3 tensorwise f32: "
              f"median {med:.3f} ms of {runs} (min {lo:.3f}, max {hi:.3f}), {tflops:.0f} TFLOP/s")


if __name__ == "__main__":
    main()
