#!/usr/bin/env python3
"""Writes tests/golden/nvfp4_sweep_scales.json: the per-block NVFP4 weight scales that ModelOpt
0.47.0's FP8-scale sweep chooses (`mtq.quantize` with NVFP4_W4A4_WEIGHT_MSE_FP8_SWEEP_CFG:
algorithm {"method": "mse", "fp8_scale_sweep": True}, static NVFP4 weights), for fp8kit's
`calibrate::nvfp4_scale_sweep` to reproduce bit for bit.

What runs is ModelOpt's own code: mtq.quantize -> model_calib.mse_calibrate (max_calibrate, then
_mse_calibrate_weights -> _make_weight_mse_calibrator -> calib/mse.py NVFP4MSECalibrator, the
reference sweep over the 126 E4M3 scale candidates of kernels/quantization/gemm/
_fp8_scale_candidates.py), then the export's NVFP4QTensor.get_weights_scaling_factor_from_quantizer
(qtensor/nvfp4_tensor.py): weight_scale (E4M3 per block of 16) and weight_scale_2.

ModelOpt 0.47.0 runs that sweep only on a CUDA device: the static NVFP4 fake quantisation
(tensor_quant.py StaticBlockwiseFP4FakeQuantFunction) raises "requires triton" unless
kernels/quantization/gemm imported its Triton kernels, which it does only when
torch.cuda.is_available(). Two modes:
  --device cuda (on a GPU; the figures of record): ModelOpt unchanged. The reference sweep is
      forced with MODELOPT_NVFP4_TRITON_SWEEP=0 and the fused Triton sweep (nvfp4_fp8_scale_sweep)
      recorded beside it.
  --device cpu: ModelOpt unchanged except the one Triton kernel launch,
      kernels/quantization/gemm/fp4_kernel.py static_blockwise_fp4_fake_quant, replaced by
      cpu_static_blockwise_fp4_fake_quant below: ModelOpt's own compute_fp4_scales (pure torch)
      for the block scales, then the kernel's per-element rule (kernels/quantization/common/
      nvfp4_quant.py nvfp4_scalar_quant, fp4_round_magnitude) written in torch. The JSON says
      which mode wrote it.

Weights: three float32 weights of data/example/llama_tiny_dump.h5 (step 299), as float32 and
rounded to bfloat16 (torch .to), each one nn.Linear's weight.

Environment: torch, h5py, nvidia-modelopt 0.47.0 (e.g. /work/ckptvenv); with --device cuda also
triton and a GPU (without h5py there: --weights FILE.npz, written here by --save-weights).
    python scripts/make_nvfp4_sweep_golden.py --device cpu tests/golden/nvfp4_sweep_scales.json
"""
import argparse
import copy
import json
import os
import struct
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DUMP = os.path.join(ROOT, "data", "example", "llama_tiny_dump.h5")
KEYS = ("lm_head/weight", "model.layers.0.self_attn.q_proj/weight", "model.layers.1.mlp.down_proj/weight")
STEP = 299


def fp4_round_magnitude(a):
    # nvfp4_quant.py fp4_round_magnitude: the E2M1 decision boundaries (ties at 0.25, 1.25, 2.5,
    # 5.0 go down; at 0.75, 1.75, 3.5 up)
    out = torch.full_like(a, 6.0)
    for bound, val, incl in ((5.0, 4.0, True), (3.5, 3.0, False), (2.5, 2.0, True), (1.75, 1.5, False),
                             (1.25, 1.0, True), (0.75, 0.5, False), (0.25, 0.0, True)):
        out = torch.where(a <= bound if incl else a < bound, torch.full_like(a, val), out)
    return out


def cpu_static_blockwise_fp4_fake_quant(x, amax, global_amax=None, quantize_block_scales=True,
                                        fp8_max_for_normalization=448.0, out_dtype=None):
    from modelopt.torch.kernels.quantization.gemm.fp4_kernel import compute_fp4_scales

    n = amax.numel()
    block = x.numel() // n
    out_dtype = x.dtype if out_dtype is None else out_dtype
    scale = compute_fp4_scales(amax, global_amax, quantize_block_scales,
                               fp8_max_for_normalization=fp8_max_for_normalization)
    xf = x.contiguous().view(n, block).to(torch.float32)
    s = scale.contiguous().view(n, 1).to(torch.float32)
    # nvfp4_scalar_quant
    zero = s == 0.0
    safe = torch.where(zero | torch.isnan(s) | (s.abs() == float("inf")), torch.ones_like(s), s)
    q = fp4_round_magnitude(xf.abs() / safe) * safe
    q = torch.where(xf >= 0, q, -q)
    q = torch.where(zero, torch.zeros_like(q), q)
    return q.to(out_dtype).view(x.shape)


