#!/usr/bin/env python3
"""Writes the issue 28 fixtures the first script (make_quant_checkpoints.py) does not: ModelOpt FP8
per-channel/per-token, MXFP8 (ModelOpt and compressed-tensors) and ModelOpt W4A8 (INT4 AWQ
weights + FP8 activations), from the same tiny Llama model (checked equal, tensor for tensor, to
data/checkpoints/original before anything is written).

  - modelopt_fp8_pcpt: nvidia-modelopt FP8_PER_CHANNEL_PER_TOKEN_CFG, mtq.quantize + export_hf_checkpoint.
  - modelopt_mxfp8:    nvidia-modelopt MXFP8_DEFAULT_CFG.
  - ct_mxfp8:          compressed-tensors preset MXFP8 (calculate_qparams + ModelCompressor, as
                       make_quant_checkpoints.py does for its presets).
  - modelopt_w4a8:     nvidia-modelopt W4A8_AWQ_BETA_CFG with the INT4 group size 64 instead of
                       128: the exporter refuses 128 on down_proj (in_dim 192, quant_utils.py
                       _validate_int4_block_size: "Cannot pack weight with input dimension 192 and
                       block size 128: partial blocks are not supported."). AWQ-lite smooths each
                       weight by a pre_quant_scale computed in float32 that the checkpoint stores
                       only rounded to bfloat16, so the weights ModelOpt quantised are not
                       recoverable from the original; the script saves them as ModelOpt held them
                       at export (the module weights after mtq.quantize and the exporter's
                       resmoothing, read from the exporter's own pass) in modelopt_w4a8_smoothed/,
                       the --reference for bit-exactness.
  - modelopt_w4a8_max: the same config with algorithm "max" (no AWQ smoothing, no
                       pre_quant_scale): the packing and scales checked against the original itself.

Run with the environment of make_quant_checkpoints.py:
    /work/ckptvenv/bin/python scripts/make_quant_checkpoints_more.py data/checkpoints
Written by: torch 2.15.0, transformers 5.24.0, compressed-tensors 0.20.0, nvidia-modelopt 0.47.0.
On a GPU: OUTDIR --device cuda --prefix gpu_ --original data/checkpoints/original, as
make_quant_checkpoints.py (the model gets the original's weights, then moves to the device).
"""
import copy
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_quant_checkpoints as base_script  # noqa: E402


def check_same_as_original(model, root):
    """The tiny model must be the one data/checkpoints/original holds, bit for bit."""
    from safetensors.torch import load_file

    orig = load_file(os.path.join(root, "original", "model.safetensors"))
    state = model.state_dict()
    for k, v in orig.items():
        if not torch.equal(state[k].view(torch.int16), v.view(torch.int16)):
            raise SystemExit(f"tiny_model() differs from {root}/original in {k}: regenerate both")


def w4a8_cfg(group, algorithm=None):
    import modelopt.torch.quantization as mtq

    cfg = copy.deepcopy(mtq.W4A8_AWQ_BETA_CFG)
    for e in cfg["quant_cfg"]:
        if e.get("quantizer_name") == "*weight_quantizer" and isinstance(e.get("cfg"), list):
            e["cfg"][0]["block_sizes"][-1] = group
    if algorithm is not None:
        cfg["algorithm"] = algorithm
    return cfg


def modelopt_export(model, cfg, out, smoothed_out=None):
    """mtq.quantize (calibration data as make_quant_checkpoints.py) + export_hf_checkpoint; with
    smoothed_out, also the weights each quantised linear held when the exporter quantised it."""
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint

    torch.manual_seed(2)
    data = torch.randint(0, 32, (4, 16)).to(base_script.DEVICE)

    def loop(m):
        with torch.no_grad():
            m(data)

    mtq.quantize(model, cfg, loop)
    import modelopt.torch.export.unified_export_hf as handlers  # hf_export_handlers imports it from here at call time

    names = {id(m): n for n, m in model.named_modules()}
    smoothed = {}
    orig = handlers._export_quantized_weight

    def spy(sub_module, dtype, weight_name="weight"):  # the weight as the exporter quantises it
        smoothed[names[id(sub_module)] + "." + weight_name] = getattr(sub_module, weight_name).detach().to(dtype).clone()
        return orig(sub_module, dtype, weight_name)

    if smoothed_out:
        handlers._export_quantized_weight = spy
    try:
        if os.path.exists(out):
            shutil.rmtree(out)
        export_hf_checkpoint(model, export_dir=out, dtype=torch.bfloat16)
    finally:
        handlers._export_quantized_weight = orig
    gen = os.path.join(out, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    if smoothed_out:
        from safetensors.torch import save_file

        if not smoothed:
            raise SystemExit("the exporter quantised no weight through _export_quantized_weight")
        if os.path.exists(smoothed_out):
            shutil.rmtree(smoothed_out)
        os.makedirs(smoothed_out)
        save_file({k: v.contiguous() for k, v in smoothed.items()}, os.path.join(smoothed_out, "model.safetensors"))


def main():
    a = base_script.parse_args(sys.argv[1:])
    base_script.DEVICE = a.device
    root = a.root
    import modelopt.torch.quantization as mtq

    base = base_script.tiny_model(a.original)
    base.config.architectures = ["LlamaForCausalLM"]  # as save_pretrained sets it in the first script
    check_same_as_original(base, os.path.dirname(a.original.rstrip("/")) if a.original else root)
    made, failed = [], []

    def attempt(label, out, fn):
        try:
            fn()
            made.append(out)
        except Exception as e:  # noqa: BLE001 - report what the library could not write
            failed.append(f"{label}: {type(e).__name__}: {e}")
            if os.environ.get("TRACE"):
                import traceback
                traceback.print_exc()
            if os.path.exists(out):
                shutil.rmtree(out)

    for cfg, name in (("FP8_PER_CHANNEL_PER_TOKEN_CFG", "modelopt_fp8_pcpt"), ("MXFP8_DEFAULT_CFG", "modelopt_mxfp8")):
        out = os.path.join(root, a.prefix + name)
        attempt(f"modelopt {cfg}", out,
                lambda: modelopt_export(copy.deepcopy(base).to(a.device), copy.deepcopy(getattr(mtq, cfg)), out))
    out = os.path.join(root, a.prefix + "modelopt_w4a8")
    attempt("modelopt W4A8_AWQ_BETA_CFG (group 128)", out + "_g128",
            lambda: modelopt_export(copy.deepcopy(base).to(a.device), w4a8_cfg(128), out + "_g128"))
    attempt("modelopt W4A8_AWQ_BETA_CFG (group 64)", out,
            lambda: modelopt_export(copy.deepcopy(base).to(a.device), w4a8_cfg(64), out, out + "_smoothed"))
    attempt("modelopt W4A8_AWQ_BETA_CFG (group 64, algorithm max)", out + "_max",
            lambda: modelopt_export(copy.deepcopy(base).to(a.device), w4a8_cfg(64, "max"), out + "_max"))
    out = os.path.join(root, a.prefix + "ct_mxfp8")
    attempt("compressed-tensors MXFP8", out, lambda: base_script.compressed_tensors_checkpoint(base, "MXFP8", out))
    print(json.dumps({"versions": base_script.versions(), "written": made, "not_written": failed}, indent=1))


if __name__ == "__main__":
    main()
