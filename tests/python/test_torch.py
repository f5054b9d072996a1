"""fp8kit.torch: fake quantisation (straight-through) and the monitor. CPU tests need torch
(not in requirements.txt: CI skips them with the reason); the GPU tests also need a GPU and the
module built with the CUDA kernels, and check that CUDA tensors give the CPU's bits."""

import csv
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (not part of CI's requirements.txt)")
import fp8kit  # noqa: E402
import fp8kit.torch as ft  # noqa: E402

ok, why = fp8kit._fp8kit.cuda_available()
gpu = pytest.mark.skipif(
    not (ok and torch.cuda.is_available()), reason=f"GPU test: {why or 'torch sees no CUDA device'}"
)


def bits(t):
    t = t.detach().cpu()
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]).numpy()


def inputs(dtype, shape=(64, 256), seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.logspace(-4, 3, shape[-1])
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fake_quantize_equals_torch_cast(dtype):
    # Independent reference: torch's own casts to float8_e4m3fn / float8_e5m2 (nearest-even). Inputs
    # stay inside E4M3's range: torch's overflow behaviour changed between versions (2.15 saturates
    # E4M3, Inf included), the in-range rounding did not.
    x = inputs(dtype).clamp(-440, 440)
    y = ft.fake_quantize(x, format="e4m3", profile="torch")
    ref = x.float().to(torch.float8_e4m3fn).float().to(dtype)
    np.testing.assert_array_equal(bits(y), bits(ref))
    y5 = ft.fake_quantize(x, format="e5m2", profile="torch")
    np.testing.assert_array_equal(bits(y5), bits(x.float().to(torch.float8_e5m2).float().to(dtype)))


def test_fake_quantize_equals_ml_dtypes():
    # Whole range, overflow and NaN included: ml_dtypes' cast (profile ml_dtypes).
    import ml_dtypes

    x = inputs(torch.float32) * 3
    x[0, :3] = torch.tensor([float("nan"), float("inf"), -1e6])
    y = ft.fake_quantize(x, format="e4m3", profile="ml_dtypes")
    ref = x.numpy().astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    np.testing.assert_array_equal(bits(y), ref.view(np.int32))


def test_fake_quantize_recipe_scale_and_gradient():
    x = inputs(torch.float32).requires_grad_()
    y = ft.fake_quantize(x, recipe="te-current")
    amax = x.detach().abs().max()
    scale, scale_inv = fp8kit.recipe_scale("te-current", "input", float(amax))
    ref = (x.detach() * torch.tensor(scale)).to(torch.float8_e4m3fn).float() * torch.tensor(scale_inv)
    np.testing.assert_array_equal(bits(y), bits(ref))  # te-current saturates; |x*scale| <= 448 here
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(x.shape, 3, np.float32))  # straight through


def test_fake_quantize_stochastic_and_module():
    x = torch.full((4096,), 1.0 + 2.0**-4)  # halfway between E4M3's 1 and 1.125: SR picks both
    m = ft.FakeQuantize(format="e4m3", rounding="stochastic", overflow="saturate-all", nan="canonical", seed=11)
    a, b = m(x), m(x)
    assert set(a.unique().tolist()) == {1.0, 1.125} and not torch.equal(a, b)
    again = ft.FakeQuantize(format="e4m3", rounding="stochastic", overflow="saturate-all", nan="canonical", seed=11)
    assert torch.equal(again(x), a)  # same seed, same bits
    assert 0.4 < (a == 1.125).float().mean() < 0.6


def test_fake_quantize_mx_blocks_cpu():
    x = inputs(torch.float32, (8, 96))
    y = ft.fake_quantize(x, recipe="mxfp8")
    d = fp8kit.quantize_blocks(x.numpy(), "mxfp8")
    # per block of 32: the E8M0 scale is a power of two, so y / 2^e are E4M3 values
    e = torch.from_numpy(d["scale_inv"]).repeat_interleave(32, 1)
    q = y / e
    np.testing.assert_array_equal(q.to(torch.float8_e4m3fn).float().numpy(), q.numpy())
    assert torch.all((y - x).abs() <= x.abs() * 2**-3 + e * 2**-9)


def test_errors():
    with pytest.raises(ValueError, match="format"):
        ft.fake_quantize(torch.ones(4))
    with pytest.raises(ValueError):
        ft.fake_quantize(torch.ones(4), format="e9m9")


def tiny_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))


