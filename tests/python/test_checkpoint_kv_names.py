"""checkpoint check's KV / attention scale names under vLLM, SGLang and TensorRT-LLM (issue 28
item 2), and the affine KV bias. Copies of the ModelOpt FP8 fixture (data/checkpoints/modelopt_fp8)
get planted KV tensors, written here with numpy in the safetensors layout; the fate each engine
gives a name comes from this file's own transcription of the engines' loaders (below), not from
fp8kit's table:

- vLLM: vllm/model_executor/model_loader/weight_utils.py maybe_remap_kv_scale_name; a remapped
  name that is no parameter is skipped with a warning; q_scale falls back to k_scale
  (vllm/attention/layer.py); a k_bias / v_bias reaches models/llama.py LlamaModel.load_weights,
  whose params_dict[name] raises KeyError. Missing scales (layers/quantization/kv_cache.py
  process_weights_after_loading): only k -> v = k.
- SGLang: python/sglang/srt/model_loader/weight_utils.py maybe_remap_kv_scale_name (the same
  remapping) for names holding "scale"; models/llama.py load_weights then renames
  .{q,k,v}_proj -> .qkv_proj and indexes params_dict (KeyError), other unknown names: warning,
  skipped. Parameters: <attn>.attn.k_scale / v_scale only (layers/quantization/kv_cache.py).
- TensorRT-LLM (PyTorch): tensorrt_llm/_torch/modules/linear.py load_kv_scales reads only
  "k_scale" / "v_scale" under <attn>.{q,k,v}_proj (modeling_utils.py filter_weights); they feed
  qkv_proj.kv_scales, used for an NVFP4 KV cache only; an FP8 KV cache stays at 1.0
  (attention_backend/trtllm.py). Everything else is never read. With an NVFP4 KV cache a k_scale
  without v_scale fails `assert v_scales`.
"""
import json
import os
import re
import shutil
import struct

import numpy as np
import pytest

import fp8kit

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "checkpoints")
A = "model.layers.0.self_attn"
ENGINES = ("vllm", "sglang", "tensorrt_llm")


# --- the engines' rules, transcribed here ---------------------------------------------------
def remap_kv_scale_name(name):
    """maybe_remap_kv_scale_name (vLLM and SGLang): the name it returns before the param check."""
    if name.endswith(".kv_scale"):
        return name.replace(".kv_scale", ".attn.k_scale")
    for s in (".k_scale", ".v_scale"):
        if name.endswith(s):
            if ".self_attn.k_proj.k_scale" in name or ".self_attn.v_proj.v_scale" in name:
                return name.replace(f".self_attn.{s[1]}_proj{s}", f".self_attn.attn{s}")
            return name.replace(s, f".attn{s}")
    return name


def vllm_fate(name):
    suffix = name.rsplit(".", 1)[1]
    if suffix in ("k_bias", "v_bias"):
        return "rejected"
    mapped = remap_kv_scale_name(name) if suffix in ("k_scale", "v_scale", "kv_scale") else name
    if re.fullmatch(r".*\.self_attn\.attn\.[kvq]_scale", mapped):
        return "loaded" if mapped == name else "renamed"
    return "replaced" if suffix == "q_scale" else "dropped"


def sglang_fate(name):
    param = re.compile(r".*\.self_attn\.attn\.[kv]_scale")
    n = name
    if "scale" in n:
        n = remap_kv_scale_name(name)
        if n != name and not param.fullmatch(n):
            return "dropped"
    for w, p in ((".q_proj", ".qkv_proj"), (".k_proj", ".qkv_proj"), (".v_proj", ".qkv_proj")):
        if w in n:
            return "renamed" if param.fullmatch(n.replace(w, p)) else "rejected"
    if param.fullmatch(n):
        return "loaded" if n == name else "renamed"
    return "dropped"


def trtllm_fate(name, kv_algo):
    if not re.fullmatch(r".*\.self_attn\.[qkv]_proj\.[kv]_scale", name):
        return "dropped"
    return "renamed" if kv_algo.startswith("NVFP4") else "replaced"


def expected(name, kv_algo="FP8"):
    return {"vllm": vllm_fate(name), "sglang": sglang_fate(name), "tensorrt_llm": trtllm_fate(name, kv_algo)}


# --- a fixture copy with tensors planted ----------------------------------------------------
SAFE_DTYPES = {"F32": np.float32, "F16": np.float16, "U8": np.uint8, "F8_E4M3": np.uint8, "BF16": np.uint16}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        out[k] = (v["dtype"], v["shape"], data[b:e])
    return out


