"""fp8kit.checkpoint_check on the ModelOpt FP8 per-channel/per-token, MXFP8 and W4A8 fixtures that
nvidia-modelopt 0.47.0 and compressed-tensors 0.20.0 wrote (scripts/fixtures/make_quant_checkpoints_more.py):
schemes, groups and conventions reported, every weight bit-exact, a planted fault named."""

import os
import shutil

import fp8kit

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "checkpoints")
ORIGINAL = os.path.join(DATA, "original")


def layers(report, scheme):
    return {l["module"]: l for l in report["layers"] if l["scheme"] == scheme}


def test_schemes_and_bit_exact():
    for name, scheme, ref in (
        ("modelopt_fp8_pcpt", "fp8-per-channel", ORIGINAL),
        ("modelopt_mxfp8", "mxfp8", ORIGINAL),
        ("ct_mxfp8", "mxfp8", ORIGINAL),
        ("modelopt_w4a8_max", "w4a8-int4", ORIGINAL),
        ("modelopt_w4a8", "w4a8-int4", os.path.join(DATA, "modelopt_w4a8_smoothed")),
    ):
        r = fp8kit.checkpoint_check(os.path.join(DATA, name), ref)
        assert not r["failed"], name
        assert len(layers(r, scheme)) == 7, name
        assert [c["verdict"] for c in r["comparisons"]] == ["bit-exact"] * 7, name
        assert all(l["scale_convention"].startswith("dequant") for l in layers(r, scheme).values())
        assert any(l["module"] == "lm_head" and l["excluded"] for l in r["layers"]), name


def test_w4a8_layout_reported():
    r = fp8kit.checkpoint_check(os.path.join(DATA, "modelopt_w4a8"))
    w = layers(r, "w4a8-int4")
    down = w["model.layers.0.mlp.down_proj"]
    assert down["global_scale"]["name"].endswith(".weight_scale_2")
    assert down["global_scale"]["convention"].startswith("dequant")
    assert down["pre_quant_scale"].endswith(".pre_quant_scale")
    assert "pre_quant_scale" not in w["model.layers.0.self_attn.q_proj"]  # folded into the layernorm


def test_flipped_w4a8_code_named(tmp_path):
    d = tmp_path / "w4a8"
    shutil.copytree(os.path.join(DATA, "modelopt_w4a8"), d)
    p = d / "model.safetensors"
    os.chmod(p, 0o644)
    b = bytearray(p.read_bytes())
    b[-1] ^= 0x08  # the shard's last tensor is v_proj.weight: flip the sign bit of one INT4 code
    p.write_bytes(bytes(b))
    r = fp8kit.checkpoint_check(str(d), os.path.join(DATA, "modelopt_w4a8_smoothed"))
    assert r["failed"]
    bad = [c for c in r["comparisons"] if c["verdict"] != "bit-exact"]
    assert [(c["module"], c["verdict"], c["code_mismatches"]) for c in bad] == [
        ("model.layers.0.self_attn.v_proj", "codes differ", 1)
    ]
