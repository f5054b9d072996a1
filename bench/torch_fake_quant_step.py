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
ratio to the BF16 step.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipes", default="nvfp4,nvfp4-torchao,mxfp4,mxfp8")
    ap.add_argument("--gemms", default="torch-blockscaled,torch")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    model, ids = make(a.batch, a.seq)
    base = time_steps(model, ids, a.steps)
    rows.append(dict(setting="bf16", gemm="torch bf16", step_s=round(base, 5), ratio=1.0))
    print(json.dumps(rows[-1]), flush=True)
    for gemm in a.gemms.split(","):
        for r in a.recipes.split(","):
            model, ids = make(a.batch, a.seq)
            names = ft.swap_linears(model, recipe=r, fprop=gemm, dgrad=gemm, wgrad=gemm)
            t = time_steps(model, ids, a.steps)
            rows.append(dict(setting=r, gemm=gemm, linears=len(names), step_s=round(t, 5)))
            rows[-1]["ratio"] = round(t / base, 3)
            print(json.dumps(rows[-1]), flush=True)
    meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, batch=a.batch, seq=a.seq)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