def run_steps(model, mon, steps, device="cpu"):
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(8, 32, generator=g).to(device)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        mon.step()


def test_monitor_cpu_files(tmp_path):
    model = tiny_model()
    with ft.monitor(
        model, recipes=["te-current", "torchao-tensorwise", "mxfp8"], every=2, out_dir=str(tmp_path)
    ) as mon:
        run_steps(model, mon, 5)
    rows = list(csv.DictReader(open(tmp_path / "stats.csv")))
    steps = sorted({int(r["step"]) for r in rows})
    assert steps == [0, 2, 4]
    names = {r["tensor"] for r in rows}
    assert names == {f"{i}.{t}" for i in ("0", "2") for t in ("input", "weight", "grad_output", "wgrad")}
    assert len(rows) == 3 * 8 * 3
    js = json.load(open(tmp_path / "stats.json"))
    assert [(r["step"], r["tensor"], r["recipe"]) for r in js] == [
        (r["step"], r["tensor"], r["recipe"]) for r in mon.rows
    ]
    tr = fp8kit.read_trace(str(tmp_path / "amax_trace.csv"))
    assert len(tr) == 8  # one series per tensor
    for r in rows:
        assert int(r["numel"]) > 0 and float(r["amax"]) > 0


def test_monitor_streams_rows_with_flat_memory(tmp_path):
    """keep_rows=False: each step's rows go to out_dir's files as they are made (temporaries of the
    output sink until close()), none stay in memory, and the committed files equal, byte for byte,
    those of a monitor that kept every row and wrote them at close(). A monitor dropped without
    close() leaves no file."""
    files = ("amax_trace.csv", "stats.csv", "stats.json")
    out = {}
    for keep in (True, False):
        torch.manual_seed(0)
        model = tiny_model()
        d = tmp_path / f"keep_{keep}"
        mon = ft.monitor(model, recipes=["te-current", "mxfp8"], out_dir=str(d), keep_rows=keep)
        kept = []
        for _ in range(6):
            run_steps(model, mon, 1)
            kept.append((len(mon._rows), len(mon._trace.items)))
        if not keep:
            assert kept == [(0, 0)] * 6  # written, not kept
            partial = os.listdir(d)
            assert len(partial) == 3 and all(n.endswith(".partial") for n in partial), partial
        mon.close()
        assert sorted(os.listdir(d)) == sorted(files)
        out[keep] = [(d / f).read_bytes() for f in files]
    assert out[True] == out[False]
    assert len(json.loads(out[False][2])) == 6 * 8 * 2
    torch.manual_seed(0)
    model = tiny_model()
    d = tmp_path / "dropped"
    mon = ft.monitor(model, recipes=["te-current"], out_dir=str(d), keep_rows=False, warn=True)
    run_steps(model, mon, 2)
    assert len(mon._trace.items) == 0 and len(mon._trace) == 2 * 8  # fed to the watcher, then dropped
    mon.remove()
    del mon
    import gc

    gc.collect()
    assert os.listdir(d) == []


def test_monitor_file_writer_raises_its_error_and_commits_nothing(tmp_path):
    """The streamed files are written on the monitor's writer thread: an error there (here a write
    that fails) is raised by the next hand-over and by commit(), every time, and no file is left,
    neither committed nor temporary. Without an error, the bytes arrive in order."""

    class Failing:
        def write(self, data):
            raise OSError("disk full")

    paths = [str(tmp_path / n) for n in ("a.csv", "b.csv")]
    w = ft._StreamWriter(paths)
    w.write([(0, b"1,"), (1, b"x")])
    w.write([(0, b"2")])
    w.commit()
    assert (tmp_path / "a.csv").read_bytes() == b"1,2" and (tmp_path / "b.csv").read_bytes() == b"x"
    d = tmp_path / "failing"
    d.mkdir()
    w = ft._StreamWriter([str(d / "a.csv"), str(d / "b.csv")])
    w._files[1] = Failing()
    w.write([(0, b"1"), (1, b"2")])
    w.stop()  # the thread has met the error
    assert len(os.listdir(d)) == 1  # a.csv's temporary, written
    for call in (lambda: w.write([(0, b"2")]), w.commit):
        with pytest.raises(OSError, match="disk full"):
            call()
    import gc

    gc.collect()
    assert os.listdir(d) == []


