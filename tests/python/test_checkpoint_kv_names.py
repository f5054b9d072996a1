"""checkpoint check's KV / attention scale names under vLLM, SGLang and TensorRT-LLM (issue 28
item 2), and the affine KV bias. Copies of the ModelOpt FP8 fixture (data/checkpoints/modelopt_fp8)
get planted KV tensors, written here with numpy in the safetensors layout; the fate each engine
gives a name comes from this file's own transcription of the engines' loaders (below), not from
fp8kit's table:

- vLLM (current main, weight_utils.py maybe_remap_kv_scale_name as docs.vllm.ai/en/latest renders
  it, fetched 2026-05-07): ".kv_scale" -> ".attn.k_scale"; names ending in .{q,k,v}_scale,
  .{q,k,v}_zero_point, .q.scale or .{k,v}_cache.scale go through scale_mapping_patterns (first
  match, re.sub); a rewritten name that is no parameter is skipped with a warning. Parameters
  (layers/quantization/kv_cache.py BaseKVCacheMethod.create_weights): <attn>.attn.{q,k,v,prob}_scale,
  scalars; compressed-tensors adds {q,k,v}_zero_point and, under strategy "attn_head", per-head
  q/k/v scales. A name not rewritten reaches models/llama.py LlamaModel.load_weights: stacked
  .{q,k,v}_proj -> .qkv_proj, then params_dict[name] raises KeyError. A scale of more than one
  element into a scalar parameter fails default_weight_loader's size assert. Missing scales
  (layers/quantization/kv_cache.py process_weights_after_loading): only k -> v = k.
- SGLang: python/sglang/srt/model_loader/weight_utils.py maybe_remap_kv_scale_name (the same
  remapping) for names holding "scale"; models/llama.py load_weights then renames
  .{q,k,v}_proj -> .qkv_proj and indexes params_dict (KeyError), other unknown names: warning,
  skipped. Parameters: <attn>.attn.k_scale / v_scale only (layers/quantization/kv_cache.py).
- TensorRT-LLM (PyTorch): tensorrt_llm/_torch/modules/linear.py load_kv_scales reads only
  "k_scale" / "v_scale" under <attn>.{q,k,v}_proj (modeling_utils.py filter_weights); they feed
  qkv_proj.kv_scales, used for an NVFP4 KV cache only; an FP8 KV cache stays at 1.0
  (attention_backend/trtllm.py). Everything else is never read. With an NVFP4 KV cache a k_scale
  without v_scale fails `assert v_scales`. load_kv_scales takes each scale with .reshape([]): one of
  more than one element raises (the max is over q/k/v_proj, not over heads).
- SGLang's parameters are scalars too (kv_cache.py); its default_weight_loader asserts equal sizes.
"""

import json
import os
import re
import shutil
import struct

import fp8kit
import numpy as np
import pytest

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "checkpoints")
A = "model.layers.0.self_attn"
ENGINES = ("vllm", "sglang", "tensorrt_llm")


def check_all(*a, **k):
    """checkpoint_check targeting every engine: each engine's concern is a failed finding."""
    return fp8kit.checkpoint_check(*a, engine="all", **k)


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


VLLM_PATTERNS = [  # scale_mapping_patterns, in order (attn_str "attn": no MLA here)
    (r"\.self_attn\.([kv])_proj\.([kv])_scale$", r".self_attn.attn.\2_scale"),
    (r"\.self_attn\.qkv_proj\.([kv])_scale$", r".self_attn.attn.\1_scale"),
    (r"\.self_attn\.qkqkv_proj\.([kv])_scale$", r".self_attn.attn.\1_scale"),
    (r"\.mixer\.[kv]_proj\.([kv])_scale$", r".mixer.attn.\1_scale"),
    (r"\.self_attn\.q\.scale$", r".self_attn.attn.q_scale"),
    (r"\.self_attn\.([kv])_cache\.scale$", r".self_attn.attn.\1_scale"),
    (r"\.([qkv])_scale$", r".attn.\1_scale"),
    (r"\.([qkv])_zero_point$", r".attn.\1_zero_point"),
]
VLLM_SUFFIXES = (
    ".k_scale",
    ".v_scale",
    ".q_scale",
    ".k_zero_point",
    ".v_zero_point",
    ".q_zero_point",
    ".q.scale",
    ".k_cache.scale",
    ".v_cache.scale",
)


