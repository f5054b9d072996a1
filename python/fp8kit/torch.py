"""fp8kit in a PyTorch run: fake quantisation with a straight-through gradient, and a monitor
that computes fp8kit's cast statistics of nn.Linear tensors under several recipes.

Every number comes from fp8kit's kernels (CUDA tensors, on torch's current stream) or its C++
reference (CPU tensors), through fp8kit.quantize / dequantize / quantize_blocks / stats; the
two give the same bits. This file only moves tensors, hooks modules and writes files.
"""

import csv
import fnmatch
import io
import json
import os
import queue
import threading
import warnings as _warnings
import weakref

import torch

import fp8kit

from . import _fp8kit
from ._linear import Fp8Linear, swap_linears

__all__ = ["fake_quantize", "FakeQuantize", "Fp8Linear", "swap_linears", "Monitor", "monitor"]


class _Trace:
    """The monitor's (step, tensor, amax) entries by absolute index, of which a prefix may have
    been dropped (written and fed to the watcher: keep_rows=False)."""

    def __init__(self):
        self.base, self.items = 0, []

    def __len__(self):
        return self.base + len(self.items)

    def append(self, entry):
        self.items.append(entry)

    def __getitem__(self, k):
        if isinstance(k, slice):
            start = self.base if k.start is None else k.start
            stop = len(self) if k.stop is None else k.stop
            return self.items[start - self.base : stop - self.base]
        return self.items[k - self.base]

    def __setitem__(self, k, entry):
        self.items[k - self.base] = entry

    def drop_before(self, k):
        del self.items[: k - self.base]
        self.base = k


def _csv_text(rows):
    """rows as CSV bytes, as csv.writer writes them (the monitor's files' one dialect)."""
    f = io.StringIO(newline="")
    csv.writer(f).writerows(rows)
    return f.getvalue().encode()


# ---- fake quantisation -------------------------------------------------------------------------


# The canonical quiet NaN of each floating dtype (sign 0, payload 0): 0x7FC00000 and its
# conversions by emu::convert (numerics/gemm_model.hpp output_bits, lib's dequantize_blocks).
_NAN_BITS = {
    torch.float32: (torch.int32, 0x7FC00000),
    torch.float16: (torch.int16, 0x7E00),
    torch.bfloat16: (torch.int16, 0x7FC0),
}


def _canonical_nan(dtype):
    int_type, bits = _NAN_BITS[dtype]
    return torch.tensor(bits, dtype=int_type).view(dtype)


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
        if "scale_inv" in d:
            sinv = d["scale_inv"]
        else:  # FP8 MX kernel: E8M0 codes, whose values are the scale_inv (exact decode)
            sinv = fp8kit.dequantize(d["scale_codes"], "e8m0", dtype=torch.float32)
    else:
        d = fp8kit.quantize_blocks(x, r, role, seed=seed)
        sinv = torch.from_numpy(d["scale_inv"].astype("float32", copy=False))
    codes = torch.as_tensor(d["codes"]) if not x.is_cuda else d["codes"]
    spec = r["roles"][role]
    br, bc = spec["block_rows"], spec["block_cols"]
    full = sinv.repeat_interleave(br, 0)[: x.shape[0]].repeat_interleave(bc, 1)[:, : x.shape[1]]
    return codes, full.contiguous(), spec["format"]


def _fused_block_path(r, role, policy):
    """Whether a CUDA tensor's block fake quantisation takes the one-call kernel: every block
    recipe with the NVFP4 or MX block shapes (cuda::quantize_blocks' warp kernel), not TE's
    1x128 / 128x128 blocks (their dedicated kernels, below) and not a profile override."""
    spec = r["roles"][role]
    return (
        policy.get("profile") is None and (spec["block_rows"], spec["block_cols"]) in fp8kit._device.FUSED_BLOCK_SHAPES
    )


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
        if xc.is_cuda and _fused_block_path(r, role, pol):
            # One call: codes in device temporaries, dequantised by the kernel with the same rule
            # as below (cuda/fake_quantize.hpp fake_quantize_blocks).
            spec = fp8kit._device.fake_quant_spec(fp8kit._recipes._recipe_arg(r), role, xc.shape[1])
            y = fp8kit._device.fake_quantize_blocks(xc, spec, seed, _WIDE_OF_DTYPE[xc.dtype])
            return y.reshape(x.shape)
        codes, sinv, fmt = _block_scale_inv(xc, r, role, pol, seed)
        # Decode exactly to float32, one float32 multiply by the block's scale_inv, one rounding
        # to x's dtype: dequantize's rule with a per-block factor. NaN codes take dequantize's
        # NaN bits, and a NaN product (a NaN block's factor) is the canonical quiet NaN of x's
        # dtype, as lib's dequantize_blocks and the GPU kernel write it (a multiply or a cast of a
        # NaN gives different bits on CPU and GPU: torch's vectorised CPU cast to bfloat16 writes
        # 0xFFFF, its scalar one 0x7FC0).
        vals = fp8kit.dequantize(codes, fmt, dtype=torch.float32)
        prod = vals * sinv
        out = torch.where(prod.isnan(), _canonical_nan(x.dtype), prod.to(x.dtype))
        y = torch.where(vals.isnan(), fp8kit.dequantize(codes, fmt, dtype=x.dtype), out)
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


