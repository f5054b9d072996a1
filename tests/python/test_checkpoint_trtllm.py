"""fp8kit.checkpoint_check on ModelOpt's TensorRT-LLM checkpoint exports (data/checkpoints/*trtllm*,
scripts/fixtures/make_modelopt_trtllm_checkpoints.py): the same reader as `fp8kit checkpoint check`,
every weight bit-exact against its original, each TensorRT-LLM layer mapped to the Hugging Face
modules it was exported from; a weight code changed in a copy is found."""

import json
import os
import shutil
import struct

import fp8kit
import pytest

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "checkpoints")
CASES = [
    ("modelopt_trtllm_fp8", "original"),
    ("modelopt_trtllm_nvfp4", "original"),
    ("modelopt_trtllm_fp8_pcpt", "original"),
    ("moe_mixtral_linear_modelopt_trtllm_fp8", "moe_mixtral_original"),
    ("moe_mixtral_linear_modelopt_trtllm_nvfp4", "moe_mixtral_original"),
]


@pytest.mark.parametrize("prefix", ["", "gpu_"])
@pytest.mark.parametrize("folder,reference", CASES)
def test_trtllm_export_bit_exact(prefix, folder, reference):
    r = fp8kit.checkpoint_check(os.path.join(DATA, prefix + folder), os.path.join(DATA, reference))
    assert r["comparisons"] and not r["failed"]
    assert all(c["verdict"] == "bit-exact" for c in r["comparisons"])
    assert any(c["module"].startswith("transformer.layers.") for c in r["comparisons"])


@pytest.mark.parametrize("folder,reference", [(f + "_tp2", r) for f, r in CASES if not f.endswith("pcpt")])
def test_trtllm_tensor_parallel_export_bit_exact(folder, reference):
    """ModelOpt's export at inference_tensor_parallel=2: two rank files, put back together."""
    r = fp8kit.checkpoint_check(os.path.join(DATA, folder), os.path.join(DATA, reference))
    assert r["comparisons"] and not r["failed"]
    assert all(c["verdict"] == "bit-exact" for c in r["comparisons"])


def test_trtllm_planted_code_is_found(tmp_path):
    copy = tmp_path / "ckpt"
    shutil.copytree(os.path.join(DATA, "modelopt_trtllm_fp8"), copy)
    shard = copy / "rank0.safetensors"
    raw = bytearray(shard.read_bytes())
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    name = next(k for k, v in header.items() if k.endswith("attention.dense.weight") and v["dtype"] == "F8_E4M3")
    at = 8 + n + header[name]["data_offsets"][0]
    raw[at] ^= 0x01  # one code one step away
    shard.write_bytes(bytes(raw))
    r = fp8kit.checkpoint_check(str(copy), os.path.join(DATA, "original"))
    bad = [c for c in r["comparisons"] if c["verdict"] != "bit-exact"]
    assert bad and r["failed"]
    assert all("attention.dense" in c["module"] for c in bad)
