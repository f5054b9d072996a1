"""fp8kit.kv on real post-rotary Q/K/V (data/example/llama_tiny_kv.h5, captured by
fp8kit.torch.Monitor(attention=True) from a trained 2-layer Llama; scripts/fixtures/make_kv_capture.py),
against an independent numpy transcription of the rules written here from the sources, with
ml_dtypes doing every cast:

- vLLM vllm/attention/layer.py calc_kv_scales: k_scale = float32(max|k| of the first batch) / 200
  (Q 200, V 100; vllm/envs.py K/Q/V_SCALE_CONSTANT); the cache kernel divides in float32 and casts
  with saturation (csrc/quantization/w8a8/fp8/nvidia/quant_utils.cuh).
- a calibrated checkpoint k_scale = amax / 448 (llm-compressor), doubled on FNUZ by vLLM's loader
  (model_executor/layers/quantization/kv_cache.py); ModelOpt's export raises it to at least 1.0
  (export/quant_utils.py get_kv_cache_scaling_factor: torch.max(factor, 1.0) for an FP8 cache).
- vLLM's per-token cache kernel (v1/attention/ops/triton_reshape_and_cache_flash.py):
  scale = max(amax / QUANT_MAX, 1e-6), x * (1 / scale), clamp, cast; QUANT_MAX 448 / FNUZ 240.
- NVFP4 (ModelOpt nvfp4_tensor.py): s2 = amax / 2688, block scale e4m3(clamp(bamax / (6 s2), 2^-9,
  448)), codes e2m1(x / (sb s2)).
Counts (saturated, underflow, nonzero) must match exactly; SQNR (an order-dependent binary64 sum)
to 1e-9 relative; FP8 attention's outputs (exact GEMM vs float64 numpy) to 1e-6 relative.
"""

import os

import fp8kit
import h5py
import ml_dtypes
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAPTURE = os.path.join(ROOT, "data", "example", "llama_tiny_kv.h5")
LAYERS = ("model.layers.0.self_attn", "model.layers.1.self_attn")
F32 = np.float32
ELEMENT = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e4m3fnuz": ml_dtypes.float8_e4m3fnuz}
FMAX = {"e4m3": 448.0, "e5m2": 57344.0, "e4m3fnuz": 240.0}


def load(layer, kind):
    """The steps of one tensor, step order, as float32 [step, batch, heads, positions, dim]."""
    with h5py.File(CAPTURE, "r") as f:
        steps = sorted(k for k in f.keys() if k.startswith("step_"))
        return np.stack([f[f"{s}/{layer}.{kind}"][()].view(ml_dtypes.bfloat16).astype(F32) for s in steps])


def cast_fp8(x, scale, fmt, reciprocal=False):
    """(deq, saturated, underflow) of the saturating RNE cast of x / scale (float32)."""
    v = x * (F32(1) / scale) if reciprocal else x / scale
    v = v.astype(F32)
    plain = v.astype(ELEMENT[fmt]).astype(F32)  # ml_dtypes: overflow gives NaN / Inf
    saturated = ~np.isfinite(plain)
    q = np.clip(v, -FMAX[fmt], FMAX[fmt]).astype(ELEMENT[fmt]).astype(np.float64)
    return q * np.float64(scale), saturated, q == 0