def vllm_remap(name):
    """Current vLLM maybe_remap_kv_scale_name: (rewritten, name)."""
    if name.endswith(".kv_scale"):
        return True, name.replace(".kv_scale", ".attn.k_scale")
    if name.endswith(VLLM_SUFFIXES):
        for pattern, replacement in VLLM_PATTERNS:
            if re.search(pattern, name):
                return True, re.sub(pattern, replacement, name)
    return False, name


def vllm_is_param(name, ct):
    return bool(
        re.fullmatch(r".*\.self_attn\.attn\.(q|k|v|prob)_scale", name)
        or (ct and re.fullmatch(r".*\.self_attn\.attn\.[qkv]_zero_point", name))
    )


def vllm_fate(name, ct=False):
    rewritten, n = vllm_remap(name) if ("scale" in name or "zero_point" in name) else (False, name)
    if rewritten:
        return "renamed" if vllm_is_param(n, ct) else "dropped"
    for w in (".q_proj", ".k_proj", ".v_proj", ".gate_proj", ".up_proj"):
        if w in n:
            return "rejected"  # the stacked name is never a parameter: KeyError
    return "loaded" if vllm_is_param(n, ct) else "rejected"


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


def expected(name, kv_algo="FP8", ct=False, numel=1, ct_heads=False):
    e = {"vllm": vllm_fate(name, ct), "sglang": sglang_fate(name), "tensorrt_llm": trtllm_fate(name, kv_algo)}
    if numel > 1 and not name.endswith(("_bias",)):
        # A per-head scale: only vLLM's compressed-tensors attn_head parameters take it.
        if e["vllm"] in ("loaded", "renamed") and not (ct_heads and not name.endswith("prob_scale")):
            e["vllm"] = "rejected"
        if e["sglang"] in ("loaded", "renamed"):
            e["sglang"] = "rejected"
        if e["tensorrt_llm"] != "dropped":
            e["tensorrt_llm"] = "rejected"
    return e


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
    f"{A}.kv_scale": 0.5,  # deprecated combined scale
    f"{A}.k_proj.kv_scale": 0.5,  # kv_scale on the projection
    f"{A}.o_proj.k_scale": 0.5,  # k_scale on the wrong module
    f"{A}.q_scale": 0.5,  # attention query scale
    f"{A}.prob_scale": 0.5,  # softmax probability scale
    f"{A}.qkv_proj.k_scale": 0.5,  # fused-projection form (newer vLLM's pattern list)
    f"{A}.q.scale": 0.5,  # HYV3 forms
    f"{A}.k_cache.scale": 0.5,
    f"{A}.k_zero_point": 0.0,  # compressed-tensors zero point
    f"{A}.attn.k_scale": 0.5,  # vLLM's own parameter name
}
KV_DROPPED = {
    f"{A}.kv_scale",
    f"{A}.k_proj.kv_scale",
    f"{A}.o_proj.k_scale",
    f"{A}.qkv_proj.k_scale",
    f"{A}.k_cache.scale",
    f"{A}.attn.k_scale",
}


