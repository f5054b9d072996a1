"""fp8kit.calibrate per channel and per head against the scales ModelOpt 0.47.0 and llm-compressor
0.14.0.1 computed themselves (tests/golden/calibration_axis_scales.json, written by
scripts/fixtures/make_calibration_axis_golden.py): ModelOpt's TensorQuantizer with axis=-1 (max, mse) on
three bfloat16 activations of the example dump, ModelOpt's MseCalibrator with axis=1 and llm-compressor's observers with strategy attn_head
and ModelOpt's max with axis=1 on the post-rotary Q/K/V of data/example/llama_tiny_kv.h5. Every
scale bit for bit."""

import json
import os
import struct

import fp8kit
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = json.load(open(os.path.join(ROOT, "tests", "golden", "calibration_axis_scales.json")))


def hexbits(v):
    return "0x%08x" % struct.unpack("<I", struct.pack("<f", v))[0]


def got(report):
    out = {}
    for r in report["rows"]:
        out.setdefault((r["tensor"], r["method"]), {})[r["index"]] = r["scale_bits_f32"]
    return {k: [v[i] for i in range(len(v))] for k, v in out.items()}


def test_per_channel_equals_modelopt_axis_minus_1():
    g = GOLDEN["channel"]
    steps = ",".join(str(s) for s in g["steps"])
    r = fp8kit.calibrate(
        os.path.join(ROOT, g["dump"]),
        ["modelopt_max"],
        tensors=["step_%06d/%s" % (s, t) for s in g["steps"] for t in g["tensors"]],
        holdout_steps="none",
        granularity="channel",
    )
    assert r["granularity"] == "channel" and steps
    scales = got(r)
    n = 0
    for tensor, methods in g["tensors"].items():
        want = methods["modelopt_max"]
        assert scales[(tensor, "modelopt_max")] == want, tensor
        n += len(want)
    assert n == 64 + 192 + 64


def test_mse_per_channel_equals_modelopt_axis_minus_1():
    """ModelOpt's MseCalibrator with axis=-1: the candidate amax rounded to the bfloat16 buffer's
    dtype (a 0-dim float32 candidate times a dimensioned bfloat16 amax stays bfloat16)."""
    g = GOLDEN["channel"]
    r = fp8kit.calibrate(
        os.path.join(ROOT, g["dump"]),
        ["modelopt_mse"],
        tensors=["step_%06d/%s" % (s, t) for s in g["steps"] for t in g["tensors"]],
        holdout_steps="none",
        granularity="channel",
    )
    scales = got(r)
    n = 0
    for tensor, methods in g["tensors"].items():
        want = methods["modelopt_mse"]
        assert scales[(tensor, "modelopt_mse")] == want, (
            tensor,
            [i for i, (a, b) in enumerate(zip(scales[(tensor, "modelopt_mse")], want)) if a != b],
        )
        n += len(want)
    assert n == 64 + 192 + 64
    # That rounding decides: the per-tensor MseCalibrator (float32 candidate amax) on each channel
    # of lm_head/input alone picks another scale on some channels than ModelOpt with axis=-1.
    import h5py
    import ml_dtypes
    import numpy as np

    with h5py.File(os.path.join(ROOT, g["dump"]), "r") as f:
        xs = [f["step_%06d/lm_head/input" % s][()].view(ml_dtypes.bfloat16) for s in g["steps"]]
    want = g["tensors"]["lm_head/input"]["modelopt_mse"]
    per_slice = [
        hexbits(fp8kit.calibrate_scale("modelopt_mse", [np.ascontiguousarray(x[..., c]) for x in xs])[0])
        for c in range(xs[0].shape[-1])
    ]
    assert sum(a != b for a, b in zip(per_slice, want)) > 0


