#!/usr/bin/env python3
"""Writes the quantised checkpoint fixtures of data/checkpoints/ with the producers' own libraries.

One tiny randomly initialised Llama-style model (transformers, bfloat16, seed 0) is saved
unquantised (data/checkpoints/original) and then quantised and exported by:
  - compressed-tensors (vllm-project/compressed-tensors): FP8, FP8_DYNAMIC, FP8_BLOCK, NVFP4,
    NVFP4A16, MXFP4 presets. compressed-tensors has no calibration loop of its own (that is
    llm-compressor), so the weight statistics are taken here (min/max over each preset's
    reduction, in the weight's dtype, as an observer does on a bfloat16 weight) and every scale
    comes from the library's calculate_qparams / generate_gparam; the codes and packing from
    ModelCompressor.compress_model.
  - ModelOpt (nvidia-modelopt), on the CPU: mtq.quantize with FP8_DEFAULT_CFG (and NVFP4 where it
    runs without a GPU) and export_hf_checkpoint.

Needs a separate virtual environment (never the project's .venv):
    python3 -m venv /tmp/ckptvenv
    /tmp/ckptvenv/bin/pip install torch compressed-tensors transformers nvidia-modelopt
    /tmp/ckptvenv/bin/python scripts/make_quant_checkpoints.py data/checkpoints
Written by: torch 2.15.0, transformers 5.24.0, compressed-tensors 0.20.0, nvidia-modelopt 0.47.0.

On a GPU (the gpu_* fixtures, data/checkpoints/README.md):
    python3 scripts/make_quant_checkpoints.py OUTDIR --device cuda --prefix gpu_ \
        --original data/checkpoints/original
builds the same model on the CPU, loads the weights of --original into it (so a different
transformers version cannot change them; checked equal tensor for tensor), moves it to the device
and quantises there: every scale and code is computed by the libraries with torch's CUDA
arithmetic. The original itself is not rewritten then.
"""
import argparse
import copy
import json
import math
import os
import shutil
import sys

import torch

DEVICE = "cpu"  # where the model is quantised (--device)


def load_original(model, original):
    """Copies the weights of ORIGINAL/model.safetensors into model; returns how many tensors the
    seeded initialisation got different (a transformers version may initialise differently)."""
    from safetensors.torch import load_file

    orig = load_file(os.path.join(original, "model.safetensors"))
    state = model.state_dict()
    missing = sorted(set(state) - set(orig))
    if missing:
        raise SystemExit(f"{original}/model.safetensors lacks {missing[:3]}")
    differ = 0
    with torch.no_grad():
        for k, v in state.items():
            if not torch.equal(v.view(torch.int16), orig[k].view(torch.int16)):
                differ += 1
                v.copy_(orig[k])
    return differ


def tiny_model(original=None):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32, hidden_size=128, intermediate_size=192, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                      max_position_embeddings=64, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():  # wider than the default init, so block amaxes differ
        for n, p in model.named_parameters():
            if n.endswith("proj.weight"):
                p.copy_(torch.randn_like(p, dtype=torch.float32).mul_(0.05).to(p.dtype))
        # one all-zero 16-element block and one large outlier (zero-block and saturation paths)
        model.model.layers[0].mlp.up_proj.weight[3, 32:48] = 0
        model.model.layers[0].mlp.down_proj.weight[5, 7] = 1.5
    if original:
        print(f"tiny_model: {load_original(model, original)} tensors differed from {original} (now loaded)")
        model.config.architectures = ["LlamaForCausalLM"]  # save_pretrained sets it; ModelOpt's export reads it
    return model


def save(model, out):
    if os.path.exists(out):
        shutil.rmtree(out)
    model.save_pretrained(out, safe_serialization=True)
    for extra in ("generation_config.json",):
        p = os.path.join(out, extra)
        if os.path.exists(p):
            os.remove(p)