def test_every_name_under_each_engine(tmp_path):
    d = planted(tmp_path, lambda t: t.update({n: f32([v]) for n, v in PLANTED_NAMES.items()}))
    r = check_all(d)
    rows = kv_rows(r)
    names = list(PLANTED_NAMES) + [f"{A}.k_proj.k_scale", f"{A}.v_proj.v_scale"]
    assert set(names) <= set(rows)
    for n in names:
        got = {e: rows[n]["engines"][e]["fate"] for e in ENGINES}
        assert got == expected(n), n
    # The new forms under current vLLM: q_scale, q.scale, the fused and cache forms are loaded;
    # prob_scale is never rewritten (KeyError); vLLM's own name gains a second ".attn".
    assert {n: expected(n)["vllm"] for n in PLANTED_NAMES} == {
        f"{A}.kv_scale": "renamed",
        f"{A}.k_proj.kv_scale": "dropped",
        f"{A}.o_proj.k_scale": "dropped",
        f"{A}.q_scale": "renamed",
        f"{A}.prob_scale": "rejected",
        f"{A}.qkv_proj.k_scale": "renamed",
        f"{A}.q.scale": "renamed",
        f"{A}.k_cache.scale": "renamed",
        f"{A}.k_zero_point": "dropped",
        f"{A}.attn.k_scale": "dropped",
    }
    assert rows[f"{A}.attn.k_scale"]["engines"]["vllm"]["detail"].find(f"{A}.attn.attn.k_scale") >= 0
    # A k/v scale an engine drops is a failed check, named per engine; a dropped q/prob scale or
    # zero point is a note; a load failure (prob_scale under vLLM) fails.
    f = findings(r)
    for n in KV_DROPPED:
        assert (n, "kv scale dropped", True) in f, n
    for n in (f"{A}.q_scale", f"{A}.prob_scale", f"{A}.k_zero_point", f"{A}.q.scale"):
        assert (n, "attention scale not loaded", False) in f, n
    assert (f"{A}.prob_scale", "attention scale rejected", True) in f
    assert not any(t in (f"{A}.q_scale", f"{A}.q.scale", f"{A}.k_zero_point") and failed for t, _, failed in f)
    assert r["failed"]


def per_head_fates(report, names):
    return {n: {e: kv_rows(report)[n]["engines"][e]["fate"] for e in ENGINES} for n in names}


def test_per_head_kv_scale_rejected(tmp_path):
    # ModelOpt names with one scale per KV head (2 here): every engine that reads them fails.
    def edit(t):
        t[f"{A}.k_proj.k_scale"] = f32([0.5, 0.125], (2,))
        t[f"{A}.v_proj.v_scale"] = f32([0.25, 0.25], (2,))

    r = check_all(planted(tmp_path, edit))
    names = (f"{A}.k_proj.k_scale", f"{A}.v_proj.v_scale")
    assert per_head_fates(r, names) == {n: expected(n, numel=2) for n in names}
    assert all(v == "rejected" for n in names for v in per_head_fates(r, names)[n].values())
    f = findings(r)
    for n in names:
        assert (n, "kv scale per-head", True) in f
    msgs = [
        x["message"]
        for x in r["findings"]
        if x["tensor"] == f"{A}.k_proj.k_scale" and x["check"] == "kv scale per-head"
    ]
    assert len(msgs) == 3 and all("min/max 0.25" in m for m in msgs)  # 0.125 / 0.5
    assert any("reshape([])" in m for m in msgs)
    # One element in a [1] tensor is a single value everywhere.
    r1 = check_all(planted(tmp_path / "one", lambda t: t.update({f"{A}.k_proj.k_scale": f32([0.5], (1,))})))
    assert per_head_fates(r1, names[:1]) == {names[0]: expected(names[0])}
    assert not any(c == "kv scale per-head" for _, c, _ in findings(r1))


def planted_ct(tmp_path, strategy, k, v):
    d = tmp_path / "ct"
    shutil.copytree(os.path.join(DATA, "ct_fp8"), d)
    for f in ("model.safetensors", "config.json"):
        os.chmod(d / f, 0o644)
    t = read_safetensors(d / "model.safetensors")
    t[f"{A}.k_scale"], t[f"{A}.v_scale"] = k, v
    write_safetensors(d / "model.safetensors", t)
    c = json.loads((d / "config.json").read_text())
    c["quantization_config"]["kv_cache_scheme"] = {
        "num_bits": 8,
        "type": "float",
        "strategy": strategy,
        "symmetric": True,
        "dynamic": False,
    }
    (d / "config.json").write_text(json.dumps(c))
    return d


@pytest.mark.parametrize("strategy", ["attn_head", "tensor"])
def test_per_head_compressed_tensors(tmp_path, strategy):
    # llm-compressor's names (<attn>.k_scale, one per KV head): vLLM loads them per head only under
    # kv_cache_scheme strategy "attn_head"; SGLang rejects them; TensorRT-LLM never reads the name.
    d = planted_ct(tmp_path, strategy, f32([0.5, 1.0], (2,)), f32([0.25, 0.5], (2,)))
    r = check_all(d)
    names = (f"{A}.k_scale", f"{A}.v_scale")
    heads = strategy == "attn_head"
    assert per_head_fates(r, names) == {
        n: expected(n, kv_algo="static", ct=True, numel=2, ct_heads=heads) for n in names
    }
    f = findings(r)
    for n in names:
        assert (n, "kv scale per-head", not heads) in f  # vLLM: a note per head, or a failure
        assert (n, "kv scale dropped", True) in f  # TensorRT-LLM
    assert r["failed"]


