#!/usr/bin/env python3
"""torch 2.x figures for the same operations as fp8kit_cuda_bench, in the same run, and the joint
table: ms, GB/s, % of the measured device-to-device copy bandwidth, and torch_ms / fp8kit_ms.

usage: bench_torch.py FP8KIT_CSV [log2_elements=28] [runs=50]
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
        sys.exit("usage: bench_torch.py FP8KIT_CSV [log2_elements=28] [runs=50]")
    csv_path = sys.argv[1]
    log2n = int(sys.argv[2]) if len(sys.argv) > 2 else 28
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    ours = {}
    with open(csv_path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("name,") or not line.strip():
                continue
            name, ms, nbytes = line.strip().split(",")
            ours[name] = (float(ms), float(nbytes))
    if "copy_d2d" not in ours:
        sys.exit(f"{csv_path}: no copy_d2d line; did fp8kit_cuda_bench run?")

    n = 1 << log2n
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n, device="cuda", generator=g) * 4
    fp8 = torch.float8_e4m3fn
    FMAX = 448.0
    scale = torch.tensor(0.5, device="cuda")

    def current(t):
        amax = t.abs().max().float()
        s = FMAX / amax
        return (t * s).clamp(-FMAX, FMAX).to(fp8), s

    def delayed(t, s):
        return (t * s).clamp(-FMAX, FMAX).to(fp8), t.abs().max()

    def block_1x128(t):
        b = t.view(-1, 128)
        amax = b.abs().amax(dim=1, keepdim=True).float()
        s = torch.where(amax > 0, FMAX / amax, torch.ones_like(amax))
        return (b * s).clamp(-FMAX, FMAX).to(fp8), 1.0 / s

    def mx(t):
        b = t.view(-1, 32)
        amax = b.abs().amax(dim=1, keepdim=True).float()
        e = torch.ceil(torch.log2(amax * (1.0 / FMAX))).clamp(-127, 127)
        e = torch.where(amax > 0, e, torch.full_like(e, -127.0))
        return (b * torch.exp2(-e)).clamp(-FMAX, FMAX).to(fp8), (e + 127).to(torch.uint8)

    def mx_floor(t):
        b = t.view(-1, 32)
        amax = b.abs().amax(dim=1, keepdim=True).float()
        e = (torch.floor(torch.log2(amax)) - 8).clamp(-127, 127)
        e = torch.where(amax > 0, e, torch.full_like(e, -127.0))
        return (b * torch.exp2(-e)).clamp(-FMAX, FMAX).to(fp8), (e + 127).to(torch.uint8)

    def block_128x128(t):
        b = t.view(-1, 128, 4096 // 128, 128)  # rows x 4096 as fp8kit_cuda_bench: (row tiles, 128, col tiles, 128)
        amax = b.abs().amax(dim=(1, 3), keepdim=True).float()
        s = torch.where(amax > 0, FMAX / amax, torch.ones_like(amax))
        return (b * s).clamp(-FMAX, FMAX).to(fp8), 1.0 / s

    # Stochastic rounding as torch can write it: add uniform random bits below the format's last
    # kept mantissa bit (20 bits for E4M3, 21 for E5M2) to the float32 pattern, truncate them
    # (round toward zero), cast. Right for the normal range; subnormal results and saturation
    # are not emulated. The shift counts are literals: inductor turned a captured int into an
    # int64 size variable that its bitcast then refused.
    def stochastic_e4m3(t):
        r = (torch.rand_like(t) * 1048576.0).to(torch.int32)
        bits = ((t.view(torch.int32) + r) >> 20) << 20
        return bits.view(torch.float32).to(torch.float8_e4m3fn)

    def stochastic_e5m2(t):
        r = (torch.rand_like(t) * 2097152.0).to(torch.int32)
        bits = ((t.view(torch.int32) + r) >> 21) << 21
        return bits.view(torch.float32).to(torch.float8_e5m2)

    def dequant(q, s_inv):
        return q.to(torch.float32) * s_inv

    def histogram(t):
        _, e = torch.frexp(t)
        return torch.bincount((e.view(-1) + 160).long(), minlength=320)

    c_current = torch.compile(current)
    c_delayed = torch.compile(delayed)
    c_block = torch.compile(block_1x128)
    c_mx = torch.compile(mx)
    c_mx_floor = torch.compile(mx_floor)
    c_tile = torch.compile(block_128x128)
    c_sr4 = torch.compile(stochastic_e4m3)
    c_sr5 = torch.compile(stochastic_e5m2)
    # 16-bit inputs: the same, widened to float32 inside the compiled function (one fused kernel).
    c_sr4_16 = torch.compile(lambda t: stochastic_e4m3(t.float()))
    c_sr5_16 = torch.compile(lambda t: stochastic_e5m2(t.float()))
    c_sr4_16s = torch.compile(lambda t: stochastic_e4m3(t.float() * 0.5))
    c_sr4_16s37 = torch.compile(lambda t: stochastic_e4m3(t.float() * 0.37))
    c_dequant = torch.compile(dequant)
    y = torch.empty_like(x)
    xh = x.half()
    xb = x.bfloat16()
    q8 = x.to(fp8)
    e5 = torch.float8_e5m2
    s_inv = torch.tensor(0.25, device="cuda")
    cast = ("x.to(float8_e4m3fn)", median_ms(lambda: x.to(fp8), runs))
    cast5 = ("x.to(float8_e5m2)", median_ms(lambda: x.to(e5), runs))
    sr4 = ("compile(rand bits + RZ, e4m3)", median_ms(lambda: c_sr4(x), runs))

    theirs = {
        "copy_d2d": ("y.copy_(x)", median_ms(lambda: y.copy_(x), runs)),
        "cast_f32_e4m3_satfinite": cast,
        "cast_f32_e4m3_cvt_satfinite": cast,
        "cast_f32_e4m3_rne_nosat": cast,
        "cast_f32_e5m2_rne_nosat": cast5,
        "cast_f32_e4m3_toward_zero": cast,
        "cast_f32_e4m3_nearest_away": cast,
        "cast_f32_e4m3fnuz_rne": ("x.to(float8_e4m3fnuz)", median_ms(lambda: x.to(torch.float8_e4m3fnuz), runs)),
        "cast_f32_e4m3_stochastic": sr4,
        "cast_f32_e5m2_stochastic": ("compile(rand bits + RZ, e5m2)", median_ms(lambda: c_sr5(x), runs)),
        "cast_f16_e4m3_satfinite": ("xh.to(float8_e4m3fn)", median_ms(lambda: xh.to(fp8), runs)),
        "cast_f16_e4m3_rne_nosat": ("xh.to(float8_e4m3fn)", None),
        "cast_f16_e4m3_stochastic": ("compile(xh.float() rand+RZ, e4m3)", median_ms(lambda: c_sr4_16(xh), runs)),
        "cast_bf16_e4m3_satfinite": ("xb.to(float8_e4m3fn)", median_ms(lambda: xb.to(fp8), runs)),
        "cast_bf16_e5m2_stochastic": ("compile(xb.float() rand+RZ, e5m2)", median_ms(lambda: c_sr5_16(xb), runs)),
        "cast_bf16_e4m3_stochastic": ("compile(xb.float() rand+RZ, e4m3)", median_ms(lambda: c_sr4_16(xb), runs)),
        "cast_f16_e4m3_stochastic_scaled": ("compile((xh.float() * 0.5) rand+RZ, e4m3)", median_ms(lambda: c_sr4_16s(xh), runs)),
        "cast_f16_e4m3_stochastic_scale_0.37": ("compile((xh.float() * 0.37) rand+RZ, e4m3)", median_ms(lambda: c_sr4_16s37(xh), runs)),
        "cast_bf16_e4m3_stochastic_scale_0.37": ("compile((xb.float() * 0.37) rand+RZ, e4m3)", median_ms(lambda: c_sr4_16s37(xb), runs)),
        "dequantize_e4m3_f32": ("compile(q.to(f32) * scale_inv)", median_ms(lambda: c_dequant(q8, s_inv), runs)),
        "amax_f32": ("x.abs().max()", median_ms(lambda: x.abs().max(), runs)),
        "mx_e4m3_floor": ("compile(1x32 amax->floor e8m0->cast)", median_ms(lambda: c_mx_floor(x), runs)),
        "block_128x128": ("compile(128x128 amax->scale->cast)", median_ms(lambda: c_tile(x), runs)),
        "dequantize_e4m3_f32_eager": None,
        "delayed_scaling_cast_amax": ("compile(cast*scale, amax)", median_ms(lambda: c_delayed(x, scale), runs)),
        "current_scaling": ("compile(amax->scale->cast)", median_ms(lambda: c_current(x), runs)),
        "statistics": ("eager frexp+bincount", median_ms(lambda: histogram(x), runs)),
        "mx_e4m3_round_up": ("compile(1x32 amax->e8m0->cast)", median_ms(lambda: c_mx(x), runs)),
        "block_1x128": ("compile(1x128 amax->scale->cast)", median_ms(lambda: c_block(x), runs)),
    }
    theirs["cast_f16_e4m3_rne_nosat"] = theirs["cast_f16_e4m3_satfinite"]
    theirs["statistics_async"] = theirs["statistics"]
    del theirs["dequantize_e4m3_f32_eager"]
    print(f"torch eager dequantize q.to(float32) * scale_inv: {median_ms(lambda: dequant(q8, s_inv), runs):.4f} ms")

    copy_ms, copy_bytes = ours["copy_d2d"]
    copy_gbs = copy_bytes / copy_ms / 1e6
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, n = 2^{log2n}, median of {runs} runs")
    print(f"{'operation':30} {'ms':>9} {'GB/s':>8} {'% copy':>7} | {'torch op':34} {'torch ms':>9} {'torch/fp8kit':>12}")
    for name, (ms, nbytes) in ours.items():
        gbs = nbytes / ms / 1e6
        top, tms = theirs.get(name) or ("-", None)
        ratio = f"{tms / ms:12.2f}" if tms else f"{'-':>12}"
        tms_s = f"{tms:9.4f}" if tms else f"{'-':>9}"
        print(f"{name:30} {ms:9.4f} {gbs:8.0f} {100 * gbs / copy_gbs:6.1f}% | {top:34} {tms_s} {ratio}")


if __name__ == "__main__":
    main()
