"""TransformerEngine DumpTensors files from Python: data/te/ was written by real torch.save
(scripts/fixtures/make_te_fixtures.py); values are compared with torch's own view of them
(data/te/EXPECTED.txt), not with fp8kit's reader."""

import os

import fp8kit
import numpy as np
import pytest

TE = os.path.join(os.path.dirname(__file__), "..", "..", "data", "te")
D = os.path.join(TE, "dumps", "tensor_dumps")


def expected():
    out = {}
    with open(os.path.join(TE, "EXPECTED.txt")) as f:
        for line in f:
            if line.startswith("hp "):
                words = line.split()
                rel, bits = words[1], [w for w in words[2:] if not w.startswith("[") and not w.endswith("]")]
                out[rel] = np.array([int(b, 16) for b in bits], dtype=np.uint32).view(np.float32)
    return out


def test_read_dump_high_precision_equals_torch():
    exp = expected()
    assert len(exp) == 4
    for rel, want in exp.items():
        got = [a for info, a in fp8kit.read_dump(os.path.join(TE, rel)) if info["name"].endswith("/high_precision")]
        assert len(got) == 1, rel
        np.testing.assert_array_equal(np.asarray(got[0], dtype=np.float32).ravel(), want)


def test_validate_te_dump():
    a = fp8kit.validate_te_dump(os.path.join(D, "rank_0", "layers_0_fc1_activation_iter_000010.pt"))
    assert a["name"] == "layers_0_fc1_activation" and a["format"] == "e4m3"
    assert a["mismatches"] == 0 and a["total"] == 128
    w = fp8kit.validate_te_dump(os.path.join(D, "rank_0", "layers_0_fc1_weight_iter_000010.pt"))
    assert w["mismatches"] == 1
    assert fp8kit.validate_te_dump(os.path.join(D, "rank_0", "layers_1_proj_dgrad_iter_000030.pt")) is None


def test_hostile_file_raises_dump_error():
    with pytest.raises(fp8kit.DumpError, match="refused global posix.system"):
        list(fp8kit.read_dump(os.path.join(TE, "hostile", "hostile_os_system.pt")))


def test_validate_te_dump_every_quantized_type():
    """MXFP8, NVFP4, blockwise and Float8Tensor entries of TE 2.15 to 2.17 (data/te/quantized,
    EXPECTED.json from the script that wrote them): codes and block scales against the reference."""
    import json

    q = os.path.join(TE, "quantized")
    with open(os.path.join(q, "EXPECTED.json")) as f:
        ex = json.load(f)["files"]
    kinds = set()
    for name, e in ex.items():
        r = fp8kit.validate_te_dump(os.path.join(q, "tensor_dumps", "rank_0", name))
        assert r["kind"] == e["kind"], name
        assert r["mismatches"] == e["mismatches"], name
        if e["kind"] == "NVFP4Tensor":
            assert r["amax_matches"] and r["scale_mismatches"] == 0 and r["swizzled"] == e["swizzled"]
        elif e["kind"] != "Float8Tensor":
            assert r["layout"] == e["layout"], name
            assert (r["scale_blocks"], r["scale_mismatches"]) == (e["scale_blocks"], e.get("scale_mismatches", 0))
        kinds.add((e["kind"], e.get("te", "2.16+")))
    assert {k for k, _ in kinds} == {"Float8Tensor", "MXFP8Tensor", "NVFP4Tensor", "Float8BlockwiseQTensor"}
    assert {v for k, v in kinds if k != "Float8Tensor"} >= {"2.15", "2.16+"}