def test_monitor_close_leaves_the_model_as_before(tmp_path):
    """After close() no hook of the monitor stays: the weights' backward-hook dicts it created are
    None again (an empty dict would still be called at every backward), and a hook the user put on
    a weight before the monitor keeps running."""
    model = tiny_model()
    first, last = model[0].weight, model[2].weight
    seen = []
    user = last.register_hook(lambda g: seen.append(g.shape))
    with ft.monitor(model, recipes=["te-current"], out_dir=str(tmp_path), keep_rows=False) as mon:
        run_steps(model, mon, 2)
    assert first._backward_hooks is None
    assert len(last._backward_hooks) == 1  # the user's, untouched
    assert all(not m._forward_hooks for m in model)
    model(torch.randn(8, 32)).square().mean().backward()
    assert len(seen) == 3  # two monitored steps, one after close()
    user.remove()


def test_monitor_records_grad_norm(tmp_path):
    """step(grad_norm=) takes a number or a tensor (read one step later), keeps (step, norm) and
    writes grad_norm.csv; the watcher gets the norms for its run-level verdict."""
    model = tiny_model()
    mon = ft.monitor(model, recipes=["te-current"], out_dir=str(tmp_path), warn=True)
    norms = [5.0, torch.tensor(4.0), 3.5]
    for n in norms:
        run_steps(model, mon, 0)
        mon.step(grad_norm=n)
    mon.close()
    assert mon.grad_norms == [(0, 5.0), (1, 4.0), (2, 3.5)]
    rows = list(csv.DictReader(open(tmp_path / "grad_norm.csv")))
    assert [(int(r["step"]), float(r["grad_norm"])) for r in rows] == mon.grad_norms


BLOCK_KEYS = (
    "blocks",
    "scale_inv_min",
    "scale_inv_max",
    "blocks_with_range",
    "block_dynamic_range_max",
    "block_dynamic_range_mean",
)


def test_monitor_cpu_rows_carry_per_block_fields(tmp_path):
    """CPU tensors: block recipes' rows carry lib's per-block fields (BlockStats: blocks,
    scale_inv_min/max, blocks_with_range, block_dynamic_range_max, block_dynamic_range_mean) equal to fp8kit.stats(host copy,
    recipe=...)'s; tensorwise rows leave them None, blank in stats.csv, so that one table holds
    both (pandas reads it as one frame when installed)."""
    recipes = ["te-current", "te-block", "mxfp8", "nvfp4"]
    mon = ft.Monitor(torch.nn.Identity(), recipes=recipes, out_dir=str(tmp_path))
    g = torch.Generator().manual_seed(5)
    xs = {
        "a": (torch.randn(48, 300, generator=g) * torch.logspace(-3, 3, 300)).to(torch.bfloat16),
        "w": torch.randn(32, 160, generator=g) * 1e-2,
    }
    xs["w"][0, :16] = 0.0  # a block without range
    xs["w"][1, 3] = float("nan")
    roles = {"a": "input", "w": "weight"}
    for n, x in xs.items():
        mon.watch(n, x, roles[n])
    mon.close()
    rows = mon.rows
    assert len(rows) == len(xs) * len(recipes)
    for row in rows:
        x = xs[row["tensor"]]
        if row["recipe"] == "te-current":
            assert all(row[k] is None for k in BLOCK_KEYS)
            continue
        want = fp8kit.stats(x, recipe=row["recipe"], role=row["role"])
        for k in BLOCK_KEYS:
            assert row[k] == want[k], (row["tensor"], row["recipe"], k)
        assert row["blocks"] > 1 and row["scale_inv_max"] > 0 and row["blocks_with_range"] > 0
    table = list(csv.DictReader(open(tmp_path / "stats.csv")))
    assert len(table) == len(rows)
    for row, line in zip(rows, table):
        for k in BLOCK_KEYS:
            assert (line[k] == "") == (row[k] is None)
            if row[k] is not None:
                assert float(line[k]) == pytest.approx(row[k], rel=1e-15)
    js = json.load(open(tmp_path / "stats.json"))
    assert [[r[k] for k in BLOCK_KEYS] for r in js] == [[r[k] for k in BLOCK_KEYS] for r in rows]
    try:
        import pandas
    except ImportError:
        return
    df = pandas.read_csv(tmp_path / "stats.csv")
    assert df["blocks"].isna().sum() == len(xs)  # the te-current rows


