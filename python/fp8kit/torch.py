"""fp8kit in a PyTorch run: fake quantisation with a straight-through gradient, and a monitor
that computes fp8kit's cast statistics of nn.Linear tensors under several recipes.

Every number comes from fp8kit's kernels (CUDA tensors, on torch's current stream) or its C++
reference (CPU tensors), through fp8kit.quantize / dequantize / quantize_blocks / stats; the
two give the same bits. This file only moves tensors, hooks modules and writes files.
"""
import csv
import fnmatch
import json
import os

import torch

import fp8kit
from . import _fp8kit
from ._linear import Fp8Linear, swap_linears

__all__ = ["fake_quantize", "FakeQuantize", "Fp8Linear", "swap_linears", "Monitor", "monitor"]


# ---- fake quantisation -------------------------------------------------------------------------

def _policy(r, role, profile, rounding, overflow, nan):
    if profile is not None or rounding is not None or overflow is not None or nan is not None:
        return dict(profile=profile, rounding=rounding, overflow=overflow, nan=nan)
    if r is None:
        return dict(profile="cuda-satfinite")
    return fp8kit.recipe_policy(r, role)  # the role's own rounding where the recipe has one


def _block_scale_inv(x, r, role, policy, seed):
    """codes and the per-element float32 scale_inv tensor of a block recipe (x 2-D)."""
    if policy.get("profile") is not None:
        raise ValueError("profile: block recipes take their policy from the recipe")
    if x.is_cuda:
        d = fp8kit.quantize_blocks(x, r, role, seed=seed)
        if "scale_codes" in d:  # E8M0 codes: their values are the scale_inv (exact decode)
            sinv = fp8kit.dequantize(d["scale_codes"], "e8m0", dtype=torch.float32)
        else:
            sinv = d["scale_inv"]
    else:
        d = fp8kit.quantize_blocks(x, r, role, seed=seed)
        sinv = torch.from_numpy(d["scale_inv"].astype("float32", copy=False))
    codes = torch.as_tensor(d["codes"]) if not x.is_cuda else d["codes"]
    spec = r["roles"][role]
    br, bc = spec["block_rows"], spec["block_cols"]
    full = sinv.repeat_interleave(br, 0)[: x.shape[0]].repeat_interleave(bc, 1)[:, : x.shape[1]]
    return codes, full.contiguous(), spec["format"]


def _fake_quantize_values(x, recipe, format, role, profile, rounding, overflow, nan, scale, seed):
    r = fp8kit.recipe(recipe) if recipe is not None else None
    role = _fp8kit.recipe_slot(role)
    pol = _policy(r, role, profile, rounding, overflow, nan)
    xc = x.detach().contiguous()
    if r is not None and r["roles"][role]["granularity"] != "tensor":
        # A fake cast stands for the row-wise copy the forward GEMM uses: TE's random Hadamard
        # transform belongs to the column-wise (wgrad) copy only, which is not x's values.
        r["roles"][role]["columnwise_rht"] = False
        if xc.dim() != 2:
            xc = xc.reshape(-1, xc.shape[-1])
        codes, sinv, fmt = _block_scale_inv(xc, r, role, pol, seed)
        # Decode exactly to float32, one float32 multiply by the block's scale_inv, one rounding
        # to x's dtype: dequantize's rule with a per-block factor. NaN codes take dequantize's
        # NaN bits (a multiply or a cast of a NaN gives different bits on CPU and GPU).
        vals = fp8kit.dequantize(codes, fmt, dtype=torch.float32)
        y = torch.where(vals.isnan(), fp8kit.dequantize(codes, fmt, dtype=x.dtype), (vals * sinv).to(x.dtype))
        return y.reshape(x.shape)
    fmt = format or (r["roles"][role]["format"] if r is not None else None)
    if fmt is None:
        raise ValueError("format: name a format or a recipe")
    scale_inv = 1.0
    if r is not None:
        scale, scale_inv = fp8kit.recipe_scale(r, role, fp8kit.amax(xc))
    elif scale != 1.0:
        scale_inv = 1.0 / float(torch.tensor(scale, dtype=torch.float32))
        scale_inv = float(torch.tensor(scale_inv, dtype=torch.float32))
    codes = fp8kit.quantize(xc, fmt, scale=scale, seed=seed, **pol)
    return fp8kit.dequantize(codes, fmt, dtype=x.dtype, scale_inv=scale_inv).reshape(x.shape)


