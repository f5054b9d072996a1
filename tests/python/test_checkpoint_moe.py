"""fp8kit.checkpoint_check on the mixture-of-experts fixtures ModelOpt and compressed-tensors wrote
(data/checkpoints/moe_*, scripts/fixtures/make_moe_checkpoints.py): every expert weight bit-exact; ModelOpt's
shared expert input scales seen in the report; one expert's input_scale removed from a copy is
named."""

import json
import os
import shutil
import struct

import fp8kit

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "checkpoints")
FIXTURES = [
    "moe_modelopt_fp8",
    "moe_modelopt_fp8_block",
    "moe_modelopt_nvfp4",
    "moe_modelopt_mxfp4",
    "moe_ct_fp8",
    "moe_ct_fp8_block",
    "moe_ct_nvfp4",
    "moe_ct_mxfp4",
]


def test_every_expert_bit_exact():
    for f in FIXTURES:
        r = fp8kit.checkpoint_check(os.path.join(DATA, f), os.path.join(DATA, "moe_original"))
        experts = [c for c in r["comparisons"] if ".mlp.experts." in c["module"]]
        assert len(experts) == 12, f
        assert all(c["verdict"] == "bit-exact" for c in r["comparisons"]), f
        assert not r["failed"], f


def test_mixtral_experts_bit_exact():
    for f in ("moe_mixtral_modelopt_fp8", "moe_mixtral_modelopt_nvfp4"):
        r = fp8kit.checkpoint_check(os.path.join(DATA, f), os.path.join(DATA, "moe_mixtral_original"))
        assert len([c for c in r["comparisons"] if ".block_sparse_moe.experts." in c["module"]]) == 12, f
        assert all(c["verdict"] == "bit-exact" for c in r["comparisons"]) and not r["failed"], f


def test_modelopt_experts_share_their_input_scale():
    r = fp8kit.checkpoint_check(os.path.join(DATA, "moe_modelopt_fp8"))
    with_scale = [l for l in r["layers"] if ".mlp.experts." in l["module"] and "input_scale" in l]
    assert len(with_scale) == 12
    assert not [f for f in r["findings"] if f["check"].startswith("expert")]
    ct = fp8kit.checkpoint_check(os.path.join(DATA, "moe_ct_fp8"))
    assert len([f for f in ct["findings"] if f["check"] == "expert input scales differ"]) == 3


def drop_tensor(path, name):
    """Rewrites safetensors file `path` without tensor `name` (header and data)."""
    with open(path, "rb") as fh:
        b = fh.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8 : 8 + n])
    data, out, pos = b[8 + n :], b"", 0
    del h[name]
    for k, v in sorted(((k, v) for k, v in h.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0]):
        lo, hi = v["data_offsets"]
        out += data[lo:hi]
        v["data_offsets"] = [pos, pos + hi - lo]
        pos += hi - lo
    s = json.dumps(h).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(s)) + s + out)


def test_missing_expert_input_scale_named(tmp_path):
    d = tmp_path / "bad"
    shutil.copytree(os.path.join(DATA, "moe_modelopt_nvfp4"), d)
    os.chmod(d / "model.safetensors", 0o644)
    drop_tensor(d / "model.safetensors", "model.layers.0.mlp.experts.3.up_proj.input_scale")
    r = fp8kit.checkpoint_check(d)
    bad = [f["tensor"] for f in r["findings"] if f["failed"] and f["check"] == "missing expert input_scale"]
    assert bad == ["model.layers.0.mlp.experts.3.up_proj.input_scale"]
    assert r["failed"]