def patch_cpu():
    import modelopt.torch.kernels.quantization.gemm as gemm
    from modelopt.torch.quantization import tensor_quant

    gemm.IS_AVAILABLE = True
    gemm.static_blockwise_fp4_fake_quant = cpu_static_blockwise_fp4_fake_quant
    tensor_quant.triton_kernel = gemm


def bits(t):
    v = t.reshape(-1).to(torch.float32).numpy()
    return ["0x%08x" % struct.unpack("<I", struct.pack("<f", float(x)))[0] for x in v]


def sweep(w, device):
    import modelopt.torch.quantization as mtq
    from modelopt.torch.quantization.config import NVFP4_W4A4_WEIGHT_MSE_FP8_SWEEP_CFG
    from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor

    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype, device=device)
    with torch.no_grad():
        lin.weight.copy_(w)
    model = torch.nn.Sequential(lin)
    cfg = copy.deepcopy(NVFP4_W4A4_WEIGHT_MSE_FP8_SWEEP_CFG)
    mtq.quantize(model, cfg, forward_loop=None)
    wq = lin.weight_quantizer
    scale, scale_2 = NVFP4QTensor.get_weights_scaling_factor_from_quantizer(wq, lin.weight)
    return {"weight_scale_e4m3": scale.view(torch.uint8).reshape(-1).cpu().tolist(),
            "weight_scale_2": bits(scale_2.cpu()), "global_amax": bits(wq.global_amax.cpu()),
            "amax": bits(wq._amax.cpu())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--weights", help="an .npz with the KEYS' step-299 weights (float32) instead of the dump "
                                      "(for a machine without h5py; --save-weights writes it)")
    ap.add_argument("--save-weights", help="write that .npz from the dump and stop")
    ap.add_argument("out")
    a = ap.parse_args()
    if a.device == "cpu":
        patch_cpu()
    import modelopt

    out = {"versions": {"torch": torch.__version__, "nvidia-modelopt": modelopt.__version__},
           "mode": ("cuda: ModelOpt unchanged" if a.device == "cuda" else
                    "cpu: ModelOpt unchanged but the Triton launch of fp4_kernel.static_blockwise_fp4_fake_quant, "
                    "replaced by its torch transcription (compute_fp4_scales + nvfp4_scalar_quant)"),
           "dump": "data/example/llama_tiny_dump.h5", "step": STEP, "tensors": {}}
    if a.save_weights:
        import h5py

        with h5py.File(DUMP, "r") as f:
            np.savez(a.save_weights, **{k: np.asarray(f["step_%06d/%s" % (STEP, k)][...], dtype=np.float32) for k in KEYS})
        return
    if a.weights:
        src = np.load(a.weights)
    else:
        import h5py

        with h5py.File(DUMP, "r") as f:
            src = {k: np.asarray(f["step_%06d/%s" % (STEP, k)][...], dtype=np.float32) for k in KEYS}
    for key in KEYS:
        w = torch.from_numpy(np.asarray(src[key], dtype=np.float32))
        for dtype in (torch.float32, torch.bfloat16):
            name = "%s:%s" % (key, str(dtype).replace("torch.", ""))
            if a.device == "cuda":
                os.environ["MODELOPT_NVFP4_TRITON_SWEEP"] = "0"
                e = sweep(w.to(dtype).cuda(), "cuda")
                os.environ["MODELOPT_NVFP4_TRITON_SWEEP"] = "1"
                e["triton_sweep_weight_scale_e4m3"] = sweep(w.to(dtype).cuda(), "cuda")["weight_scale_e4m3"]
            else:
                e = sweep(w.to(dtype), "cpu")
            e["shape"] = list(w.shape)
            out["tensors"][name] = e
            print(name, len(e["weight_scale_e4m3"]), "blocks", file=sys.stderr)
    with open(a.out, "w") as fo:
        json.dump(out, fo, indent=1, sort_keys=True)
        fo.write("\n")


if __name__ == "__main__":
    main()