def fake_quantize(
    x, recipe=None, format=None, role="input", profile=None, rounding=None, overflow=None, nan=None, scale=1.0, seed=0
):
    """x quantised and dequantised (same dtype and shape), gradient passed straight through.

    recipe: a preset, file or dict (its format, policy and scale rule for `role`: tensorwise
    recipes scale with recipe_scale(amax(x)); block recipes 1x128/128x128/MX scale per block of the
    last dimension). Or format= with profile= / rounding=, overflow=, nan= (default profile
    cuda-satfinite) and a fixed scale (scale_inv = fl32(1/scale)). Stochastic rounding draws
    stochastic_bits(seed, i) for element i. x: float32, float16 or bfloat16, CPU or CUDA.
    """
    kw = dict(
        recipe=recipe,
        format=format,
        role=role,
        profile=profile,
        rounding=rounding,
        overflow=overflow,
        nan=nan,
        scale=scale,
        seed=seed,
    )
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

_STAT_KEYS = (
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
    "mse",
    "sqnr_db",
    "dynamic_range_binades",
    "sample",
)
# Block recipes' per-block fields (lib's BlockStats, the names fp8kit.stats(x, recipe=<block
# recipe>) gives): tensorwise recipes leave them None (blank in stats.csv), so that every row has
# the same columns. On the GPU they come from each tile's scale_inv and extremes through lib's
# summarize_tiles (_fp8kit.tile_summary), the one definition of them.
_BLOCK_KEYS = (
    "blocks",
    "scale_inv_min",
    "scale_inv_max",
    "blocks_with_range",
    "block_dynamic_range_max",
    "block_dynamic_range_mean",
)
_ROW_KEYS = _STAT_KEYS + _BLOCK_KEYS
# A row's columns (stats.csv's header, stats.json's keys). The monitor keeps each row as a tuple in
# this order and builds the dicts only when `rows` is read: the files are written from the tuples
# (_fp8kit.rows_text: the bytes csv.writer and json.dumps write, at a fraction of their host time).
_COLUMNS = ("step", "tensor", "role", "recipe", "format") + _ROW_KEYS
_NO_BLOCK_FIELDS = (None,) * len(_BLOCK_KEYS)  # tensorwise recipes' per-block fields
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


# The module's input-type names of the torch dtypes watch() passes to the kernels, keyed by the
# dtype itself (no str() per call), from fp8kit._device's table.
_WIDE_OF_DTYPE = {getattr(torch, k.split(".", 1)[1]): v for k, v in fp8kit._device.TORCH_DTYPE_WIDE.items()}


def _raw_stream(device):
    """torch's current stream on `device` as an integer (cudaStream_t): torch's own accessor of the
    raw handle where this torch has it (no Stream object per call), else current_stream()."""
    get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if get is not None:
        return get(device.index if device.index is not None else torch.cuda.current_device())
    return torch.cuda.current_stream(device).cuda_stream


