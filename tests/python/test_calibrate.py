"""fp8kit.calibrate / calibrate_scale against the scales the calibration libraries computed
(tests/golden/calibration_scales.json, scripts/fixtures/make_calibration_golden.py: nvidia-modelopt 0.47.0,
llm-compressor 0.14.0.1) on data/example/llama_tiny_dump.h5; bad input raises CalibrateError."""

import json
import os
import struct

import fp8kit
import h5py
import ml_dtypes
import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DUMP = os.path.join(ROOT, "data", "example", "llama_tiny_dump.h5")
with open(os.path.join(ROOT, "tests", "golden", "calibration_scales.json")) as f:
    GOLDEN = json.load(f)


def f32_bits(v):
    return "0x%08x" % struct.unpack("<I", struct.pack("<f", v))[0]


def test_report_matches_libraries():
    r = fp8kit.calibrate(DUMP, ["modelopt_max", "modelopt_mse", "static_minmax", "llmc_mse"], tensors=["*/input"])
    assert len(r["rows"]) == 15 * 4
    for row in r["rows"]:
        want = GOLDEN["tensors"][row["tensor"]][row["method"]]
        assert row["scale_bits_f32"] == want["scale_bits_f32"], (row["tensor"], row["method"])
        assert f32_bits(row["scale"]) == want["scale_bits_f32"]
        assert row["scale_dtype"] == want["dtype"]
        assert row["calibration_steps"] == [0, 100] and row["holdout_steps"] == [299]
        assert 0 <= row["holdout"]["clipped_share"] <= 1


def test_scale_from_arrays_in_bfloat16():
    # The same batches read with h5py (bfloat16 bits), fed to calibrate_scale directly.
    key = "model.layers.1.mlp.down_proj/input"
    with h5py.File(DUMP, "r") as f:
        batches = [f["step_%06d/%s" % (s, key)][...].view(ml_dtypes.bfloat16) for s in (0, 100)]
    for method in fp8kit._calibrate.METHODS:
        scale, dtype, amax, _ = fp8kit.calibrate_scale(method, batches)
        want = GOLDEN["tensors"][key][method]
        assert f32_bits(scale) == want["scale_bits_f32"], method
        assert dtype == want["dtype"]


def test_holdout_tokens():
    r = fp8kit.calibrate(DUMP, "max", tensors=["*/lm_head/input"], holdout_tokens=0.25)
    (row,) = r["rows"]
    assert row["holdout"]["elements"] == 3 * 32 * 64 and row["calibration"]["elements"] == 3 * 96 * 64


def test_bad_input(tmp_path):
    with pytest.raises(fp8kit.CalibrateError, match="nope"):
        fp8kit.calibrate(DUMP, ["nope"])
    with pytest.raises(fp8kit.CalibrateError, match="missing.h5"):
        fp8kit.calibrate(str(tmp_path / "missing.h5"), ["max"])
    with pytest.raises(fp8kit.CalibrateError):
        fp8kit.calibrate_scale("max", [])
    with pytest.raises(fp8kit.CalibrateError):
        fp8kit.calibrate_scale("max", [np.array([1.0, np.inf], dtype=np.float32)])


def test_nvfp4_input_scales_match_producers():
    """The report's nvfp4.input_scale (ModelOpt's NVFP4 export) and nvfp4.input_global_scale
    (compressed-tensors' generate_gparam) against the producers' own values
    (tests/golden/calibration_nvfp4_input_scales.json, scripts/fixtures/make_calibration_nvfp4_golden.py)."""
    with open(os.path.join(ROOT, "tests", "golden", "calibration_nvfp4_input_scales.json")) as f:
        golden = json.load(f)["tensors"]
    methods = {"modelopt_max": "input_scale", "llmc_static_minmax": "input_global_scale"}
    methods["llmc_memoryless_minmax"] = "input_global_scale"
    r = fp8kit.calibrate(DUMP, list(methods), tensors=["*/input"])
    assert len(r["rows"]) == 15 * 3
    for row in r["rows"]:
        key = methods[row["method"]]
        assert f32_bits(row["nvfp4"][key]) == golden[row["tensor"]][row["method"]]["bits_f32"], row["tensor"]
    r = fp8kit.calibrate(DUMP, ["llmc_minmax", "modelopt_mse"], tensors=["*/lm_head/input"])
    assert all("input_scale" not in x["nvfp4"] and "input_global_scale" not in x["nvfp4"] for x in r["rows"])
