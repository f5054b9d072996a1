"""Hostile inputs of tests/cli/adversarial.sh, written into the folder given (nothing is committed).

One folder per kind of input fp8kit reads; in each, one file (or folder) per class:
  h5/ st/ pt/ npy/ bin/ recipe/ csv/ log/ stats/ te/ ckpt/
Names: `bad_*` must be refused (exit 1 or 2, one message naming it); `any_*` may be accepted
(NaN/Inf data, hostile names in a valid file): whatever the exit, the output stays short and
printable. Every name starts with its stem (ASCII) so the message can be matched; control
characters come after it. Good files to pair with (operands, codes, a recipe, a trace):
  good/ a.npy b.npy x.npy codes.npy d.npy x.h5 trace.csv recipe.json ckpt/
Usage: python make_adversarial_corpus.py DIR REPO"""

import json
import os
import shutil
import struct
import sys

import h5py
import numpy as np

T, REPO = sys.argv[1], sys.argv[2]
CTL = "\x1b[31m\x07\nfake: ok\r"  # escape, bell, newline, carriage return
BIG = 10 << 20  # a 10 MB string
rng = np.random.default_rng(47)


def put(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def cuts(kind, ext, good, offsets):
    """The classes every binary format shares: empty, cut at each offset, garbage."""
    put(f"{T}/{kind}/bad_empty{ext}", b"")
    for o in offsets:
        put(f"{T}/{kind}/bad_cut{o}{ext}", good[:o])
    put(f"{T}/{kind}/bad_garbage{ext}", rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())


def safetensors(header, data=b""):
    h = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(h)) + h + data


def npy(header, data=b""):
    h = header.encode()
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data


# Good companions.
g = f"{T}/good"
os.makedirs(g)
np.save(f"{g}/x.npy", rng.standard_normal(64).astype(np.float32))
np.save(f"{g}/codes.npy", np.zeros(64, np.uint8))
np.save(f"{g}/a.npy", rng.integers(0, 0x7E, (4, 32), dtype=np.uint8))
np.save(f"{g}/b.npy", rng.integers(0, 0x7E, (4, 32), dtype=np.uint8))
np.save(f"{g}/d.npy", np.zeros((4, 4), np.float32))
with h5py.File(f"{g}/x.h5", "w") as f:
    d = f.create_dataset("step_0/lm_head/input", data=rng.standard_normal((4, 16)).astype(np.float32))
    d.attrs["step"] = 0
put(f"{g}/trace.csv", "step,tensor,amax\n0,a,1.5\n1,a,2\n2,a,2.5\n")
shutil.copy(f"{REPO}/data/checkpoints/ct_fp8/config.json", f"{g}/config.json")
shutil.copytree(f"{REPO}/data/checkpoints/ct_fp8", f"{g}/ckpt")

