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
  data/example/msamp_ranks/rank{0..3}.h5
                                    steps 300-302, after the 300 steps above, trained as 4-rank data
      parallelism: each step's batch of 16 is split into 4 micro-batches of 4 (rank r takes rows
      4r..4r+3), each rank's gradient comes from its own forward and backward, and AdamW steps on
      their float32 mean, as DDP averages them. For the 7 Linear layers of model.layers.1:
      /step_{s:06d}/{module}/wgrad       every rank: that rank's float32 weight gradient
      /step_{s:06d}/{module}/weight      rank 0: weight after the step
      /step_{s:06d}/{module}/exp_avg     rank 0: AdamW first moment after the step
      /step_{s:06d}/{module}/exp_avg_sq  rank 0: AdamW second moment after the step
    (for `fp8kit simulate msamp`, docs/msamp.md).

Options: `--ranks-only` runs the same 300 steps and the data-parallel steps but writes only
msamp_ranks/ (the other files are left as they are). GPU kernels are not bitwise reproducible from
run to run, so a rerun gives close, not identical, values.
"""
import glob
import os
import sys

import h5py
import ml_dtypes
import numpy as np
import torch
import transformers

ARGS = [a for a in sys.argv[1:] if a != "--ranks-only"]
RANKS_ONLY = "--ranks-only" in sys.argv[1:]
OUT = ARGS[0] if ARGS else "data/example"
DP_STEPS, DP_RANKS, DP_PREFIX = (300, 301, 302), 4, "model.layers.1."
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
if RANKS_ONLY:  # the main run's files go to a scratch folder and are deleted at the end
    import tempfile
    SCRATCH = tempfile.TemporaryDirectory()
    MAIN_OUT = SCRATCH.name
else:
    MAIN_OUT = OUT
h5 = h5py.File(os.path.join(MAIN_OUT, "llama_tiny_dump.h5"), "w")
h5.attrs["description"] = ("2-layer Llama (hidden 64) trained 300 steps from scratch, bf16 autocast, "
                           "byte-level LM on the Python standard library source; made by "
                           "scripts/make_example_dump.py")
h5.attrs["torch"] = str(torch.__version__)
h5.attrs["transformers"] = str(transformers.__version__)
trace = open(os.path.join(MAIN_OUT, "amax_trace.csv"), "w")
trace.write("step,tensor,amax\n")
log = open(os.path.join(MAIN_OUT, "dlfw_inspect.log"), "w")


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


def data_parallel_steps():
    """Steps 300-302 as 4-rank data parallelism (module docstring): per-rank gradients, the mean
    applied by AdamW, rank files written as fp8kit simulate msamp reads them."""
    rdir = os.path.join(OUT, "msamp_ranks")
    os.makedirs(rdir, exist_ok=True)
    files = [h5py.File(os.path.join(rdir, f"rank{r}.h5"), "w") for r in range(DP_RANKS)]
    for r, f in enumerate(files):
        f.attrs["description"] = (f"rank {r} of {DP_RANKS}: steps 300-302 of the llama_tiny run as 4-rank data "
                                  "parallelism (one micro-batch of 4 sequences per rank); made by "
                                  "scripts/make_example_dump.py")
        f.attrs["torch"] = str(torch.__version__)
    mods = sorted(n for n in linears if n.startswith(DP_PREFIX))
    params = [p for p in model.parameters() if p.requires_grad]
    micro = BATCH // DP_RANKS
    for step in DP_STEPS:
        idx = torch.randint(0, corpus.numel() - SEQ - 1, (BATCH,), device=dev)
        x = torch.stack([corpus[i:i + SEQ] for i in idx])
        rank_grads = []
        for r in range(DP_RANKS):
            xr = x[r * micro:(r + 1) * micro]
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                model(input_ids=xr, labels=xr).loss.backward()
            rank_grads.append([p.grad.float().clone() for p in params])
        for i, p in enumerate(params):  # DDP: the float32 mean over ranks
            p.grad = torch.stack([g[i] for g in rank_grads]).sum(0) / DP_RANKS
        opt.step()
        pos = {id(p): i for i, p in enumerate(params)}
        for n in mods:
            w = linears[n].weight
            for r, f in enumerate(files):
                grp = f.require_group(f"step_{step:06d}/{n}")
                items = [("wgrad", rank_grads[r][pos[id(w)]], "gradient")]
                if r == 0:
                    items += [("weight", w.detach(), "weight"),
                              ("exp_avg", opt.state[w]["exp_avg"], "optimizer_state"),
                              ("exp_avg_sq", opt.state[w]["exp_avg_sq"], "optimizer_state")]
                for name, t, role in items:
                    ds = grp.create_dataset(name, data=t.float().cpu().numpy(), compression="gzip", shuffle=True)
                    ds.attrs["step"] = step
                    ds.attrs["role"] = role
        print(f"data-parallel step {step} done", flush=True)
    for f in files:
        f.close()


data_parallel_steps()
if RANKS_ONLY:
    SCRATCH.cleanup()
print("wrote", OUT, {f: os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT)})