def test_monitor_amax_is_torch_amax(tmp_path):
    model = tiny_model()
    seen = {}

    def hook(m, i, o):
        seen.setdefault("in", i[0].detach().abs().max().item())

    model[0].register_forward_hook(hook)
    mon = ft.Monitor(model, recipes=["te-current"], tensors=["input"])
    run_steps(model, mon, 1)
    mon.watch("extra", torch.tensor([1.0, -7.5, 2.0]), "grad")
    mon.close()
    assert mon.trace[0] == (0, "0.input", np.float32(seen["in"]))
    assert mon.trace[-1] == (1, "extra", 7.5)
    with pytest.raises(ValueError, match="out_dir"):
        mon.write()


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "kw",
    [
        dict(format="e4m3", profile="cuda-satfinite"),
        dict(format="e5m2", profile="torch"),
        dict(format="e4m3", profile="ml_dtypes", scale=3.0),
        dict(format="e4m3", rounding="stochastic", overflow="saturate-all", nan="canonical", seed=5),
        dict(recipe="te-current"),
        dict(recipe="te-current", role="grad"),
        dict(recipe="mxfp8"),
        dict(recipe="mx-ocp"),
        dict(recipe="te-block"),
        dict(recipe="te-block", role="weight"),
        # NVFP4 and MX FP4 / FP6 through the one-call kernel (cuda::fake_quantize_blocks)
        dict(recipe="nvfp4"),
        dict(recipe="nvfp4", role="weight"),
        dict(recipe="nvfp4", role="grad", seed=7),
        dict(recipe="nvfp4-torchao"),
        dict(recipe="mxfp4"),
        dict(recipe="mxfp4-ocp", role="weight"),
        dict(recipe="mxfp6-e3m2", role="grad"),
        dict(recipe="mxfp6-e2m3-ocp"),
        dict(recipe="mxfp4-torchao-floor"),  # torchao's modes: a NaN block's amax is NaN
        dict(recipe="nvfp4-torchao-single"),
    ],
)
def test_fake_quantize_gpu_equals_cpu(dtype, kw):
    x = inputs(dtype, (256, 384), seed=2)
    x[3, 5] = float("nan")
    x[4, 7] = float("inf") if "recipe" not in kw else 0.0
    y_cpu = ft.fake_quantize(x, **kw)
    y_gpu = ft.fake_quantize(x.cuda(), **kw)
    assert y_gpu.is_cuda and y_gpu.dtype == dtype
    np.testing.assert_array_equal(bits(y_gpu), bits(y_cpu))


@gpu
@pytest.mark.parametrize("recipe", ["nvfp4", "nvfp4-torchao", "mxfp4", "mx-ocp"])
@pytest.mark.parametrize("shape", [(37, 70), (5, 3, 48), (1, 16)])
def test_fake_quantize_gpu_equals_cpu_edge_blocks(recipe, shape):
    # Partial blocks at the row ends, a 3-D tensor (its last dimension is the row), one block.
    x = inputs(torch.bfloat16, shape, seed=4)
    y_gpu = ft.fake_quantize(x.cuda(), recipe=recipe, role="weight")
    np.testing.assert_array_equal(bits(y_gpu), bits(ft.fake_quantize(x, recipe=recipe, role="weight")))


@gpu
def test_monitor_gpu_equals_cpu(tmp_path):
    cpu_model = tiny_model()
    gpu_model = tiny_model().cuda()
    recipes = ["te-current", "torchao-tensorwise", "te-delayed"]
    mc = ft.Monitor(cpu_model, recipes=recipes)
    mg = ft.Monitor(gpu_model, recipes=recipes)
    run_steps(cpu_model, mc, 2)
    run_steps(gpu_model, mg, 2, device="cuda")
    assert len(mc.rows) == len(mg.rows) > 0
    for a, b in zip(mc.rows, mg.rows):
        assert (a["step"], a["tensor"], a["recipe"]) == (b["step"], b["tensor"], b["recipe"])
        assert a["numel"] == b["numel"]
        # The models' float math differs between CPU and GPU (GEMM order), so values differ; the
        # statistics of the same tensor must be exact: checked on the GPU tensors themselves below.
    x = torch.randn(1000, 300, device="cuda") * 50
    mg.watch("probe", x, "input")
    mc.watch("probe", x.cpu(), "input")
    for a, b in zip(mc.rows[-3:], mg.rows[-3:]):
        for k in ("numel", "amax", "min_nonzero", "zeros", "underflow", "subnormal", "overflow"):
            assert a[k] == b[k], k
        assert a["mse"] == pytest.approx(b["mse"], rel=1e-9)  # binary64 sums, order differs