class _StreamWriter:
    """The monitor's streamed files (fp8kit's output sink, _fp8kit.OutputFile: temporaries until
    commit()) written on a thread of their own: a step hands its bytes over and goes on, and the
    file I/O, which the sink runs without the GIL, overlaps the training step (a write that waits
    on a busy disk no longer holds up the step). At most `depth` hand-overs wait; a full queue
    blocks the step until the disk catches up. An error of the thread is raised by the next
    write() or by commit(); the files are then left uncommitted (their temporaries removed)."""

    def __init__(self, paths, depth=16):
        self._files = [_fp8kit.OutputFile(p) for p in paths]
        self._queue = queue.Queue(maxsize=depth)
        self._error = None
        self._thread = threading.Thread(target=self._run, name="fp8kit-monitor-writer", daemon=True)
        self._thread.start()

    def _run(self):
        while (parts := self._queue.get()) is not None:
            if self._error is None:
                try:
                    for i, data in parts:
                        self._files[i].write(data)
                except BaseException as e:  # noqa: BLE001  raised in the training thread
                    self._error = e

    def _raise(self):
        """The thread's error, again at every call after it: the files are then never committed."""
        if self._error is not None:
            self.stop()
            self._files = []  # dropped: their temporaries are removed
            raise self._error

    def write(self, parts):
        """parts: (index of the file, bytes) pairs, written in order."""
        self._raise()
        if self._thread.is_alive():
            self._queue.put(parts)

    def stop(self):
        """Ends the thread after what is queued (also when the monitor is collected unclosed)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def commit(self):
        self.stop()
        self._raise()
        for f in self._files:
            f.commit()


class _GpuStep:
    """One monitored step's GPU results on one device: amax slots (float32) and statistics records
    (StatsRecord) in device pages that never move while queued kernels write them; copy_out()
    queues their copy to pinned host memory and an event, read() waits for that event (the step's
    only wait), fills the trace entries that point at the slots and keeps the records' values as
    one tuple each (cuda_stats_rows); rows (dicts) are built from them only when asked for
    (Monitor.rows, write(), close()). Block recipes also write each tile's scale_inv and extremes
    into device buffers (tile_buffer: the monitor's, reused from step to step), copied to pinned
    host memory with the records; rows summarize them (tile_summary)."""

    PAGE = 256

    def __init__(self, device):
        self.device = device
        self.amax_pages, self.rec_pages, self.n_amax, self.n_rec = [], [], 0, 0
        self.rec_used = []  # records used per page (from its start: a span never crosses pages)
        self.trace = []  # (trace index, step, name, amax slot)
        self.event = self.stats = None
        self.tiles, self.tile_uses, self.h_tiles = [], {}, None  # (device buffer, tiles) per block launch

    def tile_buffer(self, cache, key, blocks):
        """A device float32 buffer [scale_inv | tile amax | tile min] of `blocks` tiles for one
        block launch of this step: the n-th launch of `key` this step takes the cache's n-th buffer
        (allocated on its first use; the copy of the previous step's contents is queued on the
        stream before this step's launches). Returns (its index in this step's tiles, pointer)."""
        n = self.tile_uses.get(key, 0)
        self.tile_uses[key] = n + 1
        bufs = cache.setdefault(key, [])
        if n == len(bufs):
            bufs.append(torch.empty(3 * max(blocks, 1), dtype=torch.float32, device=self.device))
        self.tiles.append((bufs[n], blocks))
        return len(self.tiles) - 1, bufs[n].data_ptr()

    def amax_slot(self):
        page, i = divmod(self.n_amax, self.PAGE)
        if page == len(self.amax_pages):
            self.amax_pages.append(torch.empty(self.PAGE, dtype=torch.float32, device=self.device))
        self.n_amax += 1
        return self.n_amax - 1, self.amax_pages[page], i

    def record_slots(self, k):
        """k consecutive zeroed records (statistics_async_multi's): first slot, device address."""
        size = _fp8kit.cuda_stats_record_bytes
        page, i = divmod(self.n_rec, self.PAGE)
        if i + k > self.PAGE:  # not across pages: the slots left on this one stay unread
            page, i = page + 1, 0
            self.n_rec = page * self.PAGE
        if page == len(self.rec_pages):  # statistics_async fills zeroed records
            self.rec_pages.append(torch.zeros(self.PAGE * size, dtype=torch.uint8, device=self.device))
            self.rec_used.append(0)
        self.rec_used[page] = i + k
        self.n_rec += k
        return self.n_rec - k, self.rec_pages[page].data_ptr() + i * size

    @staticmethod
    def _to_host(pages):
        if not pages:
            return None
        host = torch.empty(len(pages) * pages[0].numel(), dtype=pages[0].dtype, pin_memory=True)
        for k, p in enumerate(pages):
            host[k * p.numel() : (k + 1) * p.numel()].copy_(p, non_blocking=True)
        return host

    def copy_out(self):
        with torch.cuda.device(self.device):
            self.h_amax, self.h_rec = self._to_host(self.amax_pages), self._to_host(self.rec_pages)
            if self.tiles:
                self.h_tiles = torch.empty(sum(3 * b for _, b in self.tiles), dtype=torch.float32, pin_memory=True)
                at = 0
                for buf, b in self.tiles:
                    self.h_tiles[at : at + 3 * b].copy_(buf[: 3 * b], non_blocking=True)
                    at += 3 * b
            self.event = torch.cuda.Event()
            self.event.record()

    def read(self, trace):
        self.event.synchronize()
        amax = self.h_amax[: self.n_amax].tolist() if self.n_amax else []
        for idx, step, name, slot in self.trace:
            trace[idx] = (step, name, amax[slot])
        # Per page, its used records (the slots skipped at a page's end hold zeroed records,
        # which the reader refuses; None keeps the slot numbers).
        size, self.stats = _fp8kit.cuda_stats_record_bytes, []
        for page, used in enumerate(self.rec_used):
            self.stats += _fp8kit.cuda_stats_rows(self.h_rec.data_ptr() + page * self.PAGE * size, used)
            self.stats += [None] * (self.PAGE - used)
        self.amax_pages = self.rec_pages = self.h_amax = self.h_rec = None
        if self.h_tiles is not None:  # per block launch: (scale_inv, tile amax, tile min), host arrays
            h, at, parts = self.h_tiles.numpy(), 0, []
            for _, b in self.tiles:
                parts.append((h[at : at + b], h[at + b : at + 2 * b], h[at + 2 * b : at + 3 * b]))
                at += 3 * b
            self.h_tiles = parts
        self.tiles = None

    def tile_summary(self, k):
        """BlockStats' per-block fields of this step's k-th block launch (lib's summarize_tiles)."""
        return _fp8kit.tile_summary(*self.h_tiles[k])


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
    Tensorwise recipes run on the GPU (CUDA kernels, torch's current stream) without waiting: the
    amax kernel writes a device slot, each recipe's scale is computed from it on the device by the
    recipe's rule and the statistics go to a device record (cuda/include/fp8kit/cuda/
    statistics_async.hpp); the step's slots are copied to pinned host memory at step() and read at
    the next step() (or when rows, trace or the files are asked for): one wait per monitored step.
    Block recipes (TE 1x128 / 128x128, MX, DeepSeek, row-wise blocks and NVFP4; the tensor seen as
    rows x its last dimension) run on the GPU too (cuda::block_statistics_async, one launch each,
    the totals of lib's compute_block_stats; NVFP4's global amax and TE's column-wise RHT copy are
    computed on the device, on the same stream). Their rows also carry the per-block fields
    (blocks, scale_inv_min, scale_inv_max, blocks_with_range, block_dynamic_range_max, block_dynamic_range_mean: lib's BlockStats,
    as fp8kit.stats(x, recipe=...) gives them; None for tensorwise recipes): each tile's scale_inv
    and extremes stay in device buffers until step() copies them with the records.
    sample=k (default 1: every element) counts, in the statistics, only the blocks of 16
    consecutive elements whose index is a multiple of k (the amax and the scale stay the whole
    tensor's); rows say it in column 'sample' and their numel is the sample's. See docs/torch.md.
    warn= raises fp8kit's early warnings live (docs/early-warning.md): True (a Watcher with its
    defaults), a dict of Watcher options, or an fp8kit.Watcher. Every monitored step's amaxes are
    fed to it as they are read, and every `warn_every` steps its new warnings are given to
    `on_warning(warning_dict)`, or by default issued as Python warnings (category FP8Warning);
    `warnings` holds all of them. GPU amaxes are read one step late (see above), so a step's
    warnings come at the next poll after it.
    With out_dir, every step() writes the rows and amaxes read so far to the three files as they
    are made (each a temporary of fp8kit's output sink until close() commits it: a run that dies
    leaves no partial file), on a thread of the monitor's, so the step does not wait for the disk;
    an error there (a full disk) is raised by the next step() or by close(). keep_rows=False then
    drops the written rows, so memory stays flat over any number of steps (`rows` holds only rows
    not yet written); the trace stays in memory.
    """

    def __init__(
        self,
        model,
        recipes=("te-current",),
        every=1,
        out_dir=None,
        tensors=None,
        modules=(),
        reduce_amax=False,
        group=None,
        dump_steps=(),
        dump_include=("*",),
        attention=False,
        sample=1,
        warn=None,
        warn_every=1,
        on_warning=None,
        keep_rows=True,
    ):
        self.recipes = [fp8kit.recipe(r) for r in recipes]
        self.keep_rows = bool(keep_rows)
        if not self.keep_rows and out_dir is None:
            raise ValueError("keep_rows=False: name the out_dir the rows are written to")
        self._streams, self._rows_out, self._trace_out, self._rows_written = None, 0, 0, 0  # _stream_out
        self._committed = False
        self.grad_norms, self._gn_pending = [], None  # (step, norm): step(grad_norm=...)
        self._watcher = _make_watcher(warn)
        self.warn_every, self.on_warning, self.warnings, self._fed = int(warn_every), on_warning, [], 0
        if self.warn_every < 1:
            raise ValueError(f"warn_every: {warn_every} must be an integer >= 1")
        self.sample = int(sample)
        if self.sample < 1:
            raise ValueError(f"sample: {sample} must be an integer >= 1 (1: every element)")
        # recipe_scale's argument: the preset name, or the recipe as JSON text (parsed per call)
        self._scale_arg = [
            (r, False) if isinstance(r, str) and r in fp8kit.presets() else (json.dumps(d), True)
            for r, d in zip(recipes, self.recipes)
        ]
        self.every, self.step_index = int(every), 0
        if self.every < 1:
            raise ValueError(f"every: {every} must be an integer >= 1")
        self._active = True  # step_index % every == 0, kept current by step(): the hooks read only this
        self.tensors = set(_ROLE if tensors is None else tensors)
        self.reduce_amax, self.group = bool(reduce_amax), group
        self._rows, self._trace = [], _Trace()
        self._queues, self._pending, self._groups, self._batches, self._block_ws = {}, [], {}, {}, {}  # _watch_cuda
        self._tile_bufs = {}  # (device, stream, tiles) -> device buffers (_GpuStep.tile_buffer)
        self._row_parts = []  # rows not yet built, in order: lists of host rows, GPU tensors (_watch_cuda)
        self.out_dir = out_dir
        if (
            out_dir is not None
            and torch.distributed.is_available()
            and torch.distributed.is_initialized()
            and torch.distributed.get_world_size() > 1
        ):
            self.out_dir = os.path.join(out_dir, f"rank_{torch.distributed.get_rank()}")
        self.dump_steps, self.dump_include, self._h5 = set(dump_steps), tuple(dump_include), None
        if self.dump_steps and self.out_dir is None:
            raise ValueError("dump_steps: name the out_dir the dump (out_dir/dump.h5) is written to")
        self.handles = []
        self._hooked_leaves = []  # weights whose hook dict the monitor created (remove() drops it)
        for name, mod in model.named_modules():
            if isinstance(mod, _linear_types(modules)):
                self._hook(name, mod)
        self._attn_orig = {}
        if attention:
            self._hook_attention(model)

    @property
    def active(self):
        return self._active

    @property
    def rows(self):
        """One dict per step, tensor and recipe (GPU statistics read first if any are queued)."""
        self._drain()
        self._build_rows()
        return [dict(zip(_COLUMNS, row)) for row in self._rows]

    @property
    def trace(self):
        """(step, tensor, amax) per captured tensor (GPU amaxes read first if any are queued)."""
        self._drain()
        return self._trace.items

    def _hook(self, module_name, mod):
        # The tensor names, built once (the hooks run for every monitored step); the model itself
        # (name '') gives plain tensor names.
        names = {t: f"{module_name}.{t}" if module_name else t for t in ("input", "weight", "grad_output", "wgrad")}
        name = names.__getitem__

        # The output gradient comes from a hook on the output tensor, registered only on monitored
        # steps: a module backward hook would add autograd nodes to every step.
        def fwd(m, inp, out):
            if not self._active:  # unmonitored steps: nothing but this test
                return
            if "input" in self.tensors:
                self.watch(name("input"), inp[0], "input")
            if "weight" in self.tensors:
                self.watch(name("weight"), m.weight, "weight")
            if "grad_output" in self.tensors and isinstance(out, torch.Tensor) and out.requires_grad:
                out.register_hook(lambda g: self.watch(name("grad_output"), g, "grad"))

        def wgrad(g):
            if self._active and "wgrad" in self.tensors:
                self.watch(name("wgrad"), g, "grad")

        self.handles.append(mod.register_forward_hook(fwd))
        if mod.weight.requires_grad:
            if mod.weight._backward_hooks is None:
                self._hooked_leaves.append(mod.weight)
            self.handles.append(mod.weight.register_hook(wgrad))

    def _hook_attention(self, model):
        """Q, K and V as transformers' attention modules pass them to the attention kernel: after
        rotary embeddings, K and V after the KV cache's update and before GQA's repeat. Every
        kernel of transformers' attention registry (sdpa, flash, flex...) is wrapped while the
        monitor lives; the eager path calls a module function directly and is not captured."""
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as registry

        impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
        if impl not in registry:
            raise ValueError(
                f"attention: the model's attention implementation {impl!r} is not in transformers' "
                "registry (use attn_implementation='sdpa' or a flash/flex kernel, not eager)"
            )
        names = {id(m): n for n, m in model.named_modules() if type(m).__name__.endswith("Attention")}

        def wrap(kernel):
            def capture(module, query, key, value, *args, **kwargs):
                name = names.get(id(module))
                if name is not None and self._active:
                    for t, x in (("q", query), ("k", key), ("v", value)):
                        self.watch(f"{name}.{t}" if name else t, x, "input")
                return kernel(module, query, key, value, *args, **kwargs)

            return capture

        for k in list(registry.keys()):
            self._attn_orig[k] = registry[k]
            registry[k] = wrap(registry[k])

    def _amax(self, x):
        """A host tensor's amax (CUDA tensors go through _watch_cuda's device slot)."""
        out = torch.tensor([fp8kit.amax(x)], dtype=torch.float32)
        if self.reduce_amax and torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(out, op=torch.distributed.ReduceOp.MAX, group=self.group)
        return float(out.item())

    def watch(self, name, tensor, role="input"):
        """Statistics of `tensor` under every recipe for `role` ('input', 'weight', 'grad') at the
        current step (no-op on steps the monitor skips)."""
        if not self._active:
            return
        x = tensor.detach()
        x = x.contiguous() if x.dtype in _WIDE_OF_DTYPE else x.float().contiguous()
        if x.is_cuda:
            self._watch_cuda(name, x, role)
            return
        amax = self._amax(x)
        self._trace.append((self.step_index, name, amax))
        if self.step_index in self.dump_steps and any(fnmatch.fnmatchcase(name, p) for p in self.dump_include):
            self._dump(name, x, role)
        done, rows = {}, []  # recipes that cast this tensor identically (format, policy, scale) share one pass
        for r, arg in zip(self.recipes, self._scale_arg):
            spec = r["roles"][role]
            if spec["granularity"] == "tensor":
                scale, scale_inv = _fp8kit.recipe_scale(*arg, role, amax)
                pol = fp8kit.recipe_policy(r, role)
                key = (spec["format"], pol["rounding"], pol["overflow"], pol["nan"], scale, scale_inv)
                if key not in done:
                    done[key] = fp8kit.stats(
                        self._sampled(x),
                        spec["format"],
                        rounding=pol["rounding"],
                        overflow=pol["overflow"],
                        nan=pol["nan"],
                        scale=scale,
                        scale_inv=scale_inv,
                    )
                    done[key]["sample"] = self.sample
                s = done[key]
            else:
                s = self._block_stats(x, r, role)
            rows.append((self.step_index, name, role, r["name"], spec["format"]) + tuple(s.get(k) for k in _ROW_KEYS))
        self._row_parts.append(rows)  # after any GPU tensor's rows still to be built

    def _sampled(self, x):
        """The host tensor's elements the statistics count under sample=k (the GPU kernel's
        choice: blocks of 16 whose index is a multiple of k, a partial last block included)."""
        if self.sample == 1:
            return x
        flat = x.reshape(-1)
        full = flat.numel() // 16
        parts = [flat[: full * 16].view(-1, 16)[:: self.sample].reshape(-1)]
        if full % self.sample == 0 and flat.numel() % 16:
            parts.append(flat[full * 16 :])
        return torch.cat(parts)

    def _block_stats(self, x, r, role):
        """Block recipes: on a host copy, all elements (sample does not apply: the blocks are the
        recipe's); the row says sample 1."""
        h = x.reshape(-1, x.shape[-1]).cpu() if x.dim() != 2 else x.cpu()
        s = fp8kit.stats(h, recipe=r, role=role)
        s["sample"] = 1
        return s

    def _group(self, role, wide, ncols):
        """The recipes of a role and input type (and, for block recipes, the tensor's column count),
        resolved once: the CudaStatsGroup of the tensorwise recipes' distinct casts (recipes with the
        same format, policy and rule share one record), the GPU block plans (CudaBlockStatsPlan, one
        record each, after the group's), and per recipe (name, format, index of its record in the
        tensor's span, or None for a block recipe the GPU does not serve, computed on the host)."""
        key = (role, wide, ncols)
        g = self._groups.get(key)
        if g is not None:
            return g
        plans, blocks, cols, done = [], [], [], {}
        for r, arg in zip(self.recipes, self._scale_arg):
            spec = r["roles"][role]
            if spec["granularity"] != "tensor":
                bp = _fp8kit.cuda_block_stats_plan(*arg, role, wide, ncols)
                cols.append((r, spec["format"], None if bp is None else ("block", len(blocks))))
                if bp is not None:
                    blocks.append(bp)
                continue
            pol = r["policy"]
            k = (
                spec["format"],
                pol["rounding"],
                pol["overflow"],
                pol["nan"],
                r["rule"],
                r["epsilon"],
                r["pow2"],
                r["value_for_inf"],
                r["margin"],
            )
            if k not in done:
                done[k] = len(plans)
                plans.append(
                    _fp8kit.cuda_stats_plan(
                        *arg, role, wide, spec["format"], pol["rounding"], pol["overflow"], pol["nan"]
                    )
                )
            cols.append((r, spec["format"], done[k]))
        # Block records follow the group's in the tensor's span.
        cols = tuple((r, f, len(plans) + j[1] if isinstance(j, tuple) else j) for r, f, j in cols)
        g = self._groups[key] = (
            _fp8kit.cuda_stats_group(plans),
            len(plans),
            tuple(blocks),
            cols,
            any(c[2] is None for c in cols),
        )
        return g

    def _watch_cuda(self, name, x, role):
        """watch() of a CUDA tensor: everything queued on torch's current stream, nothing waited
        for; one call into the module (amax, then every recipe's statistics) and no row built."""
        # Every monitored step calls this for every watched tensor (196 a step in GPT-2 small): the
        # tensor's device, pointer and size are read once each.
        dev, ptr, n = x.device, x.data_ptr(), x.numel()
        wide = _WIDE_OF_DTYPE[x.dtype]
        stream = _raw_stream(dev)
        q = self._queues.get(dev)
        if q is None:
            fp8kit._device.require_cuda()
            q = self._queues[dev] = _GpuStep(dev)
        ncols = x.shape[-1] if x.dim() else 1
        group, k, blocks, cols, host = self._group(role, wide, ncols)
        amax_slot, page, i = q.amax_slot()
        slot, records = q.record_slots(k + len(blocks)) if k + len(blocks) else (0, 0)
        b = self._batches.get((dev, stream))
        if b is None:  # one per stream: K1 (the tensor's histogram) now, K2 for all at the step's end
            b = self._batches[(dev, stream)] = (_fp8kit.cuda_watch_batch(stream), torch.cuda.current_stream(dev))
        if self.reduce_amax and torch.distributed.is_available() and torch.distributed.is_initialized():
            amax_t = page[i : i + 1]
            _fp8kit.cuda_amax(ptr, wide, n, amax_t.data_ptr(), stream)
            torch.distributed.all_reduce(amax_t, op=torch.distributed.ReduceOp.MAX, group=self.group)
            b[0].add(group, ptr, wide, n, amax_t.data_ptr(), records, self.sample, 0, False)
        else:
            b[0].add(group, ptr, wide, n, page.data_ptr() + 4 * i, records, self.sample, 0)
        tiles = ()
        if blocks:  # block recipes the GPU serves: their statistics now, on the stream
            ws = self._block_ws.get((dev, stream))
            wsb = _fp8kit.cuda_stats_workspace_bytes()
            if ws is None:  # one per stream (the launches on a stream use it one after the other);
                # 16 bytes more for NVFP4's global amax (each launch writes it, then reads it)
                ws = self._block_ws[(dev, stream)] = torch.empty(wsb + 16, dtype=torch.uint8, device=dev)
            size, nrows = _fp8kit.cuda_stats_record_bytes, n // ncols if ncols else 0
            for j, bp in enumerate(blocks):
                gr, gc = _fp8kit.cuda_block_grid(bp, nrows, ncols)
                # keyed by the tile count: any launch of that many tiles can use the buffer
                t, buf = q.tile_buffer(self._tile_bufs, (dev, stream, gr * gc), gr * gc)
                tiles += (t,)
                _fp8kit.cuda_block_stats_async(
                    bp,
                    ptr,
                    nrows,
                    ncols,
                    records + (k + j) * size,
                    buf,
                    ws.data_ptr(),
                    0,
                    stream,
                    buf + 4 * gr * gc,
                    buf + 8 * gr * gc,
                    ws.data_ptr() + wsb if bp.global_amax else 0,
                )
        trace = self._trace
        q.trace.append((trace.base + len(trace.items), self.step_index, name, amax_slot))
        trace.items.append(None)  # filled when the step is read
        if self.step_index in self.dump_steps and any(fnmatch.fnmatchcase(name, p) for p in self.dump_include):
            self._dump(name, x, role)
        blocks = None
        if host:  # block recipes: their statistics on a host copy, now
            blocks = {id(r): self._block_stats(x, r, role) for r, _, j in cols if j is None}
        self._row_parts.append((q, self.step_index, name, role, slot, cols, blocks, k, tiles))

    def _flush_batches(self):
        """Queues the evaluation of every tensor watched since the last flush (one launch per stream
        and input type: cuda::WatchBatch), ordered before the copies that torch's current stream
        makes next."""
        for (dev, _), (batch, stream) in self._batches.items():
            if batch.pending:
                batch.flush()
                current = torch.cuda.current_stream(dev)
                if current != stream:
                    current.wait_stream(stream)

    def _drain(self, keep_last=False):
        """Reads the queued GPU steps (their amaxes into the trace, their records into tuples).
        keep_last: the step just queued stays pending (step() reads it at the next step, when the
        GPU has long finished it)."""
        self._flush_batches()
        fresh = len(self._queues)
        for q in self._queues.values():
            q.copy_out()
            self._pending.append(q)
        self._queues = {}
        last = len(self._pending) - (fresh if keep_last else 0)
        for q in self._pending[:last]:
            q.read(self._trace)
        self._pending = self._pending[last:]

    def _build_rows(self):
        """Rows (tuples in _COLUMNS' order) of the GPU tensors whose records have been read, in the
        order watched."""
        parts, n = self._row_parts, 0
        for n, part in enumerate(parts):
            if not isinstance(part, tuple):  # host rows (CPU tensors)
                self._rows.extend(part)
                continue
            q, step, name, role, slot, cols, blocks, k, tiles = part
            if q.stats is None:  # still queued
                break
            for r, fmt, j in cols:
                head = (step, name, role, r["name"], fmt)
                if j is None:
                    s = blocks[id(r)]
                    self._rows.append(head + tuple(s.get(key) for key in _ROW_KEYS))
                    continue
                per_block = _NO_BLOCK_FIELDS
                if j >= k:  # records k.. are the block launches', in the order of `tiles`
                    summary = q.tile_summary(tiles[j - k])
                    per_block = tuple(summary.get(key) for key in _BLOCK_KEYS)
                self._rows.append(head + q.stats[slot + j] + per_block)
        else:
            n = len(parts)
        del parts[:n]

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

    def step(self, grad_norm=None):
        """The end of a training step: the step's GPU statistics are queued for copying (read at
        the next step()), the previous step's are read (one wait, normally already finished).
        grad_norm: the step's gradient norm (a number or a tensor, e.g. what
        torch.nn.utils.clip_grad_norm_ returns): recorded in `grad_norms` and out_dir/grad_norm.csv,
        and given to the watcher's run-level verdict; a tensor is read at the next step()."""
        if self._queues or self._pending:
            self._drain(keep_last=bool(self._queues))
        self._read_grad_norm()
        if grad_norm is not None:
            self._gn_pending = (self.step_index, grad_norm)
        if self._watcher is not None:
            self._feed_watcher(poll=(self.step_index + 1) % self.warn_every == 0)
        if self.out_dir is not None:
            self._stream_out()
        self.step_index += 1
        self._active = self.step_index % self.every == 0

    def _read_grad_norm(self):
        if self._gn_pending is not None:
            step, v = self._gn_pending
            self._gn_pending = None
            self.grad_norms.append((step, float(v)))
            if self._watcher is not None:
                self._watcher.observe_grad_norm(step, self.grad_norms[-1][1])

    def _feed_watcher(self, poll):
        """Feeds the trace entries read since the last call to the watcher, one observe() per step
        (entries of a step still queued on the GPU wait for the next call), then polls it."""
        end = self._fed
        while end < len(self._trace) and self._trace[end] is not None:
            end += 1
        by_step = {}
        for step, name, amax in self._trace[self._fed : end]:
            by_step.setdefault(step, {})[name] = amax
        for step in sorted(by_step):
            self._watcher.observe(step, by_step[step])
        self._fed = end
        if poll:
            for w in self._watcher.poll():
                self.warnings.append(w)
                if self.on_warning is not None:
                    self.on_warning(w)
                else:
                    _warnings.warn(
                        f"fp8kit [{w.get('signal')}] {w.get('tensor')}: {w.get('evidence')}", FP8Warning, stacklevel=3
                    )

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []
        # A leaf tensor's first register_hook sets its _backward_hooks dict, and torch then calls
        # that dict (a Python call under the GIL) at every backward, empty or not, until the dict
        # is set back to None (torch/_tensor.py register_hook; the setter of _backward_hooks in
        # torch/csrc/autograd/python_variable.cpp). Dicts the monitor created and left empty go
        # back to None, so the model runs after close() as it ran before the monitor.
        for w in self._hooked_leaves:
            if w._backward_hooks is not None and len(w._backward_hooks) == 0:
                w._backward_hooks = None
        self._hooked_leaves = []
        if self._attn_orig:
            from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as registry

            for k, kernel in self._attn_orig.items():
                registry[k] = kernel
            self._attn_orig = {}

    def _stream_out(self):
        """Appends the rows built and the amaxes read since the last call to out_dir's files (opened
        at the first call, through the output sink: temporaries until close() commits them)."""
        self._build_rows()
        parts = []
        if self._streams is None:
            os.makedirs(self.out_dir, exist_ok=True)
            names = ("amax_trace.csv", "stats.csv", "stats.json")
            self._streams = _StreamWriter([os.path.join(self.out_dir, n) for n in names])
            weakref.finalize(self, self._streams.stop)
            parts += [(0, _csv_text([["step", "tensor", "amax"]])), (1, _csv_text([_COLUMNS])), (2, b"[")]
        end = self._trace_out
        while end < len(self._trace) and self._trace[end] is not None:
            end += 1
        new = self._trace[self._trace_out : end]
        parts.append((0, _csv_text([step, name, f"{a:.9g}"] for step, name, a in new)))
        self._trace_out = end
        rows = self._rows[self._rows_out :]
        if rows:
            csv_text, json_text = _fp8kit.rows_text(rows, _COLUMNS)
            parts += [(1, csv_text), (2, b", " + json_text if self._rows_written else json_text)]
            self._rows_written += len(rows)
        self._streams.write(parts)
        if self.keep_rows:
            self._rows_out = len(self._rows)
        else:
            del self._rows[:]
            self._trace.drop_before(min(end, self._fed) if self._watcher is not None else end)

    def write(self, out_dir=None):
        """Writes amax_trace.csv, stats.csv and stats.json into out_dir (the monitor's own out_dir:
        the files streamed since the first step, their last rows added, then committed)."""
        out_dir = out_dir or self.out_dir
        if out_dir is None:
            raise ValueError("out_dir: name the folder the monitor writes to")
        if out_dir == self.out_dir:
            self._drain()
            if self._committed and not self.keep_rows:
                self._build_rows()
                if self._rows or self._trace_out < len(self._trace):
                    raise ValueError("write: with keep_rows=False the files were committed already")
                return
            self._stream_out()
            self._streams.write([(2, b"]")])
            self._streams.commit()
            self._write_grad_norms(out_dir)
            self._streams, self._committed = None, True
            if self.keep_rows:  # a later write() writes every row again, from memory
                self._rows_out, self._trace_out, self._rows_written = 0, 0, 0
            return
        if not self.keep_rows:
            raise ValueError("write: with keep_rows=False the rows are only in the monitor's own out_dir")
        os.makedirs(out_dir, exist_ok=True)
        self._drain()
        self._build_rows()
        trace = self.trace
        # Each file through fp8kit's output sink (io/sink.hpp): written whole or not at all.
        text = _csv_text([["step", "tensor", "amax"]] + [[step, name, f"{a:.9g}"] for step, name, a in trace])
        _fp8kit.write_file(os.path.join(out_dir, "amax_trace.csv"), text)
        csv_text, json_text = _fp8kit.rows_text(self._rows, _COLUMNS)
        _fp8kit.write_file(os.path.join(out_dir, "stats.csv"), _csv_text([_COLUMNS]) + csv_text)
        _fp8kit.write_file(os.path.join(out_dir, "stats.json"), b"[" + json_text + b"]")
        self._write_grad_norms(out_dir)

    def _write_grad_norms(self, out_dir):
        if self.grad_norms:
            text = _csv_text([["step", "grad_norm"]] + [[s, f"{v:.9g}"] for s, v in self.grad_norms])
            _fp8kit.write_file(os.path.join(out_dir, "grad_norm.csv"), text)

    def close(self):
        self._drain()
        self._read_grad_norm()
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


class FP8Warning(UserWarning):
    """An early warning of fp8kit's Watcher raised live by Monitor(warn=...)."""


def _make_watcher(warn):
    if warn is None or warn is False:
        return None
    if warn is True:
        return fp8kit.Watcher()
    if isinstance(warn, dict):
        return fp8kit.Watcher(**warn)
    if isinstance(warn, fp8kit.Watcher):
        return warn
    raise ValueError(f"warn: {warn!r} must be None, True, a dict of Watcher options or an fp8kit.Watcher")


def monitor(model, recipes=("te-current",), every=1, out_dir=None, **kw):
    """Monitor(model, recipes, every, out_dir, ...): see Monitor."""
    return Monitor(model, recipes=recipes, every=every, out_dir=out_dir, **kw)
