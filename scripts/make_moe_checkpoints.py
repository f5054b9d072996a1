#!/usr/bin/env python3
"""Writes the mixture-of-experts checkpoint fixtures of data/checkpoints/moe_* (issue 28) with the
producers' own libraries.

One tiny randomly initialised Qwen3-MoE model (transformers Qwen3MoeForCausalLM, bfloat16, seed 0:
1 layer, hidden 128, 4 experts of intermediate 64, top-2) is saved unquantised
(data/checkpoints/moe_original) and then quantised and exported by the two libraries below; a
Mixtral of the same sizes (MixtralForCausalLM, saved as moe_mixtral_original) by ModelOpt only
(FP8, NVFP4), for Mixtral's expert names w1/w3/w2:
  - ModelOpt (nvidia-modelopt), on the CPU: mtq.quantize + export_hf_checkpoint with FP8_DEFAULT_CFG,
    FP8_2D_BLOCKWISE_WEIGHT_ONLY_CFG, NVFP4_DEFAULT_CFG and MXFP4_DEFAULT_CFG. transformers 5 keeps
    the experts fused in memory (Qwen3MoeExperts: gate_up_proj [E, 2I, H], down_proj [E, H, I]);
    ModelOpt wraps them in _QuantFusedExperts (modelopt/torch/quantization/plugins/huggingface.py:
    one weight quantizer per expert over the fused gate_up slice, ONE input quantizer per
    projection shared by all experts) and unfuses them on export into per-expert 2-D
    experts.{e}.{gate,up,down}_proj (modelopt/torch/export/moe_utils.py _export_fused_experts).
    The calibration forward is deliberately short (CALIB_TOKENS tokens) so that some experts get
    no token, the vLLM #45212 situation; the script prints which experts were routed tokens.
  - compressed-tensors: its apply_quantization_config targets nn.Linear modules and does not see
    the 3-D fused parameters (they are no Linear), so, as llm-compressor's MoE calibration modules
    do, the fused experts are first unfused here into one nn.Linear per expert and projection
    (the same names transformers' save_pretrained writes). Scales and codes then come from the
    library exactly as in scripts/make_quant_checkpoints.py (whose functions are reused).

Same environment as scripts/make_quant_checkpoints.py:
    /tmp/ckptvenv/bin/python scripts/make_moe_checkpoints.py data/checkpoints
Written by: torch 2.15.0, transformers 5.24.0, compressed-tensors 0.20.0, nvidia-modelopt 0.47.0.

On a GPU (the gpu_moe_* fixtures, data/checkpoints/README.md):
    python3 scripts/make_moe_checkpoints.py OUTDIR --device cuda --prefix gpu_ \
        --original data/checkpoints
builds the same two models on the CPU, loads into each the weights of ORIGINAL/moe_original and
ORIGINAL/moe_mixtral_original (transformers' own from_pretrained, which fuses the per-expert
tensors; re-saved and checked equal to the original tensor for tensor, so a different transformers
version cannot change them), moves them to the device and quantises there: every scale and code
is computed by the libraries with torch's CUDA arithmetic. The originals are not rewritten then.
"""
import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_quant_checkpoints as dense  # noqa: E402  (save, compressed_tensors_checkpoint)

CALIB_TOKENS = 3  # one sequence of 3 tokens: top-2 of 4 experts, so some experts see no token


