#!/usr/bin/env python3
"""Peers of fp8kit_cuda_bench's NVFP4 / MXFP4 / MXFP6 / MXFP8 block rows, in the same run: torchao's
own quantisers (torchao/prototype/mx_formats: nvfp4_tensor.py nvfp4_quantize with
per_tensor_amax_to_scale of the tensor's amax, and mx_tensor.py to_mx with the matching
ScaleCalculationMode: RCEIL for fp8kit's round-up rule, FLOOR for the OCP floor), compiled with
torch.compile and in eager torch, on the same shape (2^log2 elements as rows x 4096), f32 and bf16.
Prints the joint table: fp8kit ms, % of the copy bandwidth (the bytes fp8kit_cuda_bench counts;
NVFP4 counts both of its passes, so its % is of the two-pass floor), torchao compiled ms and eager
ms, and torchao_compiled_ms / fp8kit_ms.

usage: bench_blocks_torchao.py FP8KIT_CSV [log2_elements=28] [runs=50]
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
    return statistics.median(times)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: bench_blocks_torchao.py FP8KIT_CSV [log2_elements=28] [runs=50]")
    ours = {}
    with open(sys.argv[1]) as f:
        for line in f:
            if line.startswith("#") or line.startswith("name,") or not line.strip():
                continue
            name, ms, nbytes = line.strip().split(",")
            ours[name] = (float(ms), float(nbytes))
    if "copy_d2d" not in ours:
        sys.exit(f"{sys.argv[1]}: no copy_d2d line; did fp8kit_cuda_bench run?")
    log2n = int(sys.argv[2]) if len(sys.argv) > 2 else 28
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    try:
        import torchao
        from torchao.prototype.mx_formats.config import ScaleCalculationMode as Mode
        from torchao.prototype.mx_formats.mx_tensor import to_mx
        from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale
    except ImportError as e:
        sys.exit(f"torchao is not importable ({e}): carry its wheel (docs/performance.md)")

    torch._dynamo.config.recompile_limit = 64  # one compiled function per peer and input type
    n = 1 << log2n
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(n, device="cuda", generator=g) * 4).view(-1, 4096)
    xb = x.bfloat16()

    def nvfp4(t):
        return nvfp4_quantize(t, 16, per_tensor_amax_to_scale(t.abs().amax().float()))

    def mx(elem, mode):
        return lambda t: to_mx(t, elem, 32, mode)

    fp4, fp8 = torch.float4_e2m1fn_x2, torch.float8_e4m3fn
    peers = {  # fp8kit row stem -> (torchao call, function)
        "nvfp4_te_1x16_packed": ("nvfp4_quantize(per-tensor amax)", nvfp4),
        "nvfp4_torchao_1x16_packed": ("nvfp4_quantize(per-tensor amax)", nvfp4),
        "mxfp4_round_up_packed": ("to_mx(fp4, RCEIL)", mx(fp4, Mode.RCEIL)),
        "mxfp4_floor_packed": ("to_mx(fp4, FLOOR)", mx(fp4, Mode.FLOOR)),
        "mxfp6_e2m3_round_up": ("to_mx(fp6_e2m3, RCEIL)", mx("fp6_e2m3", Mode.RCEIL)),
        "mxfp6_e3m2_floor": ("to_mx(fp6_e3m2, FLOOR)", mx("fp6_e3m2", Mode.FLOOR)),
        "mxfp8_blocks_round_up": ("to_mx(e4m3, RCEIL)", mx(fp8, Mode.RCEIL)),
        "mxfp8_blocks_floor": ("to_mx(e4m3, FLOOR)", mx(fp8, Mode.FLOOR)),
    }
    theirs = {}
    done = {}
    for stem, (call, fn) in peers.items():
        for suffix, t in (("_f32", x), ("_bf16", xb)):
            name = stem + suffix
            if name not in ours:
                continue
            key = (call, suffix)
            if key not in done:
                try:
                    compiled = torch.compile(fn)
                    done[key] = (median_ms(lambda: compiled(t), runs), median_ms(lambda: fn(t), runs))
                except Exception as e:  # a peer that fails is reported, not fatal
                    print(f"# {name}: torchao {call} failed: {type(e).__name__}: {e}", file=sys.stderr)
                    done[key] = (None, None)
            theirs[name] = (call,) + done[key]

    copy_ms, copy_bytes = ours["copy_d2d"]
    copy_gbs = copy_bytes / copy_ms / 1e6
    print(f"torch {torch.__version__}, torchao {torchao.__version__}, {torch.cuda.get_device_name()}, "
          f"n = 2^{log2n} (rows x 4096), median of {runs} runs; copy {copy_gbs:.0f} GB/s")
    print(f"{'fp8kit row':40} {'ms':>8} {'% copy':>7} | {'torchao':34} {'compiled':>9} {'/fp8kit':>8} "
          f"{'% copy':>7} {'eager':>9}")
    for name, (ms, nbytes) in ours.items():
        if name not in theirs and not name.startswith(("nvfp4", "mxfp")):
            continue
        pct = 100 * nbytes / ms / 1e6 / copy_gbs
        call, cms, ems = theirs.get(name, ("-", None, None))
        f = lambda v, w=9: f"{v:{w}.4f}" if v else f"{'-':>{w}}"
        ratio = f"{cms / ms:8.2f}" if cms else f"{'-':>8}"
        tpct = f"{100 * nbytes / cms / 1e6 / copy_gbs:6.1f}%" if cms else f"{'-':>7}"
        print(f"{name:40} {ms:8.4f} {pct:6.1f}% | {call:34} {f(cms)} {ratio} {tpct} {f(ems)}")


if __name__ == "__main__":
    main()
