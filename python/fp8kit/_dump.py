"""Tensor dumps (HDF5, safetensors): read_dump yields numpy arrays, inspect gives the statistics
table (a pandas DataFrame when pandas is installed, a list of dicts otherwise)."""

import os
import warnings

from . import _fp8kit
from ._dtypes import WIDE_DTYPES
from ._recipes import _recipe_arg

DumpError = _fp8kit.DumpError


def _paths(paths):
    return [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else [os.fspath(p) for p in paths]


def _patterns(p):
    return [] if p is None else ([p] if isinstance(p, str) else list(p))


def open_dump(paths, include=None, exclude=None, steps=None):
    """The C++ Dump over `paths` (files or glob patterns) with the selection applied. Only the
    files named are read: HDF5 datasets stored in other files (external storage, virtual
    datasets) are skipped and listed by .notes(); external links are not followed."""
    return _fp8kit.Dump(_paths(paths), _patterns(include), _patterns(exclude), steps)


def warn_skipped(items, shown=5, stacklevel=3):
    """One UserWarning naming the datasets skipped on purpose (what each points at), if any:
    `items` as every report's 'skipped' lists them (dicts with 'file', 'name' and 'message'),
    each written as the CLI's "note: skipped" line."""
    if items:
        lines = [_fp8kit.describe_problem(p["file"], p["name"], p["message"]) for p in items[:shown]]
        more = f"; and {len(items) - shown} more" if len(items) > shown else ""
        warnings.warn(
            f"fp8kit: {len(items)} dataset(s) skipped, not read: " + "; ".join(lines) + more,
            UserWarning,
            stacklevel=stacklevel + 1,
        )


def _warn_skipped(d, shown=5):
    warn_skipped(d.notes(), shown, stacklevel=4)


def read_dump(paths, include=None, exclude=None, steps=None, errors="raise"):
    """Yields (info, array) for every selected tensor of the files (globs allowed), in file order.
    include/exclude: fnmatch patterns on the dataset name; steps: "0-100,200,300-".
    Arrays come as float64/float32/float16/bfloat16; FP8 tensors arrive decoded to float32
    (info['dtype'] says what was stored). errors='raise' raises DumpError for the first file or
    tensor that cannot be read, after yielding the good ones listed before it; 'skip' skips them.
    Datasets skipped on purpose (stored outside the file named, integer tensors) are named in a
    UserWarning."""
    d = open_dump(paths, include, exclude, steps)
    _warn_skipped(d)
    problems = d.errors()
    if problems and errors == "raise":
        raise DumpError(problems[0]["text"])
    for i, info in enumerate(d.tensors()):
        try:
            bits = d.read(i)
        except DumpError:
            if errors == "raise":
                raise
            continue
        yield info, bits.view(WIDE_DTYPES[info["wide"]])


# Fields of the module's per-tensor analysis that inspect's rows (like `fp8kit inspect --json`) leave out.
_ANALYSE_ONLY = ("exp_hist", "granularity", "recipe_amax", "streamed")


def inspect(
    paths, include=None, exclude=None, steps=None, recipe="te-current", format="auto", errors="raise", comm=None
):
    """Per-tensor FP8 statistics of a dump, computed by the same C++ code as `fp8kit inspect`
    (inspect::analyse): each tensor cast with `recipe` (default te-current: per-tensor scale
    fl32(max / amax)) in the recipe's format for its role (format='auto': E4M3 for activations
    and weights, E5M2 for gradients) or in `format`. Columns follow `fp8kit inspect --json`
    (the *_pct columns are percentages of all elements). Returns a pandas DataFrame when pandas
    is installed, else a list of dicts. Datasets skipped on purpose are named in a UserWarning.

    comm: an mpi4py communicator (or any object with Get_rank(), Get_size() and gather(obj, root=0)
    as mpi4py's): every rank of it calls inspect with the same arguments, each analyses its share
    of the tensors (the split of `mpirun fp8kit inspect`: whole tensors, contiguous, balanced by
    bytes; docs/mpi.md), and rank 0 returns every row in tensor order, as one process would; the
    other ranks return None. With errors="raise", a failed tensor on any rank raises on rank 0
    after the gather (no rank is left waiting)."""
    text, is_json = _recipe_arg(recipe)
    d = open_dump(paths, include, exclude, steps)
    rank, size = (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
    if rank == 0:
        _warn_skipped(d)
    problems = d.errors()
    if problems and errors == "raise":
        raise DumpError(problems[0]["text"])  # every rank lists the same files: every rank raises
    first, last = d.share(rank, size)
    tensors = d.tensors()
    rows, failed = [], None
    for i in range(first, last):
        info = tensors[i]
        try:
            s = d.analyse(i, text, is_json, None if format == "auto" else format)
        except DumpError as e:
            if errors == "raise" and comm is None:
                raise
            if errors == "raise" and failed is None:
                failed = str(e)
            continue
        row = {k: info[k] for k in ("file", "name", "step", "step_guessed", "role", "role_guessed", "dtype", "storage")}
        row["shape"] = list(info["shape"])
        row["recipe"], row["recipe_role"], row["format"] = s["recipe"], s["recipe_role"], s["format"]
        # Every field of the analysis, under the CLI's key (lib's field tables, fp8kit/stats/fields.hpp).
        for k, v in s.items():
            if k not in row and k not in _ANALYSE_ONLY:
                row[k] = v
        for k in ("underflow", "subnormal", "overflow"):
            row[k + "_pct"] = 100.0 * s[k] / s["numel"] if s["numel"] else float("nan")
        rows.append(row)
    if comm is not None:
        parts = comm.gather((rows, failed), root=0)  # rank order = tensor order
        if rank != 0:
            return None
        rows = [r for part, _ in parts for r in part]
        failed = next((f for _, f in parts if f is not None), None)
        if failed is not None:
            raise DumpError(failed)
    try:
        import pandas as pd
    except ImportError:
        return rows
    return pd.DataFrame(rows)