def cast_nvfp4(x, s2):
    """x [..., dim] in blocks of 16 along dim, global scale s2 (broadcastable to x[..., :1])."""
    s2 = np.broadcast_to(np.asarray(s2, F32), x.shape[:-1] + (1,))
    deq, sat, und = [np.empty(x.shape) for _ in range(3)]
    for b0 in range(0, x.shape[-1], 16):
        xb = x[..., b0 : b0 + 16]
        bamax = np.abs(xb).max(axis=-1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            sb = np.where(s2 == 0, F32(0), bamax / (F32(6) * s2)).astype(F32)
        sb = np.where(sb == 0, F32(1), np.clip(sb, F32(2.0**-9), F32(448)))
        sb = sb.astype(ml_dtypes.float8_e4m3fn).astype(F32)
        factor = (sb * s2).astype(F32)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(factor == 0, F32(0), xb / factor).astype(F32)
        q = np.clip(v, -6, 6).astype(ml_dtypes.float4_e2m1fn).astype(np.float64)
        deq[..., b0 : b0 + 16] = q * sb.astype(np.float64) * s2.astype(np.float64)
        sat[..., b0 : b0 + 16] = np.abs(v) >= 7  # RNE: 7 is the tie between 6 and 8, 8 even
        und[..., b0 : b0 + 16] = q == 0
    return deq, sat.astype(bool), und.astype(bool)


def reference(x, kind, fmt, policy):
    """deq, saturated, underflow (arrays shaped like x) and the head scales, from the rules."""
    amax_first, amax_all = F32(np.abs(x[0]).max()), F32(np.abs(x).max())
    amax_head = np.abs(x).max(axis=(0, 1, 3, 4)).astype(F32)  # per head
    if fmt == "nvfp4":
        if policy == "one":
            s2 = F32(1)
        elif policy == "vllm_first_batch":
            s2 = amax_first / F32(2688)
        elif policy in ("tensor", "modelopt_trtllm", "modelopt_hf"):
            s2 = amax_all / F32(2688)
        elif policy == "head":
            s2 = (amax_head / F32(2688)).reshape(1, 1, -1, 1, 1)
        else:
            s2 = (np.abs(x).max(axis=-1, keepdims=True) / F32(2688)).astype(F32)
        return cast_nvfp4(x, s2)
    if policy == "token_head":
        s = np.maximum(np.abs(x).max(axis=-1, keepdims=True) / F32(FMAX[fmt]), F32(1e-6)).astype(F32)
        return cast_fp8(x, s, fmt, reciprocal=True)
    if policy == "one":
        s = F32(1)
    elif policy == "vllm_first_batch":
        s = amax_first / (F32(100) if kind == "v" else F32(200))
    else:
        a = amax_head.reshape(1, 1, -1, 1, 1) if policy == "head" else amax_all
        s = (a / F32(448)).astype(F32)
        if policy == "modelopt_trtllm":
            s = np.maximum(s, F32(1))
        if fmt == "e4m3fnuz":
            s = (s * F32(2)).astype(F32)
    return cast_fp8(x, s, fmt)


def sqnr(x, deq):
    nz = x != 0
    e = (deq - x.astype(np.float64))[nz]
    return 10 * np.log10(np.sum(x.astype(np.float64)[nz] ** 2) / np.sum(e * e))


@pytest.fixture(scope="module")
def report():
    return fp8kit.kv(CAPTURE, bucket=32, attention=False)


def test_capture_is_post_rotary_qkv_of_a_real_model():
    with h5py.File(CAPTURE, "r") as f:
        assert "Monitor" in f.attrs["description"] and "rotary" in f.attrs["description"]
        k = f["step_000000/model.layers.0.self_attn.k"]
        assert k.shape == (2, 4, 128, 16) and k.attrs["dtype"] == "bfloat16" and k.attrs["role"] == "activation"


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e4m3fnuz", "nvfp4"])
@pytest.mark.parametrize(
    "policy", ["one", "vllm_first_batch", "tensor", "modelopt_trtllm", "modelopt_hf", "head", "token_head"]
)
def test_per_head_numbers_match_the_transcription(report, fmt, policy):
    rows = {
        (r["layer"], r["tensor"], r["head"]): r for r in report["rows"] if r["format"] == fmt and r["policy"] == policy
    }
    assert len(rows) == 2 * 3 * 4
    for layer in LAYERS:
        for kind in "qkv":
            x = load(layer, kind)
            deq, sat, und = reference(x, kind, fmt, policy)
            for h in range(x.shape[2]):
                r = rows[(layer, kind, h)]
                xs, nz = x[:, :, h], x[:, :, h] != 0
                assert r["elements"] == xs.size and r["nonzero"] == int(nz.sum())
                assert r["saturated"] == int((sat[:, :, h] & nz).sum()), (layer, kind, h)
                assert r["underflow"] == int((und[:, :, h] & nz).sum()), (layer, kind, h)
                assert r["sqnr_db"] == pytest.approx(sqnr(xs, deq[:, :, h]), rel=1e-9), (layer, kind, h)


def test_first_batch_and_calibrated_scales(report):
    """The scales themselves, bit for bit (vLLM's first-batch rule and amax / 448, FNUZ x2)."""
    for layer in LAYERS:
        for kind, rng in (("q", 200), ("k", 200), ("v", 100)):
            x = load(layer, kind)
            got = {
                (r["format"], r["policy"]): r["scale"]
                for r in report["rows"]
                if r["layer"] == layer and r["tensor"] == kind and r["head"] == 0
            }
            assert F32(got[("e4m3", "vllm_first_batch")]) == F32(np.abs(x[0]).max()) / F32(rng)
            assert F32(got[("e4m3", "tensor")]) == F32(np.abs(x).max()) / F32(448)
            assert F32(got[("e4m3fnuz", "tensor")]) == F32(np.abs(x).max()) / F32(448) * F32(2)
            assert F32(got[("e4m3", "head")]) == F32(np.abs(x[:, :, 0]).max()) / F32(448)
            assert got[("e4m3", "one")] == 1.0
            assert got[("e4m3", "modelopt_trtllm")] == 1.0  # max(amax / 448, 1): these amaxes are far below 448
            assert F32(got[("e4m3", "modelopt_hf")]) == F32(np.abs(x).max()) / F32(448)  # HF export: no clamp


def test_position_buckets_match(report):
    for fmt, policy in (("e4m3", "one"), ("e4m3", "vllm_first_batch"), ("nvfp4", "tensor")):
        for kind in "kv":
            x = load(LAYERS[1], kind)
            deq, sat, und = reference(x, kind, fmt, policy)
            rows = [
                r
                for r in report["positions"]
                if r["layer"] == LAYERS[1] and r["tensor"] == kind and r["format"] == fmt and r["policy"] == policy
            ]
            assert [(r["first"], r["last"]) for r in rows] == [(0, 31), (32, 63), (64, 95), (96, 127)]
            for r in rows:
                sl = slice(r["first"], r["last"] + 1)
                xs, nz = x[..., sl, :], x[..., sl, :] != 0
                assert r["underflow"] == int((und[..., sl, :] & nz).sum())
                assert r["sqnr_db"] == pytest.approx(sqnr(xs, deq[..., sl, :]), rel=1e-9)


def attention_sqnr(q, k, v, h, kh, sc):
    """FA3 and normalised-P output SQNR of query head h (KV head kh) over every step and batch,
    from the rules in numpy (E4M3 via ml_dtypes; S and P V as the exact GEMM: exact sums, one
    float32 rounding, done here in float64 then float32)."""
    e4 = ml_dtypes.float8_e4m3fn

    def codes(x, s):
        return np.clip((x / s).astype(F32), -448, 448).astype(e4).astype(np.float64)

    so, sn = [0.0, 0.0], [0.0, 0.0]
    for s in range(q.shape[0]):
        for b in range(q.shape[1]):
            qs, ks, vs = q[s, b, h].astype(np.float64), k[s, b, kh].astype(np.float64), v[s, b, kh].astype(np.float64)
            n, d = qs.shape
            mask = np.tril(np.ones((n, n), bool))
            scores = (
                (codes(q[s, b, h], sc["q"]) @ codes(k[s, b, kh], sc["k"]).T)
                * (np.float64(sc["q"]) * np.float64(sc["k"]))
            ).astype(F32).astype(np.float64) / np.sqrt(d)
            sref = np.where(mask, qs @ ks.T / np.sqrt(d), -np.inf)
            pref = np.exp(sref - sref.max(1, keepdims=True))
            pref /= pref.sum(1, keepdims=True)
            oref = pref @ vs
            st = np.where(mask, scores, -np.inf)
            pt = np.exp(st - st.max(1, keepdims=True)).astype(F32)
            z = pt.astype(np.float64).sum(1).astype(F32)
            vc = codes(v[s, b, kh], sc["v"])
            o = ((pt.astype(e4).astype(np.float64) @ vc) * np.float64(sc["v"])).astype(F32) / z[:, None]
            on = ((((pt / z[:, None]).astype(F32)).astype(e4).astype(np.float64) @ vc) * np.float64(sc["v"])).astype(
                F32
            )
            for acc, got in ((so, o), (sn, on)):
                acc[0] += np.sum(oref**2)
                acc[1] += np.sum((got.astype(np.float64) - oref) ** 2)
    return 10 * np.log10(so[0] / so[1]), 10 * np.log10(sn[0] / sn[1])


def test_fp8_attention_matches_numpy():
    """FA3 numerics on layer 1 under calibrated per-tensor scales, from the rules in numpy."""
    r = fp8kit.kv(CAPTURE, formats=["e4m3"], policies=["tensor"], attention=True)
    att = {(a["layer"], a["head"]): a for a in r["attention"]}
    layer = LAYERS[1]
    q, k, v = (load(layer, t) for t in "qkv")
    sc = {t: F32(np.abs(x).max()) / F32(448) for t, x in (("q", q), ("k", k), ("v", v))}
    for h in (0, 3):
        fa3, normed = attention_sqnr(q, k, v, h, h, sc)
        a = att[(layer, h)]
        assert a["out_sqnr_db"] == pytest.approx(fa3, rel=1e-6)
        assert a["out_normalized_sqnr_db"] == pytest.approx(normed, rel=1e-6)
        assert F32(a["v_scale"]) == sc["v"] and F32(a["q_scale"]) == sc["q"]


def test_fp8_attention_gqa_and_first_batch_scales(tmp_path):
    """4 query heads over 2 KV heads (query head h reads KV head h // 2), vLLM's first-batch
    scales (Q, K / 200, V / 100 of step 0) met by a later batch three times larger, float32."""
    rng = np.random.default_rng(7)
    path = tmp_path / "gqa.h5"
    data = {"q": [], "k": [], "v": []}
    with h5py.File(path, "w") as f:
        for s in range(2):
            for kind, heads, amp in (("q", 4, 2.0), ("k", 2, 3.0), ("v", 2, 0.5)):
                x = (rng.standard_normal((1, heads, 24, 16)) * amp * (1 + 2 * s)).astype(F32)
                f.create_dataset(f"step_{s:06d}/blk.attn.{kind}", data=x)
                data[kind].append(x)
    q, k, v = (np.stack(data[t]) for t in "qkv")
    r = fp8kit.kv(str(path), formats=["e4m3"], policies=["vllm_first_batch"], attention=True)
    sc = {t: F32(np.abs(x[0]).max()) / F32(rng_) for t, x, rng_ in (("q", q, 200), ("k", k, 200), ("v", v, 100))}
    assert [a["kv_head"] for a in r["attention"]] == [0, 0, 1, 1]
    for a in r["attention"]:
        fa3, normed = attention_sqnr(q, k, v, a["head"], a["kv_head"], sc)
        assert F32(a["k_scale"]) == sc["k"] and F32(a["v_scale"]) == sc["v"]
        assert a["out_sqnr_db"] == pytest.approx(fa3, rel=1e-6)
        assert a["out_normalized_sqnr_db"] == pytest.approx(normed, rel=1e-6)
    # step 1 is three times step 0: past 448 x k_scale = 2.24 x the first batch's amax, so K saturates
    assert sum(x["saturated"] for x in r["rows"] if x["tensor"] == "k") > 0


def test_bad_input_is_named(tmp_path):
    with pytest.raises(fp8kit.KvError, match="no Q/K/V tensor"):
        fp8kit.kv(os.path.join(ROOT, "data", "example", "llama_tiny_dump.h5"))
    bad = tmp_path / "flat.h5"
    with h5py.File(bad, "w") as f:
        f.create_dataset("step_000000/attn.k", data=np.ones((4, 16), np.float32))
    with pytest.raises(fp8kit.KvError, match=r"attn\.k.*\[batch, heads, positions, head_dim\]"):
        fp8kit.kv(str(bad))
    with pytest.raises(fp8kit.KvError, match="policy 'max'"):
        fp8kit.kv(CAPTURE, policies=["max"])


def test_synthetic_extremes_match_the_transcription(tmp_path):
    """Values the capture lacks: rows far below the tensor's amax (NVFP4 block scales clamped to
    2^-9, E4M3 underflow), rows far above a first batch (saturation under vLLM's rule), zeros,
    float32 storage and head_dim 32 (two NVFP4 blocks)."""
    rng = np.random.default_rng(5)
    path = tmp_path / "qkv.h5"
    data = {}
    with h5py.File(path, "w") as f:
        for kind in "qkv":
            steps = []
            for s in range(3):
                x = (rng.standard_normal((1, 2, 8, 32)) * 3).astype(F32)
                x[0, 0, 1] *= F32(1e-7)  # tiny row: clamped block scales, underflow
                x[0, 1, 2, :16] = 0  # an all-zero block
                if s == 2:
                    x[0, 1, 5] *= F32(300)  # later batch far beyond the first: saturation
                f.create_dataset(f"step_{s:06d}/m.attn.{kind}", data=x)
                steps.append(x)
            data[kind] = np.stack(steps)
    r = fp8kit.kv(str(path), bucket=3, attention=False)
    assert r["positions"] and [p["last"] for p in r["positions"][:3]] == [2, 5, 7]
    seen_sat = seen_und = 0
    for fmt in ("e4m3", "e5m2", "e4m3fnuz", "nvfp4"):
        for policy in ("one", "vllm_first_batch", "tensor", "modelopt_trtllm", "modelopt_hf", "head", "token_head"):
            for kind in "qkv":
                x = data[kind]
                deq, sat, und = reference(x, kind, fmt, policy)
                for h in range(2):
                    row = next(
                        q
                        for q in r["rows"]
                        if q["tensor"] == kind and q["head"] == h and q["format"] == fmt and q["policy"] == policy
                    )
                    nz = x[:, :, h] != 0
                    assert row["saturated"] == int((sat[:, :, h] & nz).sum()), (fmt, policy, kind, h)
                    assert row["underflow"] == int((und[:, :, h] & nz).sum()), (fmt, policy, kind, h)
                    assert row["sqnr_db"] == pytest.approx(sqnr(x[:, :, h], deq[:, :, h]), rel=1e-9), (
                        fmt,
                        policy,
                        kind,
                        h,
                    )
                    seen_sat += row["saturated"]
                    seen_und += row["underflow"]
    assert seen_sat > 0 and seen_und > 0
