"""fp8kit.nvfp4_scale_sweep against ModelOpt 0.47.0's own FP8-scale sweep for static NVFP4 weights
(tests/golden/nvfp4_sweep_scales.json, written by scripts/fixtures/make_nvfp4_sweep_golden.py: mtq.quantize
with NVFP4_W4A4_WEIGHT_MSE_FP8_SWEEP_CFG, NVFP4MSECalibrator's reference sweep, the export's
weight_scale and weight_scale_2). The file's "mode" says how ModelOpt ran: on the CPU, ModelOpt
cannot launch its Triton fake-quant kernel, so that one launch is replaced by its torch
transcription (docs/inference.md). Every scale bit for bit."""

import json
import os
import struct

import fp8kit
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = json.load(open(os.path.join(ROOT, "tests", "golden", "nvfp4_sweep_scales.json")))


def hexbits(v):
    return "0x%08x" % struct.unpack("<I", struct.pack("<f", float(v)))[0]


def weights():
    import h5py
    import ml_dtypes

    with h5py.File(os.path.join(ROOT, GOLDEN["dump"]), "r") as f:
        for name, e in GOLDEN["tensors"].items():
            key, dtype = name.split(":")
            w = f["step_%06d/%s" % (GOLDEN["step"], key)][()].astype(np.float32)
            if dtype == "bfloat16":
                w = w.astype(ml_dtypes.bfloat16)  # round to nearest even, as torch's .to(bfloat16)
            yield name, w, e


def test_sweep_equals_modelopt():
    n = changed = 0
    for name, w, e in weights():
        r = fp8kit.nvfp4_scale_sweep(w)
        assert list(e["shape"]) == list(w.shape)
        assert r["weight_scale"].shape == (w.shape[0], w.shape[1] // 16)
        assert r["weight_scale"].ravel().tolist() == e["weight_scale_e4m3"], name
        assert [hexbits(a) for a in r["amax"].ravel()] == e["amax"], name
        assert hexbits(r["weight_scale_2"]) == e["weight_scale_2"][0], name
        assert hexbits(r["global_amax"]) == e["global_amax"][0], name
        # the sweep is not the max rule: block amax / 6 / weight_scale_2 cast to E4M3
        import ml_dtypes

        blocks = np.abs(w.astype(np.float32).reshape(-1, 16)).max(1)
        by_max = (blocks / np.float32(6) / r["weight_scale_2"]).astype(np.float32).clip(2.0**-9, 448)
        changed += int((by_max.astype(ml_dtypes.float8_e4m3fn).view(np.uint8) != r["weight_scale"].ravel()).sum())
        n += r["weight_scale"].size
    assert n == 2 * (1024 + 256 + 768)
    assert changed > n // 2


def test_sweep_bad_input():
    with pytest.raises(fp8kit.CalibrateError, match="multiple of NVFP4's block of 16"):
        fp8kit.nvfp4_scale_sweep(np.ones((4, 24), dtype=np.float32))
    with pytest.raises(fp8kit.CalibrateError, match="NaN or infinite"):
        fp8kit.nvfp4_scale_sweep(np.full((1, 16), np.nan, dtype=np.float32))


def test_calibrate_method_reports_the_sweep():
    """`fp8kit calibrate --method modelopt_nvfp4_sweep` (here through fp8kit.calibrate): the same
    block scales under ModelOpt's export names (--save: tests/cli/calibrate.sh)."""
    e = GOLDEN["tensors"]["lm_head/weight:float32"]
    dump = os.path.join(ROOT, GOLDEN["dump"])
    tensors = ["step_%06d/lm_head/weight" % GOLDEN["step"]]
    r = fp8kit.calibrate(dump, ["modelopt_nvfp4_sweep"], tensors=tensors)
    (row,) = r["rows"]
    s = row["nvfp4_sweep"]
    assert s["weight_scale_e4m3"] == e["weight_scale_e4m3"]
    assert s["weight_scale_shape"] == [256, 4]
    assert row["scale_bits_f32"] == e["weight_scale_2"][0] and row["tool"] == "modelopt"
    assert row["checkpoint_name"] == "lm_head.weight_scale" and s["weight_scale_2_name"] == "lm_head.weight_scale_2"
    assert s["sqnr_db"] > s["sqnr_max_rule_db"]  # the sweep minimises the squared error
    with pytest.raises(fp8kit.CalibrateError, match="one-shot"):
        fp8kit.calibrate(dump, ["modelopt_nvfp4_sweep"], tensors=["*/lm_head/weight"], holdout_steps="none")
    with pytest.raises(fp8kit.CalibrateError, match="per tensor only"):
        fp8kit.calibrate(dump, ["modelopt_nvfp4_sweep"], tensors=tensors, granularity="channel")
    assert "modelopt_nvfp4_sweep" not in {
        x["method"] for x in fp8kit.calibrate(dump, ["all"], tensors=["*/lm_head/input"])["rows"]
    }
