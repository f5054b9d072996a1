"""Files whose tensors torch pickles through torch._utils._rebuild_tensor_v3, written by real torch
2.2 (the first version that writes it) and 2.15 (data/torch_v3/torch-X.Y/, made by
scripts/fixtures/make_torch_v3_fixtures.py): `fp8kit inspect --json` reads every file, lists the
floating-point dtypes and names the others in "skipped" (never refusing the file), and
fp8kit.read_dump decodes the values bit for bit against what the script stored beside them: torch's
own float32 values for the float8 types, and for float4_e2m1fn_x2 the bytes torch wrote
(t.view(torch.uint8)) decoded by ml_dtypes' float4_e2m1fn, low nibble first.

The CLI comes from FP8KIT_CLI or build/tools/fp8kit."""

import json
import os
import subprocess
from pathlib import Path

import fp8kit
import ml_dtypes
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "data" / "torch_v3"
VERSIONS = ["torch-2.2", "torch-2.15"]
FLOATS = {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"}


def cli():
    p = Path(os.environ.get("FP8KIT_CLI", REPO / "build" / "tools" / "fp8kit"))
    assert p.exists(), f"{p}: the fp8kit CLI is needed (run scripts/install/build.sh, or set FP8KIT_CLI)"
    return str(p)


def cases():
    out = []
    for v in VERSIONS:
        ex = json.loads((ROOT / v / "EXPECTED.json").read_text())
        out += [pytest.param(v, f, e, id=f"{v}/{f}") for f, e in sorted(ex["files"].items())]
    return out


def words(hexes):
    return np.array([int(h, 16) for h in hexes], dtype=np.uint32)


def test_versions_cover_the_range():
    ex = {v: json.loads((ROOT / v / "EXPECTED.json").read_text()) for v in VERSIONS}
    assert ex["torch-2.2"]["torch"].startswith("2.2.")
    assert ex["torch-2.15"]["torch"].startswith("2.15.")
    assert not ex["torch-2.15"]["skipped"] and not ex["torch-2.15"]["v2"]
    # torch 2.2 writes float8_e4m3fn, float8_e5m2 and the bits types through v3 (torch/_tensor.py
    # v3_dtypes) and cannot save the fnuz float8 types or complex32; 2.15 writes all 16.
    assert {e["dtype"] for e in ex["torch-2.2"]["files"].values()} == {
        "float8_e4m3fn",
        "float8_e5m2",
        "bits8",
        "bits16",
        "bits1x8",
        "bits2x4",
        "bits4x2",
    }
    assert len(ex["torch-2.15"]["files"]) == 16


@pytest.mark.parametrize("version,name,e", cases())
def test_inspect_reads_every_v3_file(version, name, e):
    path = ROOT / version / name
    r = subprocess.run([cli(), "inspect", str(path), "--json", "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["errors"] == []
    rows = {t["name"]: t for t in rep["tensors"]}
    hp = words(e["hp"]).view(np.float32)
    assert rows["high_precision"]["shape"] == [2, 3]
    assert rows["high_precision"]["amax"] == float(np.abs(hp).max())
    dtype = e["dtype"]
    if dtype in FLOATS:
        assert rows["t"]["storage"] == "torch." + dtype
        assert rows["t"]["shape"] == e["shape"]
        assert not rep["skipped"]
    elif dtype == "float4_e2m1fn_x2":
        assert rows["t"]["dtype"] == "e2m1"
        assert rows["t"]["shape"] == [e["shape"][0], 2 * e["shape"][1]]
    else:  # integers, bits, complex: named in skipped, the file still read
        assert "t" not in rows
        assert [s["name"] for s in rep["skipped"]] == ["t"]
        assert f"torch.{dtype}" in rep["skipped"][0]["message"]


@pytest.mark.parametrize("version,name,e", cases())
def test_values_decode_bit_exactly(version, name, e):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the skipped integer/bits/complex tensors
        got = {info["name"]: arr for info, arr in fp8kit.read_dump(str(ROOT / version / name))}
    np.testing.assert_array_equal(got["high_precision"].reshape(-1).view(np.uint32), words(e["hp"]))
    raw = np.frombuffer(bytes.fromhex(e["bytes"]), dtype=np.uint8)
    if e["dtype"] in FLOATS:
        t = got["t"].astype(np.float32)  # float8 arrives decoded to float32
        assert list(t.shape) == e["shape"]
        np.testing.assert_array_equal(t.reshape(-1).view(np.uint32), words(e["f32"]))
    elif e["dtype"] == "float4_e2m1fn_x2":
        codes = np.stack([raw & 15, raw >> 4], axis=-1).reshape(-1)
        want = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
        np.testing.assert_array_equal(got["t"].astype(np.float32).reshape(-1).view(np.uint32), want.view(np.uint32))
    else:
        assert "t" not in got


def test_inspect_skips_a_dtype_it_does_not_know():
    """A v3 tensor of a dtype no torch has yet (torch.float6_e3m2fn_x4): in skipped, the file read."""
    path = ROOT / "hostile" / "future_dtype_v3.pt"
    r = subprocess.run([cli(), "inspect", str(path), "--json", "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["errors"] == []
    assert [t["name"] for t in rep["tensors"]] == ["high_precision"]
    assert [s["name"] for s in rep["skipped"]] == ["t"]
    assert "torch.float6_e3m2fn_x4" in rep["skipped"][0]["message"]