# HDF5 dumps.
good_h5 = open(f"{REPO}/data/example/llama_tiny_kv.h5", "rb").read()
cuts("h5", ".h5", good_h5, [8, 96, 800, 4096, len(good_h5) // 2, len(good_h5) - 1])
put(f"{T}/h5/bad_garbage_sig.h5", b"\x89HDF\r\n\x1a\n" + rng.integers(0, 256, 4088, dtype=np.uint8).tobytes())
with h5py.File(f"{T}/h5/bad_huge.h5", "w") as f:  # a header claiming 2^40 float32, no chunk written
    f.create_dataset("step_0/x.weight", shape=(1 << 40,), dtype="f4", chunks=(1 << 16,))
with h5py.File(f"{T}/h5/any_nan.h5", "w") as f:
    f.create_dataset("step_0/x.weight", data=np.array([np.nan, np.inf, -np.inf, 1.0] * 4, np.float32))
    f.create_dataset("step_0/y.weight", data=np.full(16, np.nan, np.float32))
    f["step_0/x.weight"].attrs["step"] = float("nan")
with h5py.File(f"{T}/h5/any_names.h5", "w") as f:
    f.create_dataset(f"step_0/ctl{CTL}.weight", data=np.ones(16, np.float32))
    f.create_dataset("step_0/" + "n" * 60000 + ".weight", data=np.ones(16, np.float32))
    f.create_dataset("step_0/attr.weight", data=np.ones(16, np.float32)).attrs["role"] = "ctl" + CTL
with h5py.File(f"{T}/h5/any_deep.h5", "w") as f:
    f.create_dataset("/".join(["g"] * 500) + "/x.weight", data=np.ones(16, np.float32))
with h5py.File(f"{T}/h5/bad_nothing.h5", "w") as f:  # a valid file holding no tensor
    f.create_group("step_0")

# safetensors.
one = struct.pack("<f", 1.0)
good_st = safetensors({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, one * 4)
cuts("st", ".safetensors", good_st, [4, 8, 20, len(good_st) - 1])
put(f"{T}/st/bad_hugelen.safetensors", struct.pack("<Q", 1 << 63) + b"{}")
put(
    f"{T}/st/bad_hugeshape.safetensors",
    safetensors({"w": {"dtype": "F32", "shape": [1 << 62, 1 << 62], "data_offsets": [0, 16]}}, one * 4),
)
put(
    f"{T}/st/bad_hugeoffset.safetensors",
    safetensors({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1 << 62]}}, one * 4),
)
put(
    f"{T}/st/bad_deep.safetensors",
    safetensors(
        b'{"w":{"dtype":"F32","shape":' + b"[" * 200000 + b"4" + b"]" * 200000 + b',"data_offsets":[0,16]}}', one * 4
    ),
)
put(
    f"{T}/st/bad_nanshape.safetensors",
    safetensors(b'{"w":{"dtype":"F32","shape":[NaN],"data_offsets":[0,16]}}', one * 4),
)
put(
    f"{T}/st/bad_infoffset.safetensors",
    safetensors(b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,1e999]}}', one * 4),
)
put(
    f"{T}/st/bad_floatshape.safetensors",
    safetensors(b'{"w":{"dtype":"F32","shape":[4.5],"data_offsets":[0,16]}}', one * 4),
)
put(f"{T}/st/bad_notobject.safetensors", safetensors(b"[1,2,3]"))
put(f"{T}/st/bad_nothing.safetensors", safetensors({}))
put(
    f"{T}/st/any_nan.safetensors",
    safetensors(
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
        np.array([np.nan, np.inf, -np.inf, 1], np.float32).tobytes(),
    ),
)
put(
    f"{T}/st/any_names.safetensors",
    safetensors(
        {
            "ctl" + CTL: {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
            "n" * BIG: {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]},
            "__metadata__": {"role:ctl" + CTL: "weight" + CTL, "m" * 100: "v" * BIG},
        },
        one * 8,
    ),
)
put(
    f"{T}/st/bad_dtype.safetensors",
    safetensors({"w": {"dtype": "F" + CTL + "x" * BIG, "shape": [4], "data_offsets": [0, 16]}}, one * 4),
)

# torch.save zips (TransformerEngine DumpTensors files).
te_dir = f"{REPO}/data/te/dumps/tensor_dumps/rank_0"
good_pt = open(f"{te_dir}/layers_0_fc1_activation_iter_000010.pt", "rb").read()
cuts("pt", ".pt", good_pt, [4, 30, 200, len(good_pt) // 2, len(good_pt) - 22, len(good_pt) - 1])
put(f"{T}/pt/bad_zipsig.pt", b"PK\x03\x04" + rng.integers(0, 256, 2048, dtype=np.uint8).tobytes())
# End-of-central-directory record claiming 65535 entries at a huge offset.
put(f"{T}/pt/bad_eocd.pt", b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 65535, 65535, 0xFFFFFFF0, 0xFFFFFFF0, 0))
# A zip with a data.pkl of garbage and a huge declared size (through Python's zipfile).
import zipfile  # noqa: E402

with zipfile.ZipFile(f"{T}/pt/bad_pickle.pt", "w", zipfile.ZIP_STORED) as z:
    z.writestr("archive/data.pkl", b"\x80\x02" + b"(" * 100000 + b".")
    z.writestr("archive/data/0", b"\x00" * 16)
for n in ("ctl" + CTL, "n" * 200):
    shutil.copy(f"{te_dir}/layers_0_fc1_activation_iter_000010.pt", f"{T}/pt/any_name_{n}.pt")

# .npy arrays.
good_npy = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", one * 4)
cuts("npy", ".npy", good_npy, [6, 9, 40, len(good_npy) - 1])
put(f"{T}/npy/bad_hugeshape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }"))
put(f"{T}/npy/bad_hugelen.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{")
put(
    f"{T}/npy/bad_deep.npy",
    npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 20000 + "4" + ",)" * 20000 + ", }", one * 4),
)
put(f"{T}/npy/bad_nanshape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (nan,), }", one * 4))
put(f"{T}/npy/bad_negshape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", one * 4))
# A 10 MB dtype string with control characters: a version 2.0 header (4-byte length) holds it.
descr = ("{'descr': '<f4" + CTL + "x" * BIG + "', 'fortran_order': False, 'shape': (4,), }").encode()
descr += b" " * ((64 - (12 + len(descr) + 1) % 64) % 64) + b"\n"
put(f"{T}/npy/bad_descr.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", len(descr)) + descr + one * 4)
put(f"{T}/npy/bad_object.npy", npy("{'descr': '|O', 'fortran_order': False, 'shape': (4,), }", b"\0" * 32))
put(f"{T}/npy/bad_empty_array.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }"))
np.save(f"{T}/npy/any_nan.npy", np.array([np.nan, np.inf, -np.inf, 1] * 16, np.float32))