def test_unplanted_fixture_loads_everywhere():
    r = check_all(os.path.join(DATA, "modelopt_fp8"))
    for n, k in kv_rows(r).items():
        assert {e: k["engines"][e]["fate"] for e in ENGINES} == expected(n)
    assert not r["failed"]  # TensorRT-LLM's 1.0 for scales below 1 is a note
    flat = fp8kit.checkpoint_kv_names(os.path.join(DATA, "modelopt_fp8"))
    assert len(flat) == 3 * len(kv_rows(r))
    assert all(x["fate"] == expected(x["name"])[x["engine"]] for x in flat)


def test_scale_above_one_replaced_by_trtllm(tmp_path):
    d = planted(tmp_path, lambda t: t.update({f"{A}.k_proj.k_scale": f32([2.0])}))
    r = check_all(d)
    assert (f"{A}.k_proj.k_scale", "kv scale replaced", True) in findings(r)
    assert kv_rows(r)[f"{A}.k_proj.k_scale"]["engines"]["tensorrt_llm"]["fate"] == "replaced"


@pytest.mark.parametrize("kv_algo,trt", [("FP8", "replaced"), ("NVFP4", "rejected")])
def test_missing_v_scale(tmp_path, kv_algo, trt):
    d = planted(tmp_path, lambda t: t.pop(f"{A}.v_proj.v_scale"), kv_algo=kv_algo)
    r = check_all(d)
    row = kv_rows(r)[f"{A}.v_proj.v_scale"]
    assert not row["present"]
    # vLLM and SGLang duplicate k_scale into v (kv_cache.py); TensorRT-LLM per its KV cache.
    assert {e: row["engines"][e]["fate"] for e in ENGINES} == {
        "vllm": "replaced",
        "sglang": "replaced",
        "tensorrt_llm": trt,
    }
    assert (f"{A}.v_proj.v_scale", "kv scale missing", True) in findings(r)


def test_nvfp4_affine_kv_left_undetermined(tmp_path):
    # Whether TensorRT-LLM takes kv_cache_quant_algo NVFP4_AFFINE is not in its transcribed source:
    # reported as undetermined (a note), not guessed.
    d = planted(tmp_path, lambda t: None, kv_algo="NVFP4_AFFINE")
    r = check_all(d)
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

    r = check_all(planted(tmp_path, edit))
    rows, f = kv_rows(r), findings(r)
    for n in (f"{A}.k_proj.k_bias", f"{A}.v_proj.v_bias"):
        assert {e: rows[n]["engines"][e]["fate"] for e in ENGINES} == expected(n)
        assert (n, "kv bias rejected", True) in f  # vLLM and SGLang: KeyError
        assert (n, "kv bias ignored", True) in f  # TensorRT-LLM never reads it
    assert (f"{A}.k_proj.k_bias", "kv bias finite", True) in f
    assert (f"{A}.v_proj.v_bias", "kv bias", True) in f
    assert not any(t == f"{A}.k_proj.k_bias" and c == "kv bias" for t, c, _ in f)


def test_affine_kv_bias_alone(tmp_path):
    # A k_bias without v_bias: half an affine pair (FP8_AFFINE_KV_CFG biases both bmm quantizers).
    r = check_all(planted(tmp_path, lambda t: t.update({f"{A}.k_proj.k_bias": f32(np.zeros(64), (1, 2, 1, 32))})))
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
    assert exe.exists(), f"{exe}: the fp8kit CLI is needed (run scripts/install/build.sh, or set FP8KIT_CLI)"
    d = planted(tmp_path, lambda t: t.update({f"{A}.o_proj.k_scale": f32([0.5])}))
    out = subprocess.run(
        [str(exe), "checkpoint", "check", str(d), "--csv", "--engine", "all"], capture_output=True, text=True
    )
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
