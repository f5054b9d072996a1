"""fp8kit.checkpoint_check on the library-written fixtures (data/checkpoints): bit-exact, the
producer and conventions reported, and bad input raising CheckpointError."""

import os

import fp8kit
import pytest

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "checkpoints")


def test_nvfp4_conventions_and_bit_exact():
    ct = fp8kit.checkpoint_check(os.path.join(DATA, "ct_nvfp4"), os.path.join(DATA, "original"))
    mo = fp8kit.checkpoint_check(os.path.join(DATA, "modelopt_nvfp4"), os.path.join(DATA, "original"))
    assert ct["producer"] == "compressed-tensors" and mo["producer"] == "modelopt"
    assert not ct["failed"] and not mo["failed"]
    assert [c["verdict"] for c in ct["comparisons"]] == ["bit-exact"] * 7
    g = {l["module"]: l for l in ct["layers"] if l["scheme"] == "nvfp4"}
    assert g["model.layers.0.self_attn.q_proj"]["global_scale"]["convention"].startswith("reciprocal")
    g = {l["module"]: l for l in mo["layers"] if l["scheme"] == "nvfp4"}
    assert g["model.layers.0.self_attn.q_proj"]["global_scale"]["convention"].startswith("dequant")


def test_kv_names():
    r = fp8kit.checkpoint_check(os.path.join(DATA, "modelopt_fp8"))
    assert sorted(k["name"].rsplit(".", 1)[1] for k in r["kv_scales"]) == ["k_scale", "v_scale"]
    assert not any(k["dropped"] for k in r["kv_scales"])


def test_bad_input(tmp_path):
    with pytest.raises(fp8kit.CheckpointError, match="no_such"):
        fp8kit.checkpoint_check(str(tmp_path / "no_such"))


def test_gpu_written_checkpoint_names_the_cuda_variant():
    # data/checkpoints/gpu_modelopt_fp8: ModelOpt on an H100; every weight_scale is amax * fl(1/448)
    # (torch's CUDA division by a Python number), bit-exact only under the CUDA variant.
    gpu = fp8kit.checkpoint_check(os.path.join(DATA, "gpu_modelopt_fp8"), os.path.join(DATA, "original"))
    cpu = fp8kit.checkpoint_check(os.path.join(DATA, "modelopt_fp8"), os.path.join(DATA, "original"))
    assert not gpu["failed"] and not cpu["failed"]
    assert {c["variant"] for c in gpu["comparisons"]} == {"modelopt (CUDA arithmetic)"}
    assert {c["variant"] for c in cpu["comparisons"]} == {"modelopt (CPU arithmetic)"}
    assert {c["verdict"] for c in gpu["comparisons"]} == {"bit-exact"}