class _FakeQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kw):
        return _fake_quantize_values(x, **kw)

    @staticmethod
    def backward(ctx, g):
        return g, None  # straight through


def fake_quantize(x, recipe=None, format=None, role="input", profile=None, rounding=None, overflow=None,
                  nan=None, scale=1.0, seed=0):
    """x quantised and dequantised (same dtype and shape), gradient passed straight through.

    recipe: a preset, file or dict (its format, policy and scale rule for `role`: tensorwise
    recipes scale with recipe_scale(amax(x)); block recipes 1x128/128x128/MX scale per block of the
    last dimension). Or format= with profile= / rounding=, overflow=, nan= (default profile
    cuda-satfinite) and a fixed scale (scale_inv = fl32(1/scale)). Stochastic rounding draws
    stochastic_bits(seed, i) for element i. x: float32, float16 or bfloat16, CPU or CUDA.
    """
    kw = dict(recipe=recipe, format=format, role=role, profile=profile, rounding=rounding, overflow=overflow,
              nan=nan, scale=scale, seed=seed)
    return _FakeQuant.apply(x, kw)


class FakeQuantize(torch.nn.Module):
    """fake_quantize as a module. With stochastic rounding each call uses seed + call count, so
    steps draw fresh bits and a rerun from the same seed draws the same ones."""

    def __init__(self, recipe=None, format=None, role="input", seed=0, **policy):
        super().__init__()
        self.kw = dict(recipe=recipe, format=format, role=role, **policy)
        self.seed, self.calls = int(seed), 0

    def forward(self, x):
        y = fake_quantize(x, seed=self.seed + self.calls, **self.kw)
        self.calls += 1
        return y

    def extra_repr(self):
        return ", ".join(f"{k}={v!r}" for k, v in self.kw.items() if v is not None)


# ---- the monitor -------------------------------------------------------------------------------

_STAT_KEYS = ("numel", "amax", "min_nonzero", "zeros", "nan", "inf", "underflow", "subnormal", "overflow",
              "te_underflow", "te_overflow", "mse", "sqnr_db", "dynamic_range_binades")
# Role of each captured tensor in a recipe (input and weight in the forward pass, gradients in
# the backward pass), as TransformerEngine assigns formats.
_ROLE = {"input": "input", "weight": "weight", "grad_output": "grad", "wgrad": "grad"}


def _linear_types(extra):
    types = [torch.nn.Linear]
    try:  # transformers' GPT-2 projections are Conv1D (a Linear with a transposed weight)
        from transformers.pytorch_utils import Conv1D
        types.append(Conv1D)
    except Exception:  # noqa: BLE001  transformers absent: nn.Linear only
        pass
    return tuple(types) + tuple(extra)