def test_per_head_equals_llm_compressor_attn_head_and_modelopt_axis_1():
    g = GOLDEN["head"]
    r = fp8kit.calibrate(
        os.path.join(ROOT, g["dump"]),
        ["modelopt_max", "modelopt_mse", "memoryless_minmax", "static_minmax", "minmax", "llmc_mse"],
        tensors=["*self_attn.[qkv]"],
        holdout_steps="none",
        granularity="head",
    )
    scales = got(r)
    n = 0
    for tensor, methods in g["tensors"].items():
        for method, want in methods.items():
            assert scales[(tensor, method)] == want, (tensor, method)
            n += len(want)
    assert n == 6 * 6 * 4
    names = {x["checkpoint_name"] for x in r["rows"]}
    assert "model.layers.1.self_attn.v_scale" in names  # the KV-cache scale names vLLM loads


def test_granularity_refusals_name_the_library():
    dump = os.path.join(ROOT, "data", "example", "llama_tiny_dump.h5")
    with pytest.raises(fp8kit.CalibrateError, match="refuses a channel strategy"):
        fp8kit.calibrate(dump, ["static_minmax"], granularity="channel")
    with pytest.raises(fp8kit.CalibrateError, match=r"\[batch, heads, positions, head_dim\]"):
        fp8kit.calibrate(dump, ["static_minmax"], tensors=["*/lm_head/input"], granularity="head")
    with pytest.raises(fp8kit.CalibrateError, match="granularity 'row'"):
        fp8kit.calibrate(dump, ["max"], granularity="row")


def test_refused_where_modelopt_raises():
    """Percentile with an axis, histogram entropy and histogram mse for FP8: ModelOpt 0.47.0 raises
    (the golden file holds its exceptions) and fp8kit refuses, naming the source."""
    refused = GOLDEN["refused"]
    assert refused["modelopt_percentile_axis"].startswith("NotImplementedError")
    assert refused["modelopt_histogram_entropy"].startswith("TypeError")
    assert refused["modelopt_histogram_mse"].startswith("TypeError") and "'M'" in refused["modelopt_histogram_mse"]
    dump = os.path.join(ROOT, "data", "example", "llama_tiny_dump.h5")
    with pytest.raises(fp8kit.CalibrateError, match="NotImplementedError for any axis"):
        fp8kit.calibrate(dump, ["modelopt_percentile"], granularity="channel")
    with pytest.raises(fp8kit.CalibrateError, match="_compute_amax_entropy"):
        fp8kit.calibrate(dump, ["entropy"])
    with pytest.raises(fp8kit.CalibrateError, match="_compute_amax_mse"):
        fp8kit.calibrate(dump, ["modelopt_hist_mse"])
    with pytest.raises(fp8kit.CalibrateError, match="_compute_amax_entropy"):
        fp8kit.calibrate_scale("modelopt_entropy", [[1.0, 2.0]])


def test_nvfp4_headroom_from_modelopts_rule():
    """ModelOpt's NVFP4 activation global scale amax / (6 * 448) (nvfp4_tensor.py), transcribed in
    numpy: the scale bit for bit, and on the held-out step the blocks of 16 whose E4M3 block scale
    block_amax / (6 s2) passes 448 or falls below 2^-9."""
    import h5py
    import ml_dtypes
    import numpy as np

    dump = os.path.join(ROOT, "data", "example", "llama_tiny_dump.h5")
    r = fp8kit.calibrate(dump, ["modelopt_max"], tensors=["*/input"])
    f = h5py.File(dump, "r")
    seen_over = 0
    for row in r["rows"]:
        n = row["nvfp4"]
        s2 = np.float32(row["amax"]) / np.float32(2688)
        assert hexbits(n["global_scale"]) == hexbits(float(s2))
        x = f["step_000299/" + row["tensor"]][()].view(ml_dtypes.bfloat16).astype(np.float64)
        blocks = np.abs(x.reshape(-1, x.shape[-1] // 16, 16)).max(-1).ravel()
        assert n["blocks"] == blocks.size
        assert n["blocks_over"] == int((blocks > 448 * 6 * np.float64(s2)).sum())
        assert n["blocks_under"] == int(((blocks > 0) & (blocks < 2.0**-9 * 6 * np.float64(s2))).sum())
        assert n["headroom_binades"] == pytest.approx(np.log2(row["amax"] / blocks.max()), rel=1e-12)
        seen_over += n["blocks_over"]
    assert seen_over > 0  # step 299 passes the amax of steps 0 and 100 somewhere
