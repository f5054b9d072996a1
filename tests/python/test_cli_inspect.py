"""fp8kit.inspect against `fp8kit inspect --json` on the committed example dump: the module and the
CLI must report the same statistics for every tensor (counts and scales exactly; the float64 sums
are printed by the CLI with 9 to 17 significant digits, so those compare as the CLI's text reads back).

The CLI comes from FP8KIT_CLI or build/tools/fp8kit (scripts/install/build.sh builds it before pytest)."""

import json
import math
import os
import subprocess
from pathlib import Path

import fp8kit

REPO = Path(__file__).resolve().parents[2]
DUMP = REPO / "data" / "example" / "llama_tiny_dump.h5"


def cli():
    p = Path(os.environ.get("FP8KIT_CLI", REPO / "build" / "tools" / "fp8kit"))
    assert p.exists(), f"{p}: the fp8kit CLI is needed (run scripts/install/build.sh, or set FP8KIT_CLI)"
    return str(p)


def num(v):
    return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}.get(v, v) if isinstance(v, str) else v


def same(a, b):
    a, b = num(a), num(b)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def test_inspect_matches_cli_json():
    out = subprocess.run(
        [cli(), "inspect", str(DUMP), "--json", "--quiet"], check=True, capture_output=True, text=True
    ).stdout
    cli_rows = {r["name"]: r for r in json.loads(out)["tensors"]}
    df = fp8kit.inspect(DUMP)
    assert len(df) == len(cli_rows) == 273
    for _, row in df.iterrows():
        c = cli_rows[row["name"]]
        for k in (
            "step",
            "role",
            "dtype",
            "format",
            "recipe_role",
            "numel",
            "zeros",
            "nan",
            "inf",
            "underflow",
            "subnormal",
            "overflow",
            "te_underflow",
            "te_overflow",
        ):
            assert same(row[k], c[k]), (row["name"], k, row[k], c[k])
        for k in ("amax", "min_nonzero", "scale", "scale_inv", "sqnr_db", "mse", "sum_x2", "sum_err2"):
            assert same(float(row[k]), float(num(c[k]))), (row["name"], k, row[k], c[k])


def test_inspect_keys_match_cli_json():
    """One field table for both (lib's stats/fields.hpp): the module's columns are the CLI's keys,
    for a per-tensor recipe and a block recipe."""
    for recipe in ("te-current", "mxfp8"):
        out = subprocess.run(
            [cli(), "inspect", str(DUMP), "--json", "--quiet", "--recipe", recipe, "--include", "*lm_head/weight"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        rows = json.loads(out)["tensors"]
        assert rows, recipe
        cli_keys = set(rows[0]) - {"exp_hist"}
        df = fp8kit.inspect(DUMP, include="*lm_head/weight", recipe=recipe)
        py_keys = set(df.columns) if hasattr(df, "columns") else set(df[0])
        assert py_keys == cli_keys, (recipe, sorted(py_keys ^ cli_keys))
        if recipe == "mxfp8":
            assert "block_dynamic_range_max" in cli_keys
