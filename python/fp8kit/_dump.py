"""Tensor dumps (HDF5, safetensors): read_dump yields numpy arrays, inspect gives the statistics
table (a pandas DataFrame when pandas is installed, a list of dicts otherwise)."""
import os

import numpy as np

from . import _fp8kit
from ._dtypes import WIDE_DTYPES
from ._recipes import recipe as _recipe, stats as _stats

DumpError = _fp8kit.DumpError

# Dump roles -> the recipe role whose format and scale apply ("hybrid": E5M2 for gradients).
_RECIPE_ROLE = {"gradient": "grad", "weight": "weight"}


def _paths(paths):
    return [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else [os.fspath(p) for p in paths]


def _patterns(p):
    return [] if p is None else ([p] if isinstance(p, str) else list(p))


def open_dump(paths, include=None, exclude=None, steps=None):
    """The C++ Dump over `paths` (files or glob patterns) with the selection applied."""
    return _fp8kit.Dump(_paths(paths), _patterns(include), _patterns(exclude), steps)


def read_dump(paths, include=None, exclude=None, steps=None, errors="raise"):
    """Yields (info, array) for every selected tensor of the files (globs allowed), in file order.
    include/exclude: fnmatch patterns on the dataset name; steps: "0-100,200,300-".
    Arrays come as float64/float32/float16/bfloat16; FP8 tensors arrive decoded to float32
    (info['dtype'] says what was stored). errors='raise' raises DumpError for the first file or
    tensor that cannot be read, after yielding the good ones listed before it; 'skip' skips them."""
    d = open_dump(paths, include, exclude, steps)
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


def inspect(paths, include=None, exclude=None, steps=None, recipe="te-current", format="auto", errors="raise"):
    """Per-tensor FP8 statistics of a dump, as `fp8kit inspect` computes them: each tensor cast
    with `recipe` (default te-current: per-tensor scale fl32(max / amax)) in the recipe's format
    for its role (format='auto': E4M3 for activations and weights, E5M2 for gradients), or in
    `format`. Returns a pandas DataFrame when pandas is installed, else a list of dicts."""
    r = _recipe(recipe)
    rows = []
    for info, x in read_dump(paths, include, exclude, steps, errors):
        role = _RECIPE_ROLE.get(info["role"], "input")
        s = _stats(x.reshape(-1) if r["roles"][role]["granularity"] == "tensor" else x.reshape(-1, x.shape[-1]),
                   format=None if format == "auto" else format, recipe=r, role=role)
        row = {k: info[k] for k in ("file", "name", "step", "role", "dtype")}
        row["shape"] = "x".join(map(str, info["shape"]))
        row.update({k: s[k] for k in ("format", "numel", "amax", "min_nonzero", "zeros", "nan", "inf", "underflow",
                                      "subnormal", "overflow", "te_underflow", "te_overflow", "mse", "sqnr_db",
                                      "dynamic_range_binades")})
        if "scale" in s:
            row["scale"], row["scale_inv"] = s["scale"], s["scale_inv"]
        rows.append(row)
    try:
        import pandas as pd
    except ImportError:
        return rows
    return pd.DataFrame(rows)