def _rank_main(rank, store, out_dir, result_dir):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        model = torch.nn.Linear(16, 4)
        mon = ft.Monitor(model, recipes=["te-current"], tensors=["input"], reduce_amax=True, out_dir=out_dir)
        model(torch.full((2, 16), 1.0 + 10.0 * rank))  # rank 0: amax 1, rank 1: amax 11
        mon.close()
        with open(os.path.join(result_dir, f"{rank}.json"), "w") as f:
            json.dump([mon.trace, mon.out_dir], f)
    finally:
        dist.destroy_process_group()


def test_monitor_reduces_amax_over_ranks(tmp_path):
    import torch.multiprocessing as mp

    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available in this torch build")
    out, res = tmp_path / "out", tmp_path / "res"
    res.mkdir()
    mp.spawn(_rank_main, args=(str(tmp_path / "store"), str(out), str(res)), nprocs=2, join=True)
    for rank in (0, 1):
        trace, out_dir = json.load(open(res / f"{rank}.json"))
        assert trace == [[0, "input", 11.0]]  # MAX over the group, as TE's reduce_amax
        assert out_dir == str(out / f"rank_{rank}")
        assert (out / f"rank_{rank}" / "amax_trace.csv").exists()


def test_monitor_dump_is_read_by_fp8kit(tmp_path):
    model = tiny_model().to(torch.bfloat16)
    mon = ft.Monitor(
        model, recipes=["te-current"], out_dir=str(tmp_path), dump_steps=[1], dump_include=["0.*", "2.weight"]
    )
    seen = {}
    model[0].register_forward_hook(
        lambda m, i, o: seen.__setitem__("x", i[0].detach().clone()) if mon.step_index == 1 else None
    )
    for _ in range(3):
        model.zero_grad()
        model(torch.randn(8, 32).to(torch.bfloat16)).float().square().mean().backward()
        mon.step()
    mon.close()
    got = {info["name"]: (info, a) for info, a in fp8kit.read_dump(str(tmp_path / "dump.h5"))}
    assert sorted(got) == sorted(
        f"step_000001/{n}" for n in ("0.input", "0.weight", "0.grad_output", "0.wgrad", "2.weight")
    )
    info, a = got["step_000001/0.input"]
    assert info["step"] == 1 and info["role"] == "activation" and info["dtype"] == "bf16"
    np.testing.assert_array_equal(np.asarray(a).view(np.uint16), bits(seen["x"]).view(np.uint16))
    assert got["step_000001/0.wgrad"][0]["role"] == "gradient"
    assert got["step_000001/2.weight"][0]["role"] == "weight"


def test_monitor_attention_qkv_after_rotary():
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as registry

    cfg = transformers.LlamaConfig(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        num_hidden_layers=2,
        vocab_size=97,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    model.config._attn_implementation = "eager"
    with pytest.raises(ValueError, match="eager"):
        ft.Monitor(model, tensors=[], attention=True)
    model.config._attn_implementation = "sdpa"
    qproj = []
    model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda m, i, o: qproj.append(o.abs().max().item()))
    mon = ft.Monitor(model, recipes=["te-current"], tensors=[], attention=True)
    # Reference: what the attention kernel itself receives, recorded by a wrapper around the
    # monitor's one (same run, so the same tensors).
    seen, inner = [], registry["sdpa"]

    def record(module, q, k, v, *a, **kw):
        seen.append((q.abs().max().item(), k.abs().max().item(), v.abs().max().item(), k.shape))
        return inner(module, q, k, v, *a, **kw)

    registry["sdpa"] = record
    try:
        with torch.no_grad():
            model(input_ids=torch.randint(0, 97, (2, 12)))
    finally:
        registry["sdpa"] = inner
    mon.close()
    got = {name: a for _, name, a in mon.trace}
    assert sorted(got) == sorted(f"model.layers.{i}.self_attn.{t}" for i in range(2) for t in "qkv")
    assert len(seen) == 2
    for i, (q, k, v, kshape) in enumerate(seen):
        assert kshape[1] == 2  # K as the KV cache holds it: 2 KV heads, before GQA's repeat
        assert [got[f"model.layers.{i}.self_attn.{t}"] for t in "qkv"] == [q, k, v]
    assert got["model.layers.0.self_attn.q"] != qproj[0]  # after the rotary embedding, not q_proj's output
    assert "capture" not in registry["sdpa"].__name__  # the wrapper is removed on close


