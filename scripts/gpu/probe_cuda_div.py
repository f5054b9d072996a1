"""Probe of torch's CUDA `tensor / python_number` (ATen BinaryDivTrueKernel.cu: a * (1/b) when b is a
CPU scalar) against the CPU's division, and of CUDA's log2 (ModelOpt MXFP4/MXFP8 exponents)."""

import json
import sys

import torch

torch.manual_seed(0)
out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
x32 = torch.cat(
    [
        torch.rand(1 << 20) * 2.0 ** torch.randint(-20, 10, (1 << 20,)).float(),
        torch.tensor([float.fromhex("0x1.38p-2")]),
    ]
)  # 0x3e9c0000, the NVFP4 amax of the report
for b in (448.0, 6.0, 2688.0, 7.0):
    r = {}
    for dt in (torch.float32, torch.bfloat16):
        x = x32.to(dt)
        gpu = (x.cuda() / b).cpu()
        cpu_div = x / b
        recip = (x.float() * torch.tensor(1.0 / b, dtype=torch.float32).item()).to(dt)  # fl32(1/b) as ATen's opmath
        inv = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(b, dtype=torch.float32)
        recip = (x.float() * inv).to(dt)
        r[str(dt)] = {
            "n": x.numel(),
            "cuda_equals_reciprocal_multiply": int(
                (
                    gpu.view(torch.int16 if dt == torch.bfloat16 else torch.int32)
                    == recip.view(torch.int16 if dt == torch.bfloat16 else torch.int32)
                ).sum()
            ),
            "cuda_equals_cpu_division": int(
                (
                    gpu.view(torch.int16 if dt == torch.bfloat16 else torch.int32)
                    == cpu_div.view(torch.int16 if dt == torch.bfloat16 else torch.int32)
                ).sum()
            ),
        }
    out[f"x / {b}"] = r
# CUDA tensor divisor (0-dim, on the device): a true division?
x = x32.cuda()
out["x / cuda_tensor(448)"] = int(
    ((x / torch.tensor(448.0, device="cuda")).cpu().view(torch.int32) == (x32 / 448.0).view(torch.int32)).sum()
)
# log2 and ceil(log2) of amax/6 on CUDA vs CPU
d = x32 * (torch.tensor(1.0) / torch.tensor(6.0))
lg, lc = torch.log2(d.cuda()).cpu(), torch.log2(d)
out["log2 cuda==cpu"] = int((lg.view(torch.int32) == lc.view(torch.int32)).sum())
out["ceil(log2) cuda==cpu"] = int((torch.ceil(lg) == torch.ceil(lc)).sum())
pw = torch.ldexp(torch.ones(200), torch.arange(-100, 100))
out["log2 of powers of two exact on cuda"] = bool(
    (torch.log2(pw.cuda()).cpu() == torch.arange(-100, 100).float()).all()
)
nx = torch.nextafter(pw, torch.full_like(pw, float("inf")))
out["ceil(log2(2^k next up)) cuda==cpu"] = int(
    (torch.ceil(torch.log2(nx.cuda())).cpu() == torch.ceil(torch.log2(nx))).sum()
)
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out))