def write_safetensors(path, tensors):
    head, blob = {}, b""
    for k, (dtype, shape, raw) in sorted(tensors.items()):
        head[k] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(head).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


def f32(values, shape=()):
    return ("F32", list(shape), np.asarray(values, dtype="<f4").reshape(shape).tobytes())


def bf16(values, shape):
    bits = (np.asarray(values, dtype="<f4").view("<u4") >> 16).astype("<u2")  # exact for these values
    return ("BF16", list(shape), bits.reshape(shape).tobytes())


def planted(tmp_path, edit, kv_algo=None):
    d = tmp_path / "ckpt"
    shutil.copytree(os.path.join(DATA, "modelopt_fp8"), d)
    os.chmod(d / "model.safetensors", 0o644)
    t = read_safetensors(d / "model.safetensors")
    edit(t)
    write_safetensors(d / "model.safetensors", t)
    if kv_algo is not None:
        os.chmod(d / "hf_quant_config.json", 0o644)
        q = json.loads((d / "hf_quant_config.json").read_text())
        q["quantization"]["kv_cache_quant_algo"] = kv_algo
        (d / "hf_quant_config.json").write_text(json.dumps(q))
    return d


def findings(report):
    return {(f["tensor"], f["check"], f["failed"]) for f in report["findings"]}


def kv_rows(report):
    return {k["name"]: k for k in report["kv_scales"]}


# --- tests -----------------------------------------------------------------------------------
PLANTED_NAMES = {
    f"{A}.kv_scale": 0.5,            # deprecated combined scale
    f"{A}.k_proj.kv_scale": 0.5,     # kv_scale on the projection
    f"{A}.o_proj.k_scale": 0.5,      # k_scale on the wrong module
    f"{A}.q_scale": 0.5,             # attention query scale
    f"{A}.prob_scale": 0.5,          # softmax probability scale
}


def test_every_name_under_each_engine(tmp_path):
    d = planted(tmp_path, lambda t: t.update({n: f32([v]) for n, v in PLANTED_NAMES.items()}))
    r = fp8kit.checkpoint_check(d)
    rows = kv_rows(r)
    names = list(PLANTED_NAMES) + [f"{A}.k_proj.k_scale", f"{A}.v_proj.v_scale"]
    assert set(names) <= set(rows)
    for n in names:
        got = {e: rows[n]["engines"][e]["fate"] for e in ENGINES}
        assert got == expected(n), n
    # A k/v scale an engine drops is a failed check, named per engine; q/prob scales are notes.
    f = findings(r)
    for n in (f"{A}.kv_scale", f"{A}.k_proj.kv_scale", f"{A}.o_proj.k_scale"):
        assert (n, "kv scale dropped", True) in f
    for n in (f"{A}.q_scale", f"{A}.prob_scale"):
        assert (n, "attention scale not loaded", False) in f
        assert not any(t == n and failed for t, _, failed in f)
    assert r["failed"]


def test_unplanted_fixture_loads_everywhere():
    r = fp8kit.checkpoint_check(os.path.join(DATA, "modelopt_fp8"))
    for n, k in kv_rows(r).items():
        assert {e: k["engines"][e]["fate"] for e in ENGINES} == expected(n)
    assert not r["failed"]  # TensorRT-LLM's 1.0 for scales below 1 is a note
    flat = fp8kit.checkpoint_kv_names(os.path.join(DATA, "modelopt_fp8"))
    assert len(flat) == 3 * len(kv_rows(r))
    assert all(x["fate"] == expected(x["name"])[x["engine"]] for x in flat)


def test_scale_above_one_replaced_by_trtllm(tmp_path):
    d = planted(tmp_path, lambda t: t.update({f"{A}.k_proj.k_scale": f32([2.0])}))
    r = fp8kit.checkpoint_check(d)
    assert (f"{A}.k_proj.k_scale", "kv scale replaced", True) in findings(r)
    assert kv_rows(r)[f"{A}.k_proj.k_scale"]["engines"]["tensorrt_llm"]["fate"] == "replaced"


@pytest.mark.parametrize("kv_algo,trt", [("FP8", "replaced"), ("NVFP4", "rejected")])
def test_missing_v_scale(tmp_path, kv_algo, trt):
    d = planted(tmp_path, lambda t: t.pop(f"{A}.v_proj.v_scale"), kv_algo=kv_algo)
    r = fp8kit.checkpoint_check(d)
    row = kv_rows(r)[f"{A}.v_proj.v_scale"]
    assert not row["present"]
    # vLLM and SGLang duplicate k_scale into v (kv_cache.py); TensorRT-LLM per its KV cache.
    assert {e: row["engines"][e]["fate"] for e in ENGINES} == {"vllm": "replaced", "sglang": "replaced", "tensorrt_llm": trt}
    assert (f"{A}.v_proj.v_scale", "kv scale missing", True) in findings(r)


