#!/usr/bin/env python3
"""The block-scaled operand of a transposed view (fp8kit._linear.blockscaled): read where it lies
(cuda::fake_quantize_blocks_transposed) against the contiguous copy quantised as before (t.contiguous()
then cuda::fake_quantize_blocks), on the operands of GPT-2 small's GEMMs (batch 8 x sequence 1024
= 8192 tokens; bf16 activations and gradients, float32 weights), with the bits of both compared.

    PYTHONPATH=BUNDLE/pkg python3 BUNDLE/bench/bench_blockscaled_transposed.py [--recipes nvfp4,mxfp4,mxfp8]
                                                                               [--reps 50] [--json OUT]

(BUNDLE: cuda/pack_python_for_gpu.sh's, with the module built there by BUNDLE/build_module.sh.)

Prints one JSON line per (recipe, role, shape, dtype): the median milliseconds of each path over
--reps calls (CUDA events around each call, after 3 warm-up calls: bench_blocks_torchao.median_ms) and whether the operand and the
tensor factor are equal bit for bit.
"""

import argparse
import json
import os
import sys

import fp8kit
import torch
from fp8kit._linear import blockscaled

# The CUDA-event median of the other block benchmarks: cuda/tools/bench_blocks_torchao.py, in the
# repository or beside this file in cuda/pack_python_for_gpu.sh's bundle.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "cuda", "tools")]
from bench_blocks_torchao import median_ms  # noqa: E402

# (role, rows, cols, dtype) of X whose transpose is the operand: wgrad's dy and x (tokens x
# features), dgrad's weight (out x in features).
TOKENS = 8192
SHAPES = [
    ("grad", TOKENS, 768, torch.bfloat16),
    ("grad", TOKENS, 2304, torch.bfloat16),
    ("grad", TOKENS, 3072, torch.bfloat16),
    ("input", TOKENS, 768, torch.bfloat16),
    ("input", TOKENS, 3072, torch.bfloat16),
    ("weight", 2304, 768, torch.float32),
    ("weight", 768, 3072, torch.float32),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipes", default="nvfp4,nvfp4-torchao,mxfp4,mxfp8")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows_out = []
    for name in args.recipes.split(","):
        r = fp8kit.recipe(name)
        for role, rows, cols, dtype in SHAPES:
            torch.manual_seed(rows + cols)
            t = (torch.randn(rows, cols, device="cuda") * 0.1).to(dtype).t()  # the transposed view
            q, f = blockscaled(t, r, role, 11)
            qc, fc = blockscaled(t.contiguous(), r, role, 11)
            equal = torch.equal(q.contiguous().view(torch.int16), qc.view(torch.int16)) and torch.equal(
                f.view(torch.int32), fc.view(torch.int32)
            )
            rec = {
                "recipe": name,
                "role": role,
                "operand": [cols, rows],
                "dtype": str(dtype).replace("torch.", ""),
                "in_place": not q.is_contiguous(),
                "in_place_ms": median_ms(lambda: blockscaled(t, r, role, 11), args.reps),
                "copy_ms": median_ms(lambda: blockscaled(t.contiguous(), r, role, 11), args.reps),
                "bit_equal": equal,
            }
            print(json.dumps(rec), flush=True)
            rows_out.append(rec)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows_out}, fh)
    if not all(x["bit_equal"] for x in rows_out):
        raise SystemExit("bench_blockscaled_transposed: an operand differs from its contiguous copy's")


if __name__ == "__main__":
    main()