class Monitor:
    """Statistics of the tensors of every nn.Linear (and transformers Conv1D) of `model` under
    each recipe of `recipes`, on the step the monitor is on when step % every == 0.

    Captured: 'input' and 'weight' (forward), 'grad_output' (a hook on the output) and 'wgrad'
    (the weight's gradient); `tensors=` picks some. watch(name, tensor, role) adds any other tensor. Call
    step() once per training step (after backward). close() (or leaving a `with` block) writes
    out_dir/amax_trace.csv (step,tensor,amax: what `fp8kit replay` and `fp8kit sweep` read) and
    out_dir/stats.csv and stats.json (one row per step, tensor and recipe).
    With reduce_amax=True under torch.distributed, each amax is reduced with MAX over `group`
    before the recipe's scale is computed, as TransformerEngine's reduce_amax does; every rank
    writes its own files (rank_R/ under out_dir when the world has more than one rank).
    attention=True also captures Q, K and V of transformers' attention modules ('<module>.q',
    '.k', '.v'; see _hook_attention).
    dump_steps= (and dump_include=, fnmatch patterns on the tensor names) also write those
    tensors on those steps to out_dir/dump.h5 in fp8kit's HDF5 layout (host copies: slow).
    Tensorwise recipes run on the GPU (CUDA kernels, torch's current stream); block recipes give
    per-block scales but their statistics are computed on the host (a copy), see docs/torch.md.
    """

    def __init__(self, model, recipes=("te-current",), every=1, out_dir=None, tensors=None, modules=(),
                 reduce_amax=False, group=None, dump_steps=(), dump_include=("*",), attention=False):
        self.recipes = [fp8kit.recipe(r) for r in recipes]
        # recipe_scale's argument: the preset name, or the recipe as JSON text (parsed per call)
        self._scale_arg = [(r, False) if isinstance(r, str) and r in fp8kit.presets() else (json.dumps(d), True)
                           for r, d in zip(recipes, self.recipes)]
        self.every, self.step_index = int(every), 0
        self.tensors = set(_ROLE if tensors is None else tensors)
        self.reduce_amax, self.group = bool(reduce_amax), group
        self.rows, self.trace = [], []
        self.out_dir = out_dir
        if out_dir is not None and torch.distributed.is_available() and torch.distributed.is_initialized() \
                and torch.distributed.get_world_size() > 1:
            self.out_dir = os.path.join(out_dir, f"rank_{torch.distributed.get_rank()}")
        self.dump_steps, self.dump_include, self._h5 = set(dump_steps), tuple(dump_include), None
        if self.dump_steps and self.out_dir is None:
            raise ValueError("dump_steps: name the out_dir the dump (out_dir/dump.h5) is written to")
        self.handles = []
        for name, mod in model.named_modules():
            if isinstance(mod, _linear_types(modules)):
                self._hook(name, mod)
        self._attn_orig = {}
        if attention:
            self._hook_attention(model)

    @property
    def active(self):
        return self.step_index % self.every == 0

    def _hook(self, module_name, mod):
        def name(t):  # the model itself (name '') gives plain tensor names
            return f"{module_name}.{t}" if module_name else t

        # The output gradient comes from a hook on the output tensor, registered only on monitored
        # steps: a module backward hook would add autograd nodes to every step.
        def fwd(m, inp, out):
            if not self.active:
                return
            if "input" in self.tensors:
                self.watch(name("input"), inp[0], "input")
            if "weight" in self.tensors:
                self.watch(name("weight"), m.weight, "weight")
            if "grad_output" in self.tensors and isinstance(out, torch.Tensor) and out.requires_grad:
                out.register_hook(lambda g: self.watch(name("grad_output"), g, "grad"))

        def wgrad(g):
            if self.active and "wgrad" in self.tensors:
                self.watch(name("wgrad"), g, "grad")

        self.handles.append(mod.register_forward_hook(fwd))
        if mod.weight.requires_grad:
            self.handles.append(mod.weight.register_hook(wgrad))

    def _hook_attention(self, model):
        """Q, K and V as transformers' attention modules pass them to the attention kernel: after
        rotary embeddings, K and V after the KV cache's update and before GQA's repeat. Every
        kernel of transformers' attention registry (sdpa, flash, flex...) is wrapped while the
        monitor lives; the eager path calls a module function directly and is not captured."""
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as registry
        impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
        if impl not in registry:
            raise ValueError(f"attention: the model's attention implementation {impl!r} is not in transformers' "
                             "registry (use attn_implementation='sdpa' or a flash/flex kernel, not eager)")
        names = {id(m): n for n, m in model.named_modules() if type(m).__name__.endswith("Attention")}

        def wrap(kernel):
            def capture(module, query, key, value, *args, **kwargs):
                name = names.get(id(module))
                if name is not None and self.active:
                    for t, x in (("q", query), ("k", key), ("v", value)):
                        self.watch(f"{name}.{t}" if name else t, x, "input")
                return kernel(module, query, key, value, *args, **kwargs)
            return capture

        for k in list(registry.keys()):
            self._attn_orig[k] = registry[k]
            registry[k] = wrap(registry[k])

    def _amax(self, x):
        if x.is_cuda:
            out = torch.empty(1, dtype=torch.float32, device=x.device)
            d = fp8kit._device.DeviceArray(x)
            _fp8kit.cuda_amax(d.ptr, d.wide, d.size, out.data_ptr(), d.stream)
        else:
            out = torch.tensor([fp8kit.amax(x)], dtype=torch.float32)
        if self.reduce_amax and torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(out, op=torch.distributed.ReduceOp.MAX, group=self.group)
        return float(out.item())

    def watch(self, name, tensor, role="input"):
        """Statistics of `tensor` under every recipe for `role` ('input', 'weight', 'grad') at the
        current step (no-op on steps the monitor skips)."""
        if not self.active:
            return
        x = tensor.detach()
        x = x.contiguous() if x.dtype in (torch.float32, torch.float16, torch.bfloat16) else x.float().contiguous()
        amax = self._amax(x)
        self.trace.append((self.step_index, name, amax))
        if self.step_index in self.dump_steps and any(fnmatch.fnmatchcase(name, p) for p in self.dump_include):
            self._dump(name, x, role)
        done = {}  # recipes that cast this tensor identically (format, policy, scale) share one pass
        for r, arg in zip(self.recipes, self._scale_arg):
            spec = r["roles"][role]
            if spec["granularity"] == "tensor":
                scale, scale_inv = _fp8kit.recipe_scale(*arg, role, amax)
                pol = fp8kit.recipe_policy(r, role)
                key = (spec["format"], pol["rounding"], pol["overflow"], pol["nan"], scale, scale_inv)
                if key not in done:
                    done[key] = fp8kit.stats(x, spec["format"], rounding=pol["rounding"], overflow=pol["overflow"],
                                             nan=pol["nan"], scale=scale, scale_inv=scale_inv)
                s = done[key]
            else:
                h = x.reshape(-1, x.shape[-1]).cpu() if x.dim() != 2 else x.cpu()
                s = fp8kit.stats(h, recipe=r, role=role)
            row = {"step": self.step_index, "tensor": name, "role": role, "recipe": r["name"],
                   "format": spec["format"]}
            row.update({k: s.get(k) for k in _STAT_KEYS})
            self.rows.append(row)

    def _dump(self, name, x, role):
        """x (a host copy) as dataset step_NNNNNN/<module>/<tensor> of out_dir/dump.h5, fp8kit's HDF5
        layout (docs/dumps.md): attributes step and role (activation, weight, gradient); bfloat16
        stored as its uint16 bits with dtype='bfloat16'."""
        import h5py
        if self._h5 is None:
            os.makedirs(self.out_dir, exist_ok=True)
            self._h5 = h5py.File(os.path.join(self.out_dir, "dump.h5"), "w")
        t = x.detach().cpu()
        bf16 = t.dtype == torch.bfloat16
        data = t.view(torch.int16).numpy().view("uint16") if bf16 else t.numpy()
        ds = self._h5.create_dataset(f"step_{self.step_index:06d}/{name}", data=data)
        if bf16:
            ds.attrs["dtype"] = "bfloat16"
        ds.attrs["step"] = self.step_index
        ds.attrs["role"] = {"input": "activation", "weight": "weight", "grad": "gradient"}[role]

    def step(self):
        self.step_index += 1

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []
        if self._attn_orig:
            from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as registry
            for k, kernel in self._attn_orig.items():
                registry[k] = kernel
            self._attn_orig = {}

    def write(self, out_dir=None):
        """Writes amax_trace.csv, stats.csv and stats.json into out_dir."""
        out_dir = out_dir or self.out_dir
        if out_dir is None:
            raise ValueError("out_dir: name the folder the monitor writes to")
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "amax_trace.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "tensor", "amax"])
            for step, name, a in self.trace:
                w.writerow([step, name, f"{a:.9g}"])
        with open(os.path.join(out_dir, "stats.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["step", "tensor", "role", "recipe", "format", *_STAT_KEYS])
            w.writeheader()
            w.writerows(self.rows)
        with open(os.path.join(out_dir, "stats.json"), "w") as f:
            json.dump(self.rows, f, allow_nan=True)

    def close(self):
        self.remove()
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None
        if self.out_dir is not None:
            self.write()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def monitor(model, recipes=("te-current",), every=1, out_dir=None, **kw):
    """Monitor(model, recipes, every, out_dir, ...): see Monitor."""
    return Monitor(model, recipes=recipes, every=every, out_dir=out_dir, **kw)