def test_nvfp4_affine_kv_left_undetermined(tmp_path):
    # Whether TensorRT-LLM takes kv_cache_quant_algo NVFP4_AFFINE is not in its transcribed source:
    # reported as undetermined (a note), not guessed.
    d = planted(tmp_path, lambda t: None, kv_algo="NVFP4_AFFINE")
    r = fp8kit.checkpoint_check(d)
    row = kv_rows(r)[f"{A}.k_proj.k_scale"]
    assert row["engines"]["tensorrt_llm"]["fate"] == "undetermined"
    assert (f"{A}.k_proj.k_scale", "kv scale undetermined", False) in findings(r)
    assert not r["failed"]


def test_affine_kv_bias(tmp_path):
    # ModelOpt's affine KV: k_proj.k_bias / v_proj.v_bias, one per KV head and channel (2 x 32 here).
    kb = np.linspace(-1, 1, 64, dtype=np.float32)
    kb[5] = np.nan

    def edit(t):
        t[f"{A}.k_proj.k_bias"] = bf16(kb, (1, 2, 1, 32))
        t[f"{A}.v_proj.v_bias"] = f32(np.zeros(63), (63,))  # one channel short

    r = fp8kit.checkpoint_check(planted(tmp_path, edit))
    rows, f = kv_rows(r), findings(r)
    for n in (f"{A}.k_proj.k_bias", f"{A}.v_proj.v_bias"):
        assert {e: rows[n]["engines"][e]["fate"] for e in ENGINES} == expected(n)
        assert (n, "kv bias rejected", True) in f       # vLLM and SGLang: KeyError
        assert (n, "kv bias ignored", True) in f        # TensorRT-LLM never reads it
    assert (f"{A}.k_proj.k_bias", "kv bias finite", True) in f
    assert (f"{A}.v_proj.v_bias", "kv bias", True) in f
    assert not any(t == f"{A}.k_proj.k_bias" and c == "kv bias" for t, c, _ in f)


def test_affine_kv_bias_alone(tmp_path):
    # A k_bias without v_bias: half an affine pair (FP8_AFFINE_KV_CFG biases both bmm quantizers).
    r = fp8kit.checkpoint_check(planted(tmp_path, lambda t: t.update({f"{A}.k_proj.k_bias": f32(np.zeros(64), (1, 2, 1, 32))})))
    kb = [f for f in r["findings"] if f["tensor"] == f"{A}.k_proj.k_bias" and f["check"] == "kv bias"]
    assert len(kb) == 1 and "without v_bias" in kb[0]["message"] and kb[0]["failed"]


def test_csv_rows_whole_names(tmp_path):
    """--csv: one row per KV name (scheme "kv"), names whole, each engine's "fate: detail" quoted
    where it holds commas; read with the csv module (and pandas where installed)."""
    import csv
    import io
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    exe = Path(os.environ.get("FP8KIT_CLI", repo / "build" / "tools" / "fp8kit"))
    assert exe.exists(), f"{exe}: the fp8kit CLI is needed (run scripts/build.sh, or set FP8KIT_CLI)"
    d = planted(tmp_path, lambda t: t.update({f"{A}.o_proj.k_scale": f32([0.5])}))
    out = subprocess.run([str(exe), "checkpoint", "check", str(d), "--csv"], capture_output=True, text=True)
    assert out.returncode == 1
    rows = [r for r in csv.DictReader(io.StringIO(out.stdout)) if r["scheme"] == "kv"]
    kv = {r["kv_name"]: r for r in rows}
    assert set(kv) == {f"{A}.o_proj.k_scale", f"{A}.k_proj.k_scale", f"{A}.v_proj.v_scale"}
    for n, r in kv.items():
        for e in ENGINES:
            assert r[e].split(":", 1)[0] == expected(n)[e]
    assert "kv scale dropped" in kv[f"{A}.o_proj.k_scale"]["findings"]
    try:
        import pandas as pd
    except ImportError:
        return
    df = pd.read_csv(io.StringIO(out.stdout))
    assert sorted(df[df["scheme"] == "kv"]["kv_name"]) == sorted(kv)