def ct_weight_stats(w, args):
    """min/max over the preset's reduction (what an observer reduces), in the weight's dtype."""
    from compressed_tensors.quantization import QuantizationStrategy as S

    if args.strategy == S.TENSOR:
        return w.amin().reshape(1), w.amax().reshape(1)
    if args.strategy == S.CHANNEL:
        return w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True)
    if args.strategy in (S.GROUP, S.TENSOR_GROUP):
        g = w.unflatten(-1, (w.shape[-1] // args.group_size, args.group_size))
        return g.amin(-1), g.amax(-1)
    if args.strategy == S.BLOCK:
        br, bc = args.block_structure
        r, c = w.shape
        pad = torch.zeros(math.ceil(r / br) * br, math.ceil(c / bc) * bc, dtype=w.dtype, device=w.device)
        lo, hi = pad.clone(), pad.clone()
        lo[:r, :c], hi[:r, :c] = w, w
        shape = (pad.shape[0] // br, br, pad.shape[1] // bc, bc)
        return lo.reshape(shape).amin(dim=(1, 3)), hi.reshape(shape).amax(dim=(1, 3))
    raise ValueError(args.strategy)


def compressed_tensors_checkpoint(base, scheme, out):
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (QuantizationConfig, QuantizationStatus, apply_quantization_config,
                                                 preset_name_to_scheme)
    from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam

    model = copy.deepcopy(base).to(DEVICE)
    qs = preset_name_to_scheme(scheme, ["Linear"])
    config = QuantizationConfig(config_groups={"group_0": qs}, ignore=["lm_head"])
    apply_quantization_config(model, config)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, m in model.named_modules():
            s = getattr(m, "quantization_scheme", None)
            if s is None or s.weights is None:
                continue
            w = m.weight
            gs = None
            if hasattr(m, "weight_global_scale"):
                gs = generate_gparam(w.amin(), w.amax())
                m.weight_global_scale.copy_(gs)
            lo, hi = ct_weight_stats(w, s.weights)
            sc, zp = calculate_qparams(lo, hi, s.weights, global_scale=gs)
            m.weight_scale.copy_(sc.reshape(m.weight_scale.shape))
            if hasattr(m, "weight_zero_point"):
                m.weight_zero_point.copy_(zp.reshape(m.weight_zero_point.shape))
            ia = s.input_activations
            if ia is not None and not ia.dynamic and hasattr(m, "input_scale"):
                x = torch.randn(8, w.shape[1], dtype=w.dtype).to(w.device)  # stands in for calibration activations
                isc, _ = calculate_qparams(x.amin().reshape(1), x.amax().reshape(1), ia)
                m.input_scale.copy_(isc.reshape(m.input_scale.shape))
            if ia is not None and hasattr(m, "input_global_scale"):
                x = torch.randn(8, w.shape[1], dtype=w.dtype).to(w.device)
                m.input_global_scale.copy_(generate_gparam(x.amin(), x.amax()))
            m.quantization_status = QuantizationStatus.FROZEN
    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    save(model, out)
    compressor.update_config(out)


def modelopt_checkpoint(base, cfg_name, out, kv=False):
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint

    model = copy.deepcopy(base).to(DEVICE)
    cfg = copy.deepcopy(getattr(mtq, cfg_name))
    if kv:  # ModelOpt 0.47: quant_cfg is a list of entries; append the FP8 KV entries
        cfg["quant_cfg"] = list(cfg["quant_cfg"]) + [e for e in mtq.FP8_KV_CFG["quant_cfg"]
                                                     if e.get("quantizer_name") != "*"]
    torch.manual_seed(2)
    data = torch.randint(0, 32, (4, 16)).to(DEVICE)

    def loop(m):
        with torch.no_grad():
            m(data)

    mtq.quantize(model, cfg, loop)
    if os.path.exists(out):
        shutil.rmtree(out)
    # dtype given: on this transformers version ModelOpt reads the config dtype as a string
    export_hf_checkpoint(model, export_dir=out, dtype=torch.bfloat16)
    for extra in ("generation_config.json",):
        p = os.path.join(out, extra)
        if os.path.exists(p):
            os.remove(p)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default="data/checkpoints")
    ap.add_argument("--device", default="cpu", help="where the libraries quantise (cpu, cuda)")
    ap.add_argument("--prefix", default="", help="prefix of every folder written (gpu_)")
    ap.add_argument("--original", help="load the weights of this unquantised checkpoint (not rewritten)")
    return ap.parse_args(argv)


def versions():
    import transformers

    v = {"torch": torch.__version__, "transformers": transformers.__version__, "device": DEVICE}
    for mod in ("modelopt", "compressed_tensors"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            v[mod] = f"unavailable: {e}"
    if DEVICE.startswith("cuda"):
        v["gpu"] = torch.cuda.get_device_name()
    return v


def main():
    global DEVICE
    a = parse_args(sys.argv[1:])
    DEVICE = a.device
    root = a.root
    os.makedirs(root, exist_ok=True)
    base = tiny_model(a.original)
    if not a.original:
        save(base, os.path.join(root, a.prefix + "original"))
    made, failed = [], []
    for scheme in ("FP8", "FP8_DYNAMIC", "FP8_BLOCK", "NVFP4", "NVFP4A16", "MXFP4"):
        out = os.path.join(root, a.prefix + "ct_" + scheme.lower())
        try:
            compressed_tensors_checkpoint(base, scheme, out)
            made.append(out)
        except Exception as e:  # noqa: BLE001 - report which preset the library could not write
            failed.append(f"compressed-tensors {scheme}: {type(e).__name__}: {e}")
    for cfg, name, kv in (("FP8_DEFAULT_CFG", "modelopt_fp8", True),
                          ("FP8_2D_BLOCKWISE_WEIGHT_ONLY_CFG", "modelopt_fp8_block", False),
                          ("NVFP4_DEFAULT_CFG", "modelopt_nvfp4", False),
                          ("MXFP4_DEFAULT_CFG", "modelopt_mxfp4", False)):
        out = os.path.join(root, a.prefix + name)
        try:
            modelopt_checkpoint(base, cfg, out, kv)
            made.append(out)
        except Exception as e:  # noqa: BLE001
            failed.append(f"modelopt {cfg}: {type(e).__name__}: {e}")
            if os.environ.get("TRACE"):
                import traceback
                traceback.print_exc()
            if os.path.exists(out):
                shutil.rmtree(out)
    print(json.dumps({"versions": versions(), "written": made, "not_written": failed}, indent=1))


if __name__ == "__main__":
    main()