def _sample_mask(n, k):
    """Elements kept by sample=k, written from its definition (docs/torch.md): those in blocks of
    16 consecutive elements whose block index is a multiple of k."""
    return (np.arange(n) // 16) % k == 0


def test_monitor_sample_cpu(tmp_path):
    x = inputs(torch.float32, (37, 53), seed=4)  # 1961 elements: a partial last block
    mon = ft.Monitor(torch.nn.Identity(), recipes=["te-current", "torchao-tensorwise"], sample=3)
    mon.watch("t", x, "input")
    mon.close()
    kept = x.reshape(-1).numpy()[_sample_mask(x.numel(), 3)]
    for row, name in zip(mon.rows, ["te-current", "torchao-tensorwise"]):
        scale, scale_inv = fp8kit.recipe_scale(name, "input", float(np.abs(x.numpy()).max()))
        want = fp8kit.stats(
            kept,
            "e4m3",
            rounding="nearest-even",
            overflow="saturate-all",
            nan="canonical",
            scale=scale,
            scale_inv=scale_inv,
        )
        assert row["sample"] == 3 and row["numel"] == kept.size == want["numel"]
        for k in ("amax", "min_nonzero", "zeros", "underflow", "subnormal", "overflow", "te_overflow", "mse"):
            assert row[k] == want[k], k
    with pytest.raises(ValueError, match="sample"):
        ft.Monitor(torch.nn.Identity(), sample=0)


@gpu
@pytest.mark.parametrize("sample", [1, 5])
def test_monitor_gpu_queued_equals_stats(sample):
    """The monitor's queued GPU statistics (scale from the device amax, record read at the next
    step) against fp8kit.stats: the synchronous GPU kernel with recipe_scale's host scale (the
    same kernel: everything bit for bit) and, for sample > 1, the CPU on the kept elements."""
    recipes = ["te-current", "torchao-tensorwise", "msamp"]
    assert fp8kit._fp8kit.cuda_stats_columns == ft._STAT_KEYS  # the binding's row tuples
    mon = ft.Monitor(torch.nn.Identity(), recipes=recipes, sample=sample)
    xs = {
        "a": (torch.randn(1000, 301, device="cuda") * 30).to(torch.bfloat16),
        "g": torch.randn(4099, device="cuda") * 1e-3,
    }
    xs["a"][5, 7] = float("nan")
    mon.watch("a", xs["a"], "input")
    mon.watch("g", xs["g"], "grad")
    assert mon._queues and not mon._pending  # queued, nothing read yet
    mon.step()
    assert mon._pending and not mon._queues  # copied out, read at the next step or on access
    rows = mon.rows
    assert len(rows) == 6 and not mon._pending
    for row in rows:
        x, role = xs[row["tensor"]], row["role"]
        amax = float(x.float().abs().nan_to_num(0).max())
        assert dict((n, a) for _, n, a in mon.trace)[row["tensor"]] == amax
        r = fp8kit.recipe(row["recipe"])
        scale, scale_inv = fp8kit.recipe_scale(row["recipe"], role, amax)
        pol = r["policy"]
        kw = dict(rounding=pol["rounding"], overflow=pol["overflow"], nan=pol["nan"], scale=scale, scale_inv=scale_inv)
        if sample == 1:
            want = fp8kit.stats(x, row["format"], **kw)
            keys = (
                "numel",
                "amax",
                "min_nonzero",
                "zeros",
                "nan",
                "underflow",
                "subnormal",
                "overflow",
                "te_underflow",
                "te_overflow",
            )
            # The sums: the same kernel, but torchao's record may be te-current's (one pass when
            # their scales agree: statistics_async_multi), whose launch may split the work
            # differently: the documented order tolerance.
            assert row["mse"] == pytest.approx(want["mse"], rel=1e-9)
            assert row["sqnr_db"] == pytest.approx(want["sqnr_db"], rel=1e-9)
        else:
            kept = x.cpu().reshape(-1)[torch.from_numpy(_sample_mask(x.numel(), sample))]
            want = fp8kit.stats(kept, row["format"], **kw)
            keys = (
                "numel",
                "amax",
                "min_nonzero",
                "zeros",
                "nan",
                "underflow",
                "subnormal",
                "overflow",
                "te_underflow",
                "te_overflow",
            )
            assert row["mse"] == pytest.approx(want["mse"], rel=1e-9)  # binary64 sums, order differs
        assert row["sample"] == sample
        for k in keys:
            assert row[k] == want[k] or (row[k] != row[k] and want[k] != want[k]), (row["recipe"], k)


@gpu
def test_monitor_gpu_one_call_per_tensor_equals_per_recipe():
    """The monitor's hot path (one cuda_watch per tensor: amax and every recipe's statistics,
    recipes with the same cast computed once when their scales agree) against the per-recipe
    path (cuda_amax, then cuda_stats_async with one plan at a time): every column equal, the
    binary64 sums (mse, sqnr_db) to the documented 1e-9. Tensors where TE's and torchao's scales
    agree, where they do not (amax below torchao's epsilon 1e-12), NaN inputs, and
    more tensors than one page of records holds (a tensor's records never straddle pages)."""
    from fp8kit import _fp8kit

    recipes = ["te-current", "torchao-tensorwise", "msamp", "te-delayed"]
    mon = ft.Monitor(torch.nn.Identity(), recipes=recipes)
    g = torch.Generator(device="cuda").manual_seed(3)
    xs = []
    for i in range(100):
        dtype = (torch.bfloat16, torch.float32, torch.float16)[i % 3]
        x = torch.randn(1 + 997 * (i % 7), generator=g, device="cuda") * 10.0 ** (i % 9 - 4)
        if i % 10 == 3:
            x = x * 1e-15  # amax below torchao's epsilon: its scale differs from TE's
        if i % 10 == 5:
            x[0] = float("nan")
        xs.append((f"t{i}", x.to(dtype), ("input", "weight", "grad")[i % 3]))
    for name, x, role in xs:
        mon.watch(name, x, role)
    rows = mon.rows
    assert len(rows) == 4 * len(xs)
    stream = torch.cuda.current_stream().cuda_stream
    size = _fp8kit.cuda_stats_record_bytes
    ws = torch.empty(_fp8kit.cuda_stats_workspace_bytes(), dtype=torch.uint8, device="cuda")
    amax = torch.empty(1, dtype=torch.float32, device="cuda")
    for i, (name, x, role) in enumerate(xs):
        wide = fp8kit._device.TORCH_DTYPE_WIDE[str(x.dtype)]
        _fp8kit.cuda_amax(x.data_ptr(), wide, x.numel(), amax.data_ptr(), stream)
        for j, rname in enumerate(recipes):
            row = rows[4 * i + j]
            assert (row["tensor"], row["recipe"]) == (name, rname)
            r = fp8kit.recipe(rname)
            spec, pol = r["roles"][role], r["policy"]
            plan = _fp8kit.cuda_stats_plan(
                rname, False, role, wide, spec["format"], pol["rounding"], pol["overflow"], pol["nan"]
            )
            rec = torch.zeros(size, dtype=torch.uint8, device="cuda")
            _fp8kit.cuda_stats_async(
                [plan], x.data_ptr(), x.numel(), amax.data_ptr(), [rec.data_ptr()], ws.data_ptr(), 1, 0, stream
            )
            host = rec.cpu()
            want = dict(zip(ft._STAT_KEYS, _fp8kit.cuda_stats_rows(host.data_ptr(), 1)[0]))
            for k in ft._STAT_KEYS:
                if k in ("mse", "sqnr_db"):
                    assert row[k] == pytest.approx(want[k], rel=1e-9, nan_ok=True), (name, rname, k)
                else:
                    assert row[k] == want[k] or (row[k] != row[k] and want[k] != want[k]), (name, rname, k)


def _planted_steps(mon, steps=240, spike_at=150):
    """Feeds one extra tensor per step: log-normal noise around 1 with one 100x spike."""
    g = np.random.default_rng(27)
    for step in range(steps):
        a = float(np.exp(g.normal(0, 0.05))) * (100.0 if step == spike_at else 1.0)
        mon.watch("planted.input", torch.tensor([a, -0.5 * a]), "input")
        mon.step()


def test_monitor_raises_warnings_live():
    got = []
    mon = ft.Monitor(
        tiny_model(),
        recipes=["te-current"],
        warn={"recipe": None},
        warn_every=10,
        on_warning=lambda w: got.append((mon.step_index, w)),
    )
    _planted_steps(mon)
    mon.close()
    spikes = [(at, w) for at, w in got if w["signal"] == "spike" and w["tensor"] == "planted.input"]
    assert spikes, [w["signal"] for _, w in got]
    at, w = spikes[0]
    assert 150 <= at < 160  # polled at the first warn_every boundary after the spike
    assert mon.warnings == [w for _, w in got]
    # The same trace fed to a Watcher by hand gives the same warnings (the monitor adds nothing).
    ref = fp8kit.Watcher(recipe=None)
    for step in sorted({s for s, _, _ in mon.trace}):
        ref.observe(step, {n: a for s, n, a in mon.trace if s == step})
    assert sorted((w["signal"], w["tensor"]) for w in ref.poll()) == sorted(
        (w["signal"], w["tensor"]) for w in mon.warnings
    )


def test_monitor_warnings_default_to_python_warnings():
    mon = ft.Monitor(tiny_model(), recipes=["te-current"], warn=True, warn_every=5)
    with pytest.warns(ft.FP8Warning, match="planted.input"):
        _planted_steps(mon)
    mon.close()
    with pytest.raises(ValueError, match="warn_every"):
        ft.Monitor(tiny_model(), warn=True, warn_every=0)
    with pytest.raises(ValueError, match="warn:"):
        ft.Monitor(tiny_model(), warn="yes")


@gpu
def test_monitor_gpu_block_recipes_equal_host_block_stats():
    """Block recipes in the monitor run on the GPU (cuda_block_stats_async: lib's
    compute_block_stats totals per tile scale): every row equals fp8kit.stats(host copy,
    recipe=...) with counts, extremes and the per-block fields (lib's summarize_tiles of the
    GPU's tiles) exact and the binary64 sums (mse, sqnr_db) to the documented 1e-9; NVFP4 (its
    global amax and TE's column-wise RHT copy on the device) too. f32, bf16 and 3-D tensors (rows
    x last dimension), partial edge tiles; two steps (the tile buffers reused)."""
    recipes = ["te-block", "mxfp8", "mx-ocp", "deepseek-v3", "nvfp4", "nvfp4-rowwise"]
    mon = ft.Monitor(torch.nn.Identity(), recipes=recipes)
    group = mon._group("input", "bf16", 300)
    assert all(c[2] is not None for c in group[3])  # every block recipe on the GPU, NVFP4 included
    torch.manual_seed(3)
    # NVFP4's column-wise copy needs a row count that is a multiple of 16 (TE asserts the same).
    # "w2" before "a", of its shape and type: a weight's NVFP4 tiles (16 x 16) are fewer than an
    # input's (1 x 16 of the column-wise copy); their tile buffers must not be mixed up.
    xs = {
        "w2": (torch.randn(144, 300, device="cuda") * 3).to(torch.bfloat16),
        "a": (torch.randn(144, 300, device="cuda") * 30).to(torch.bfloat16),
        "w": torch.randn(256, 160, device="cuda") * 1e-2,
        "g": torch.randn(3, 48, 96, device="cuda") * 1e-4,
    }
    xs["a"][5, 7] = float("nan")
    xs["w"][0, 0] = float("inf")
    roles = {"w2": "weight", "a": "input", "w": "weight", "g": "grad"}
    for step in range(2):
        for n, x in xs.items():
            mon.watch(n, x * (1 + step) if step else x, roles[n])
        mon.step()
    rows = mon.rows
    assert len(rows) == 2 * len(xs) * len(recipes)
    keys = (
        "numel",
        "amax",
        "min_nonzero",
        "zeros",
        "nan",
        "inf",
        "underflow",
        "subnormal",
        "overflow",
        "te_underflow",
        "te_overflow",
        "sample",
    ) + BLOCK_KEYS
    for row in rows:
        x = xs[row["tensor"]] * (1 + row["step"]) if row["step"] else xs[row["tensor"]]
        want = fp8kit.stats(x.cpu().reshape(-1, x.shape[-1]), recipe=row["recipe"], role=row["role"])
        for k in keys:
            assert row[k] == (want[k] if k != "sample" else 1), (row["tensor"], row["recipe"], k)
        for k in ("mse", "sqnr_db"):
            if np.isfinite(want[k]):
                assert row[k] == pytest.approx(want[k], rel=1e-9), (row["tensor"], row["recipe"], k)
            else:
                assert row[k] == want[k] or (np.isnan(row[k]) and np.isnan(want[k]))
