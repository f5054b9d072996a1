#!/usr/bin/env python3
"""Make data/example/: a tensor dump and amax traces from a real (small) training run.

A 2-layer Llama-style decoder (transformers.LlamaForCausalLM, hidden 64) is trained from scratch
for 300 steps, bf16 autocast on a GPU, as a byte-level language model on the Python standard
library's own source files (a real text corpus that exists on any machine with Python).

Written:
  data/example/llama_tiny_dump.h5   tensors of every nn.Linear at steps 0, 100 and 299:
      /step_{s:06d}/{module}/input        bf16 activation, stored as uint16 + attribute dtype=bfloat16
      /step_{s:06d}/{module}/output       bf16 activation, stored as 2-byte opaque + dtype=bfloat16
      /step_{s:06d}/{module}/grad_output  float16 (native HDF5 float)
      /step_{s:06d}/{module}/weight       float32, chunked + shuffle + deflate
      /step_{s:06d}/{module}/wgrad        float32
      /step_{s:06d}/{module}/exp_avg      float32 (AdamW first moment after the step), deflate
      /step_{s:06d}/lm_head/weight_fp8    the weight cast to float8_e4m3fn by torch, uint8 + dtype
    Each dataset has attributes step and role (activation, weight, gradient, optimizer_state).
    Activations keep the first sequence of the batch to keep the file small.
  data/example/amax_trace.csv       step,tensor,amax for every step and every Linear's
                                    input, weight, output and grad_output (forward and backward)
  data/example/dlfw_inspect.log     the same grad_output amaxes in nvidia-dlfw-inspect's log format
"""
import glob
import os
import sys

import h5py
import ml_dtypes
import numpy as np
import torch
import transformers

OUT = sys.argv[1] if len(sys.argv) > 1 else "data/example"
STEPS = 300
DUMP_AT = {0, 100, 299}
BATCH, SEQ, KEEP = 16, 128, 1

torch.manual_seed(0)
np.random.seed(0)
dev = "cuda"

# Corpus: the standard library's source, bytes as tokens.
files = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))
corpus = np.frombuffer(b"".join(open(f, "rb").read() for f in files), dtype=np.uint8)
corpus = torch.from_numpy(corpus.astype(np.int64)).to(dev)

cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=192,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                               max_position_embeddings=SEQ)
model = transformers.LlamaForCausalLM(cfg).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}

captured = {}


def fwd_hook(name):
    def hook(mod, inp, out):
        captured[(name, "input")] = inp[0].detach()
        captured[(name, "output")] = out.detach()
    return hook


def bwd_hook(name):
    def hook(mod, grad_in, grad_out):
        captured[(name, "grad_output")] = grad_out[0].detach()
    return hook


for n, m in linears.items():
    m.register_forward_hook(fwd_hook(n))
    m.register_full_backward_hook(bwd_hook(n))

os.makedirs(OUT, exist_ok=True)
h5 = h5py.File(os.path.join(OUT, "llama_tiny_dump.h5"), "w")
h5.attrs["description"] = ("2-layer Llama (hidden 64) trained 300 steps from scratch, bf16 autocast, "
                           "byte-level LM on the Python standard library source; made by "
                           "scripts/make_example_dump.py")
h5.attrs["torch"] = str(torch.__version__)
h5.attrs["transformers"] = str(transformers.__version__)
trace = open(os.path.join(OUT, "amax_trace.csv"), "w")
trace.write("step,tensor,amax\n")
log = open(os.path.join(OUT, "dlfw_inspect.log"), "w")


def put(group, name, arr, role, step, how):
    arr = np.ascontiguousarray(arr)
    kw = {}
    if how in ("weight", "exp_avg", "bf16_uint16", "f16"):
        kw = dict(chunks=True, compression="gzip", compression_opts=4, shuffle=True)
    if how == "bf16_uint16":
        ds = group.create_dataset(name, data=arr.view(np.uint16), **kw)
        ds.attrs["dtype"] = "bfloat16"
    elif how == "bf16_opaque":
        ds = group.create_dataset(name, data=arr.view(ml_dtypes.bfloat16), **kw)
        ds.attrs["dtype"] = "bfloat16"
    elif how == "fp8":
        ds = group.create_dataset(name, data=arr, **kw)
        ds.attrs["dtype"] = "float8_e4m3fn"
    else:
        ds = group.create_dataset(name, data=arr, **kw)
    ds.attrs["step"] = step
    ds.attrs["role"] = role


def to_np_bf16(t):
    return t.to(torch.bfloat16).contiguous().view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)


for step in range(STEPS):
    idx = torch.randint(0, corpus.numel() - SEQ - 1, (BATCH,), device=dev)
    x = torch.stack([corpus[i:i + SEQ] for i in idx])
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=x, labels=x).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    for n, m in linears.items():
        for t in ("input", "output", "grad_output"):
            a = captured[(n, t)].float().abs().max().item()
            trace.write(f"{step},{n}.{t},{a:.9g}\n")
        trace.write(f"{step},{n}.weight,{m.weight.detach().abs().max().item():.9g}\n")
        g = captured[(n, "grad_output")].float().abs().max().item()
        log.write(f"2026-11-22 00:00:{step % 60:02d},000 - INFO - {n}_gradient_cur_amax \t\t\t\t "
                  f"iteration={step:06d} \t\t\t\t value={g:.6g}\n")
    opt.step()
    if step in DUMP_AT:
        sg = h5.create_group(f"step_{step:06d}")
        for n, m in linears.items():
            g = sg.create_group(n)
            put(g, "input", to_np_bf16(captured[(n, "input")][:KEEP]), "activation", step, "bf16_uint16")
            put(g, "output", to_np_bf16(captured[(n, "output")][:KEEP]), "activation", step, "bf16_opaque")
            put(g, "grad_output", captured[(n, "grad_output")][:KEEP].to(torch.float16).cpu().numpy(),
                "gradient", step, "f16")
            put(g, "weight", m.weight.detach().float().cpu().numpy(), "weight", step, "weight")
            put(g, "wgrad", m.weight.grad.float().cpu().numpy(), "gradient", step, "f32")
            put(g, "exp_avg", opt.state[m.weight]["exp_avg"].float().cpu().numpy(), "optimizer_state",
                step, "exp_avg")
        w8 = model.lm_head.weight.detach().to(torch.float8_e4m3fn).view(torch.uint8).cpu().numpy()
        put(sg["lm_head"], "weight_fp8", w8, "weight", step, "fp8")
    if step % 50 == 0 or step == STEPS - 1:
        print(f"step {step} loss {loss.item():.4f}", flush=True)

h5.attrs["final_loss"] = float(loss.item())
h5.close()
trace.close()
log.close()
print("wrote", OUT, {f: os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT)})
