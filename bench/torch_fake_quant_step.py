"""A fake-quantised training step against the BF16 step (issue 48's target: at most 1.5x): GPT-2
small from transformers (random initial weights), batch 8, sequence 1024, bf16 autocast, AdamW;
every nn.Linear and Conv1D (lm_head included) replaced by fp8kit.torch.Fp8Linear, whose three GEMMs
take both operands quantised under the recipe by fp8kit's CUDA kernels, under each GEMM model of
--gemms: 'torch-blockscaled' (the block-scaled operands in bfloat16, torch's bfloat16 GEMM with a
float32 result, times the tensor factors) and 'torch' (the dequantised float32 operands multiplied
by torch in float32).

    python bench/torch_fake_quant_step.py [--recipes nvfp4,mxfp4] [--gemms torch-blockscaled,torch]
                                          [--steps 10] [--json OUT]

Prints one JSON line per setting: median step seconds over --steps after 2 warm-up steps, and the
ratio to the BF16 step. --profile adds, per setting, one step under torch.profiler: the host's
time to queue the step (CPU wall), the GPU's busy time (sum of its kernels), and the ops with the
most self CPU time.
"""

import argparse
import json
import statistics
import time

import fp8kit.torch as ft
import torch


def make(batch, seq):
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_positions=max(1024, seq))).to("cuda")
    # GPT-2's projections are Conv1D (y = x W + b with W stored in x out): each becomes an
    # nn.Linear with the transposed weight, so swap_linears replaces it like any Linear.
    for name, mod in list(model.named_modules()):
        for cname, child in list(mod.named_children()):
            if isinstance(child, Conv1D):
                lin = torch.nn.Linear(child.weight.shape[0], child.weight.shape[1], device="cuda")
                with torch.no_grad():
                    lin.weight.copy_(child.weight.t())
                    lin.bias.copy_(child.bias)
                setattr(mod, cname, lin)
    ids = torch.randint(0, 50257, (batch, seq), device="cuda")
    return model, ids


def time_steps(model, ids, n, warm=2):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for i in range(warm + n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= warm:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def profile_step(model, ids):
    """One step under torch.profiler (after the timed ones): host wall ms, GPU kernel ms, top ops."""
    from torch.profiler import ProfilerActivity, profile

    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        host = time.perf_counter() - t0
        torch.cuda.synchronize()
    ev = prof.key_averages()
    gpu_us = sum(e.self_device_time_total for e in ev if e.device_type.name == "CUDA")  # kernels only
    top = sorted(ev, key=lambda e: e.self_cpu_time_total, reverse=True)[:8]
    return dict(
        host_queue_ms=round(1e3 * host, 2),
        gpu_kernel_ms=round(gpu_us / 1e3, 2),
        top_self_cpu_ms={e.key: round(e.self_cpu_time_total / 1e3, 2) for e in top},
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipes", default="nvfp4,nvfp4-torchao,mxfp4,mxfp8")
    ap.add_argument("--gemms", default="torch-blockscaled,torch")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--json")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    rows = []
    model, ids = make(a.batch, a.seq)
    base = time_steps(model, ids, a.steps)
    rows.append(dict(setting="bf16", gemm="torch bf16", step_s=round(base, 5), ratio=1.0))
    if a.profile:
        rows[-1]["profile"] = profile_step(model, ids)
    print(json.dumps(rows[-1]), flush=True)
    for gemm in a.gemms.split(","):
        for r in a.recipes.split(","):
            model, ids = make(a.batch, a.seq)
            names = ft.swap_linears(model, recipe=r, fprop=gemm, dgrad=gemm, wgrad=gemm)
            t = time_steps(model, ids, a.steps)
            rows.append(dict(setting=r, gemm=gemm, linears=len(names), step_s=round(t, 5)))
            rows[-1]["ratio"] = round(t / base, 3)
            if a.profile:
                rows[-1]["profile"] = profile_step(model, ids)
            print(json.dumps(rows[-1]), flush=True)
    meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, batch=a.batch, seq=a.seq)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