def widen(model):
    """Wider weights than the default init, each expert on its own spread so amaxes differ; one
    all-zero 16-element block in expert 1's up half, one 1.5 outlier in expert 2's down_proj."""
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("proj.weight") or n.endswith("gate_up_proj") or n.endswith("experts.down_proj"):
                p.copy_(torch.randn_like(p, dtype=torch.float32).mul_(0.05).to(p.dtype))
            if n.endswith("mlp.gate.weight"):
                p.copy_(torch.randn_like(p, dtype=torch.float32).to(p.dtype))
        ex = model.model.layers[0].mlp.experts
        for e in range(ex.gate_up_proj.shape[0]):
            ex.gate_up_proj[e].mul_(1 + 0.5 * e)
            ex.down_proj[e].mul_(1 + 0.25 * e)
        ex.gate_up_proj[1, ex.gate_up_proj.shape[1] // 2 + 6, 32:48] = 0
        ex.down_proj[2, 5, 7] = 1.5
    return model


def load_original(model, original):
    """Loads ORIGINAL (a save_pretrained folder of the same architecture) into model through
    transformers' from_pretrained (it fuses the per-expert tensors as the in-memory model holds
    them); returns how many tensors the seeded initialisation got different. Exits when the
    loaded model, saved again, is not the original tensor for tensor (bit for bit)."""
    from safetensors.torch import load_file

    loaded = type(model).from_pretrained(original, dtype=torch.bfloat16)
    state, want = model.state_dict(), loaded.state_dict()
    if set(state) != set(want):
        raise SystemExit(f"{original}: parameters differ from the built model: {sorted(set(state) ^ set(want))[:3]}")
    differ = 0
    with torch.no_grad():
        for k, v in state.items():
            if not torch.equal(v.view(torch.int16), want[k].view(torch.int16)):
                differ += 1
                v.copy_(want[k])
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        again, orig = load_file(os.path.join(tmp, "model.safetensors")), load_file(os.path.join(original, "model.safetensors"))
        bad = sorted(k for k in orig if k not in again or not torch.equal(again[k].view(torch.int16), orig[k].view(torch.int16)))
        if bad or set(again) != set(orig):
            raise SystemExit(f"{original}: the loaded weights do not save back bit for bit: {bad[:3]}")
    return differ


def with_original(model, original):
    if original:
        print(f"{type(model).__name__}: {load_original(model, original)} tensors differed from {original} (now loaded)")
        model.config.architectures = [type(model).__name__]  # save_pretrained sets it; ModelOpt's export reads it
    return model


def tiny_moe():
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3MoeConfig(vocab_size=32, hidden_size=128, intermediate_size=192, moe_intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                         num_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
                         tie_word_embeddings=False)
    return widen(Qwen3MoeForCausalLM(cfg).to(torch.bfloat16))


def tiny_mixtral():
    """Mixtral: the same fused experts in memory, saved under Mixtral's names
    (block_sparse_moe.experts.<e>.w1 / w3 / w2, transformers' conversion_mapping.py)."""
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    cfg = MixtralConfig(vocab_size=32, hidden_size=128, intermediate_size=64, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_local_experts=4,
                        num_experts_per_tok=2, max_position_embeddings=64, tie_word_embeddings=False)
    return widen(MixtralForCausalLM(cfg).to(torch.bfloat16))


class ExpertLinears(torch.nn.Module):
    """One expert as three nn.Linear (gate_proj, up_proj, down_proj), copied from the fused slices."""

    def __init__(self, gate_up, down, act):
        super().__init__()
        i = gate_up.shape[0] // 2
        self.gate_proj = torch.nn.Linear(gate_up.shape[1], i, bias=False, dtype=gate_up.dtype)
        self.up_proj = torch.nn.Linear(gate_up.shape[1], i, bias=False, dtype=gate_up.dtype)
        self.down_proj = torch.nn.Linear(down.shape[1], down.shape[0], bias=False, dtype=down.dtype)
        with torch.no_grad():
            self.gate_proj.weight.copy_(gate_up[:i])
            self.up_proj.weight.copy_(gate_up[i:])
            self.down_proj.weight.copy_(down)


def unfuse_experts(model):
    """Replaces every fused experts module by a ModuleList of per-expert linears (names experts.{e}.*)."""
    for layer in model.model.layers:
        ex = layer.mlp.experts
        layer.mlp.experts = torch.nn.ModuleList(
            ExpertLinears(ex.gate_up_proj[e].detach(), ex.down_proj[e].detach(), ex.act_fn)
            for e in range(ex.gate_up_proj.shape[0]))
    return model


def routed_experts(model, data):
    """Which experts the calibration tokens reach (top-k of the router), per layer."""
    hits = []

    def hook(mod, args, out):
        hits.append(sorted(set(out[2].flatten().tolist())))

    model = copy.deepcopy(model).to(dense.DEVICE)  # routed where the calibration runs
    hs = [l.mlp.gate.register_forward_hook(hook) for l in model.model.layers]
    with torch.no_grad():
        model(data.to(dense.DEVICE))
    for h in hs:
        h.remove()
    return hits


def modelopt_checkpoint(base, cfg_name, out, data, notes):
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint

    model = copy.deepcopy(base).to(dense.DEVICE)
    cfg = copy.deepcopy(getattr(mtq, cfg_name))

    def loop(m):
        with torch.no_grad():
            m(data.to(dense.DEVICE))

    mtq.quantize(model, cfg, loop)
    if os.path.exists(out):
        shutil.rmtree(out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export_hf_checkpoint(model, export_dir=out, dtype=torch.bfloat16)
    notes[os.path.basename(out)] = sorted({str(w.message).split(".")[0] for w in caught if "xpert" in str(w.message)})
    p = os.path.join(out, "generation_config.json")
    if os.path.exists(p):
        os.remove(p)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default="data/checkpoints")
    ap.add_argument("--device", default="cpu", help="where the libraries quantise (cpu, cuda)")
    ap.add_argument("--prefix", default="", help="prefix of every folder written (gpu_)")
    ap.add_argument("--original", help="a folder holding moe_original and moe_mixtral_original: load their "
                    "weights (not rewritten)")
    return ap.parse_args(argv)


def write_all(jobs, made, failed):
    """Runs each (label, out, make) job; a folder the library refuses is removed and recorded."""
    for label, out, make in jobs:
        try:
            make(out)
            made.append(out)
        except Exception as e:  # noqa: BLE001 - record what the library refuses
            failed.append(f"{label}: {type(e).__name__}: {e}")
            if os.environ.get("TRACE"):
                import traceback
                traceback.print_exc()
            if os.path.exists(out):
                shutil.rmtree(out)


def main():
    a = parse_args(sys.argv[1:])
    dense.DEVICE = a.device  # compressed_tensors_checkpoint and modelopt_checkpoint move the model there
    root, pre = a.root, a.prefix
    os.makedirs(root, exist_ok=True)
    orig = (lambda name: os.path.join(a.original, name)) if a.original else (lambda name: None)
    base = with_original(tiny_moe(), orig("moe_original"))
    if not a.original:
        dense.save(base, os.path.join(root, "moe_original"))
    torch.manual_seed(2)
    data = torch.randint(0, 32, (1, CALIB_TOKENS))
    notes = {"calibration_experts_routed": routed_experts(base, data)}
    made, failed = [], []
    mo = lambda model, cfg: (lambda out: modelopt_checkpoint(model, cfg, out, data, notes))  # noqa: E731
    write_all([(f"modelopt {cfg}", os.path.join(root, pre + name), mo(base, cfg))
               for cfg, name in (("FP8_DEFAULT_CFG", "moe_modelopt_fp8"),
                                 ("FP8_2D_BLOCKWISE_WEIGHT_ONLY_CFG", "moe_modelopt_fp8_block"),
                                 ("NVFP4_DEFAULT_CFG", "moe_modelopt_nvfp4"),
                                 ("MXFP4_DEFAULT_CFG", "moe_modelopt_mxfp4"))], made, failed)
    # Mixtral under ModelOpt only: its exported expert names (w1/w3/w2) carry the gate/up rule
    # under other names. (compressed-tensors on the script's unfused linears would write
    # mlp.experts.<e>.gate_proj, not the original's names.)
    mixtral = with_original(tiny_mixtral(), orig("moe_mixtral_original"))
    if not a.original:
        dense.save(mixtral, os.path.join(root, "moe_mixtral_original"))
    notes["calibration_experts_routed_mixtral"] = routed_experts(mixtral, data)
    write_all([(f"modelopt {cfg} (Mixtral)", os.path.join(root, pre + name), mo(mixtral, cfg))
               for cfg, name in (("FP8_DEFAULT_CFG", "moe_mixtral_modelopt_fp8"),
                                 ("NVFP4_DEFAULT_CFG", "moe_mixtral_modelopt_nvfp4"))], made, failed)
    linear = unfuse_experts(copy.deepcopy(base))
    write_all([(f"compressed-tensors {scheme}", os.path.join(root, pre + "moe_ct_" + scheme.lower()),
                (lambda s: lambda out: dense.compressed_tensors_checkpoint(linear, s, out))(scheme))
               for scheme in ("FP8", "FP8_BLOCK", "NVFP4", "MXFP4")], made, failed)
    print(json.dumps({"versions": dense.versions(), "written": made, "not_written": failed, "notes": notes}, indent=1))


if __name__ == "__main__":
    main()