# Raw arrays (validate --dtype f32).
put(f"{T}/bin/bad_empty.bin", b"")
put(f"{T}/bin/bad_odd.bin", b"\0" * 7)
put(f"{T}/bin/any_nan.bin", np.array([np.nan, np.inf, -np.inf, 1] * 16, np.float32).tobytes())

# Recipe files (JSON, at most 1 MiB).
put(f"{T}/recipe/bad_empty.json", "")
put(f"{T}/recipe/bad_garbage.json", rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
put(f"{T}/recipe/bad_cut.json", '{"name": "x", "rule": "delayed", "history": ')
put(f"{T}/recipe/bad_deep.json", "[" * 100000 + "]" * 100000)
put(f"{T}/recipe/bad_deepobj.json", '{"a":' * 50000 + "1" + "}" * 50000)
put(f"{T}/recipe/bad_nan.json", '{"name": "x", "margin": NaN, "history": Infinity}')
put(f"{T}/recipe/bad_huge.json", '{"name": "x", "margin": 1e999, "history": 99999999999999999999999}')
put(f"{T}/recipe/bad_ctl.json", json.dumps({"name": "ctl" + CTL, "rule": "r" + CTL + "x" * 60000}))
put(f"{T}/recipe/bad_big.json", json.dumps({"name": "x" * BIG}))
put(f"{T}/recipe/bad_array.json", "[1, 2, 3]")
# A parse error whose token is 900 kB (nlohmann's message quotes the token it last read).
put(f"{T}/recipe/bad_token.json", '{"name": "' + "a" * 900000 + '\\q"}')

# amax traces (CSV).
put(f"{T}/csv/bad_empty.csv", "")
put(f"{T}/csv/bad_header.csv", "step,tensor,amax\n")
put(f"{T}/csv/bad_cut.csv", "step,tensor,amax\n0,a,1.5\n1,a,")
put(f"{T}/csv/bad_garbage.csv", rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
put(f"{T}/csv/bad_nanstep.csv", "step,tensor,amax\nnan,a,1\n")
put(f"{T}/csv/bad_infstep.csv", "step,tensor,amax\ninf,a,1\n")
put(f"{T}/csv/bad_hugestep.csv", "step,tensor,amax\n99999999999999999999999,a,1\n")
put(f"{T}/csv/bad_negamax.csv", "step,tensor,amax\n0,a,-1\n")
put(f"{T}/csv/bad_longline.csv", "step,tensor,amax\n0," + "a" * BIG + ",1\n")
put(f"{T}/csv/bad_nul.csv", "step,tensor,amax\n0,a\0b,1\n1,a,\0\n")
put(f"{T}/csv/any_order.csv", "step,tensor,amax\n5,a,1\n3,a,1\n")
put(f"{T}/csv/any_nan.csv", "step,tensor,amax\n0,a,nan\n1,a,inf\n2,a,1e999\n3,a,2\n")
put(
    f"{T}/csv/any_layer.csv",
    "step,tensor,amax\n0,model.layers.99999999999999999999999.mlp.fc1.weight,1\n"
    "1,model.layers.99999999999999999999999.mlp.fc1.weight,2\n0,ln_" + "n" * 100000 + ".weight,1\n",
)
put(f"{T}/csv/any_ctl.csv", f"step,tensor,amax\n0,ctl{CTL},1\n1,ctl{CTL},2\n")

# nvidia-dlfw-inspect logs and TransformerEngine statistics folders.
good_log = open(f"{REPO}/data/example/dlfw_inspect.log", "rb").read()[:20000]
put(f"{T}/log/bad_empty.log", "")
put(f"{T}/log/bad_garbage.log", rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
put(f"{T}/log/bad_nanit.log", "2026-11-22 00:00:00,000 - INFO - a_gradient_cur_amax \t iteration=nan \t value=1\n")
put(
    f"{T}/log/bad_hugeit.log",
    "2026-11-22 00:00:00,000 - INFO - a_gradient_cur_amax \t iteration=999999999999999999999999 \t value=1\n",
)
put(f"{T}/log/bad_longline.log", "2026-11-22 00:00:00,000 - INFO - " + "a" * BIG + "\n")
put(f"{T}/log/any_cut.log", good_log[: good_log.rfind(b"value=") + 8])
put(
    f"{T}/log/any_ctl.log",
    f"2026-11-22 00:00:00,000 - INFO - ctl{CTL}_gradient_cur_amax \t iteration=000001 \t value=1\n",
)


def stats_dir(name, text):
    d = f"{T}/stats/{name}/nvdlfw_inspect_statistics_logs"
    put(f"{d}/nvdlfw_inspect_globalrank-0.log", text)


line = "2026-11-29 01:00:00,000 - INFO - {} \t\t\t\t iteration={} \t\t\t\t value={}\n"
os.makedirs(f"{T}/stats/bad_nologs/nvdlfw_inspect_statistics_logs")
stats_dir("bad_garbage", rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
stats_dir("bad_empty", "")
stats_dir("bad_nanit", line.format("fc1_activation_max", "nan", "1.0"))
stats_dir("bad_longline", line.format("fc1_activation_max" + "a" * BIG, "000001", "1.0"))
stats_dir(
    "any_nan", line.format("fc1_activation_max", "000001", "nan") + line.format("fc1_activation_max", "000002", "inf")
)
stats_dir("any_ctl", line.format("fc1" + CTL + "_activation_max", "000001", "1.0"))

# TransformerEngine tensor_dumps folders.
for name, entry in (("bad_garbage", "garbage"), ("bad_empty", "empty"), ("bad_cut", "cut")):
    r = f"{T}/te/{name}/tensor_dumps/rank_0"
    os.makedirs(r)
    data = {
        "garbage": rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(),
        "empty": b"",
        "cut": good_pt[: len(good_pt) // 2],
    }[entry]
    put(f"{r}/layers_0_fc1_activation_iter_000001.pt", data)
r = f"{T}/te/bad_loop/tensor_dumps/rank_0"
os.makedirs(r)
os.symlink("loop_b.pt", f"{r}/loop_a.pt")
os.symlink("loop_a.pt", f"{r}/loop_b.pt")
r = f"{T}/te/bad_dirpt/tensor_dumps/rank_0"
os.makedirs(f"{r}/layers_0_fc1_activation_iter_000001.pt")
r = f"{T}/te/bad_fifo/tensor_dumps/rank_0"
os.makedirs(r)
os.mkfifo(f"{r}/layers_0_fc1_activation_iter_000001.pt")  # no writer: opening it would block
os.makedirs(f"{T}/stats/bad_fifo/nvdlfw_inspect_statistics_logs")
os.mkfifo(f"{T}/stats/bad_fifo/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log")
r = f"{T}/te/bad_rankloop/tensor_dumps"
os.makedirs(r)
os.symlink(".", f"{r}/rank_0")  # a rank folder that is its own parent

# Checkpoint folders: config.json, the index, the shards.
ck = f"{REPO}/data/checkpoints/ct_fp8"
cfg = open(f"{ck}/config.json").read()
shard = open(f"{ck}/model.safetensors", "rb").read()


def ckpt(name, config=cfg, files=None, index=None):
    d = f"{T}/ckpt/{name}"
    os.makedirs(d)
    if config is not None:
        put(f"{d}/config.json", config)
    for k, v in (files if files is not None else {"model.safetensors": shard}).items():
        put(f"{d}/{k}", v)
    if index is not None:
        put(f"{d}/model.safetensors.index.json", index)
    return d


ckpt("bad_noconfig", config=None)
ckpt("bad_cfg_empty", config="")
ckpt("bad_cfg_garbage", config=rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
ckpt("bad_cfg_deep", config="[" * 100000 + "]" * 100000)
ckpt("bad_cfg_nan", config=cfg.replace('"num_attention_heads": 4', '"num_attention_heads": NaN'))
ckpt("bad_cfg_huge", config=cfg.replace('"num_attention_heads": 4', '"num_attention_heads": 1e999'))
ckpt("bad_cfg_big", config=json.dumps({"x": "y" * BIG}))
ckpt("bad_cfg_token", config='{"x": "' + "y" * BIG + '\\q"}')
ckpt("any_cfg_ctl", config=json.loads(json.dumps(cfg)).replace('"llama"', json.dumps("ctl" + CTL)))
# compressed-tensors "re:" ignore patterns that backtrack exponentially (nested repetition) or
# polynomially (eight unbounded repeats), and one with a lookbehind ERE cannot say.
redos = json.loads(cfg)
redos["quantization_config"]["ignore"] += ["re:(.*.*)*zq", "re:.*.*.*.*.*.*.*.*zq", "re:(?<=x)y"]
ckpt("any_cfg_redos", config=json.dumps(redos))
# Fields of the right name and the wrong value: a weight block of 0 x 128 (compressed-tensors
# block_structure, DeepSeek weight_block_size), a quant_method that is a number, a strategy that is
# an array.
blk = json.loads(cfg)
blk["quantization_config"]["config_groups"]["group_0"]["weights"].update(strategy="block", block_structure=[0, 128])
ckpt("bad_cfg_block0", config=json.dumps(blk))
ds = json.loads(cfg)
ds["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 0]}
ckpt("bad_cfg_dsblock0", config=json.dumps(ds))
typ = json.loads(cfg)
typ["quantization_config"]["quant_method"] = 5
ckpt("bad_cfg_type", config=json.dumps(typ))
typ = json.loads(cfg)
typ["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"] = ["tensor"]
ckpt("bad_cfg_strategy", config=json.dumps(typ))
ckpt("bad_noshard", files={})
ckpt("bad_shard_cut", files={"model.safetensors": shard[: len(shard) // 2]})
ckpt("bad_shard_empty", files={"model.safetensors": b""})
ckpt("bad_shard_garbage", files={"model.safetensors": rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()})
d = ckpt("bad_shard_dir", files={})
os.makedirs(f"{d}/model.safetensors")
d = ckpt("bad_shard_loop", files={})
os.symlink("model.safetensors", f"{d}/model.safetensors")
ckpt("bad_idx_escape", index=json.dumps({"weight_map": {"lm_head.weight": "../../../../../../etc/passwd"}}))
ckpt("bad_idx_abs", index=json.dumps({"weight_map": {"lm_head.weight": "/etc/passwd"}}))
ckpt("bad_idx_missing", index=json.dumps({"weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"}}))
ckpt("bad_idx_garbage", index='{"weight_map": ')
ckpt("bad_idx_type", index=json.dumps({"weight_map": [1, 2]}))
ckpt("bad_idx_ctl", index=json.dumps({"weight_map": {"lm_head.weight": "ctl" + CTL + ".safetensors"}}))
ckpt("bad_idx_deep", index='{"weight_map":' + "[" * 100000 + "]" * 100000 + "}")
d = ckpt("bad_shard_fifo", files={})
os.mkfifo(f"{d}/model.safetensors")
# Shards whose tensor names are long (100 kB: pattern matching on names must not recurse per byte)
# or hold control characters, beside the checkpoint's own tensors.
hl = struct.unpack("<Q", shard[:8])[0]
head = json.loads(shard[8 : 8 + hl])
data = shard[8 + hl :]
for name, extra in (
    ("any_longname", "model.layers.0.mlp.experts.0." + "x" * 100000 + ".weight"),
    ("any_ctlname", "model.layers.0.ctl" + CTL + ".weight"),
):
    h = dict(head)
    h[extra] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
    ckpt(name, files={"model.safetensors": safetensors(h, data + one)})
