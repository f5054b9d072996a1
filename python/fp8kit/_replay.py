"""Amax traces (CSV, nvidia-dlfw-inspect logs) replayed through a scaling recipe."""

import os

import numpy as np

from . import _fp8kit
from ._dump import warn_skipped
from ._recipes import _recipe_arg

TraceError = _fp8kit.TraceError
# With comm=: raised on ranks other than 0 for the error every rank meets alike (rank 0 raises the original).
SharedError = _fp8kit.SharedError


def read_trace(path):
    """The series of a trace file: list of {'tensor', 'role', 'steps' (int64), 'amax' (float32)}."""
    return _fp8kit.read_trace(os.fspath(path))


def te_stats(path):
    """Every statistic of TransformerEngine's statistics logs (a log file, the
    nvdlfw_inspect_statistics_logs folder or the log_dir holding it), as `fp8kit replay --stats`
    reports them: {'files', 'skipped', 'series'}, each series {'name', 'layer', 'tensor',
    'recipe', 'stat', 'columnwise', 'combine' ('max', 'min', 'mean' or 'per rank'), 'rank' (None
    when combined over ranks), 'ranks', 'steps' (int64), 'values' (float64), 'readable' (bool:
    False where the log wrote too few significant digits to read the value)}. Ranks are combined
    where the statistic allows it (max, min, numel-weighted mean; docs/replay.md says why sums,
    counts and derived statistics stay per rank). Lines whose statistic name TE does not log are
    listed in 'skipped' ({'file', 'name', 'message'}) and named in a UserWarning."""
    out = _fp8kit.te_stats(os.fspath(path))
    warn_skipped(out["skipped"])
    return out


def replay(trace, recipe="te-delayed", format=None, include=None):
    """Replays every series of `trace` (a file path, or a list of {'tensor', 'steps', 'amax'}
    dicts) through `recipe` (preset name, file or dict): the scale each step casts with, its
    headroom amax * scale / fmax, and whether it overflowed. format= forces one format for every
    tensor (default: the recipe's format for the tensor's class). include: fnmatch patterns on
    the tensor name. Returns a list of dicts, one per series, with numpy arrays per step."""
    import fnmatch

    series = read_trace(trace) if isinstance(trace, (str, os.PathLike)) else list(trace)
    pats = [include] if isinstance(include, str) else include
    text, is_json = _recipe_arg(recipe)
    out = []
    for s in series:
        if pats and not any(fnmatch.fnmatchcase(s["tensor"], p) for p in pats):
            continue
        out.append(
            _fp8kit.replay_series(
                text, is_json, s["tensor"], np.asarray(s["steps"]), np.asarray(s["amax"], dtype=np.float32), format
            )
        )
    return out


def overflows(amax, scale, format):
    """Whether fl32(amax * scale) rounds past the format's largest finite value (or amax is Inf)."""
    return _fp8kit.overflows(float(amax), float(scale), format)


def sweep(inputs, include=None, formats=("auto",), blocks=True, comm=None):
    """`fp8kit sweep` over amax traces (CSV, dlfw-inspect logs) and tensor dumps (HDF5,
    safetensors), told apart by content: every delayed-scaling setting (histories 1..1024, max and
    most_recent, margins 0..4), the tensorwise reference presets and, when a dump is given and
    blocks=True, the block presets. inputs: a path or a list of paths (as `fp8kit sweep INPUT...`).
    include: glob(s) on the tensor name (as --tensor). formats: 'auto' (the recipe's per-class
    format), 'all' (E4M3 and E5M2), or a list of 'auto', 'e4m3', 'e5m2', ...
    Returns {'table': rows per (candidate, class), 'tensors': rows per (candidate, tensor) (each a
    DataFrame when pandas is installed), 'ranked': {class: candidate labels, best first},
    'recommendation': {class: text}, 'notes', 'skipped', 'trace_files', 'dump_files'}. Datasets
    skipped on purpose (stored outside the file named, integer tensors) are listed in 'skipped' and
    named in a UserWarning.

    comm: an mpi4py communicator (or any object with mpi4py's Get_rank(), Get_size(),
    gather(obj, root=0) and bcast(obj, root=0)): every rank of it calls sweep with the same
    arguments; the dumped tensors' passes and the replay of the series are split over the ranks
    as `mpirun fp8kit sweep` splits them (docs/mpi.md), rank 0 returns the result one process
    returns and the other ranks return None. An input that cannot be read raises on every rank."""
    files = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    pats = [include] if isinstance(include, str) else list(include or [])
    if isinstance(formats, str):
        formats = ["e4m3", "e5m2"] if formats == "all" else [formats]
    out = _fp8kit.sweep([os.fspath(f) for f in files], pats, list(formats), bool(blocks), comm)
    if out is None:  # a rank other than 0 of comm
        return None
    warn_skipped(out["skipped"])
    rows, tensor_rows = out.pop("rows"), out.pop("tensor_rows")
    try:
        import pandas as pd

        out["table"], out["tensors"] = pd.DataFrame(rows), pd.DataFrame(tensor_rows)
    except ImportError:
        out["table"], out["tensors"] = rows, tensor_rows
    return out
