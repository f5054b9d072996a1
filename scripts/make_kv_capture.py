#!/usr/bin/env python3
"""Make data/example/llama_tiny_kv.h5: Q, K and V as the KV cache holds them (after the rotary
embedding), captured by fp8kit's PyTorch monitor from a real (small) model, for `fp8kit kv`.

The model is scripts/make_example_dump.py's: a 2-layer Llama-style decoder
(transformers.LlamaForCausalLM, hidden 64, 4 heads of 16, 4 KV heads), trained from scratch as a
byte-level language model on the Python standard library's own source files, here for 300 steps
(batch 16, 128 tokens, AdamW lr 3e-3) on the CPU with bfloat16 autocast (the example dump was
trained on a GPU, so the weights differ; the recipe is the same).

The trained model is cast to bfloat16 (the dtype a served model's KV cache is filled from) and
run, without gradients, on CAPTURE_STEPS batches of 2 held-out sequences of 128 tokens (taken
from the last tenth of the corpus, which training never samples). fp8kit.torch.Monitor with
attention=True wraps transformers' sdpa kernel and dumps what it receives:

  /step_{s:06d}/model.layers.{l}.self_attn.{q,k,v}   bfloat16 (uint16 + attribute dtype),
      shape [batch 2, heads 4, positions 128, head_dim 16], attributes step (the batch: 0 is the
      first batch a server sees) and role=activation.

Run with a Python that has torch, transformers, h5py and fp8kit (PYTHONPATH=build/python):
    PYTHONPATH=build/python /work/tvenv/bin/python scripts/make_kv_capture.py [OUT_DIR]
CPU kernels are deterministic here, but torch versions differ in their kernels: a rerun with
another torch gives close, not identical, values.
"""
import glob
import os
import shutil
import sys
import tempfile

import h5py
import numpy as np
import torch
import transformers

import fp8kit.torch as ft

OUT = sys.argv[1] if len(sys.argv) > 1 else "data/example"
STEPS, BATCH, SEQ = 300, 16, 128
CAPTURE_STEPS, CAPTURE_BATCH = 4, 2

torch.manual_seed(0)
np.random.seed(0)
torch.set_num_threads(1)  # the dev VM is shared; also keeps CPU reductions in one order

files = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))
corpus = np.frombuffer(b"".join(open(f, "rb").read() for f in files), dtype=np.uint8)
corpus = torch.from_numpy(corpus.astype(np.int64))
split = int(corpus.numel() * 0.9)  # training samples [0, split), capture [split, end)

cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=192,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                               max_position_embeddings=SEQ)
model = transformers.LlamaForCausalLM(cfg)
model.config._attn_implementation = "sdpa"
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

for step in range(STEPS):
    idx = torch.randint(0, split - SEQ - 1, (BATCH,))
    x = torch.stack([corpus[i:i + SEQ] for i in idx])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(input_ids=x, labels=x).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 50 == 0 or step == STEPS - 1:
        print(f"step {step} loss {loss.item():.4f}", flush=True)

model = model.to(torch.bfloat16).eval()
scratch = tempfile.mkdtemp()
try:
    mon = ft.Monitor(model, recipes=["te-current"], tensors=[], attention=True, out_dir=scratch,
                     dump_steps=range(CAPTURE_STEPS))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for s in range(CAPTURE_STEPS):
            idx = torch.randint(split, corpus.numel() - SEQ - 1, (CAPTURE_BATCH,), generator=gen)
            x = torch.stack([corpus[i:i + SEQ] for i in idx])
            out = model(input_ids=x, labels=x)
            print(f"capture batch {s}: loss {out.loss.item():.4f}", flush=True)
            mon.step()
    mon.close()
    os.makedirs(OUT, exist_ok=True)
    dst = os.path.join(OUT, "llama_tiny_kv.h5")
    shutil.copyfile(os.path.join(scratch, "dump.h5"), dst)
finally:
    shutil.rmtree(scratch)
with h5py.File(dst, "a") as h5:
    h5.attrs["description"] = (
        "Q, K, V after the rotary embedding (fp8kit.torch.Monitor attention=True, sdpa) of a 2-layer Llama "
        "(hidden 64, 4 heads x 16) trained 300 steps from scratch on CPU, bf16 autocast, byte-level LM on the "
        "Python standard library source, then run in bfloat16 on 4 held-out batches of 2 x 128 tokens; made by "
        "scripts/make_kv_capture.py")
    h5.attrs["torch"] = str(torch.__version__)
    h5.attrs["transformers"] = str(transformers.__version__)
    h5.attrs["final_train_loss"] = float(loss.item())
print("wrote", dst, os.path.getsize(dst), "bytes")
